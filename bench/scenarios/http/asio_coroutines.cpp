// http/minimal for asio/coroutines: the shape of asio_callbacks.cpp, each connection side a coroutine (co_spawn,
// use_awaitable; the server's read goes through redirect_error to see the end of stream).
#include "http_codec.hpp"
#include "../sockets/asio_common.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::asio_impl {

namespace {

asio::awaitable<void> http_server(tcp::socket& sock, std::size_t& done) {
    http::server_connection conn;
    for (;;) {
        asio::error_code ec;
        std::size_t n = co_await sock.async_read_some(asio::buffer(conn.space(), conn.space_size()),
                                                      asio::redirect_error(asio::use_awaitable, ec));
        if (ec == asio::error::eof) break;
        expect_ok(ec, "server read");
        bool keep = conn.received(n);
        if (!conn.out().empty()) {
            co_await asio::async_write(sock, asio::buffer(conn.out()), asio::use_awaitable);
            conn.out().clear();
        }
        if (!keep) break;
    }
    if (!conn.idle()) throw bench_failure("server: end of stream inside a request");
    ++done;
}

asio::awaitable<void> http_client(tcp::socket& sock, request_meter& meter) {
    http::client_connection conn;
    const auto request = http::client_connection::request();
    for (;;) {
        auto t0 = bench_clock::now();
        co_await asio::async_write(sock, asio::buffer(request.data(), request.size()), asio::use_awaitable);
        for (bool complete = false; !complete;) {
            std::size_t n =
                co_await sock.async_read_some(asio::buffer(conn.space(), conn.space_size()), asio::use_awaitable);
            complete = conn.received(n);
        }
        if (!meter.record(t0, bench_clock::now())) break;
    }
    sock.shutdown(tcp::socket::shutdown_send);
}

}  // namespace

void http_minimal_coroutines(session& s) {
    announce(s);
    if (s.param_int("threads") != 1) throw bench_failure("http/minimal runs on one thread (threads=1)");
    asio::io_context ctx(concurrency_hint);
    auto pairs = connect_pairs(ctx, static_cast<std::size_t>(s.param_int("conns")));
    request_meter meter(s, "req_per_s");
    std::size_t servers_done = 0;
    meter.start();
    for (auto& p : pairs) {
        asio::co_spawn(ctx, http_server(p.server, servers_done), rethrow{});
        asio::co_spawn(ctx, http_client(p.client, meter), rethrow{});
    }
    ctx.run();
    if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
    if (servers_done != pairs.size()) throw bench_failure("a server did not see its client's end of stream");
}

}  // namespace tern_bench::asio_impl
