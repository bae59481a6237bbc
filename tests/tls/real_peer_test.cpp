// tern::tls against TLS ends it did not write, on both backends: a tern client against `openssl s_server`, a tern
// server against `openssl s_client`, and Python's ssl module on either side (1 MB echoed and checked, ALPN,
// close_notify both ways).
#include "tls_support.hpp"

#include <thread>

namespace {

using namespace tern_test;
namespace net = tern::net;

class tls_real_peer_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(tls_real_peer_test);

TEST_P(tls_real_peer_test, tern_client_against_openssl_s_server) {
  child_process server({"openssl", "s_server", "-accept", "127.0.0.1:0", "-cert", pki().server_cert, "-key",
                        pki().server_key, "-rev", "-alpn", "http/1.1"});
  ASSERT_TRUE(server.started());
  const std::string banner = server.read_until("ACCEPT");
  const std::uint16_t port = trailing_port(banner, "ACCEPT");
  ASSERT_NE(port, 0) << banner;
  run_bounded(ctx, [](tern::io_context& ctx, std::uint16_t port) -> tern::task<void> {
    tls::context client_ctx = client_context();
    CO_ASSERT_OK(client_ctx.set_alpn_protocols({"h2", "http/1.1"}));
    auto [cec, socket] = co_await net::connect(ctx, net::endpoint::loopback_v4(port));
    CO_ASSERT_OK(cec);
    tls_tcp s(std::move(socket), client_ctx);
    CO_ASSERT_OK(s.set_host_name("localhost"));
    CO_ASSERT_OK(co_await s.handshake());
    EXPECT_EQ(s.alpn_protocol(), "http/1.1");
    EXPECT_EQ(s.protocol_version(), "TLSv1.3");
    CO_ASSERT_OK((co_await s.write_all(tern::const_buffer("hello openssl\n"))).ec);
    tern::buffered_reader in(s, 1024);
    auto [lec, line] = co_await in.read_line();  // -rev answers each line reversed
    CO_ASSERT_OK(lec);
    EXPECT_EQ(line, "lssnepo olleh");
    CO_ASSERT_OK(co_await s.shutdown_send());
  }(ctx, port));
  const std::string log = server.read_until("CONNECTION CLOSED");
  EXPECT_NE(log.find("CONNECTION CLOSED"), std::string::npos) << log;
}

TEST_P(tls_real_peer_test, tern_server_against_openssl_s_client) {
  net::tcp_acceptor acceptor(ctx);
  const net::endpoint where = listen_loopback(acceptor);
  std::string client_out;
  int status = -1;
  std::thread client([&] {
    client_out = run_command("printf 'ping\\n' | timeout 20 openssl s_client -connect 127.0.0.1:" +
                                 std::to_string(where.port()) + " -CAfile " + pki().ca +
                                 " -verify_return_error -servername localhost -alpn h2 -brief -ign_eof",
                             status);
  });
  run_bounded(ctx, [](net::tcp_acceptor& acceptor) -> tern::task<void> {
    tls::context server_ctx = server_context();
    CO_ASSERT_OK(server_ctx.set_alpn_protocols({"h2"}));
    auto [aec, socket] = co_await acceptor.accept();
    CO_ASSERT_OK(aec);
    tls_tcp s(std::move(socket), server_ctx);
    CO_ASSERT_OK(co_await s.handshake());
    EXPECT_EQ(s.server_name(), "localhost");
    EXPECT_EQ(s.alpn_protocol(), "h2");
    tern::buffered_reader in(s, 1024);
    auto [lec, line] = co_await in.read_line();
    CO_ASSERT_OK(lec);
    EXPECT_EQ(line, "ping");
    CO_ASSERT_OK((co_await s.write_all(tern::const_buffer("PONG\n"))).ec);
    // s_client answers close_notify with its own.
    EXPECT_OK(co_await tern::with_timeout(s.shutdown(), 10s));
  }(acceptor));
  client.join();
  EXPECT_EQ(status, 0) << client_out;
  EXPECT_NE(client_out.find("Verification: OK"), std::string::npos) << client_out;
  EXPECT_NE(client_out.find("PONG"), std::string::npos) << client_out;
}

// Python: 1 MB in 64 KiB pieces, each echoed and checked, then close_notify both ways (unwrap).
constexpr std::string_view python_client = R"(
import socket, ssl, sys
port, ca = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["h2", "http/1.1"])
raw = socket.create_connection(("127.0.0.1", port), timeout=20)
s = ctx.wrap_socket(raw, server_hostname="localhost")
version, alpn = s.version(), s.selected_alpn_protocol()
data = bytes((i * 31 + 7) % 251 for i in range(1 << 20))
for at in range(0, len(data), 65536):
    piece = data[at:at + 65536]
    s.sendall(piece)
    got = bytearray()
    while len(got) < len(piece):
        chunk = s.recv(len(piece) - len(got))
        assert chunk, "the server closed early"
        got += chunk
    assert bytes(got) == piece, "echo differs at %d" % at
s.unwrap()
raw.close()
print("ok", version, alpn)
)";

TEST_P(tls_real_peer_test, tern_server_against_python_ssl_client) {
  net::tcp_acceptor acceptor(ctx);
  const net::endpoint where = listen_loopback(acceptor);
  std::string client_out;
  int status = -1;
  std::thread client([&] {
    client_out = run_command("timeout 30 python3 -c '" + std::string(python_client) + "' " +
                                 std::to_string(where.port()) + " " + pki().ca,
                             status);
  });
  std::size_t echoed = 0;
  run_bounded(ctx, [](net::tcp_acceptor& acceptor, std::size_t& echoed) -> tern::task<void> {
    tls::context server_ctx = server_context();
    CO_ASSERT_OK(server_ctx.set_alpn_protocols({"http/1.1"}));
    auto [aec, socket] = co_await acceptor.accept();
    CO_ASSERT_OK(aec);
    tls_tcp s(std::move(socket), server_ctx);
    CO_ASSERT_OK(co_await s.handshake());
    char buf[16384];
    for (;;) {
      auto [ec, n] = co_await s.read_some(buf);
      if (ec) {
        EXPECT_EC(ec, tern::error::eof);  // Python's close_notify, not a bare FIN
        break;
      }
      CO_ASSERT_OK((co_await s.write_all(tern::const_buffer(buf, n))).ec);
      echoed += n;
    }
    EXPECT_OK(co_await s.shutdown_send());  // what Python's unwrap() waits for
  }(acceptor, echoed));
  client.join();
  EXPECT_EQ(status, 0) << client_out;
  EXPECT_EQ(client_out, "ok TLSv1.3 http/1.1\n");
  EXPECT_EQ(echoed, 1u << 20);
}

constexpr std::string_view python_server = R"(
import socket, ssl, sys
cert, key = sys.argv[1], sys.argv[2]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ctx.set_alpn_protocols(["x-tern-test"])
listener = socket.create_server(("127.0.0.1", 0))
print("port", listener.getsockname()[1], flush=True)
raw, _ = listener.accept()
raw.settimeout(20)
s = ctx.wrap_socket(raw, server_side=True)
line = b""
while not line.endswith(b"\n"):
    chunk = s.recv(100)
    assert chunk, "the client closed early"
    line += chunk
s.sendall(line.upper())
version = s.version()
s.unwrap()
print("done", version, flush=True)
)";

TEST_P(tls_real_peer_test, tern_client_against_python_ssl_server) {
  child_process server({"python3", "-c", std::string(python_server), pki().server_cert, pki().server_key});
  ASSERT_TRUE(server.started());
  const std::string banner = server.read_until("port");
  const std::uint16_t port = trailing_port(banner, "port");
  ASSERT_NE(port, 0) << banner;
  run_bounded(ctx, [](tern::io_context& ctx, std::uint16_t port) -> tern::task<void> {
    tls::context client_ctx = client_context();
    CO_ASSERT_OK(client_ctx.set_alpn_protocols({"x-tern-test"}));
    auto [cec, socket] = co_await net::connect(ctx, net::endpoint::loopback_v4(port));
    CO_ASSERT_OK(cec);
    tls_tcp s(std::move(socket), client_ctx);
    CO_ASSERT_OK(s.set_host_name("localhost"));
    CO_ASSERT_OK(co_await s.handshake());
    EXPECT_EQ(s.alpn_protocol(), "x-tern-test");
    CO_ASSERT_OK((co_await s.write_all(tern::const_buffer("hello python\n"))).ec);
    char buf[13];
    auto [rec, n] = co_await s.read_exact(buf);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(std::string_view(buf, n), "HELLO PYTHON\n");
    // Python's unwrap() sends close_notify and waits for ours: shutdown() does both halves.
    EXPECT_OK(co_await s.shutdown());
  }(ctx, port));
  const std::string log = server.read_until("done");
  EXPECT_NE(log.find("done TLSv1.3"), std::string::npos) << log;
}

}  // namespace
