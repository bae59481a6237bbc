// coro/channel and coro/event for asio/callbacks: the same channels as asio/coroutines (asio_coroutines_sync.cpp),
// driven by completion handlers.
//
// channel: 2 threads (thread i pinned to CPU i % 2), one io_context each; pair k on context k % 2, with its own
// asio::experimental::channel<void(asio::error_code, int)> of capacity 1024; the producer's send handler starts
// the next send, the consumer's receive handler adds the value and starts the next receive; count and sum checked.
// event: an experimental::channel<void(asio::error_code, int)> of capacity 1 as the auto-reset event: a posted
// handler signals it with try_send, the receive handler counts the iteration and starts the next one.
#include "../asio_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"
#include "../thread_rate.hpp"

#include <asio/experimental/channel.hpp>

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tern_bench::asio_impl {

namespace coro_asio_callbacks_sync {  // this file's own (see bench/CMakeLists.txt)
namespace {

using int_channel = asio::experimental::channel<void(asio::error_code, int)>;

constexpr std::size_t channel_capacity = 1024;

struct pair_state {
    pair_state(asio::io_context& ctx, int m) : ch(ctx, channel_capacity), m(m) {}
    int_channel ch;
    int m;
    int next_send = 1;
    int received = 0;
    std::uint64_t sum = 0;

    void send() {
        int v = next_send++;
        ch.async_send(asio::error_code{}, v, [this](asio::error_code ec) {
            expect_ok(ec, "channel send");
            if (next_send <= m) send();
        });
    }
    void receive() {
        ch.async_receive([this](asio::error_code ec, int v) {
            expect_ok(ec, "channel receive");
            sum += static_cast<std::uint64_t>(v);
            if (++received < m) receive();
        });
    }
    void check() const {
        std::uint64_t expected = static_cast<std::uint64_t>(m) * static_cast<std::uint64_t>(m + 1) / 2;
        if (received != m || sum != expected)
            throw bench_failure("a consumer received " + std::to_string(received) + " values summing to " +
                                std::to_string(sum) + ", expected " + std::to_string(m) + " summing to " +
                                std::to_string(expected));
        if (ch.ready()) throw bench_failure("a channel still holds a value after its consumer finished");
    }
};

struct event_loop {
    asio::io_context& ctx;
    int_channel ev;
    std::uint64_t n;
    std::uint64_t woken = 0;

    event_loop(asio::io_context& c, std::uint64_t n) : ctx(c), ev(c, 1), n(n) {}

    void step() {
        asio::post(ctx, [this] {
            if (!ev.try_send(asio::error_code{}, 0)) throw bench_failure("the event could not be signalled");
        });
        ev.async_receive([this](asio::error_code ec, int) {
            expect_ok(ec, "event wait");
            if (++woken < n) step();
        });
    }
};

}  // namespace
}  // namespace coro_asio_callbacks_sync

void coro_channel_callbacks(session& s) {
    announce(s);
    auto pairs = static_cast<int>(s.param_int("pairs"));
    auto n = s.param_int("n");
    int m = static_cast<int>(n / pairs);
    if (static_cast<std::int64_t>(m) * pairs != n) throw bench_failure("n must be a multiple of pairs");
    constexpr int threads = 2;
    s.for_each_phase([&](const phase&) {
        std::vector<std::unique_ptr<asio::io_context>> ctxs;
        for (int i = 0; i < threads; ++i) ctxs.push_back(std::make_unique<asio::io_context>(concurrency_hint));
        std::vector<std::unique_ptr<coro_asio_callbacks_sync::pair_state>> states;
        for (int p = 0; p < pairs; ++p)
            states.push_back(
                std::make_unique<coro_asio_callbacks_sync::pair_state>(*ctxs[static_cast<std::size_t>(p % threads)], m));
        for (auto& st : states) {
            st->receive();
            st->send();
        }
        std::exception_ptr failure;
        std::mutex failure_lock;
        auto t0 = bench_clock::now();
        std::vector<std::thread> pool;
        for (int i = 0; i < threads; ++i)
            pool.emplace_back([&, i] {
                pin_thread_index(static_cast<std::size_t>(i));
                try {
                    ctxs[static_cast<std::size_t>(i)]->run();
                } catch (...) {
                    std::lock_guard<std::mutex> g(failure_lock);
                    if (!failure) failure = std::current_exception();
                }
            });
        for (auto& t : pool) t.join();
        auto t1 = bench_clock::now();
        if (failure) std::rethrow_exception(failure);
        for (auto& st : states) st->check();
        return metric_values{{"ms", static_cast<double>(elapsed_ns(t0, t1)) / 1e6}};
    });
}

void coro_event_callbacks(session& s) {
    announce(s);
    auto n = static_cast<std::uint64_t>(s.param_int("n"));
    asio::io_context ctx(concurrency_hint);
    s.for_each_phase([&](const phase&) {
        coro_asio_callbacks_sync::event_loop loop(ctx, n);
        ctx.restart();
        auto t0 = bench_clock::now();
        loop.step();
        ctx.run();
        auto t1 = bench_clock::now();
        if (loop.woken != n)
            throw bench_failure("woke " + std::to_string(loop.woken) + " times of " + std::to_string(n));
        return metric_values{{"iter_per_s", static_cast<double>(n) / std::chrono::duration<double>(t1 - t0).count()}};
    });
}

}  // namespace tern_bench::asio_impl
