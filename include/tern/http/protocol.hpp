// tern/http/protocol.hpp
//
// http::connection_protocol: another HTTP version on an http::server's port; http::client_protocol: the same for
// http::client's connections. The server accepts and, over TLS,
// shakes hands as always; then a connection whose handshake agreed on "h2" (ALPN), whose first bytes are the
// HTTP/2 connection preface, or whose first request asks for `Upgrade: h2c`, is handed over to the protocol set in
// server_options::http2 (http2::server_protocol() from <tern/http2/server.hpp>). Through this seam tern::http
// itself links no HTTP/2 library and its HTTP/1.1 path pays nothing for HTTP/2: the preface is recognised where
// the HTTP/1.1 parser refuses it (a version 2.0 request line), ALPN is read once after the handshake, and the
// upgrade is one more look at a request that asked for an upgrade.
//
// The protocol serves the connection inside the server's own connection task: it stays counted against
// max_connections, shutdown's cut and cancellation reach it as they reach an HTTP/1.1 connection, and the server
// closes the socket (over TLS after close_notify) when serve() returns.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "tern/buffer.hpp"
#include "tern/http/fields.hpp"
#include "tern/http/message.hpp"
#include "tern/http/parser.hpp"
#include "tern/http/transport.hpp"
#include "tern/net/endpoint.hpp"
#include "tern/io_result.hpp"
#include "tern/net/tcp.hpp"
#include "tern/task.hpp"

namespace tern::http {

class server;

// Told when the server stops (stop(), shutdown()): the protocol then finishes what is in flight and takes nothing
// new (HTTP/2: GOAWAY). Called on the server's loop, never from inside the protocol's own code.
class stop_listener {
 public:
  virtual void server_stopping() noexcept = 0;

 protected:
  ~stop_listener() = default;
};

// What a connection is handed over with. Every reference outlives serve().
struct handover {
  http::server& server;
  net::tcp_socket& socket;     // the connection's socket: read and written directly when secure is null
  transport* secure;           // the TLS the bytes go through, or null
  const net::endpoint& remote;
  std::string_view received;   // bytes read from the peer and not yet used (the preface, or what followed the upgrade)
  // Upgrade: h2c only: the HTTP/1.1 request that becomes the first stream, its whole body, and its HTTP2-Settings.
  const request_head* upgraded = nullptr;
  std::string_view upgraded_body;
  std::string_view upgrade_settings;
  // The protocol sets *listener while it serves, to hear of the server's stop.
  stop_listener** listener = nullptr;
};

class connection_protocol {
 public:
  virtual ~connection_protocol() = default;
  // Serves the connection until it ends; the server closes it afterwards. Never throws.
  virtual task<void> serve(handover h) const = 0;
};

// ---- the client side ----
//
// http::client hands a new connection to client_options::http2 (http2::client_protocol() from
// <tern/http2/client.hpp>) when its TLS handshake agreed on "h2", or, for http:// with
// client_options::http2_prior_knowledge, at once; the protocol makes a session of it, and every request to that host
// and port then goes through the session, concurrently, until it stops taking new ones (GOAWAY, a failure). Each
// request is a client_stream, behind a client_exchange like an HTTP/1.1 request.

// One request and its response, over another protocol (client_exchange's operations, in the same order).
class client_stream {
 public:
  virtual ~client_stream() = default;
  virtual task<std::error_code> write(const_buffer b) = 0;
  virtual task<std::error_code> finish() = 0;
  virtual const response_head& head() const noexcept = 0;
  virtual task<io_result<std::size_t>> read_some(mutable_buffer b) = 0;
};

// A connection that carries many requests at once. Its tasks belong to the client's loop; destroying the session
// ends the connection (streams still open then fail).
class client_session {
 public:
  virtual ~client_session() = default;
  // Opens a request, waiting while the server's limit of concurrent streams is reached. Fails with
  // http::error::unprocessed when the session takes no more requests (the request may go to another connection).
  virtual task<io_result<std::unique_ptr<client_stream>>> open(method m, std::string_view target,
                                                               const fields& headers,
                                                               std::optional<std::uint64_t> body_length) = 0;
  // Whether it takes new requests (no GOAWAY received, not failed).
  virtual bool usable() const noexcept = 0;
};

// What a session is made with.
struct client_handover {
  net::tcp_socket socket;               // the connection (used directly when secure is null)
  std::unique_ptr<transport> secure;    // its TLS, after the handshake
  std::string authority;                // ":authority" of its requests ("host" or "host:port")
  std::string user_agent;               // sent unless a request has its own ("" for none)
  parser_limits limits;                 // a response's head and body
  std::chrono::milliseconds response_timeout;
  std::chrono::milliseconds read_timeout;
  std::chrono::milliseconds write_timeout;
};

class client_protocol {
 public:
  virtual ~client_protocol() = default;
  // A session on a new connection, on the calling task's loop.
  virtual std::unique_ptr<client_session> start(client_handover h) const = 0;
};

}  // namespace tern::http
