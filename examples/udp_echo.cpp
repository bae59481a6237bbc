// udp_echo: a UDP echo server, and a client that checks every echo.
//
//   udp_echo server [HOST:PORT]                  default 127.0.0.1:5556; port 0 picks one (printed)
//   udp_echo client HOST:PORT [COUNT] [SIZE]     default 1000 datagrams of 512 bytes
//
// The server answers each datagram to its sender, whatever its size, until SIGINT or SIGTERM. The client sends
// numbered datagrams one at a time, waits up to a second for each echo (UDP may lose one: it is then sent again,
// up to three times), and checks the echo byte by byte; it prints the round-trip figures and fails on a mismatch.
#include <tern/tern.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace net = tern::net;
using namespace std::chrono_literals;

namespace {

tern::task<int> serve(net::endpoint where, std::stop_token stop) {
  tern::io_context& ctx = *tern::io_context::current();
  net::udp_socket socket(ctx);
  if (auto ec = socket.bind(where)) {
    std::fprintf(stderr, "bind %s: %s\n", where.to_string().c_str(), ec.message().c_str());
    co_return 1;
  }
  auto [lec, local] = socket.local_endpoint();
  std::printf("listening on %s\n", (lec ? where : local).to_string().c_str());
  std::fflush(stdout);
  std::vector<char> buffer(65536);
  for (;;) {
    auto [ec, got] = co_await tern::with_stop(socket.receive_from(buffer), stop);
    if (ec == tern::error::operation_canceled) co_return 0;
    if (ec) {
      // A truncated datagram cannot happen with a 64 KiB buffer; a refused earlier reply shows up here too.
      std::fprintf(stderr, "receive: %s\n", ec.message().c_str());
      continue;
    }
    if (auto [sec, n] = co_await socket.send_to(tern::const_buffer(buffer.data(), got.size), got.from); sec) {
      std::fprintf(stderr, "send to %s: %s\n", got.from.to_string().c_str(), sec.message().c_str());
    }
  }
}

tern::task<int> client(net::endpoint server, int count, std::size_t size) {
  tern::io_context& ctx = *tern::io_context::current();
  net::udp_socket socket(ctx);
  if (auto ec = socket.connect(server)) {
    std::fprintf(stderr, "connect %s: %s\n", server.to_string().c_str(), ec.message().c_str());
    co_return 1;
  }
  std::vector<char> sent(size), back(size + 1);
  double total_us = 0, worst_us = 0;
  for (int i = 0; i < count; ++i) {
    for (std::size_t k = 0; k < size; ++k) sent[k] = static_cast<char>(i * 131 + k * 7);
    bool echoed = false;
    for (int attempt = 0; attempt < 3 && !echoed; ++attempt) {
      const auto start = std::chrono::steady_clock::now();
      if (auto [ec, n] = co_await socket.send(sent); ec) {
        std::fprintf(stderr, "send: %s\n", ec.message().c_str());
        co_return 1;
      }
      auto [ec, n] = co_await tern::with_timeout(socket.receive(back), 1s);
      if (ec == tern::error::timed_out) continue;  // lost: send again
      if (ec) {
        std::fprintf(stderr, "receive: %s\n", ec.message().c_str());
        co_return 1;
      }
      if (n != size || std::memcmp(back.data(), sent.data(), size) != 0) {
        std::fprintf(stderr, "datagram %d: the echo differs from what was sent\n", i);
        co_return 1;
      }
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      total_us += us;
      if (us > worst_us) worst_us = us;
      echoed = true;
    }
    if (!echoed) {
      std::fprintf(stderr, "datagram %d: no echo after 3 tries\n", i);
      co_return 1;
    }
  }
  std::printf("%d datagrams of %zu bytes echoed: mean %.1f us, worst %.1f us\n", count, size, total_us / count,
              worst_us);
  co_return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "server") {
    auto where = net::endpoint::parse(argc > 2 ? argv[2] : "127.0.0.1:5556");
    if (!where) {
      std::fprintf(stderr, "bad endpoint\n");
      return 2;
    }
    tern::io_context ctx;
    tern::signal_set signals(ctx, {SIGINT, SIGTERM});
    std::stop_source stop;
    tern::spawn(ctx, [&signals, &stop]() -> tern::task<> {
      (void)co_await signals.wait();
      stop.request_stop();
    }).detach();
    return ctx.block_on(serve(*where, stop.get_token()));
  }
  if (mode == "client" && argc > 2) {
    auto server = net::endpoint::parse(argv[2]);
    const int count = argc > 3 ? std::atoi(argv[3]) : 1000;
    const std::size_t size = argc > 4 ? static_cast<std::size_t>(std::atoi(argv[4])) : 512;
    if (!server || count < 1 || size > 65507) {
      std::fprintf(stderr, "bad arguments\n");
      return 2;
    }
    return tern::run(client(*server, count, size));
  }
  std::fprintf(stderr, "usage: %s server [HOST:PORT] | client HOST:PORT [COUNT] [SIZE]\n", argv[0]);
  return 2;
}
