// coro/spawn and coro/switch for asio/coroutines.
//
// spawn: co_spawn(ex, child, detached) from a coroutine running on the context. Asio's co_spawn enters the child
// through dispatch(), so from inside the running context each child runs at once, to completion (eagerly); the
// parent then waits until the completion counter reaches n. co_spawn with use_awaitable would instead be lazy and
// run children only when awaited, which is not the same work.
// switch: Asio has no yield; posting the coroutine's own continuation (co_await post) is the idiom.
#include "../asio_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

namespace tern_bench::asio_impl {

namespace coro_asio_coroutines {  // this file's own (see bench/CMakeLists.txt)
namespace {

asio::awaitable<void> empty_child(std::uint64_t& done) {
    ++done;
    co_return;
}

asio::awaitable<void> spawn_all(std::uint64_t n, double& ns_per_task) {
    auto ex = co_await asio::this_coro::executor;
    std::uint64_t done = 0;
    auto t0 = bench_clock::now();
    for (std::uint64_t i = 0; i < n; ++i) asio::co_spawn(ex, empty_child(done), asio::detached);
    while (done < n) co_await asio::post(ex, asio::use_awaitable);
    auto t1 = bench_clock::now();
    ns_per_task = static_cast<double>(elapsed_ns(t0, t1)) / static_cast<double>(n);
}

asio::awaitable<void> switch_n(std::uint64_t n, double& ns_per_switch) {
    auto ex = co_await asio::this_coro::executor;
    auto t0 = bench_clock::now();
    for (std::uint64_t i = 0; i < n; ++i) co_await asio::post(ex, asio::use_awaitable);
    auto t1 = bench_clock::now();
    ns_per_switch = static_cast<double>(elapsed_ns(t0, t1)) / static_cast<double>(n);
}

// Runs `make()` as the context's only coroutine, once per phase, on one context.
template <class Make>
void each_phase_on(session& s, const char* metric, Make make) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    s.for_each_phase([&](const phase&) {
        double value = 0;
        ctx.restart();
        asio::co_spawn(ctx, make(value), rethrow{});
        ctx.run();
        return metric_values{{metric, value}};
    });
}

}  // namespace
}  // namespace coro_asio_coroutines

void coro_spawn_coroutines(session& s) {
    auto n = static_cast<std::uint64_t>(s.param_int("n"));
    coro_asio_coroutines::each_phase_on(s, "ns_per_task", [n](double& out) { return coro_asio_coroutines::spawn_all(n,
        out); });
}

void coro_switch_coroutines(session& s) {
    auto n = static_cast<std::uint64_t>(s.param_int("n"));
    coro_asio_coroutines::each_phase_on(s, "ns_per_switch", [n](double& out) { return coro_asio_coroutines::switch_n(n,
        out); });
}

}  // namespace tern_bench::asio_impl
