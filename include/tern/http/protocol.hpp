// tern/http/protocol.hpp
//
// http::connection_protocol: another HTTP version on an http::server's port. The server accepts and, over TLS,
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

#include <string_view>

#include "tern/http/parser.hpp"
#include "tern/http/transport.hpp"
#include "tern/net/endpoint.hpp"
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

}  // namespace tern::http
