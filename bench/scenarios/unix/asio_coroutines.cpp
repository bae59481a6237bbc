// unix/pingpong for asio/coroutines: sockets/pingpong's client and server coroutines over
// asio::local::stream_protocol sockets made by connect_pair, on one io_context; every byte verified.
#include "../asio_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::asio_impl {

namespace {

using stream = asio::local::stream_protocol;

asio::awaitable<void> client_loop(stream::socket& sock, const payload_pattern& pattern, latency_meter& meter) {
    std::vector<unsigned char> buf(pattern.size());
    for (std::uint64_t round = 0;; ++round) {
        auto t0 = bench_clock::now();
        co_await asio::async_write(sock, asio::buffer(pattern.round(round), pattern.size()), asio::use_awaitable);
        co_await asio::async_read(sock, asio::buffer(buf), asio::use_awaitable);
        auto t1 = bench_clock::now();
        pattern.verify(buf.data(), round, "client");
        if (!meter.record(t0, t1)) break;
    }
    sock.shutdown(stream::socket::shutdown_send);
}

asio::awaitable<void> server_loop(stream::socket& sock, const payload_pattern& pattern, bool& done) {
    std::vector<unsigned char> buf(pattern.size());
    for (std::uint64_t round = 0;; ++round) {
        asio::error_code ec;
        std::size_t n = co_await asio::async_read(sock, asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
        if (ec == asio::error::eof && n == 0) break;
        expect_ok(ec, "server read");
        pattern.verify(buf.data(), round, "server");
        co_await asio::async_write(sock, asio::buffer(buf), asio::use_awaitable);
    }
    done = true;
}

}  // namespace

void unix_pingpong_coroutines(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    stream::socket client_sock(ctx), server_sock(ctx);
    asio::local::connect_pair(client_sock, server_sock);
    payload_pattern pattern(static_cast<std::size_t>(s.param_int("size")));
    latency_meter meter(s);
    bool server_done = false;
    meter.start();
    asio::co_spawn(ctx, server_loop(server_sock, pattern, server_done), rethrow{});
    asio::co_spawn(ctx, client_loop(client_sock, pattern, meter), rethrow{});
    ctx.run();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
    if (!server_done) throw bench_failure("the server did not see its client's end of stream");
}

}  // namespace tern_bench::asio_impl
