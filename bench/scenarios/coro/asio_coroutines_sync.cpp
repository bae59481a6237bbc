// coro/channel and coro/event for asio/coroutines.
//
// channel: 2 threads (thread i pinned to CPU i % 2), each running an io_context of its own (hint 1); `pairs`
// producer/consumer coroutine pairs, each pair with its own asio::experimental::channel<void(asio::error_code,
// int)> of capacity 1024, pair k on context k % 2. An experimental::channel is not thread-safe, so a pair stays on
// one thread: this is Asio's io_context-per-thread model. (One io_context run by both threads with a strand per
// pair crashes in this build: a coroutine resumed on the other thread can reuse the address of a thread_local,
// Asio's handler-memory cache, that clang kept across the co_await.) Producer k sends 1..m (m = n / pairs), its
// consumer checks the count and the sum.
// event: Asio has no event; the cheapest correct idiom is an experimental::channel of capacity 1 used as an
// auto-reset event (void(asio::error_code, int) with a dummy 0: asio 1.22.1 rejects void(asio::error_code), its
// channel_traits partial specialisations are ambiguous for it): the posted handler signals it with try_send
// (which hands the signal to the waiting receive, or buffers it), the coroutine waits with co_await
// async_receive. The alternative, a
// steady_timer expiring at time_point::max() and signalled with cancel_one, goes through the timer queue under the
// scheduler's mutex and cannot hold a signal set before the wait.
#include "../asio_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"
#include "../thread_rate.hpp"

#include <asio/experimental/channel.hpp>

#include <memory>
#include <thread>
#include <vector>

namespace tern_bench::asio_impl {

namespace coro_asio_coroutines_sync {  // this file's own (see bench/CMakeLists.txt)
namespace {

using int_channel = asio::experimental::channel<void(asio::error_code, int)>;
using signal_channel = asio::experimental::channel<void(asio::error_code, int)>;

constexpr std::size_t channel_capacity = 1024;

asio::awaitable<void> produce(int_channel& ch, int m) {
    for (int v = 1; v <= m; ++v) co_await ch.async_send(asio::error_code{}, v, asio::use_awaitable);
}

asio::awaitable<void> consume(int_channel& ch, int m, std::atomic<int>& left) {
    std::uint64_t sum = 0;
    for (int i = 0; i < m; ++i) sum += static_cast<std::uint64_t>(co_await ch.async_receive(asio::use_awaitable));
    std::uint64_t expected = static_cast<std::uint64_t>(m) * static_cast<std::uint64_t>(m + 1) / 2;
    if (sum != expected)
        throw bench_failure("a consumer received a sum of " + std::to_string(sum) + ", expected " +
                            std::to_string(expected));
    if (ch.ready()) throw bench_failure("a channel still holds a value after its consumer finished");
    left.fetch_sub(1);
}

asio::awaitable<void> event_loop(std::uint64_t n, std::uint64_t& woken) {
    auto ex = co_await asio::this_coro::executor;
    signal_channel ev(ex, 1);
    for (std::uint64_t i = 0; i < n; ++i) {
        asio::post(ex, [&ev] {
            if (!ev.try_send(asio::error_code{}, 0)) throw bench_failure("the event could not be signalled");
        });
        co_await ev.async_receive(asio::use_awaitable);
        ++woken;
    }
}

}  // namespace
}  // namespace coro_asio_coroutines_sync

void coro_channel_coroutines(session& s) {
    announce(s);
    auto pairs = static_cast<int>(s.param_int("pairs"));
    auto n = s.param_int("n");
    int m = static_cast<int>(n / pairs);
    if (static_cast<std::int64_t>(m) * pairs != n) throw bench_failure("n must be a multiple of pairs");
    constexpr int threads = 2;
    s.for_each_phase([&](const phase&) {
        std::vector<std::unique_ptr<asio::io_context>> ctxs;
        for (int i = 0; i < threads; ++i) ctxs.push_back(std::make_unique<asio::io_context>(concurrency_hint));
        std::vector<std::unique_ptr<coro_asio_coroutines_sync::int_channel>> chans;
        for (int p = 0; p < pairs; ++p)
            chans.push_back(
                std::make_unique<coro_asio_coroutines_sync::int_channel>(*ctxs[static_cast<std::size_t>(p % threads)],
                    coro_asio_coroutines_sync::channel_capacity));
        std::atomic<int> left{pairs};
        for (auto& ch : chans) {
            asio::co_spawn(ch->get_executor(), coro_asio_coroutines_sync::consume(*ch, m, left), rethrow{});
            asio::co_spawn(ch->get_executor(), coro_asio_coroutines_sync::produce(*ch, m), rethrow{});
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
        if (left.load() != 0) throw bench_failure(std::to_string(left.load()) + " consumers did not finish");
        return metric_values{{"ms", static_cast<double>(elapsed_ns(t0, t1)) / 1e6}};
    });
}

void coro_event_coroutines(session& s) {
    announce(s);
    auto n = static_cast<std::uint64_t>(s.param_int("n"));
    asio::io_context ctx(concurrency_hint);
    s.for_each_phase([&](const phase&) {
        std::uint64_t woken = 0;
        ctx.restart();
        auto t0 = bench_clock::now();
        asio::co_spawn(ctx, coro_asio_coroutines_sync::event_loop(n, woken), rethrow{});
        ctx.run();
        auto t1 = bench_clock::now();
        if (woken != n) throw bench_failure("woke " + std::to_string(woken) + " times of " + std::to_string(n));
        return metric_values{{"iter_per_s", static_cast<double>(n) / std::chrono::duration<double>(t1 - t0).count()}};
    });
}

}  // namespace tern_bench::asio_impl
