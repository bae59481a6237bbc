// http2/* for tern: tern::http's server with server_options::http2 (tern::http2 on nghttp2's session), h2c with
// prior knowledge, on the io_context of one server thread. POST /ping is http/ping_json's route, the same handler
// and service; GET /bytes/{n} writes its body from one static buffer through the response stream, with write_last
// (up to output_per_stream, the DATA frames take the bytes from there), so that the handler copies none of them.
// The HTTP/1.1 comparator of http2/ping_json (tern/io_uring-http1) is http/ping_json's own server under wrk with as
// many connections as the HTTP/2 point has requests in flight.
// POST /upload (h2_upload.hpp) is a whole-body route: the body arrives in the stream's body buffer.
//
// Instruction mode (tern-bench --instructions) counts the server alone, on the worker's own thread (../served.hpp
// says why no harness thread runs beside an io_uring loop), driven over one connection by tern-bench-client with
// `streams` requests in flight: POST /ping, or POST /upload with `body` bytes. The last request starts a graceful
// shutdown (GOAWAY); run() returns once the connection has ended.
#include "h2_load.hpp"
#include "h2_upload.hpp"
#include "../served.hpp"
#include "../http/tern_ping.hpp"
#include "../registry.hpp"
#include "../tern_setup.hpp"

#include <tern/http/stream.hpp>
#include <tern/http2/server.hpp>

namespace tern_bench::tern_impl {

namespace http = tern::http;

namespace http2_tern {  // this file's own (see bench/CMakeLists.txt)
namespace {

http::router h2_routes(ping::service& service) {
    http::router routes = ping_routes(service);
    routes.stream(http::method::get, "/bytes/{n}",
                  [](http::request& req, http::body_reader&, http::response_stream& out) -> tern::task<void> {
                      const long long n = h2::bytes_size(req.path());
                      if (n < 0) {
                          if (!co_await out.start(404, {}, 0)) (void)co_await out.finish();
                          co_return;
                      }
                      const auto size = static_cast<std::uint64_t>(n);
                      if (co_await out.start(200, {}, size)) co_return;
                      (void)co_await out.write_last(tern::const_buffer(h2::body_bytes(), size));
                  });
    routes.post(h2::upload_path, [](http::request& req) -> tern::task<http::response> {
        char answer[h2::upload_answer_size];
        const std::size_t n = h2::upload_answer(req.body(), answer);
        instructions::request_handled();
        co_return http::response(200, std::string(answer, n), "text/plain");
    });
    return routes;
}

http::server_options h2_options() {
    http::server_options opts = ping_options();
    opts.http2 = tern::http2::server_protocol();
    return opts;
}

void count_ping(session& s) {
    if (s.param_int("conns") != 1 || s.param_int("streams") < 1)
        throw bench_failure("http2/ping_json's instructions are counted with conns=1");
    const std::int64_t body = s.request().params.count("body") ? s.param_int("body") : 0;
    pin_to_cpu(0);
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ping::service service;
    http::server server(ctx, h2_routes(service), h2_options());
    expect_ok(server.listen(tern::net::endpoint::loopback_v4(0)), "listen");
    served::client client(s, server.local_endpoint().value.port(),
                          body > 0 ? served::protocol::h2_upload : served::protocol::h2_ping,
                          static_cast<std::size_t>(body), [&server] { server.stop(); },
                          static_cast<std::uint64_t>(s.param_int("streams")));
    ctx.block_on(server.run());
    client.finish();
    if (service.refused() != 0)
        throw bench_failure("the server refused " + std::to_string(service.refused()) + " requests");
}

std::unique_ptr<ping::server> start_h2_server(session& s, int threads) {
    return start_tern_server(s, threads, h2_routes, h2_options());
}

std::unique_ptr<ping::server> start_h1_server(session& s, int threads) {
    return start_tern_server(s, threads, ping_routes, ping_options());
}

}  // namespace
}  // namespace http2_tern

void http2_ping_json(session& s) {
    if (s.request().impl == "tern/io_uring-http1")
        return ping::run_ping_json(s, http2_tern::start_h1_server, s.param_int("conns") * s.param_int("streams"), 1);
    if (s.instructions()) return http2_tern::count_ping(s);
    h2::run_ping(s, http2_tern::start_h2_server);
}

void http2_streams(session& s) { h2::run_streams(s, http2_tern::start_h2_server); }

}  // namespace tern_bench::tern_impl
