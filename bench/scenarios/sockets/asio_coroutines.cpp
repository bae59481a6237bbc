// The ping-pong family for asio/coroutines: sockets/pingpong, sockets/pingpong_cross_thread,
// sockets/concurrent_pairs. Client and server are coroutines using async_write / async_read (exact sizes) with
// use_awaitable. The server's read goes through redirect_error so that the client's end of stream ends it without
// an exception.
//   pingpong:              both coroutines on one io_context;
//   pingpong_cross_thread: the client on one io_context run by a thread on CPU 0, the server on another on CPU 1;
//   concurrent_pairs:      `pairs` client/server coroutines on one io_context, one latency meter for all of them.
#include "asio_common.hpp"
#include "asio_pingpong.hpp"
#include "../two_threads.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::asio_impl {

namespace sockets_asio_coroutines {  // this file's own (see bench/CMakeLists.txt)
namespace {

void check_end(const latency_meter& meter, int servers_done, std::size_t servers) {
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
    if (servers_done != static_cast<int>(servers))
        throw bench_failure("a server did not see its client's end of stream");
}

}  // namespace
}  // namespace sockets_asio_coroutines

void sockets_pingpong_coroutines(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    loopback_pair pair(ctx);
    payload_pattern pattern(static_cast<std::size_t>(s.param_int("size")));
    latency_meter meter(s);
    int servers_done = 0;
    meter.start();
    asio::co_spawn(ctx, server_loop(pair.server, pattern, servers_done), rethrow{});
    asio::co_spawn(ctx, client_loop(pair.client, pattern, meter), rethrow{});
    ctx.run();
    sockets_asio_coroutines::check_end(meter, servers_done, 1);
}

void sockets_pingpong_cross_thread_coroutines(session& s) {
    announce(s);
    asio::io_context client_ctx(concurrency_hint);
    asio::io_context server_ctx(concurrency_hint);
    auto pairs = connect_pairs(client_ctx, server_ctx, 1);
    payload_pattern pattern(static_cast<std::size_t>(s.param_int("size")));
    latency_meter meter(s);
    int servers_done = 0;
    asio::co_spawn(server_ctx, server_loop(pairs[0].server, pattern, servers_done), rethrow{});
    asio::co_spawn(client_ctx, client_loop(pairs[0].client, pattern, meter), rethrow{});
    run_pinned_pair(
        s,
        [&] {
            meter.start();
            client_ctx.run();
        },
        [&] { server_ctx.run(); },
        [&] {
            client_ctx.stop();
            server_ctx.stop();
        });
    sockets_asio_coroutines::check_end(meter, servers_done, 1);
}

void sockets_concurrent_pairs_coroutines(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    auto pairs = connect_pairs(ctx, static_cast<std::size_t>(s.param_int("pairs")));
    payload_pattern pattern(64);
    latency_meter meter(s);
    int servers_done = 0;
    meter.start();
    for (auto& p : pairs) {
        asio::co_spawn(ctx, server_loop(p.server, pattern, servers_done), rethrow{});
        asio::co_spawn(ctx, client_loop(p.client, pattern, meter), rethrow{});
    }
    ctx.run();
    sockets_asio_coroutines::check_end(meter, servers_done, pairs.size());
}

}  // namespace tern_bench::asio_impl
