// ws_client: a WebSocket client (tern::ws) that sends each line of its standard input as a text message and
// prints every message that comes back, one per line.
//
//   ws_client ws://HOST:PORT/PATH          plain
//   ws_client wss://HOST:PORT/PATH [--cacert FILE]   over TLS, trusting FILE's CAs (the system's by default)
//
// Sending and receiving are two tasks, so messages the server sends on its own are printed as they come. At the
// end of the input the client waits until as many messages have come back as it sent (an echo server's answers),
// or until 2 s pass without one, then closes (1000) and waits for the server's close; the exit status is 0 after a
// clean close handshake, 1 on any error (printed), 2 for a bad command line. permessage-deflate is offered.
#include <tern/tern.hpp>
#include <tern/tls/stream.hpp>
#include <tern/ws/stream.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

namespace net = tern::net;
namespace tls = tern::tls;
namespace ws = tern::ws;
using namespace std::chrono_literals;

namespace {

struct url {
  bool secure = false;
  std::string host, port, target;
};

std::optional<url> parse_url(std::string_view text) {
  url u;
  if (text.starts_with("ws://")) {
    text.remove_prefix(5);
  } else if (text.starts_with("wss://")) {
    text.remove_prefix(6);
    u.secure = true;
  } else {
    return std::nullopt;
  }
  const std::size_t slash = text.find('/');
  const std::string_view authority = text.substr(0, slash);
  u.target = slash == std::string_view::npos ? "/" : std::string(text.substr(slash));
  const std::size_t colon = authority.rfind(':');
  if (colon == std::string_view::npos || authority.empty()) {
    u.host = authority;
    u.port = u.secure ? "443" : "80";
  } else {
    u.host = authority.substr(0, colon);
    u.port = authority.substr(colon + 1);
  }
  if (u.host.size() > 2 && u.host.front() == '[' && u.host.back() == ']') u.host = u.host.substr(1, u.host.size() - 2);
  if (u.host.empty() || u.port.empty()) return std::nullopt;
  return u;
}

// Prints what arrives until the close handshake (or an error).
struct counts {
  std::size_t sent = 0, received = 0;
};

template <class S>
tern::task<int> receive(ws::stream<S>& s, counts& n) {
  std::string message;
  for (;; ++n.received) {
    auto [ec, type] = co_await s.read(message);
    if (ec == ws::close_code::normal) co_return 0;
    if (ec) {
      std::fprintf(stderr, "ws_client: %s\n", ec.message().c_str());
      co_return 1;
    }
    std::fwrite(message.data(), 1, message.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
}

// Sends each line of standard input, then closes.
template <class S>
tern::task<int> send_lines(tern::io_context& ctx, ws::stream<S>& s, counts& n) {
  auto [aec, in] = tern::fs::pipe_reader::adopt(ctx, tern::unique_fd(::dup(0)));
  std::optional<tern::buffered_reader<tern::fs::pipe_reader>> lines;
  if (!aec) lines.emplace(in);
  std::string file_line;
  for (;;) {
    std::string_view line;
    if (lines) {
      auto [ec, l] = co_await lines->read_line(1 << 20);
      if (ec) break;  // the end of the input (or a line over 1 MiB)
      line = l;
    } else {
      // A regular file (which the loop cannot poll): it never makes a read wait long, so read it directly.
      if (!std::getline(std::cin, file_line)) break;
      line = file_line;
    }
    if (auto wec = co_await s.write(ws::message_type::text, line)) {
      std::fprintf(stderr, "ws_client: send: %s\n", wec.message().c_str());
      co_return 1;
    }
    ++n.sent;
  }
  // The answers still on their way.
  for (std::size_t seen = n.received, idle = 0; n.received < n.sent && s.is_open() && idle < 200; ++idle) {
    co_await tern::sleep_for(10ms);
    if (n.received != seen) {
      seen = n.received;
      idle = 0;
    }
  }
  if (auto cec = co_await s.close(ws::close_code::normal)) {
    std::fprintf(stderr, "ws_client: close: %s\n", cec.message().c_str());
    co_return 1;
  }
  co_return 0;
}

template <class S>
tern::task<int> talk(tern::io_context& ctx, ws::stream<S>& s, const url& u) {
  ws::handshake_options o;
  const std::string host = u.host.find(':') != std::string::npos ? "[" + u.host + "]:" + u.port : u.host + ":" + u.port;
  if (auto ec = co_await s.handshake(host, u.target, o)) {
    std::fprintf(stderr, "ws_client: handshake: %s", ec.message().c_str());
    if (ec == ws::error::rejected) std::fprintf(stderr, " (status %d)", s.handshake_status());
    std::fputc('\n', stderr);
    co_return 1;
  }
  counts n;
  auto [sent, received] = co_await tern::when_all(send_lines(ctx, s, n), receive(s, n));
  co_return sent != 0 ? sent : received;
}

tern::task<int> run(tern::io_context& ctx, url u, const char* cacert) {
  auto [ec, socket] = co_await net::connect(ctx, u.host, u.port);
  if (ec) {
    std::fprintf(stderr, "ws_client: connect to %s:%s: %s\n", u.host.c_str(), u.port.c_str(), ec.message().c_str());
    co_return 1;
  }
  (void)socket.set_option(net::option::no_delay{true});
  ws::stream_options opts;
  opts.deflate.enabled = true;
  if (!u.secure) {
    ws::stream<net::tcp_socket> s(std::move(socket), ws::role::client, opts);
    co_return co_await talk(ctx, s, u);
  }
  tls::context tls_ctx(tls::role::client);
  if (cacert != nullptr) {
    if (auto lec = tls_ctx.load_verify_file(cacert)) {
      std::fprintf(stderr, "ws_client: %s: %s\n", cacert, lec.message().c_str());
      co_return 1;
    }
  }
  tls::stream<net::tcp_socket> secure(std::move(socket), tls_ctx);
  if (auto hec = secure.set_host_name(u.host)) {
    std::fprintf(stderr, "ws_client: host name: %s\n", hec.message().c_str());
    co_return 1;
  }
  if (auto hec = co_await secure.handshake()) {
    std::fprintf(stderr, "ws_client: TLS handshake: %s\n", hec.message().c_str());
    co_return 1;
  }
  ws::stream<tls::stream<net::tcp_socket>> s(std::move(secure), ws::role::client, opts);
  co_return co_await talk(ctx, s, u);
}

}  // namespace

int main(int argc, char** argv) {
  const char* cacert = nullptr;
  if (argc == 4 && std::strcmp(argv[2], "--cacert") == 0) {
    cacert = argv[3];
  } else if (argc != 2) {
    std::fprintf(stderr, "usage: ws_client ws://HOST:PORT/PATH | wss://HOST:PORT/PATH [--cacert FILE]\n");
    return 2;
  }
  const std::optional<url> u = parse_url(argv[1]);
  if (!u) {
    std::fprintf(stderr, "ws_client: not a ws:// or wss:// URL: %s\n", argv[1]);
    return 2;
  }
  tern::io_context ctx;
  return ctx.block_on(run(ctx, *u, cacert));
}
