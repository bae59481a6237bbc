// services/events for asio/callbacks: Asio has no event bus, so an event is a small handler posted to the
// handlers' io_context, capturing the event and its type's sink (asio::post(ctx, [sink, e] { (*sink)(e); })), which
// Asio type-erases into one of its operations. threads=1: publisher and handlers on one io_context run by the
// worker's thread (CPU 0); threads=2: the publisher on one io_context run by a thread on CPU 0, the handlers on
// another run by a thread on CPU 1 (concurrency hint 1 each, the dispatch scenarios' per_thread model). The sinks,
// the checks and the in-flight window are events_common.hpp's, the same as tern's.
#include "../asio_setup.hpp"
#include "../registry.hpp"
#include "../thread_rate.hpp"
#include "events_common.hpp"

#include <future>
#include <optional>
#include <thread>

namespace tern_bench::asio_impl {

namespace ev = services_events;

namespace services_asio_callbacks {  // this file's own (see bench/CMakeLists.txt)
namespace {

template <int K>
void post_event(asio::io_context& target, ev::sink<K>& sink, std::uint64_t sequence) {
    asio::post(target, [s = &sink, e = ev::make_event<K>(sequence)] { (*s)(e); });
}

// One phase of publishing: rounds [round, end) of the four types.
struct publish_state {
    asio::io_context* home;    // where the publisher runs
    asio::io_context* target;  // where the handlers run
    ev::sinks* sinks;
    std::uint64_t round;
    std::uint64_t end;
    std::uint64_t published;
    std::optional<bench_clock::time_point> started;
    std::promise<double> seconds;  // from the publisher's first run until it saw every event handled
};

// Publishes while fewer than ev::window events are in flight, then re-posts itself behind what it queued; once
// everything is published and handled it reports the time.
struct publisher {
    publish_state* st;
    void operator()() const {
        publish_state& s = *st;
        if (!s.started) s.started = bench_clock::now();
        while (s.round < s.end && s.published - s.sinks->done.handled() < ev::window) {
            post_event(*s.target, s.sinks->s0, s.round);
            post_event(*s.target, s.sinks->s1, s.round);
            post_event(*s.target, s.sinks->s2, s.round);
            post_event(*s.target, s.sinks->s3, s.round);
            s.published += ev::event_types;
            ++s.round;
        }
        if (s.round < s.end || s.sinks->done.handled() != s.published) {
            asio::post(*s.home, *this);
            return;
        }
        s.seconds.set_value(static_cast<double>(elapsed_ns(*s.started, bench_clock::now())) / 1e9);
    }
};

// Two io_contexts kept busy by work guards, each run by a pinned thread of its own until destruction.
class two_loops {
public:
    two_loops()
        : publisher_ctx(concurrency_hint),
          handler_ctx(concurrency_hint),
          guards_{asio::make_work_guard(publisher_ctx), asio::make_work_guard(handler_ctx)} {
        threads_[0] = std::thread([this] {
            pin_thread_index(0);
            publisher_ctx.run();
        });
        threads_[1] = std::thread([this] {
            pin_thread_index(1);
            handler_ctx.run();
        });
    }
    ~two_loops() {
        for (auto& g : guards_) g.reset();
        for (auto& t : threads_) t.join();
    }
    two_loops(const two_loops&) = delete;
    two_loops& operator=(const two_loops&) = delete;

    asio::io_context publisher_ctx;
    asio::io_context handler_ctx;

private:
    asio::executor_work_guard<asio::io_context::executor_type> guards_[2];
    std::thread threads_[2];
};

}  // namespace
}  // namespace services_asio_callbacks

void services_events_callbacks(session& s) {
    announce(s);
    auto threads = s.param_int("threads");
    if (threads != 1 && threads != 2) throw bench_failure("threads must be 1 or 2");
    const std::uint64_t rounds = ev::rounds_per_phase(s);
    ev::sinks sinks;
    std::uint64_t first = 0;
    auto run_phase = [&](asio::io_context& home, asio::io_context& target, auto&& wait) {
        services_asio_callbacks::publish_state st{&home, &target, &sinks, first, first + rounds,
            first * ev::event_types, {}, {}};
        auto seconds = st.seconds.get_future();
        asio::post(home, services_asio_callbacks::publisher{&st});
        wait();
        double secs = seconds.get();
        first += rounds;
        sinks.verify(first);
        return metric_values{{"events_per_s", static_cast<double>(rounds * ev::event_types) / secs}};
    };
    if (threads == 1) {
        pin_thread_index(0);
        asio::io_context ctx(concurrency_hint);
        s.for_each_phase([&](const phase&) {
            return run_phase(ctx, ctx, [&] {
                ctx.run();  // returns once the publisher has stopped re-posting itself
                ctx.restart();
            });
        });
    } else {
        services_asio_callbacks::two_loops loops;
        s.for_each_phase([&](const phase&) {
            return run_phase(loops.publisher_ctx, loops.handler_ctx, [] {});  // the future waits
        });
    }
}

}  // namespace tern_bench::asio_impl
