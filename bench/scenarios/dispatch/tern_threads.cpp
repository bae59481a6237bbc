// dispatch/scaling, dispatch/interleaved, dispatch/concurrent and dispatch/cross_thread for tern.
//
// scaling: a runtime of `threads` workers; 1000 chains whose handlers post their successor with runtime::post
// (model=shared: work-shared, an idle worker takes over half of a busy one's queue) or with post_to the worker
// running the handler (model=per_thread: placed, never moves).
// interleaved: one io_context; post 100 handlers, poll until they have run, repeat.
// concurrent: a runtime of 4 workers; on each, a driver posts 100 handlers to its own loop and then itself behind
// them, forever.
// cross_thread: one io_context run by a thread of its own; P std::threads post their increments to it.
#include "../tern_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"
#include "../thread_rate.hpp"

#include <memory>
#include <thread>
#include <vector>

namespace tern_bench::tern_impl {

namespace dispatch_tern_threads {  // this file's own (see bench/CMakeLists.txt)
namespace {

constexpr int chains = 1000;

tern::runtime_options runtime_options_for(const session& s, int threads) {
    tern::runtime_options o;
    o.threads = static_cast<unsigned>(threads);
    o.backend = requested_backend(s);
    return o;
}

// The runtime of one run, shared with the function that finishes it. (Held by value in a wrapper: tern::runtime
// has virtual functions and a non-virtual destructor, which a smart pointer to it warns about.)
struct runtime_box {
    tern::runtime rt;
    runtime_box(const session& s, int threads) : rt(runtime_options_for(s, threads)) {
        for (int i = 0; i < threads; ++i) rt.post_to(static_cast<std::size_t>(i), [i] { pin_thread_index(i); });
    }
};

std::shared_ptr<runtime_box> make_runtime(const session& s, int threads) {
    return std::make_shared<runtime_box>(s, threads);
}

struct shared_chain {
    tern::runtime* rt;
    thread_counters* c;
    void operator()() const {
        c->tick();
        if (!c->stopping()) rt->post(*this);
    }
};

struct placed_chain {
    tern::runtime* rt;
    thread_counters* c;
    void operator()() const {
        c->tick();
        if (!c->stopping()) rt->post_to(rt->current_worker(), *this);
    }
};

std::function<void()> finisher(std::shared_ptr<runtime_box> box) {
    return [box] {
        if (!box->rt.shutdown(std::chrono::seconds(10))) throw bench_failure("the runtime did not drain its handlers");
    };
}

}  // namespace
}  // namespace dispatch_tern_threads

void dispatch_scaling(session& s) {
    {
        tern::io_context probe(options_for(s));
        announce(s, probe);
    }
    bool shared = s.request().params.at("model") == "shared";
    launch_fn launch = [&s, shared](int threads, thread_counters& c) {
        auto box = dispatch_tern_threads::make_runtime(s, threads);
        tern::runtime* rt = &box->rt;
        for (int i = 0; i < dispatch_tern_threads::chains; ++i) {
            if (shared)
                rt->post(dispatch_tern_threads::shared_chain{rt, &c});
            else
                rt->post_to(static_cast<std::size_t>(i % threads), dispatch_tern_threads::placed_chain{rt, &c});
        }
        return finisher(box);
    };
    report_scaling(s, launch);
}

namespace dispatch_tern_threads {  // this file's own (see bench/CMakeLists.txt)
namespace {

struct counted {
    ops_meter* meter;
    void operator()() const { meter->tick(); }
};

}  // namespace
}  // namespace dispatch_tern_threads

void dispatch_interleaved(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    tern::io_context::work_guard guard(ctx);
    ops_meter meter(s, "ops_per_s");
    constexpr int batch = 100;
    meter.start();
    while (!meter.done()) {
        for (int i = 0; i < batch; ++i) ctx.post(dispatch_tern_threads::counted{&meter});
        ctx.poll();
    }
}

namespace dispatch_tern_threads {  // this file's own (see bench/CMakeLists.txt)
namespace {

struct concurrent_driver {
    tern::io_context* ctx;
    thread_counters* c;
    void operator()() const {
        if (c->stopping()) return;
        thread_counters* counters = c;
        for (int i = 0; i < 100; ++i) ctx->post([counters] { counters->tick(); });
        ctx->post(*this);
    }
};

}  // namespace
}  // namespace dispatch_tern_threads

void dispatch_concurrent(session& s) {
    {
        tern::io_context probe(options_for(s));
        announce(s, probe);
    }
    constexpr int threads = 4;
    launch_fn launch = [&s](int n, thread_counters& c) {
        auto box = dispatch_tern_threads::make_runtime(s, n);
        for (int i = 0; i < n; ++i)
            box->rt.post_to(static_cast<std::size_t>(i),
                            dispatch_tern_threads::concurrent_driver{&box->rt.worker(static_cast<std::size_t>(i)), &c});
        return finisher(box);
    };
    report_rates(s, threads, launch, "ops_per_s");
}

void dispatch_cross_thread(session& s) {
    auto producers = static_cast<int>(s.param_int("producers"));
    auto per_producer = static_cast<std::uint64_t>(s.param_int("per_producer"));
    const std::uint64_t total = per_producer * static_cast<std::uint64_t>(producers);
    {
        tern::io_context probe(options_for(s));
        announce(s, probe);
    }
    s.for_each_phase([&](const phase&) {
        tern::io_context ctx(options_for(s));
        std::uint64_t count = 0;
        std::optional<tern::io_context::work_guard> guard(std::in_place, ctx);
        std::atomic<int> ready{0};
        std::atomic<bool> go{false};
        std::thread consumer([&] {
            pin_thread_index(0);
            ctx.run();
        });
        std::vector<std::thread> threads;
        for (int p = 0; p < producers; ++p)
            threads.emplace_back([&, p] {
                pin_thread_index(static_cast<std::size_t>(p) + 1);
                ready.fetch_add(1);
                while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
                for (std::uint64_t i = 0; i < per_producer; ++i)
                    ctx.post([&] {
                        if (++count == total) guard.reset();
                    });
            });
        while (ready.load() < producers) std::this_thread::yield();
        auto t0 = bench_clock::now();
        go.store(true, std::memory_order_release);
        for (auto& t : threads) t.join();
        consumer.join();
        auto t1 = bench_clock::now();
        if (count != total)
            throw bench_failure("ran " + std::to_string(count) + " increments of " + std::to_string(total));
        double secs = std::chrono::duration<double>(t1 - t0).count();
        return metric_values{{"seconds", secs}, {"ops_per_s", static_cast<double>(total) / secs}};
    });
}

}  // namespace tern_bench::tern_impl
