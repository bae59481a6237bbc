// tern/http/upgrade.hpp
//
// Taking a connection over from HTTP (a WebSocket, or any protocol negotiated with Upgrade): a handler answers 101
// Switching Protocols and sets response::upgrade; once the 101 has been written, the server calls it with the
// connection as an upgraded_stream, and the connection is the upgrade function's until it returns.
//
//   routes.get("/chat", [](http::request& req) -> tern::task<http::response> {
//     if (!iequals(req.header("upgrade"), "my-protocol")) co_return http::response(426);
//     http::response r(101);
//     r.headers.set("Upgrade", "my-protocol");                 // Connection: Upgrade is the server's
//     r.upgrade = [](http::upgraded_stream s) -> tern::task<void> {
//       char buf[512];
//       auto [ec, n] = co_await s.read_some(buf);               // bytes that came right after the request first
//       ...
//     };
//     co_return r;
//   });
//
// An upgraded_stream is a tern stream (read_some and write_some awaited as io_result<size_t>), so any protocol
// library over streams runs on it (ws::stream<http::upgraded_stream>). Over HTTPS it reads and writes through the
// connection's TLS. The server's timeouts no longer apply (the protocol keeps its own). The connection stays
// counted against max_connections, and shutdown(grace) cancels the upgrade function's operations once the grace
// has passed, as it does a busy connection's. The 101 is sent only to HTTP/1.1 requests; an upgrade on
// any other status is ignored (the response is sent as it is and the connection goes on as HTTP). Over HTTP/2, a
// WebSocket's extended CONNECT (RFC 8441, :protocol websocket) reaches the same handler as a GET with Upgrade:
// websocket (request.version() is http2): its 101 with an upgrade function goes out as a 200, and the function
// gets the stream as its upgraded_stream.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <system_error>

#include "tern/buffer.hpp"
#include "tern/io_result.hpp"
#include "tern/http/transport.hpp"
#include "tern/net/tcp.hpp"
#include "tern/task.hpp"

namespace tern::http {

class upgraded_stream {
 public:
  // The server makes these; a moved-from one may only be destroyed or assigned to.
  upgraded_stream(net::tcp_socket socket, std::unique_ptr<transport> secure, std::string buffered);
  // Over a stream of another protocol (a WebSocket on an HTTP/2 stream, RFC 8441): its bytes are the stream's.
  explicit upgraded_stream(std::unique_ptr<transport> tunnel);
  upgraded_stream(upgraded_stream&&) noexcept;
  upgraded_stream& operator=(upgraded_stream&&) noexcept;
  ~upgraded_stream();

  // Awaitable: at least one byte into b (those that arrived with the request first), or an error (tern::error::eof
  // at the end of the connection); io_result<size_t>.
  task<io_result<std::size_t>> read_some(mutable_buffer b);
  // Awaitable: some of b (over TLS, all of it); io_result<size_t>.
  task<io_result<std::size_t>> write_some(const_buffer b);
  // Awaitable: all of b; io_result<size_t>, the count written before any error.
  task<io_result<std::size_t>> write_all(const_buffer b);
  // Awaitable: ends this side's sending (TLS: close_notify; TCP: a FIN); std::error_code.
  task<std::error_code> shutdown_send();
  // Closes the connection, or resets the HTTP/2 stream (pending operations end with operation_canceled).
  void close() noexcept;
  // The TCP socket underneath (options, endpoints).
  net::tcp_socket& socket() noexcept;
  // True when the bytes go through TLS (the server had a transport), or through an HTTP/2 stream.
  bool secure() const noexcept { return secure_ != nullptr; }

 private:
  net::tcp_socket socket_;
  std::unique_ptr<transport> secure_;
  std::string buffered_;   // what arrived after the request, read before the connection
  std::size_t taken_ = 0;  // of buffered_
};

}  // namespace tern::http
