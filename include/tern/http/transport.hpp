// tern/http/transport.hpp
//
// http::transport: what an HTTP connection runs over when it is not plain TCP. A server or client given a
// transport maker (server_options::transport, client_options::tls) wraps each new TCP socket in one, shakes
// hands, and then moves its bytes through it; without one, the socket is used directly, with no indirection.
// tern::http knows no TLS library: <tern/http/tls.hpp> makes transports of tern::tls streams (HTTPS), and a
// program may make its own.
//
// Operations are tasks of the connection's loop, awaited one read and one write at a time, under the connection's
// timeouts and stop token (like every task). socket() is the TCP socket underneath: the server closes it to cut a
// connection under pending operations (shutdown's grace, stop() of idle ones).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>
#include <system_error>

#include "tern/buffer.hpp"
#include "tern/io_result.hpp"
#include "tern/net/tcp.hpp"
#include "tern/task.hpp"

namespace tern::http {

class transport {
 public:
  virtual ~transport() = default;

  // The handshake, before any request: yields std::error_code.
  virtual task<std::error_code> handshake() = 0;
  // At least one byte into b, or an error (tern::error::eof at a clean end).
  virtual task<io_result<std::size_t>> read_some(mutable_buffer b) = 0;
  // All of b, or an error with the count written before it.
  virtual task<io_result<std::size_t>> write_all(const_buffer b) = 0;
  // Ends this side's sending the protocol's way (TLS: close_notify) before the socket is closed.
  virtual task<std::error_code> shutdown_send() = 0;
  // The TCP socket underneath.
  virtual net::tcp_socket& socket() noexcept = 0;
  // The application protocol the handshake agreed on (TLS: ALPN, "h2" or "http/1.1"), or "".
  virtual std::string_view application_protocol() const noexcept { return {}; }
  // Ends the transport under whatever is pending (TLS: closes the socket; an HTTP/2 stream: resets the stream).
  virtual void close() noexcept { socket().close(); }
};

// A server's: wraps an accepted socket.
using server_transport = std::function<std::unique_ptr<transport>(net::tcp_socket socket)>;
// A client's: wraps a socket connected to host (the name the request was for: TLS sends it and checks it).
using client_transport = std::function<std::unique_ptr<transport>(net::tcp_socket socket, std::string_view host)>;

}  // namespace tern::http
