// https_server: the /ping service (ping_service.hpp) over TLS: tern::http's server with tern::tls streams
// (<tern/http/tls.hpp>), speaking HTTP/2 or HTTP/1.1 as each client's ALPN agrees (tern::http2).
//
//   https_server ADDRESS:PORT CERT KEY [THREADS]
//
// CERT is a PEM certificate chain (the server's certificate first), KEY its unencrypted PEM key. Every worker of a
// runtime of THREADS (default 1) serves the port. ALPN offers h2, then http/1.1. Prints "listening on ADDRESS:PORT" once
// it serves; SIGINT or SIGTERM shut it down gracefully (requests in flight are answered, for up to two seconds,
// and every connection ends with close_notify).
#include <tern/http/server.hpp>
#include <tern/http/tls.hpp>
#include <tern/http2/server.hpp>
#include <tern/tern.hpp>
#include <tern/tls/context.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "ping_service.hpp"

namespace http = tern::http;
namespace net = tern::net;
namespace tls = tern::tls;

namespace {

std::atomic<int> exit_status{0};

// Serves until the runtime's shutdown; a failure to listen ends the program (through the signal it waits for).
tern::task<void> serve(tern::runtime& rt, net::endpoint where, http::server_options opts) {
  const std::error_code ec =
      co_await http::serve(rt, ping_service::routes(), where, std::move(opts), std::chrono::seconds(2),
                           [](const net::endpoint& ep) {
                             std::printf("listening on %s\n", ep.to_string().c_str());
                             std::fflush(stdout);
                           });
  if (ec) {
    std::fprintf(stderr, "https_server: listen on %s: %s\n", where.to_string().c_str(), ec.message().c_str());
    exit_status = 1;
    ::kill(::getpid(), SIGTERM);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::fprintf(stderr, "usage: https_server ADDRESS:PORT CERT KEY [THREADS]\n");
    return 1;
  }
  const auto where = net::endpoint::parse(argv[1]);
  const int threads = argc == 5 ? std::atoi(argv[4]) : 1;
  if (!where || threads < 1) {
    std::fprintf(stderr, "https_server: bad address or thread count\n");
    return 1;
  }
  // One context for every connection of every worker: configured here, shared read-only afterwards.
  tls::context tls_ctx(tls::role::server);
  if (auto ec = tls_ctx.use_certificate_chain_file(argv[2])) {
    std::fprintf(stderr, "https_server: %s: %s\n", argv[2], ec.message().c_str());
    return 1;
  }
  if (auto ec = tls_ctx.use_private_key_file(argv[3])) {
    std::fprintf(stderr, "https_server: %s: %s\n", argv[3], ec.message().c_str());
    return 1;
  }
  if (auto ec = tls_ctx.set_alpn_protocols({"h2", "http/1.1"})) {
    std::fprintf(stderr, "https_server: ALPN: %s\n", ec.message().c_str());
    return 1;
  }
  http::server_options opts;
  opts.transport = http::tls_server(tls_ctx);
  opts.http2 = tern::http2::server_protocol();  // for the connections whose ALPN picked h2

  tern::io_context main_loop;
  tern::signal_set signals(main_loop, {SIGINT, SIGTERM});  // before the workers start: they inherit the mask
  tern::runtime_options ro;
  ro.threads = static_cast<unsigned>(threads);
  tern::runtime rt(ro);
  auto serving = rt.spawn_on(0, serve(rt, *where, std::move(opts)));
  (void)main_loop.block_on(signals.wait());
  rt.shutdown(std::chrono::seconds(3));
  return exit_status;
}
