// tern/http2/client.hpp
//
// HTTP/2 for http::client: one connection per host carries every request to it at once.
//
//   tls::context tls_ctx(tls::role::client);
//   (void)tls_ctx.set_alpn_protocols({"h2", "http/1.1"});  // offer h2; HTTP/1.1 stays the fallback
//   http::client_options o;
//   o.tls = http::tls_client(tls_ctx);
//   o.http2 = http2::client_protocol();
//   http::client c(loop, o);
//   auto [ec, r] = co_await c.get("https://example.com/");   // r.status, r.body, as over HTTP/1.1
//
// A new https connection whose ALPN agrees on "h2" becomes the host's HTTP/2 session (http:// ones too with
// client_options::http2_prior_knowledge: h2c); every later request to that host and port opens a stream on it,
// concurrently with the others. nghttp2 (driven through its memory interface, as the server drives it) keeps
// requests beyond the server's SETTINGS_MAX_CONCURRENT_STREAMS waiting until a stream ends: they wait, never fail.
// A request whose task is cancelled resets its stream (RST_STREAM CANCEL) and leaves the others running. After a
// GOAWAY the session takes no new request; the requests beyond its last-stream-id (never processed) fail with
// http::error::unprocessed, and client::send() sends them again on a new connection. Response bodies follow the
// reader: a stream's window reopens by what client_exchange::read_some has taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "tern/http/protocol.hpp"

namespace tern::http2 {

struct client_options {
  std::uint32_t stream_window = 1024 * 1024;          // each response body's window (SETTINGS_INITIAL_WINDOW_SIZE)
  std::uint32_t connection_window = 8 * 1024 * 1024;  // the connection's receive window
  std::size_t write_size = 64 * 1024;                 // output gathered into one write to the socket
  std::size_t output_per_stream = 64 * 1024;          // a streamed request body's bytes queued before write() waits
};

// The protocol to set in http::client_options::http2.
std::shared_ptr<const http::client_protocol> client_protocol(client_options opts = {});

}  // namespace tern::http2
