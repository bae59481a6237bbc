// The stream scenarios for tern: sockets/unidirectional, sockets/bidirectional, sockets/echo.
//   unidirectional: a writer task write_all()s `size`-byte chunks of the stream pattern, a reader task
//                   read_some()s into a `size`-byte buffer and checks every chunk at its offset; one io_context.
//   bidirectional:  the same in both directions at once on one connection pair (four tasks, one io_context).
//   echo:           the client2/server2 method on two loops (client on CPU 0, server on CPU 1): each session
//                   sends one block, then both sides echo whatever arrives (read_some, write_all, repeat).
// When the meter's last phase ends, the writers (or the echoing clients) stop and shut down their sending side;
// the readers drain to end of stream, still checking every byte.
#include "tern_common.hpp"
#include "../two_threads.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <memory>
#include <vector>

namespace tern_bench::tern_impl {

namespace sockets_tern_streams {  // this file's own (see bench/CMakeLists.txt)
namespace {

constexpr std::size_t stream_period = 4093;  // prime: chunk boundaries never line up with the pattern

tern::task<void> stream_writer(net::tcp_socket& sock, const stream_pattern& pattern, std::size_t size,
                               const bool& stop) {
    std::uint64_t offset = 0;
    while (!stop) {
        auto [ec, n] = co_await sock.write_all(tern::const_buffer(pattern.at(offset), size));
        expect_ok(ec, "writer");
        offset += size;
    }
    expect_ok(sock.shutdown(net::shutdown_how::send), "writer shutdown");
}

tern::task<void> stream_reader(net::tcp_socket& sock, const stream_pattern& pattern, std::size_t size,
                               throughput_meter& meter, bool& stop) {
    std::vector<unsigned char> buf(size);
    std::uint64_t offset = 0;
    for (;;) {
        auto [ec, n] = co_await sock.read_some(tern::mutable_buffer(buf.data(), buf.size()));
        if (ec == net::error::eof) break;
        expect_ok(ec, "reader");
        pattern.verify(buf.data(), n, offset, "reader");
        offset += n;
        if (!stop && !meter.add(n)) stop = true;
    }
    if (!stop) throw bench_failure("reader: end of stream before the last phase ended");
}

tern::task<void> streams(tern::io_context& ctx, session& s, bool both_ways) {
    auto size = static_cast<std::size_t>(s.param_int("size"));
    auto pairs = co_await connect_pairs(ctx, 1);
    auto& [a, b] = pairs[0];
    stream_pattern pattern(size, stream_period);
    throughput_meter meter(s, "mb_per_s", 1e6);
    bool stop = false;
    meter.start();
    std::vector<tern::join_handle<void>> tasks;
    tasks.push_back(tern::spawn(stream_reader(b, pattern, size, meter, stop)));
    tasks.push_back(tern::spawn(stream_writer(a, pattern, size, stop)));
    if (both_ways) {
        tasks.push_back(tern::spawn(stream_reader(a, pattern, size, meter, stop)));
        tasks.push_back(tern::spawn(stream_writer(b, pattern, size, stop)));
    }
    co_await join_all(tasks);
}

// ---- echo ----

tern::task<void> echo_server_session(net::tcp_socket sock, const stream_pattern& pattern) {
    // receive(): the bytes arrive in a buffer of the loop's pool (under io_uring picked by the kernel for a
    // multishot receive), so a session waiting for data holds no buffer, and writing the lease back copies nothing.
    std::uint64_t offset = 0;
    for (;;) {
        auto [ec, lease] = co_await sock.receive();
        if (ec == net::error::eof) co_return;  // the client is done; closing ends its drain
        expect_ok(ec, "server read");
        pattern.verify(reinterpret_cast<const unsigned char*>(lease.data()), lease.size(), offset, "server");
        offset += lease.size();
        auto [wec, wn] = co_await sock.write_all(lease.buffer());
        expect_ok(wec, "server write");
    }
}

tern::task<void> echo_client_session(net::tcp_socket& sock, const stream_pattern& pattern, throughput_meter& meter) {
    const std::size_t block = pattern.period();
    auto [fec, fn] = co_await sock.write_all(tern::const_buffer(pattern.at(0), block));
    expect_ok(fec, "client write");
    std::uint64_t offset = 0;
    bool echoing = true;
    for (;;) {
        auto [ec, lease] = co_await sock.receive();
        if (!echoing && ec == net::error::eof) break;
        expect_ok(ec, "client read");
        const std::size_t n = lease.size();
        pattern.verify(reinterpret_cast<const unsigned char*>(lease.data()), n, offset, "client");
        offset += n;
        if (!echoing) continue;
        if (meter.add(n)) {
            auto [wec, wn] = co_await sock.write_all(lease.buffer());
            expect_ok(wec, "client write");
        } else {
            echoing = false;
            expect_ok(sock.shutdown(net::shutdown_how::send), "client shutdown");
        }
    }
}

tern::task<void> echo_client(tern::io_context& ctx, net::endpoint where, std::size_t sessions,
                             const stream_pattern& pattern, throughput_meter& meter) {
    auto socks = co_await connect_n(ctx, where, sessions);
    meter.start();
    std::vector<tern::join_handle<void>> tasks;
    tasks.reserve(sessions);
    for (auto& sock : socks) tasks.push_back(tern::spawn(echo_client_session(sock, pattern, meter)));
    co_await join_all(tasks);
    if (!meter.done()) throw bench_failure("the sessions stopped before the last phase ended");
}

tern::task<void> echo_server(net::tcp_acceptor& acceptor, std::size_t sessions, const stream_pattern& pattern) {
    std::vector<tern::join_handle<void>> tasks;
    tasks.reserve(sessions);
    co_await accept_n(acceptor, sessions, [&](net::tcp_socket sock) {
        tasks.push_back(tern::spawn(echo_server_session(std::move(sock), pattern)));
    });
    co_await join_all(tasks);
}

}  // namespace
}  // namespace sockets_tern_streams

void sockets_unidirectional(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(sockets_tern_streams::streams(ctx, s, false));
}

void sockets_bidirectional(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(sockets_tern_streams::streams(ctx, s, true));
}

void sockets_echo(session& s) {
    auto block = static_cast<std::size_t>(s.param_int("blocksize"));
    auto sessions = static_cast<std::size_t>(s.param_int("sessions"));
    if (s.param_int("threads") != 1) throw bench_failure("sockets/echo runs one thread per side (threads=1)");
    tern::io_context client_ctx(options_for(s));
    tern::io_context server_ctx(options_for(s));
    announce(s, client_ctx);
    announce(s, server_ctx);
    stream_pattern pattern(block, block);
    throughput_meter meter(s, "mib_per_s", 1024.0 * 1024.0);
    net::tcp_acceptor acceptor(server_ctx);
    net::endpoint where = listen_loopback(acceptor);
    run_pinned_pair(
        s, [&] { client_ctx.block_on(sockets_tern_streams::echo_client(client_ctx, where, sessions, pattern, meter)); },
        [&] { server_ctx.block_on(sockets_tern_streams::echo_server(acceptor, sessions, pattern)); },
        [&] {
            client_ctx.stop();
            server_ctx.stop();
        });
}

}  // namespace tern_bench::tern_impl
