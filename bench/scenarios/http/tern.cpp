// http/minimal for tern: `conns` keep-alive connections, clients and servers on one io_context. A client task
// write_all()s the request, read_some()s until the response is complete (http_codec.hpp parses and checks it), and
// records the latency; a server task read_some()s, answers every complete request in one write_all. After the last
// phase the clients shut down their sending side and the servers read end of stream.
#include "http_codec.hpp"
#include "../sockets/tern_common.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::tern_impl {

namespace {

tern::task<void> http_server(net::tcp_socket& sock) {
    http::server_connection conn;
    for (;;) {
        auto [ec, n] = co_await sock.read_some(tern::mutable_buffer(conn.space(), conn.space_size()));
        if (ec == net::error::eof) break;
        expect_ok(ec, "server read");
        bool keep = conn.received(n);
        if (!conn.out().empty()) {
            auto [wec, wn] = co_await sock.write_all(tern::const_buffer(conn.out().data(), conn.out().size()));
            expect_ok(wec, "server write");
            conn.out().clear();
        }
        if (!keep) break;
    }
    if (!conn.idle()) throw bench_failure("server: end of stream inside a request");
}

tern::task<void> http_client(net::tcp_socket& sock, request_meter& meter) {
    http::client_connection conn;
    const auto request = http::client_connection::request();
    for (;;) {
        auto t0 = bench_clock::now();
        auto [wec, wn] = co_await sock.write_all(tern::const_buffer(request.data(), request.size()));
        expect_ok(wec, "client write");
        for (bool complete = false; !complete;) {
            auto [ec, n] = co_await sock.read_some(tern::mutable_buffer(conn.space(), conn.space_size()));
            expect_ok(ec, "client read");
            complete = conn.received(n);
        }
        if (!meter.record(t0, bench_clock::now())) break;
    }
    expect_ok(sock.shutdown(net::shutdown_how::send), "client shutdown");
}

tern::task<void> run_minimal(tern::io_context& ctx, session& s) {
    auto pairs = co_await connect_pairs(ctx, static_cast<std::size_t>(s.param_int("conns")));
    request_meter meter(s, "req_per_s");
    meter.start();
    std::vector<tern::join_handle<void>> tasks;
    for (auto& p : pairs) {
        tasks.push_back(tern::spawn(http_server(p.server)));
        tasks.push_back(tern::spawn(http_client(p.client, meter)));
    }
    co_await join_all(tasks);
    if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
}

}  // namespace

void http_minimal(session& s) {
    if (s.param_int("threads") != 1) throw bench_failure("http/minimal runs on one thread (threads=1)");
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(run_minimal(ctx, s));
}

}  // namespace tern_bench::tern_impl
