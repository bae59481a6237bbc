// dispatch/scaling, dispatch/interleaved, dispatch/concurrent and dispatch/cross_thread for asio/coroutines.
//
// scaling: 1000 coroutines, each looping on co_await post(use_awaitable) on the context it was spawned on (the
// coroutine form of a handler posting its successor), in either of Asio's models (asio_threads.hpp).
// interleaved: one coroutine posts 100 handlers, then co_await post() queues its continuation behind them; repeat.
// concurrent: the same driver coroutine, 4 of them on one io_context (hint 4) run by 4 threads, each driver on a
// strand of its own (the handlers it posts go to the io_context and run on any thread).
// cross_thread: each producer thread runs a coroutine on an io_context of its own that asio::posts the increments
// to the loop (an increment awaits nothing, so it stays a handler; spawning a coroutine per increment would
// measure co_spawn and hold every pending frame in memory).
#include "asio_threads.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

namespace tern_bench::asio_impl {

namespace dispatch_asio_coroutines_threads {  // this file's own (see bench/CMakeLists.txt)
namespace {

constexpr int chains = 1000;

// A coroutine here may resume on another thread than the one it suspended on, and clang can keep the address of
// a thread_local (the counters' slot, Asio's recycling allocator cache) across a co_await: whatever touches
// thread-local state is therefore called out of line, so that it looks the address up on the thread it runs on.
[[gnu::noinline]] void tick(thread_counters& c) { c.tick(); }

[[gnu::noinline]] void post_batch(asio::io_context& ctx, thread_counters& c) {
    for (int i = 0; i < 100; ++i) asio::post(ctx, [&c] { c.tick(); });
}

asio::awaitable<void> post_loop(thread_counters& c) {
    auto ex = co_await asio::this_coro::executor;
    while (!c.stopping()) {
        tick(c);
        co_await asio::post(ex, asio::use_awaitable);
    }
}

asio::awaitable<void> interleave(ops_meter& meter) {
    auto ex = co_await asio::this_coro::executor;
    while (!meter.done()) {
        for (int i = 0; i < 100; ++i) asio::post(ex, [&meter] { meter.tick(); });
        co_await asio::post(ex, asio::use_awaitable);
    }
}

asio::awaitable<void> concurrent_driver(asio::io_context& ctx, thread_counters& c) {
    auto ex = co_await asio::this_coro::executor;
    while (!c.stopping()) {
        post_batch(ctx, c);
        co_await asio::post(ex, asio::use_awaitable);
    }
}

template <class F>
asio::awaitable<void> produce(asio::io_context& loop, std::uint64_t count, F& on_run) {
    for (std::uint64_t i = 0; i < count; ++i) asio::post(loop, [&on_run] { on_run(); });
    co_return;
}

}  // namespace
}  // namespace dispatch_asio_coroutines_threads

void dispatch_scaling_coroutines(session& s) {
    announce(s);
    bool shared = shared_model(s);
    launch_fn launch = [shared](int threads, thread_counters& c) {
        auto pool = std::make_shared<context_pool>(threads, shared);
        for (int i = 0; i < dispatch_asio_coroutines_threads::chains; ++i)
            asio::co_spawn(pool->context(static_cast<std::size_t>(i)), dispatch_asio_coroutines_threads::post_loop(c),
                rethrow{});
        pool->start();
        return std::function<void()>([pool] { pool->stop_and_join(); });
    };
    report_scaling(s, launch);
}

void dispatch_interleaved_coroutines(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    ops_meter meter(s, "ops_per_s");
    asio::co_spawn(ctx, dispatch_asio_coroutines_threads::interleave(meter), rethrow{});
    meter.start();
    ctx.run();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
}

void dispatch_concurrent_coroutines(session& s) {
    announce(s);
    constexpr int threads = 4;
    launch_fn launch = [](int n, thread_counters& c) {
        auto pool = std::make_shared<context_pool>(n, true);
        for (int i = 0; i < n; ++i)
            asio::co_spawn(asio::make_strand(pool->context(0)),
                dispatch_asio_coroutines_threads::concurrent_driver(pool->context(0), c), rethrow{});
        pool->start();
        return std::function<void()>([pool] { pool->stop_and_join(); });
    };
    report_rates(s, threads, launch, "ops_per_s");
}

void dispatch_cross_thread_coroutines(session& s) {
    cross_thread_run(s, [](asio::io_context& loop, std::uint64_t count, auto& on_run) {
        asio::io_context own(1);
        asio::co_spawn(own, dispatch_asio_coroutines_threads::produce(loop, count, on_run), rethrow{});
        own.run();
    });
}

}  // namespace tern_bench::asio_impl
