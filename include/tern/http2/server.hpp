// tern/http2/server.hpp
//
// HTTP/2 (RFC 9113) for http::server: the same routes answer HTTP/1.1 and HTTP/2 on one port.
//
//   http::server_options so;
//   so.http2 = http2::server_protocol();        // h2c (preface, Upgrade: h2c); over TLS when ALPN agrees on "h2"
//   so.transport = http::tls_server(ctx);       // optional: with ctx.set_alpn_protocols({"h2", "http/1.1"})
//   http::server server(loop, std::move(routes), so);
//
// A handler does not know which version it serves unless it asks (request.version() == http::http2). Each stream
// is a task of the connection's loop, started when its HEADERS have arrived and cancelled through its stop token
// when the stream closes under it (RST_STREAM from the peer, the connection's end): the handler's pending
// operation reports operation_canceled, and nothing else on the connection is disturbed.
//
// Framing, HPACK and the stream states are nghttp2's (Debian's libnghttp2 1.52), driven through its memory
// interface only: tern owns the socket, the buffers and the scheduling (docs/design.md, "HTTP/2").
// - Request bodies follow the handler: what a stream's body reader has taken is what its window reopens by
//   (WINDOW_UPDATEs sent in batches, when half a window has been consumed); a handler that stops reading stops
//   the peer. A whole-body route reads its body first, within the server's max_body.
// - Response bodies are sent as the handler writes them (DATA deferred until it does), within the peer's windows;
//   a write waits while the stream has output_per_stream bytes queued, up to the server's write_timeout, after
//   which the stream is reset. Output leaves in writes of up to write_size bytes, many frames each.
// - The server's limits apply per stream (a header section over max_header_bytes or max_headers is answered 431
//   on its stream; a body over max_body 413; a body slower than min_body_rate after body_timeout 408), and its
//   timeouts per connection (header_timeout for the preface, idle_timeout with no stream open, write_timeout for
//   each write to the socket).
// - Shutdown (server::stop, shutdown): GOAWAY, then the streams in flight finish (within shutdown's grace) and
//   new ones are refused; the last-stream-id is that of the last stream handed to a handler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "tern/http/protocol.hpp"

namespace tern::http2 {

struct server_options {
  std::uint32_t max_concurrent_streams = 100;         // SETTINGS_MAX_CONCURRENT_STREAMS
  std::uint32_t stream_window = 1024 * 1024;          // each request body's window (SETTINGS_INITIAL_WINDOW_SIZE)
  std::uint32_t connection_window = 8 * 1024 * 1024;  // the connection's receive window, all streams together
  std::uint32_t max_frame_size = 16 * 1024;           // SETTINGS_MAX_FRAME_SIZE (16 KiB to 16 MiB)
  std::size_t write_size = 64 * 1024;                 // output gathered into one write to the socket
  std::size_t output_per_stream = 64 * 1024;          // a streaming response's bytes queued before write() waits
  bool cleartext = true;                              // h2c: the preface and Upgrade: h2c on a plain port
  bool extended_connect = true;                       // RFC 8441 (WebSocket over a stream)
};

// The protocol to set in http::server_options::http2.
std::shared_ptr<const http::connection_protocol> server_protocol(server_options opts = {});

}  // namespace tern::http2
