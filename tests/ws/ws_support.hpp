// Helpers for the tern::ws tests: WebSocket pairs over loopback TCP (and TLS, and Unix sockets) with both
// handshakes run together, raw frames built by hand, and a hash for checking large messages.
#pragma once

#include "net_support.hpp"

#include <tern/ws/stream.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace tern_test {

namespace ws = tern::ws;
using ws_tcp = ws::stream<tern::net::tcp_socket>;

struct ws_pair {
  ws_tcp client;
  ws_tcp server;
};

// Both ends of a TCP connection with the opening handshake done (errors fail the test).
inline tern::task<ws_pair> ws_over_tcp(tern::io_context& ctx, ws::stream_options client_opts = {},
                                       ws::stream_options server_opts = {}) {
  socket_pair p = co_await connected_pair(ctx);
  // As a WebSocket server and client should: a frame's last small write is not held back for the peer's ACK.
  EXPECT_OK(p.client.set_option(tern::net::option::no_delay{true}));
  EXPECT_OK(p.server.set_option(tern::net::option::no_delay{true}));
  ws_pair out{ws_tcp(std::move(p.client), ws::role::client, client_opts),
              ws_tcp(std::move(p.server), ws::role::server, server_opts)};
  auto [cec, sec] = co_await tern::when_all(out.client.handshake("localhost", "/chat"), out.server.accept());
  EXPECT_OK(cec);
  EXPECT_OK(sec);
  co_return out;
}

// FNV-1a, 64 bits: enough to tell a 16 MiB message from a damaged one.
inline std::uint64_t fnv1a(std::string_view data) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : data) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// A frame as a client would send it (masked with key), or unmasked when masked is false.
inline std::string raw_frame(unsigned char first_byte, std::string_view payload, bool masked = true,
                             std::uint32_t key = 0x37fa213d) {
  unsigned char h[ws::detail::max_header_size];
  const auto op = static_cast<ws::detail::opcode>(first_byte & 0x0f);
  const std::size_t n =
      ws::detail::write_header(h, op, (first_byte & 0x80) != 0, (first_byte & 0x40) != 0, payload.size(), masked, key);
  h[0] = first_byte;  // any reserved bits exactly as given
  std::string out(reinterpret_cast<char*>(h), n);
  std::string body(payload);
  if (masked) ws::detail::apply_mask(reinterpret_cast<unsigned char*>(body.data()), body.size(), key, 0);
  return out + body;
}

// A valid upgrade request.
inline std::string upgrade_request(std::string_view extra = {}) {
  return "GET /chat HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
         std::string(extra) + "\r\n";
}

// Reads from a raw socket until the response head's end; returns the head.
inline tern::task<std::string> read_head(tern::net::tcp_socket& s) {
  std::string got;
  char c;
  while (got.find("\r\n\r\n") == std::string::npos) {
    auto [ec, n] = co_await s.read_some(tern::mutable_buffer(&c, 1));
    if (ec) break;
    got += c;
  }
  co_return got;
}

// Reads one unmasked frame (a server's) from a raw socket: first byte and payload.
inline tern::task<std::pair<int, std::string>> read_server_frame(tern::net::tcp_socket& s) {
  unsigned char h[10];
  auto [ec, n] = co_await s.read_exact(tern::mutable_buffer(h, 2));
  if (ec) co_return std::pair<int, std::string>{-1, ec.message()};
  std::uint64_t len = h[1] & 0x7f;
  if (len == 126) {
    (void)co_await s.read_exact(tern::mutable_buffer(h + 2, 2));
    len = (std::uint64_t{h[2]} << 8) | h[3];
  } else if (len == 127) {
    (void)co_await s.read_exact(tern::mutable_buffer(h + 2, 8));
    len = 0;
    for (int i = 2; i < 10; ++i) len = (len << 8) | h[i];
  }
  std::string payload(len, '\0');
  if (len != 0) (void)co_await s.read_exact(tern::mutable_buffer(payload.data(), payload.size()));
  co_return std::pair<int, std::string>{h[0], payload};
}

// The close code at the start of a close frame's payload.
inline int close_code_of(const std::string& payload) {
  if (payload.size() < 2) return 0;
  return (static_cast<unsigned char>(payload[0]) << 8) | static_cast<unsigned char>(payload[1]);
}

}  // namespace tern_test
