// dispatch/post for asio/coroutines: 1000 coroutines, each posting its own continuation (co_await post) in a
// loop: the coroutine form of "post a handler and run it".
#include "../asio_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

namespace tern_bench::asio_impl {

namespace dispatch_asio_coroutines {  // this file's own (see bench/CMakeLists.txt)
namespace {

asio::awaitable<void> post_loop(ops_meter& meter) {
    auto ex = co_await asio::this_coro::executor;
    while (meter.tick()) co_await asio::post(ex, asio::use_awaitable);
}

}  // namespace
}  // namespace dispatch_asio_coroutines

void dispatch_post_coroutines(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    ops_meter meter(s, "ops_per_s");
    constexpr int chains = 1000;
    for (int i = 0; i < chains; ++i) asio::co_spawn(ctx, dispatch_asio_coroutines::post_loop(meter), rethrow{});
    meter.start();
    ctx.run();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
}

}  // namespace tern_bench::asio_impl
