// unix/pingpong for asio/callbacks: sockets/pingpong's two handler chains over asio::local::stream_protocol
// sockets made by connect_pair, on one io_context; async_write / async_read of exact sizes, every byte verified.
#include "../asio_setup.hpp"
#include "../sockets/asio_pingpong.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

namespace tern_bench::asio_impl {

using stream = asio::local::stream_protocol;

void unix_pingpong_callbacks(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    stream::socket client_sock(ctx), server_sock(ctx);
    asio::local::connect_pair(client_sock, server_sock);
    payload_pattern pattern(static_cast<std::size_t>(s.param_int("size")));
    latency_meter meter(s);
    pingpong_server<stream::socket> server(server_sock, pattern);
    pingpong_client<stream::socket> client(client_sock, pattern, meter);
    meter.start();
    server.start();
    client.start();
    ctx.run();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
    if (!server.done()) throw bench_failure("the server did not see its client's end of stream");
}

}  // namespace tern_bench::asio_impl
