// sockets/messages for tern: mg::aio bench_io's frames (frames.hpp). Each client connection sends `parallel`
// requests, then for every receive decodes the replies, records their latency, encodes one new request per reply
// and writes them in one write_all; each server connection decodes the requests of a receive and writes the
// replies in one write_all. threads=1: clients and servers on one io_context; threads=2: the clients on one
// io_context on CPU 0, the servers on another on CPU 1. After the last phase a client stops sending, collects the
// replies still in flight and shuts down its sending side; its server connection then reads end of stream.
//
// How the sides read depends on the backend, as it would for a user who measured both. Under io_uring they read with
// receive() (one multishot receive per socket that stays armed, into the loop's pool of bench_io's 8 KiB buffers)
// and copy each lease into the connection's frame buffer, since the decoder needs a frame in one piece; the raw
// liburing floor does the same. read_some would be one RECV per read, and a RECV that finds no data arms a poll
// first. Under epoll a receive() is a recv into a pool buffer, so the copy is all it adds: there they read_some
// into the frame buffer (100 KB frames lose about a tenth of their rate to the copy). TERN_BENCH_MESSAGES_READ=
// receive or read_some forces one way on either backend.
#include "tern_common.hpp"
#include "frames.hpp"
#include "../two_threads.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

namespace tern_bench::tern_impl {

using frames::codec;

namespace sockets_tern_messages {  // this file's own (see bench/CMakeLists.txt)
namespace {

// Whether the connections of ctx read with read_some rather than receive() (see above).
bool reads_with_read_some(const tern::io_context& ctx) {
    const char* env = std::getenv("TERN_BENCH_MESSAGES_READ");
    if (env != nullptr && std::string_view(env) == "receive") return false;
    if (env != nullptr && std::string_view(env) == "read_some") return true;
    return ctx.backend() == tern::backend_kind::epoll;
}

// Copies a lease into the connection's frame buffer and hands it to received(n), in space_size() pieces (the
// pool's buffers are that size, so one piece unless the options change).
template <class Side, class Received>
void take(Side& side, tern::leased_buffer& lease, Received received) {
    while (!lease.empty()) {
        const std::size_t n = std::min(lease.size(), side.conn().space_size());
        std::memcpy(side.conn().space(), lease.data(), n);
        lease.consume(n);
        received(n);
    }
}

tern::task<void> message_server(net::tcp_socket sock, const codec& c) {
    frames::server_connection side(c);
    const bool read_some = reads_with_read_some(sock.context());
    for (;;) {
        if (read_some) {
            auto [ec, n] = co_await sock.read_some(tern::mutable_buffer(side.conn().space(), side.conn().space_size()));
            if (ec == net::error::eof) break;
            expect_ok(ec, "server read");
            side.received(n);
        } else {
            auto [ec, lease] = co_await sock.receive();
            if (ec == net::error::eof) break;
            expect_ok(ec, "server receive");
            take(side, lease, [&](std::size_t n) { side.received(n); });
        }
        if (!side.out().empty()) {
            auto [wec, wn] = co_await sock.write_all(tern::const_buffer(side.out().data(), side.out().size()));
            expect_ok(wec, "server write");
            side.out().clear();
        }
    }
    side.check_end();
}

tern::task<void> message_client(net::tcp_socket& sock, const codec& c, std::size_t parallel, std::uint32_t seed,
                                request_meter& meter) {
    frames::client_connection side(c, parallel, seed);
    side.start();
    const bool read_some = reads_with_read_some(sock.context());
    while (!side.finished()) {
        if (!side.out().empty()) {
            auto [wec, wn] = co_await sock.write_all(tern::const_buffer(side.out().data(), side.out().size()));
            expect_ok(wec, "client write");
            side.out().clear();
        }
        if (read_some) {
            auto [ec, n] = co_await sock.read_some(tern::mutable_buffer(side.conn().space(), side.conn().space_size()));
            expect_ok(ec, "client read");
            side.received(n, meter);
        } else {
            auto [ec, lease] = co_await sock.receive();
            expect_ok(ec, "client receive");
            take(side, lease, [&](std::size_t n) { side.received(n, meter); });
        }
    }
    expect_ok(sock.shutdown(net::shutdown_how::send), "client shutdown");
}

tern::task<void> message_clients(tern::io_context& ctx, net::endpoint where, const frames::messages_params& p,
                                 const codec& c, request_meter& meter) {
    auto socks = co_await connect_n(ctx, where, p.conns);
    meter.start();
    std::vector<tern::join_handle<void>> tasks;
    tasks.reserve(p.conns);
    for (std::size_t i = 0; i < p.conns; ++i)
        tasks.push_back(tern::spawn(message_client(socks[i], c, p.parallel, static_cast<std::uint32_t>(i + 1), meter)));
    co_await join_all(tasks);
    if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
}

tern::task<void> message_servers(net::tcp_acceptor& acceptor, std::size_t conns, const codec& c) {
    std::vector<tern::join_handle<void>> tasks;
    tasks.reserve(conns);
    co_await accept_n(acceptor, conns,
                      [&](net::tcp_socket sock) { tasks.push_back(tern::spawn(message_server(std::move(sock), c))); });
    co_await join_all(tasks);
}

tern::task<void> one_loop(tern::io_context& ctx, net::tcp_acceptor& acceptor, net::endpoint where,
                          const frames::messages_params& p, const codec& c, request_meter& meter) {
    auto servers = tern::spawn(message_servers(acceptor, p.conns, c));
    co_await message_clients(ctx, where, p, c, meter);
    co_await std::move(servers);
}

}  // namespace
}  // namespace sockets_tern_messages

// The loops' options: receive() buffers of bench_io's receive size.
tern::io_context_options messages_options(const session& s) {
    tern::io_context_options o = options_for(s);
    o.receive_buffer_size = frames::recv_size;
    return o;
}

void sockets_messages(session& s) {
    frames::messages_params p = frames::read_messages_params(s);
    codec c(p.shape);
    request_meter meter(s, "msg_per_s");
    tern::io_context client_ctx(messages_options(s));
    announce(s, client_ctx);
    if (p.threads == 1) {
        pin_single_thread(s);
        net::tcp_acceptor acceptor(client_ctx);
        net::endpoint where = listen_loopback(acceptor);
        client_ctx.block_on(sockets_tern_messages::one_loop(client_ctx, acceptor, where, p, c, meter));
        return;
    }
    tern::io_context server_ctx(messages_options(s));
    announce(s, server_ctx);
    net::tcp_acceptor acceptor(server_ctx);
    net::endpoint where = listen_loopback(acceptor);
    run_pinned_pair(
        s, [&] { client_ctx.block_on(sockets_tern_messages::message_clients(client_ctx, where, p, c, meter)); },
        [&] { server_ctx.block_on(sockets_tern_messages::message_servers(acceptor, p.conns, c)); },
        [&] {
            client_ctx.stop();
            server_ctx.stop();
        });
}

}  // namespace tern_bench::tern_impl
