// sockets/messages for asio/coroutines: the shape of asio_callbacks_messages.cpp, each connection side a
// coroutine (co_spawn, use_awaitable; the server's read goes through redirect_error to see the end of stream).
#include "asio_common.hpp"
#include "frames.hpp"
#include "../two_threads.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::asio_impl {

using frames::codec;

namespace sockets_asio_coroutines_messages {  // this file's own (see bench/CMakeLists.txt)
namespace {

asio::awaitable<void> message_server(tcp::socket sock, const codec& c, std::size_t& done) {
    frames::server_connection side(c);
    for (;;) {
        asio::error_code ec;
        std::size_t n = co_await sock.async_read_some(asio::buffer(side.conn().space(), side.conn().space_size()),
                                                      asio::redirect_error(asio::use_awaitable, ec));
        if (ec == asio::error::eof) break;
        expect_ok(ec, "server read");
        side.received(n);
        if (!side.out().empty()) {
            co_await asio::async_write(sock, asio::buffer(side.out()), asio::use_awaitable);
            side.out().clear();
        }
    }
    side.check_end();
    ++done;
}

asio::awaitable<void> message_client(tcp::socket& sock, const codec& c, std::size_t parallel, std::uint32_t seed,
                                     request_meter& meter) {
    frames::client_connection side(c, parallel, seed);
    side.start();
    while (!side.finished()) {
        if (!side.out().empty()) {
            co_await asio::async_write(sock, asio::buffer(side.out()), asio::use_awaitable);
            side.out().clear();
        }
        std::size_t n = co_await sock.async_read_some(asio::buffer(side.conn().space(), side.conn().space_size()),
                                                      asio::use_awaitable);
        side.received(n, meter);
    }
    sock.shutdown(tcp::socket::shutdown_send);
}

}  // namespace
}  // namespace sockets_asio_coroutines_messages

void sockets_messages_coroutines(session& s) {
    announce(s);
    frames::messages_params p = frames::read_messages_params(s);
    codec c(p.shape);
    request_meter meter(s, "msg_per_s");
    asio::io_context client_ctx(concurrency_hint);
    asio::io_context server_ctx(concurrency_hint);
    asio::io_context& servers_ctx = p.threads == 1 ? client_ctx : server_ctx;
    auto pairs = connect_pairs(client_ctx, servers_ctx, p.conns);
    std::size_t servers_done = 0;
    for (std::size_t i = 0; i < p.conns; ++i) {
        asio::co_spawn(servers_ctx, sockets_asio_coroutines_messages::message_server(std::move(pairs[i].server), c,
            servers_done), rethrow{});
        asio::co_spawn(client_ctx,
                       sockets_asio_coroutines_messages::message_client(pairs[i].client, c, p.parallel,
                           static_cast<std::uint32_t>(i + 1), meter),
                       rethrow{});
    }
    if (p.threads == 1) {
        pin_single_thread(s);
        meter.start();
        client_ctx.run();
    } else {
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
    }
    if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
    if (servers_done != p.conns) throw bench_failure("a server connection did not see its end of stream");
}

}  // namespace tern_bench::asio_impl
