// The ping-pong family for asio/callbacks: sockets/pingpong, sockets/pingpong_cross_thread,
// sockets/concurrent_pairs. Client and server are two handler chains.
// Client: async_write(size bytes) -> async_read(size bytes) -> verify -> next round. Server: async_read(size
// bytes) -> verify -> async_write(echo) -> next read. After the last phase the client shuts down its sending
// side, the server's read ends with eof, and run() returns.
//   pingpong:              both chains on one io_context;
//   pingpong_cross_thread: the client on one io_context run by a thread on CPU 0, the server on another on CPU 1;
//   concurrent_pairs:      `pairs` client/server chains on one io_context, one latency meter for all of them.
#include "asio_common.hpp"
#include "asio_pingpong.hpp"
#include "../two_threads.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <memory>
#include <vector>

namespace tern_bench::asio_impl {

namespace sockets_asio_callbacks {  // this file's own (see bench/CMakeLists.txt)
namespace {

void check_end(const latency_meter& meter, bool servers_done) {
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
    if (!servers_done) throw bench_failure("a server did not see its client's end of stream");
}

}  // namespace
}  // namespace sockets_asio_callbacks

void sockets_pingpong_callbacks(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    loopback_pair pair(ctx);
    payload_pattern pattern(static_cast<std::size_t>(s.param_int("size")));
    latency_meter meter(s);
    pingpong_server server(pair.server, pattern);
    pingpong_client client(pair.client, pattern, meter);
    meter.start();
    server.start();
    client.start();
    ctx.run();
    sockets_asio_callbacks::check_end(meter, server.done());
}

void sockets_pingpong_cross_thread_callbacks(session& s) {
    announce(s);
    asio::io_context client_ctx(concurrency_hint);
    asio::io_context server_ctx(concurrency_hint);
    auto pairs = connect_pairs(client_ctx, server_ctx, 1);
    payload_pattern pattern(static_cast<std::size_t>(s.param_int("size")));
    latency_meter meter(s);
    pingpong_server server(pairs[0].server, pattern);
    pingpong_client client(pairs[0].client, pattern, meter);
    run_pinned_pair(
        s,
        [&] {
            meter.start();
            client.start();
            client_ctx.run();
        },
        [&] {
            server.start();
            server_ctx.run();
        },
        [&] {
            client_ctx.stop();
            server_ctx.stop();
        });
    sockets_asio_callbacks::check_end(meter, server.done());
}

void sockets_concurrent_pairs_callbacks(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    auto pairs = connect_pairs(ctx, static_cast<std::size_t>(s.param_int("pairs")));
    payload_pattern pattern(64);
    latency_meter meter(s);
    std::vector<std::unique_ptr<pingpong_server<tcp::socket>>> servers;
    std::vector<std::unique_ptr<pingpong_client<tcp::socket>>> clients;
    for (auto& p : pairs) {
        servers.push_back(std::make_unique<pingpong_server<tcp::socket>>(p.server, pattern));
        clients.push_back(std::make_unique<pingpong_client<tcp::socket>>(p.client, pattern, meter));
    }
    meter.start();
    for (std::size_t i = 0; i < pairs.size(); ++i) {
        servers[i]->start();
        clients[i]->start();
    }
    ctx.run();
    bool all_done = true;
    for (auto& sv : servers) all_done = all_done && sv->done();
    sockets_asio_callbacks::check_end(meter, all_done);
}

}  // namespace tern_bench::asio_impl
