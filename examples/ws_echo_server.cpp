// ws_echo_server: a WebSocket server (tern::ws) that sends every message back, text as text and binary as binary.
//
//   ws_echo_server ADDRESS:PORT [--tls CERT KEY]      port 0 picks a port; --tls serves wss:// with CERT and KEY
//
// Prints "listening on ADDRESS:PORT" once it serves. Each connection is a task: the upgrade request is checked
// (a bad one gets its 400 or 426), then messages are read and written back until the client closes; pings are
// answered while reading, and permessage-deflate is agreed when the client asks. SIGINT or SIGTERM ends it:
// accepting stops and the open connections' operations are cancelled (a task_group's cancel), so it exits at once.
#include <tern/tern.hpp>
#include <tern/tls/stream.hpp>
#include <tern/ws/stream.hpp>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace net = tern::net;
namespace tls = tern::tls;
namespace ws = tern::ws;
using namespace std::chrono_literals;

namespace {

ws::stream_options options() {
  ws::stream_options o;
  o.deflate.enabled = true;
  o.max_message_size = 64 << 20;
  return o;
}

// Echoes until the client closes, the connection fails, or the server stops (the task is cancelled).
template <class S>
tern::task<void> echo(ws::stream<S>& s) {
  if (auto ec = co_await tern::with_timeout(s.accept(), 10s)) {
    std::fprintf(stderr, "handshake: %s\n", ec.message().c_str());
    co_return;
  }
  std::string message;
  for (;;) {
    auto [ec, type] = co_await s.read(message);
    if (ec == tern::error::operation_canceled) co_return;  // the server is stopping
    if (ec) {
      if (!ws::is_close_code(ec) || ec == ws::close_code::abnormal) {
        std::fprintf(stderr, "read: %s\n", ec.message().c_str());
      }
      co_return;
    }
    if (auto wec = co_await s.write(type, message)) {
      std::fprintf(stderr, "write: %s\n", wec.message().c_str());
      co_return;
    }
  }
}

tern::task<void> connection(net::tcp_socket socket, const tls::context* tls_ctx) {
  (void)socket.set_option(net::option::no_delay{true});
  if (tls_ctx == nullptr) {
    ws::stream<net::tcp_socket> s(std::move(socket), ws::role::server, options());
    co_await echo(s);
    co_return;
  }
  tls::stream<net::tcp_socket> secure(std::move(socket), *tls_ctx);
  if (auto ec = co_await tern::with_timeout(secure.handshake(), 10s)) {
    std::fprintf(stderr, "TLS handshake: %s\n", ec.message().c_str());
    co_return;
  }
  ws::stream<tls::stream<net::tcp_socket>> s(std::move(secure), ws::role::server, options());
  co_await echo(s);
}

tern::task<int> serve(tern::io_context& ctx, net::endpoint where, const tls::context* tls_ctx) {
  tern::signal_set signals(ctx, {SIGINT, SIGTERM});
  net::tcp_acceptor acceptor(ctx);
  if (auto ec = acceptor.listen(where)) {
    std::fprintf(stderr, "ws_echo_server: listen on %s: %s\n", where.to_string().c_str(), ec.message().c_str());
    co_return 1;
  }
  std::printf("listening on %s\n", acceptor.local_endpoint().value.to_string().c_str());
  std::fflush(stdout);
  co_await tern::task_group::run(ctx, [&](tern::task_group& group) -> tern::task<void> {
    auto accept_loop = [](net::tcp_acceptor& acceptor, tern::task_group& group,
                          const tls::context* tls_ctx) -> tern::task<void> {
      for (;;) {
        auto [ec, socket] = co_await acceptor.accept();
        if (ec == tern::error::operation_canceled) co_return;
        if (ec) {
          std::fprintf(stderr, "accept: %s\n", ec.message().c_str());
          co_await tern::sleep_for(20ms);
          continue;
        }
        group.spawn(connection(std::move(socket), tls_ctx));
      }
    };
    group.spawn(accept_loop(acceptor, group, tls_ctx));
    (void)co_await signals.wait();
    group.cancel();  // the accept loop and every connection
  });
  co_return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 5 && std::strcmp(argv[2], "--tls") == 0)) {
    std::fprintf(stderr, "usage: ws_echo_server ADDRESS:PORT [--tls CERT KEY]\n");
    return 2;
  }
  const std::optional<net::endpoint> where = net::endpoint::parse(argv[1]);
  if (!where) {
    std::fprintf(stderr, "ws_echo_server: not an ADDRESS:PORT: %s\n", argv[1]);
    return 2;
  }
  std::optional<tls::context> tls_ctx;
  if (argc == 5) {
    tls_ctx.emplace(tls::role::server);
    if (auto ec = tls_ctx->use_certificate_chain_file(argv[3])) {
      std::fprintf(stderr, "ws_echo_server: certificate %s: %s\n", argv[3], ec.message().c_str());
      return 1;
    }
    if (auto ec = tls_ctx->use_private_key_file(argv[4])) {
      std::fprintf(stderr, "ws_echo_server: key %s: %s\n", argv[4], ec.message().c_str());
      return 1;
    }
  }
  tern::io_context ctx;
  return ctx.block_on(serve(ctx, *where, tls_ctx ? &*tls_ctx : nullptr));
}
