// echo_server: accepts TCP connections and echoes every byte back until the peer closes.
//
//   echo_server [ENDPOINT|PORT]      default 127.0.0.1:5555; port 0 picks a free port
//
// One task per connection. An error on one connection is printed and ends that connection only.
#include <tern/tern.hpp>

#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace net = tern::net;
using namespace std::chrono_literals;

namespace {

std::optional<net::endpoint> parse_listen_endpoint(std::string_view arg) {
  std::uint16_t port = 0;
  auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), port);
  if (ec == std::errc{} && end == arg.data() + arg.size()) return net::endpoint::loopback_v4(port);
  return net::endpoint::parse(arg);
}

tern::task<> echo(net::tcp_socket socket, std::string peer) {
  std::array<char, 16 * 1024> buffer;
  for (;;) {
    auto [read_ec, n] = co_await socket.read_some(buffer);
    if (read_ec) {
      if (read_ec != net::error::eof) std::fprintf(stderr, "%s: read: %s\n", peer.c_str(), read_ec.message().c_str());
      co_return;
    }
    auto [write_ec, written] = co_await socket.write_all(tern::const_buffer(buffer.data(), n));
    if (write_ec) {
      std::fprintf(stderr, "%s: write: %s\n", peer.c_str(), write_ec.message().c_str());
      co_return;
    }
  }
}

tern::task<int> serve(tern::io_context& ctx, net::endpoint where) {
  net::tcp_acceptor acceptor(ctx);
  if (auto ec = acceptor.listen(where)) {
    std::fprintf(stderr, "listen on %s: %s\n", where.to_string().c_str(), ec.message().c_str());
    co_return 1;
  }
  auto [local_ec, local] = acceptor.local_endpoint();
  std::printf("listening on %s (%s)\n", local_ec ? where.to_string().c_str() : local.to_string().c_str(),
              tern::to_string(ctx.backend()));
  std::fflush(stdout);

  for (;;) {
    auto [ec, socket] = co_await acceptor.accept();
    if (ec) {
      // EMFILE, ECONNABORTED and the like: report, back off a little, keep serving.
      std::fprintf(stderr, "accept: %s\n", ec.message().c_str());
      co_await tern::sleep_for(10ms);
      continue;
    }
    auto [peer_ec, peer] = socket.remote_endpoint();
    socket.set_no_delay(true);
    tern::spawn(ctx, echo(std::move(socket), peer_ec ? std::string("?") : peer.to_string())).detach();
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view arg = argc > 1 ? argv[1] : "127.0.0.1:5555";
  auto where = parse_listen_endpoint(arg);
  if (!where) {
    std::fprintf(stderr, "usage: %s [HOST:PORT | PORT]   (bad endpoint '%s')\n", argv[0], argv[1]);
    return 2;
  }

  tern::io_context ctx;
  // A connection task that throws ends that connection only.
  ctx.set_exception_handler([](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      std::fprintf(stderr, "connection task failed: %s\n", x.what());
    } catch (...) {
      std::fprintf(stderr, "connection task failed\n");
    }
  });
  return ctx.block_on(serve(ctx, *where));
}
