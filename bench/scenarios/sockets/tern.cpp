// sockets/pingpong for tern: client and server as two spawned tasks on one io_context, using read_exact and
// write_all (the counterparts of Asio's async_read / async_write of exact sizes). After the last phase the client
// shuts down its sending side and the server's read ends with eof.
#include "../tern_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::tern_impl {

namespace {

namespace net = tern::net;

tern::task<void> client_loop(net::tcp_socket& sock, const payload_pattern& pattern, latency_meter& meter) {
    std::vector<unsigned char> buf(pattern.size());
    for (std::uint64_t round = 0;; ++round) {
        auto t0 = bench_clock::now();
        auto [wec, wn] = co_await sock.write_all(tern::const_buffer(pattern.round(round), pattern.size()));
        expect_ok(wec, "client write");
        auto [rec, rn] = co_await sock.read_exact(tern::mutable_buffer(buf.data(), buf.size()));
        auto t1 = bench_clock::now();
        expect_ok(rec, "client read");
        pattern.verify(buf.data(), round, "client");
        if (!meter.record(t0, t1)) break;
    }
    expect_ok(sock.shutdown(net::shutdown_how::send), "client shutdown");
}

tern::task<void> server_loop(net::tcp_socket& sock, const payload_pattern& pattern) {
    std::vector<unsigned char> buf(pattern.size());
    for (std::uint64_t round = 0;; ++round) {
        auto [rec, rn] = co_await sock.read_exact(tern::mutable_buffer(buf.data(), buf.size()));
        if (rec == net::error::eof && rn == 0) co_return;
        expect_ok(rec, "server read");
        pattern.verify(buf.data(), round, "server");
        auto [wec, wn] = co_await sock.write_all(tern::const_buffer(buf.data(), buf.size()));
        expect_ok(wec, "server write");
    }
}

tern::task<void> pingpong(tern::io_context& ctx, session& s, std::size_t size) {
    // Setup, not measured: a loopback pair with TCP_NODELAY on both ends. connect() completes from the backlog,
    // so connecting before accepting is fine.
    net::tcp_acceptor acceptor(ctx);
    expect_ok(acceptor.listen(net::endpoint::loopback_v4(0)), "listen");
    auto [lec, where] = acceptor.local_endpoint();
    expect_ok(lec, "local_endpoint");
    auto [cec, client] = co_await net::connect(ctx, where);
    expect_ok(cec, "connect");
    auto [aec, server] = co_await acceptor.accept();
    expect_ok(aec, "accept");
    expect_ok(client.set_no_delay(true), "TCP_NODELAY");
    expect_ok(server.set_no_delay(true), "TCP_NODELAY");

    payload_pattern pattern(size);
    latency_meter meter(s);
    meter.start();
    auto server_task = tern::spawn(server_loop(server, pattern));
    auto client_task = tern::spawn(client_loop(client, pattern, meter));
    co_await std::move(client_task);
    co_await std::move(server_task);
    if (!meter.done()) throw bench_failure("the client stopped before the last phase ended");
}

}  // namespace

void sockets_pingpong(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(pingpong(ctx, s, static_cast<std::size_t>(s.param_int("size"))));
}

}  // namespace tern_bench::tern_impl
