// The stream scenarios for asio/coroutines: sockets/unidirectional, sockets/bidirectional, sockets/echo; the same
// shapes as asio_callbacks_streams.cpp, each chain a coroutine (co_spawn, use_awaitable; reads that may end with
// eof go through redirect_error).
#include "asio_common.hpp"
#include "../two_threads.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::asio_impl {

namespace sockets_asio_coroutines_streams {  // this file's own (see bench/CMakeLists.txt)
namespace {

constexpr std::size_t stream_period = 4093;

asio::awaitable<void> stream_writer(tcp::socket& sock, const stream_pattern& pattern, std::size_t size,
                                    const bool& stop) {
    std::uint64_t offset = 0;
    while (!stop) {
        co_await asio::async_write(sock, asio::buffer(pattern.at(offset), size), asio::use_awaitable);
        offset += size;
    }
    sock.shutdown(tcp::socket::shutdown_send);
}

asio::awaitable<void> stream_reader(tcp::socket& sock, const stream_pattern& pattern, std::size_t size,
                                    throughput_meter& meter, bool& stop, int& done) {
    std::vector<unsigned char> buf(size);
    std::uint64_t offset = 0;
    for (;;) {
        asio::error_code ec;
        std::size_t n = co_await sock.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
        if (ec == asio::error::eof) break;
        expect_ok(ec, "reader");
        pattern.verify(buf.data(), n, offset, "reader");
        offset += n;
        if (!stop && !meter.add(n)) stop = true;
    }
    if (!stop) throw bench_failure("reader: end of stream before the last phase ended");
    ++done;
}

void streams(session& s, bool both_ways) {
    announce(s);
    auto size = static_cast<std::size_t>(s.param_int("size"));
    asio::io_context ctx(concurrency_hint);
    loopback_pair pair(ctx);
    stream_pattern pattern(size, stream_period);
    throughput_meter meter(s, "mb_per_s", 1e6);
    bool stop = false;
    int readers_done = 0;
    meter.start();
    asio::co_spawn(ctx, stream_reader(pair.server, pattern, size, meter, stop, readers_done), rethrow{});
    asio::co_spawn(ctx, stream_writer(pair.client, pattern, size, stop), rethrow{});
    if (both_ways) {
        asio::co_spawn(ctx, stream_reader(pair.client, pattern, size, meter, stop, readers_done), rethrow{});
        asio::co_spawn(ctx, stream_writer(pair.server, pattern, size, stop), rethrow{});
    }
    ctx.run();
    if (!meter.done() || readers_done != (both_ways ? 2 : 1))
        throw bench_failure("the loop ran out of work before the streams ended");
}

// ---- echo ----

asio::awaitable<void> echo_server_session(tcp::socket sock, const stream_pattern& pattern) {
    std::vector<unsigned char> buf(pattern.period());
    std::uint64_t offset = 0;
    for (;;) {
        asio::error_code ec;
        std::size_t n = co_await sock.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
        if (ec == asio::error::eof) co_return;  // the client is done; closing ends its drain
        expect_ok(ec, "server read");
        pattern.verify(buf.data(), n, offset, "server");
        offset += n;
        co_await asio::async_write(sock, asio::buffer(buf.data(), n), asio::use_awaitable);
    }
}

asio::awaitable<void> echo_client_session(tcp::socket& sock, const stream_pattern& pattern, throughput_meter& meter,
                                          std::size_t& done) {
    const std::size_t block = pattern.period();
    std::vector<unsigned char> buf(block);
    co_await asio::async_write(sock, asio::buffer(pattern.at(0), block), asio::use_awaitable);
    std::uint64_t offset = 0;
    bool echoing = true;
    for (;;) {
        asio::error_code ec;
        std::size_t n = co_await sock.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
        if (!echoing && ec == asio::error::eof) break;
        expect_ok(ec, "client read");
        pattern.verify(buf.data(), n, offset, "client");
        offset += n;
        if (!echoing) continue;
        if (meter.add(n)) {
            co_await asio::async_write(sock, asio::buffer(buf.data(), n), asio::use_awaitable);
        } else {
            echoing = false;
            sock.shutdown(tcp::socket::shutdown_send);
        }
    }
    ++done;
}

}  // namespace
}  // namespace sockets_asio_coroutines_streams

void sockets_unidirectional_coroutines(session& s) { sockets_asio_coroutines_streams::streams(s, false); }
void sockets_bidirectional_coroutines(session& s) { sockets_asio_coroutines_streams::streams(s, true); }

void sockets_echo_coroutines(session& s) {
    announce(s);
    auto block = static_cast<std::size_t>(s.param_int("blocksize"));
    auto sessions = static_cast<std::size_t>(s.param_int("sessions"));
    if (s.param_int("threads") != 1) throw bench_failure("sockets/echo runs one thread per side (threads=1)");
    asio::io_context client_ctx(concurrency_hint);
    asio::io_context server_ctx(concurrency_hint);
    auto pairs = connect_pairs(client_ctx, server_ctx, sessions);
    stream_pattern pattern(block, block);
    throughput_meter meter(s, "mib_per_s", 1024.0 * 1024.0);
    std::size_t clients_done = 0;
    for (auto& p : pairs) {
        asio::co_spawn(server_ctx, sockets_asio_coroutines_streams::echo_server_session(std::move(p.server), pattern),
            rethrow{});
        asio::co_spawn(client_ctx, sockets_asio_coroutines_streams::echo_client_session(p.client, pattern, meter,
            clients_done), rethrow{});
    }
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
    if (!meter.done()) throw bench_failure("the sessions stopped before the last phase ended");
    if (clients_done != sessions) throw bench_failure("a client session did not see its end of stream");
}

}  // namespace tern_bench::asio_impl
