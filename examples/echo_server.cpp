// echo_server: accepts TCP connections and echoes every byte back until the peer closes.
//
//   echo_server [ENDPOINT|PORT] [THREADS]   default 127.0.0.1:5555 and one worker per CPU; port 0 picks a port
//
// Every worker of a tern::runtime listens on the same port (SO_REUSEPORT: the kernel spreads connections over
// them) and serves its connections itself, one task per connection. An error on one connection is printed and
// ends that connection only. SIGINT or SIGTERM shuts down gracefully: accepting stops, open connections get a
// grace period to finish.
#include <tern/tern.hpp>

#include <array>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <stop_token>
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

// The accept loop of one worker; ends (closing its acceptor) when the runtime's stop token is triggered.
tern::task<> serve(std::unique_ptr<net::tcp_acceptor> acceptor, std::stop_token stop) {
  tern::io_context& ctx = acceptor->context();
  for (;;) {
    auto [ec, socket] = co_await tern::with_stop(acceptor->accept(), stop);
    if (ec == std::errc::operation_canceled) co_return;
    if (ec) {
      // EMFILE, ECONNABORTED and the like: report, back off a little, keep serving.
      std::fprintf(stderr, "accept: %s\n", ec.message().c_str());
      co_await tern::sleep_for(10ms);
      continue;
    }
    auto [peer_ec, peer] = socket.remote_endpoint();
    (void)socket.set_no_delay(true);  // latency only; the echo works without it
    tern::spawn(ctx, echo(std::move(socket), peer_ec ? std::string("?") : peer.to_string())).detach();
  }
}

// Listens on worker i; returns the bound endpoint (the first worker resolves port 0 for the others).
tern::task<std::optional<net::endpoint>> listen_on(tern::runtime& rt, std::size_t i, net::endpoint where) {
  co_await rt.switch_to(i);
  auto acceptor = std::make_unique<net::tcp_acceptor>(rt.worker(i));
  net::acceptor_options opts;
  opts.reuse_port = true;
  if (auto ec = acceptor->listen(where, opts)) {
    std::fprintf(stderr, "listen on %s: %s\n", where.to_string().c_str(), ec.message().c_str());
    co_return std::nullopt;
  }
  auto [ec, local] = acceptor->local_endpoint();
  tern::spawn(rt.worker(i), serve(std::move(acceptor), rt.stop_token())).detach();
  co_return ec ? where : local;
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view arg = argc > 1 ? argv[1] : "127.0.0.1:5555";
  auto where = parse_listen_endpoint(arg);
  unsigned threads = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 0;
  if (!where) {
    std::fprintf(stderr, "usage: %s [HOST:PORT | PORT] [THREADS]   (bad endpoint '%s')\n", argv[0], argv[1]);
    return 2;
  }

  // Signals must be blocked before the workers start, so that they inherit the mask and only the signalfd
  // receives SIGINT and SIGTERM.
  tern::io_context main_loop;
  tern::signal_set signals(main_loop, {SIGINT, SIGTERM});

  tern::runtime_options opts;
  opts.threads = threads;
  tern::runtime rt(opts);
  // A connection task that throws ends that connection only.
  for (std::size_t i = 0; i < rt.size(); ++i) {
    rt.worker(i).set_exception_handler([](std::exception_ptr e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::fprintf(stderr, "connection task failed: %s\n", x.what());
      } catch (...) {
        std::fprintf(stderr, "connection task failed\n");
      }
    });
  }

  net::endpoint bound = *where;
  for (std::size_t i = 0; i < rt.size(); ++i) {
    auto ep = rt.block_on(listen_on(rt, i, bound));
    if (!ep) return 1;
    bound = *ep;
  }
  std::printf("listening on %s (%s, %zu workers)\n", bound.to_string().c_str(), tern::to_string(rt.worker(0).backend()),
              rt.size());
  std::fflush(stdout);

  auto [ec, signo] = main_loop.block_on(signals.wait());
  std::printf("signal %d: shutting down\n", ec ? 0 : signo);
  // Accept loops end at once; connections still open after the grace period are closed with their loops.
  if (!rt.shutdown(2s)) std::printf("closing the connections still open\n");
  return 0;
}
