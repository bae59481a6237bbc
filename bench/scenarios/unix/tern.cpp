// unix/pingpong for tern: sockets/pingpong over a Unix stream socket pair (unix_stream_socket::pair) on one
// io_context; the client writes `size` bytes with write_all and reads the echo with read_exact, the server echoes;
// both verify every byte. The client's shutdown of its sending side ends the server with eof.
#include "../tern_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::tern_impl {

namespace net = tern::net;

namespace {

tern::task<void> client_loop(net::unix_stream_socket& sock, const payload_pattern& pattern, latency_meter& meter) {
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

tern::task<void> server_loop(net::unix_stream_socket& sock, const payload_pattern& pattern) {
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
    auto [ec, ends] = net::unix_stream_socket::pair(ctx);
    expect_ok(ec, "socketpair");
    payload_pattern pattern(size);
    latency_meter meter(s);
    meter.start();
    auto server_task = tern::spawn(server_loop(ends.second, pattern));
    auto client_task = tern::spawn(client_loop(ends.first, pattern, meter));
    co_await std::move(client_task);
    co_await std::move(server_task);
    if (!meter.done()) throw bench_failure("the client stopped before the last phase ended");
}

}  // namespace

void unix_pingpong(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(pingpong(ctx, s, static_cast<std::size_t>(s.param_int("size"))));
}

}  // namespace tern_bench::tern_impl
