// unix/pingpong for asio/coroutines: sockets/pingpong's client and server coroutines over
// asio::local::stream_protocol sockets made by connect_pair, on one io_context; every byte verified.
#include "../asio_setup.hpp"
#include "../sockets/asio_pingpong.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

namespace tern_bench::asio_impl {

using stream = asio::local::stream_protocol;

void unix_pingpong_coroutines(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    stream::socket client_sock(ctx), server_sock(ctx);
    asio::local::connect_pair(client_sock, server_sock);
    payload_pattern pattern(static_cast<std::size_t>(s.param_int("size")));
    latency_meter meter(s);
    int server_done = 0;
    meter.start();
    asio::co_spawn(ctx, server_loop(server_sock, pattern, server_done), rethrow{});
    asio::co_spawn(ctx, client_loop(client_sock, pattern, meter), rethrow{});
    ctx.run();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
    if (server_done != 1) throw bench_failure("the server did not see its client's end of stream");
}

}  // namespace tern_bench::asio_impl
