// peer_server: an http::server with HTTP/2 on, for the peers the tests run as other processes (h2spec, nghttp,
// h2load, curl, Python's h2). One loop on the backend TERN_BACKEND names.
//
//   peer_server [--tls CERT KEY] [--max-streams N] [--window BYTES] [--write-timeout MS] [--header-bytes N]
//
// Listens on 127.0.0.1 (a free port), prints "port N" once it serves, and shuts down gracefully when its standard
// input closes. Routes: GET, HEAD and POST / (a short body; POST reads the request's whole), GET /bytes/{n} (n
// bytes of 'a'..'z' repeating, streamed), POST /sha (the request body streamed through, answered with its size
// and byte sum), POST /whole (the request body read whole, answered with its size and FNV-1a hash).
#include <tern/http/router.hpp>
#include <tern/http/server.hpp>
#include <tern/http/stream.hpp>
#include <tern/http/tls.hpp>
#include <tern/http2/server.hpp>
#include <tern/tern.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

namespace http = tern::http;

namespace {

http::router routes() {
  http::router r;
  r.get("/", [](http::request&) -> tern::task<http::response> { co_return http::response(200, "hello from tern\n"); });
  r.post("/", [](http::request& q) -> tern::task<http::response> {
    co_return http::response(200, "got " + std::to_string(q.body().size()) + "\n");
  });
  r.post("/whole", [](http::request& q) -> tern::task<http::response> {
    std::uint64_t h = 14695981039346656037ull;
    for (unsigned char c : q.body()) h = (h ^ c) * 1099511628211ull;
    co_return http::response(200, std::to_string(q.body().size()) + " " + std::to_string(h));
  });
  r.stream(http::method::get, "/bytes/{n}",
           [](http::request& q, http::body_reader&, http::response_stream& out) -> tern::task<void> {
             const std::size_t n = std::strtoull(std::string(q.param("n")).c_str(), nullptr, 10);
             if (co_await out.start(200, {}, n)) co_return;
             char piece[16384];
             for (std::size_t at = 0; at < n;) {
               const std::size_t k = std::min(sizeof piece, n - at);
               for (std::size_t i = 0; i < k; ++i) piece[i] = static_cast<char>('a' + (at + i) % 26);
               if (co_await out.write(tern::const_buffer(piece, k))) co_return;
               at += k;
             }
             (void)co_await out.finish();
           });
  r.stream(http::method::post, "/sha",
           [](http::request&, http::body_reader& body, http::response_stream& out) -> tern::task<void> {
             std::uint64_t size = 0, sum = 0;
             char buf[16384];
             for (;;) {
               auto [ec, n] = co_await body.read_some(tern::mutable_buffer(buf, sizeof buf));
               if (ec == tern::error::eof) break;
               if (ec) co_return;
               size += n;
               for (std::size_t i = 0; i < n; ++i) sum += static_cast<unsigned char>(buf[i]);
             }
             const std::string answer = std::to_string(size) + " " + std::to_string(sum);
             if (co_await out.start(200, {}, answer.size())) co_return;
             (void)co_await out.write(tern::const_buffer(answer.data(), answer.size()));
             (void)co_await out.finish();
           });
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  http::server_options o;
  tern::http2::server_options h2;
  std::string cert, key;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tls") == 0 && i + 2 < argc) {
      cert = argv[++i];
      key = argv[++i];
    } else if (std::strcmp(argv[i], "--max-streams") == 0 && i + 1 < argc) {
      h2.max_concurrent_streams = static_cast<std::uint32_t>(std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--window") == 0 && i + 1 < argc) {
      h2.stream_window = static_cast<std::uint32_t>(std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--write-timeout") == 0 && i + 1 < argc) {
      o.write_timeout = std::chrono::milliseconds(std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--header-bytes") == 0 && i + 1 < argc) {
      o.limits.max_header_bytes = static_cast<std::size_t>(std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: peer_server [--tls CERT KEY] [--max-streams N] [--window BYTES] "
                           "[--write-timeout MS] [--header-bytes N]\n");
      return 2;
    }
  }
  o.http2 = tern::http2::server_protocol(h2);
  if (!cert.empty()) {
    tern::tls::context ctx(tern::tls::role::server);
    if (ctx.use_certificate_chain_file(cert) || ctx.use_private_key_file(key) ||
        ctx.set_alpn_protocols({"h2", "http/1.1"})) {
      std::fprintf(stderr, "peer_server: cannot use %s and %s\n", cert.c_str(), key.c_str());
      return 1;
    }
    o.transport = http::tls_server(ctx);
  }
  tern::io_context ctx;
  http::server server(ctx, routes(), o);
  if (auto ec = server.listen(tern::net::endpoint::loopback_v4(0))) {
    std::fprintf(stderr, "peer_server: %s\n", ec.message().c_str());
    return 1;
  }
  std::printf("port %u\n", static_cast<unsigned>(server.local_endpoint().value.port()));
  std::fflush(stdout);
  // The end of standard input (the test is done with the server) shuts it down; the shutdown is awaited too, since
  // run() may return before it has.
  std::optional<tern::join_handle<void>> stopping;
  std::thread watcher([&] {
    char c;
    while (::read(0, &c, 1) > 0) {
    }
    ctx.post([&] { stopping.emplace(tern::spawn(ctx, server.shutdown(std::chrono::seconds(2)))); });
  });
  ctx.block_on([](http::server& server, std::optional<tern::join_handle<void>>& stopping) -> tern::task<void> {
    co_await server.run();
    if (stopping) co_await std::move(*stopping);
  }(server, stopping));
  watcher.join();
  return 0;
}
