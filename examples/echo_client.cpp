// echo_client: sends messages to an echo server, reads each one back and checks every byte.
//
//   echo_client [ENDPOINT|PORT] [MESSAGES] [SIZE]     defaults 127.0.0.1:5555 10000 64
//
// Prints round trips per second. Exits 1 on a connection error or when an echo differs from what was sent.
#include <tern/tern.hpp>

#include <chrono>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

namespace net = tern::net;

namespace {

std::optional<net::endpoint> parse_endpoint(std::string_view arg) {
  std::uint16_t port = 0;
  auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), port);
  if (ec == std::errc{} && end == arg.data() + arg.size()) return net::endpoint::loopback_v4(port);
  return net::endpoint::parse(arg);
}

std::optional<std::size_t> parse_count(std::string_view arg) {
  std::size_t value = 0;
  auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), value);
  if (ec != std::errc{} || end != arg.data() + arg.size()) return std::nullopt;
  return value;
}

// Message i is a byte pattern that differs from message i - 1, so a stale or shifted echo is caught.
void fill(std::vector<char>& message, std::size_t i) {
  for (std::size_t k = 0; k < message.size(); ++k) message[k] = static_cast<char>((i * 131 + k * 7) & 0xff);
}

tern::task<int> run_client(tern::io_context& ctx, net::endpoint server, std::size_t messages, std::size_t size) {
  auto [connect_ec, socket] = co_await net::connect(ctx, server);
  if (connect_ec) {
    std::fprintf(stderr, "connect to %s: %s\n", server.to_string().c_str(), connect_ec.message().c_str());
    co_return 1;
  }
  if (auto ec = socket.set_no_delay(true)) std::fprintf(stderr, "TCP_NODELAY: %s\n", ec.message().c_str());

  std::vector<char> sent(size);
  std::vector<char> received(size);
  auto start = tern::clock::now();
  for (std::size_t i = 0; i < messages; ++i) {
    fill(sent, i);
    // Write and read at once: a message larger than the socket buffers would otherwise deadlock, with the
    // client blocked writing while the server is blocked writing the echo back.
    auto writing = tern::spawn(ctx, socket.write_all(sent));
    auto [read_ec, n] = co_await socket.read_exact(received);
    if (read_ec) socket.cancel();  // the writer must not outlive this round trip
    auto [write_ec, written] = co_await std::move(writing);
    if (read_ec) {
      std::fprintf(stderr, "message %zu: read: %s (%zu of %zu bytes)\n", i, read_ec.message().c_str(), n, size);
      co_return 1;
    }
    if (write_ec) {
      std::fprintf(stderr, "message %zu: write: %s\n", i, write_ec.message().c_str());
      co_return 1;
    }
    if (received != sent) {
      std::fprintf(stderr, "message %zu: the echo differs from what was sent\n", i);
      co_return 1;
    }
  }
  std::chrono::duration<double> elapsed = tern::clock::now() - start;

  double seconds = elapsed.count();
  std::printf("%zu round trips of %zu B to %s in %.3f s: %.0f round trips/s (%s)\n", messages, size,
              server.to_string().c_str(), seconds, seconds > 0 ? messages / seconds : 0.0,
              tern::to_string(ctx.backend()));
  co_return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto server = parse_endpoint(argc > 1 ? argv[1] : "127.0.0.1:5555");
  auto messages = parse_count(argc > 2 ? argv[2] : "10000");
  auto size = parse_count(argc > 3 ? argv[3] : "64");
  if (!server || !messages || !size || *size == 0) {
    std::fprintf(stderr, "usage: %s [HOST:PORT | PORT] [MESSAGES] [SIZE > 0]\n", argv[0]);
    return 2;
  }
  tern::io_context ctx;
  return ctx.block_on(run_client(ctx, *server, *messages, *size));
}
