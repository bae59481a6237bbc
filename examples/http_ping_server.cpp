// http_ping_server: the /ping service of Ichor's HTTP benchmark on tern::http (ping_service.hpp: a POST to /ping
// with a JSON body {"sequence": N} is answered with {"sequence":N}; anything else gets a status that says why).
//
//   http_ping_server ADDRESS:PORT [THREADS]
//
// HTTP/1.1 and HTTP/2 on the same port: h2c with prior knowledge (h2load, curl --http2-prior-knowledge) or through
// Upgrade: h2c (curl --http2), the same routes answering both (TERN_HTTP2=0 turns HTTP/2 off, for comparisons).
// With THREADS (default 1) above one, every worker of a tern::runtime serves the port (SO_REUSEPORT). Prints
// "listening on ADDRESS:PORT" once it serves; SIGINT or SIGTERM shut it down gracefully (requests in flight are
// answered, for up to two seconds). GET /metrics answers with the loops' counters in Prometheus's text format
// (tern/metrics.hpp), one series per worker.
//
// The server's limits and timeouts (http::server_options) can be set from the environment, for tests that need them
// short (scripts/reliability.sh: the hostile-client check); unset, the library's defaults hold:
//   TERN_HTTP_HEADER_TIMEOUT_MS, TERN_HTTP_IDLE_TIMEOUT_MS, TERN_HTTP_BODY_TIMEOUT_MS, TERN_HTTP_WRITE_TIMEOUT_MS,
//   TERN_HTTP_MIN_BODY_RATE (bytes per second), TERN_HTTP_MAX_CONNECTIONS, TERN_HTTP_MAX_BODY,
//   TERN_HTTP_MAX_HEADER_BYTES, TERN_HTTP_MAX_REQUEST_LINE; and TERN_HTTP2 (1: HTTP/2 on, the default; 0: off)
#include <tern/http/server.hpp>
#include <tern/http2/server.hpp>
#include <tern/tern.hpp>

#include <csignal>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "ping_service.hpp"

namespace http = tern::http;
namespace net = tern::net;

namespace {

// The value of the environment variable name as a number, or fallback when it is unset or not a number.
template <class T>
T from_env(const char* name, T fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == 0) return fallback;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (*end != 0) {
    std::fprintf(stderr, "http_ping_server: %s='%s' is not a number; ignored\n", name, v);
    return fallback;
  }
  return static_cast<T>(n);
}

http::server_options options_from_env() {
  http::server_options o;
  using ms = std::chrono::milliseconds;
  o.header_timeout = ms(from_env<long long>("TERN_HTTP_HEADER_TIMEOUT_MS", o.header_timeout.count()));
  o.idle_timeout = ms(from_env<long long>("TERN_HTTP_IDLE_TIMEOUT_MS", o.idle_timeout.count()));
  o.body_timeout = ms(from_env<long long>("TERN_HTTP_BODY_TIMEOUT_MS", o.body_timeout.count()));
  o.write_timeout = ms(from_env<long long>("TERN_HTTP_WRITE_TIMEOUT_MS", o.write_timeout.count()));
  o.min_body_rate = from_env<std::size_t>("TERN_HTTP_MIN_BODY_RATE", o.min_body_rate);
  o.max_connections = from_env<std::size_t>("TERN_HTTP_MAX_CONNECTIONS", o.max_connections);
  o.limits.max_body = from_env<std::uint64_t>("TERN_HTTP_MAX_BODY", o.limits.max_body);
  o.limits.max_header_bytes = from_env<std::size_t>("TERN_HTTP_MAX_HEADER_BYTES", o.limits.max_header_bytes);
  o.limits.max_request_line = from_env<std::size_t>("TERN_HTTP_MAX_REQUEST_LINE", o.limits.max_request_line);
  if (from_env<int>("TERN_HTTP2", 1) != 0) o.http2 = tern::http2::server_protocol();
  return o;
}

// The /ping service, and GET /metrics with what exposition() writes.
std::shared_ptr<const http::router> routes(std::function<std::string()> exposition) {
  auto r = std::make_shared<http::router>();
  r->post("/ping", ping_service::ping);
  r->get("/metrics", [exposition = std::move(exposition)](http::request&) -> tern::task<http::response> {
    co_return http::response(200, exposition(), "text/plain; version=0.0.4");
  });
  return r;
}

tern::task<int> serve_one(tern::io_context& ctx, net::endpoint where) {
  http::server server(ctx, routes([&ctx] {
    std::string text;
    tern::metrics::write_prometheus(ctx.metrics(), text);
    return text;
  }), options_from_env());
  if (auto ec = server.listen(where)) {
    std::fprintf(stderr, "http_ping_server: listen on %s: %s\n", where.to_string().c_str(), ec.message().c_str());
    co_return 1;
  }
  std::printf("listening on %s\n", server.local_endpoint().value.to_string().c_str());
  std::fflush(stdout);
  tern::signal_set signals(ctx, {SIGINT, SIGTERM});
  auto running = tern::spawn(ctx, server.run());
  (void)co_await signals.wait();
  co_await server.shutdown(std::chrono::seconds(2));
  co_await std::move(running);
  co_return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: http_ping_server ADDRESS:PORT [THREADS]\n");
    return 1;
  }
  const auto where = net::endpoint::parse(argv[1]);
  const int threads = argc == 3 ? std::atoi(argv[2]) : 1;
  if (!where || threads < 1) {
    std::fprintf(stderr, "http_ping_server: bad address or thread count\n");
    return 1;
  }
  if (threads == 1) {
    tern::io_context ctx;
    return ctx.block_on(serve_one(ctx, *where));
  }
  tern::io_context main_loop;
  tern::signal_set signals(main_loop, {SIGINT, SIGTERM});  // before the workers start: they inherit the mask
  tern::runtime_options o;
  o.threads = static_cast<unsigned>(threads);
  tern::runtime rt(o);
  auto exposition = [&rt] {
    std::string text;
    tern::metrics::write_prometheus(rt.metrics(), text);
    return text;
  };
  auto done = rt.spawn_on(0, http::serve(rt, routes(exposition), *where, options_from_env(), std::chrono::seconds(2),
                                         [](const net::endpoint& ep) {
                                           std::printf("listening on %s\n", ep.to_string().c_str());
                                           std::fflush(stdout);
                                         }));
  (void)main_loop.block_on(signals.wait());
  rt.shutdown(std::chrono::seconds(3));
  return 0;
}
