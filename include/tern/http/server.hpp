// tern/http/server.hpp
//
// http::server: an HTTP/1.1 server on one loop (and HTTP/2 with server_options::http2); http::serve runs one on every
// worker of a runtime.
//
//   http::router routes;
//   routes.get("/hello/{name}", [](http::request& r) -> tern::task<http::response> {
//     co_return http::response(200, "hello " + std::string(r.param("name")));
//   });
//   http::server server(ctx, std::move(routes));
//   if (auto ec = server.listen(net::endpoint::loopback_v4(8080))) ...;
//   co_await server.run();  // until stop() or shutdown(); an error if the listener breaks
//
// Each connection is a task of the server's loop. It reads a request head (parser.hpp: strict, with limits),
// finds the route, reads the body (Content-Length or chunked; answering Expect: 100-continue first), runs the
// handler and writes its response; then the next request of the connection. Requests that arrived together
// (pipelining) are answered in order, and their responses written together when the connection next waits for
// input. A connection costs its socket, a read buffer that starts at server_options::buffer_size and grows only
// for a long head, and the bodies of its current request and response.
//
// What a misbehaving peer gets:
// - a malformed head or one over a limit: its status (400, 413, 414, 431, 501, 505, 417) with Connection: close;
// - a head that has not arrived header_timeout after its first byte (slowloris), or a body slower than
//   min_body_rate after body_timeout: 408 and the connection is closed;
// - a connection that stays silent idle_timeout between requests is closed;
// - a connection beyond max_connections: a 503 and a close at once, never a hang (over TLS, a close at once);
// - a handler that throws: 500, and the connection goes on (an exception never reaches the loop).
//
// Shutdown: stop() stops accepting and closes the idle connections; a connection inside a request finishes it,
// answers with Connection: close, and closes. shutdown(grace) does the same and then, after grace, cuts the
// connections still busy. run() returns once every connection is closed. Cancelling run() itself (a deadline on
// it, a stop of the task awaiting it) cuts every connection at once, like a shutdown whose grace has passed.
// An accept that fails for one connection (reset on its way in) is skipped; one that fails for lack of descriptors
// or memory is retried every 20 ms; any other failure (a listener that never listened or was closed) ends run()
// with that error, after the connections have finished as on stop().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

#include "tern/buffer.hpp"
#include "tern/cancel.hpp"
#include "tern/http/parser.hpp"
#include "tern/http/protocol.hpp"
#include "tern/http/response.hpp"
#include "tern/http/router.hpp"
#include "tern/http/transport.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/net/endpoint.hpp"
#include "tern/net/tcp.hpp"
#include "tern/runtime.hpp"
#include "tern/sync/wait_group.hpp"
#include "tern/task.hpp"
#include "tern/task_group.hpp"

namespace tern::http {

struct server_options {
  parser_limits limits;                                    // request line, header section, fields, body
  std::chrono::milliseconds header_timeout{10'000};        // a head's last byte after its first (or the accept)
  std::chrono::milliseconds idle_timeout{60'000};          // between two requests of a connection
  std::chrono::milliseconds body_timeout{10'000};          // the body's grace before min_body_rate applies
  std::size_t min_body_rate = 1024;                        // bytes per second, averaged over the body
  std::chrono::milliseconds write_timeout{30'000};         // a response's bytes to leave (a peer that stops reading)
  std::size_t max_connections = 10'000;                    // beyond it, 503 and close
  std::size_t buffer_size = 4096;                          // a connection's first read buffer
  std::string server_name = "tern";                        // the Server field ("" sends none)
  bool date = true;                                        // a Date field on every response
  // Wraps each accepted connection (HTTPS: http::tls_server from <tern/http/tls.hpp>). Its handshake must end
  // within header_timeout. Empty: plain TCP.
  server_transport transport;
  // HTTP/2 on the same port (http2::server_protocol() from <tern/http2/server.hpp>): over TLS when ALPN agrees on
  // "h2", in clear on the connection preface or an Upgrade: h2c (protocol.hpp). Empty: HTTP/1.1 only.
  std::shared_ptr<const connection_protocol> http2;
};

namespace detail {
class connection;
}

class server {
 public:
  // A server on ctx answering with routes (shared when the same router serves several servers).
  server(io_context& ctx, std::shared_ptr<const router> routes, server_options opts = {});
  server(io_context& ctx, router routes, server_options opts = {})
      : server(ctx, std::make_shared<const router>(std::move(routes)), std::move(opts)) {}
  server(const server&) = delete;
  server& operator=(const server&) = delete;
  // The server must not be running (run() has returned, or never started).
  ~server();

  // Listens on ep (acceptor_options: reuse_port lets several servers share a port, see serve()).
  [[nodiscard]] std::error_code listen(const net::endpoint& ep, net::acceptor_options opts = {});
  [[nodiscard]] io_result<net::endpoint> local_endpoint() const noexcept;

  // Accepts and serves connections until stop() or shutdown(); returns once every connection has closed and the
  // kernel has ended what the server closed (the listener's io_uring accept), so the loop may be destroyed on
  // another thread once block_on(run()) has returned. Yields std::error_code: empty after stop() or shutdown(),
  // operation_canceled when run() was cancelled, else the listener's error (bad_file_descriptor for a server that
  // never listened, ...).
  task<std::error_code> run();
  // Stops accepting, closes the idle connections, and lets busy ones finish their request. Loop thread only.
  void stop() noexcept;
  // stop(), then waits until every connection has closed or grace has passed, when the busy ones are cut.
  task<void> shutdown(std::chrono::milliseconds grace);

  // Connections open now.
  std::size_t connections() const noexcept { return open_; }
  // The routes it answers with.
  const router& routes() const noexcept { return *routes_; }
  // stop() or shutdown() has been called.
  bool stopping() const noexcept { return stopping_; }
  const server_options& options() const noexcept { return opts_; }
  io_context& context() const noexcept { return *ctx_; }

 private:
  friend class detail::connection;
  task<void> serve(net::tcp_socket socket);
  task<void> refuse(net::tcp_socket socket);
  void link(detail::connection* c) noexcept;
  void cut_all() noexcept;
  void unlink(detail::connection* c) noexcept;

  io_context* ctx_;
  std::shared_ptr<const router> routes_;
  server_options opts_;
  net::tcp_acceptor acceptor_;
  sync::wait_group active_;   // connection tasks (and refusals) still running, for waits with a deadline
  task_group tasks_;          // the same tasks, as children whose every operation shutdown can cancel at once
  detail::connection* head_ = nullptr;  // every open connection, for stop() and shutdown()
  std::size_t open_ = 0;
  std::size_t refusing_ = 0;
  bool stopping_ = false;
};

namespace detail {
// serve(), the coroutine; the overloads below fill in what the call leaves out.
task<std::error_code> serve_on_workers(runtime& rt, std::shared_ptr<const router> routes, net::endpoint ep,
                                       server_options opts, std::chrono::milliseconds grace,
                                       std::function<void(const net::endpoint&)> on_listening);
}  // namespace detail

// Runs a server on every worker of rt, each listening on ep with SO_REUSEPORT (the kernel spreads the
// connections), all answering with routes (a router, copied or moved in, or a shared_ptr to one); port 0 picks one
// free port for all of them. on_listening (if given) is called with the endpoint once every worker listens. Returns
// after rt's shutdown, whose stop request shuts every server down with grace (5 s unless given), or at once with
// the first error of listening (a listener that broke meanwhile is reported then). Awaitable from any worker, or rt.block_on(serve(...)) from outside.
// The forms without opts are overloads, not a default argument: g++ 12 destroys twice an aggregate temporary
// (server_options{}) made in an expression that co_awaits (docs/guide.md, "Compilers").
TERN_CORO_WRAPPER inline task<std::error_code> serve(runtime& rt, std::shared_ptr<const router> routes,
                                                     net::endpoint ep) {
  return detail::serve_on_workers(rt, std::move(routes), ep, server_options(), std::chrono::seconds(5), {});
}
TERN_CORO_WRAPPER inline task<std::error_code> serve(runtime& rt, std::shared_ptr<const router> routes,
                                                     net::endpoint ep, server_options opts,
                                                     std::chrono::milliseconds grace = std::chrono::seconds(5),
                                                     std::function<void(const net::endpoint&)> on_listening = {}) {
  return detail::serve_on_workers(rt, std::move(routes), ep, std::move(opts), grace, std::move(on_listening));
}
TERN_CORO_WRAPPER inline task<std::error_code> serve(runtime& rt, router routes, net::endpoint ep) {
  return serve(rt, std::make_shared<const router>(std::move(routes)), ep);
}
TERN_CORO_WRAPPER inline task<std::error_code> serve(runtime& rt, router routes, net::endpoint ep,
                                                     server_options opts,
                                                     std::chrono::milliseconds grace = std::chrono::seconds(5),
                                                     std::function<void(const net::endpoint&)> on_listening = {}) {
  return serve(rt, std::make_shared<const router>(std::move(routes)), ep, std::move(opts), grace,
               std::move(on_listening));
}

}  // namespace tern::http
