// HTTPS: tern::http's server and client over tern::tls (<tern/http/tls.hpp>), on both backends. tern's client
// against tern's server (keep-alive, bodies both ways, streaming, a pool kept apart from plain HTTP, sessions
// resumed), real peers (curl --cacert and Python's http.client against tern's server; tern's client against a
// Python HTTPS server), and what goes wrong: an untrusted, expired or misnamed certificate, https without a TLS
// maker, a client that never shakes hands, plain HTTP or half a handshake sent to the TLS port, a server that
// closes in the middle of the handshake. The server goes on serving after each.
#include "../tls/tls_support.hpp"
#include "http_support.hpp"

#include <tern/http/client.hpp>
#include <tern/http/router.hpp>
#include <tern/http/stream.hpp>
#include <tern/http/tls.hpp>
#include <tern/http/upgrade.hpp>

#include <openssl/ssl.h>

#include <atomic>

namespace {

using namespace tern_test;
namespace http = tern::http;
namespace net = tern::net;
using namespace std::chrono_literals;

class https_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(https_test);

http::router https_routes() {
  http::router r;
  r.get("/hello", [](http::request&) -> tern::task<http::response> { co_return http::response(200, "hello\n"); });
  r.post("/sum", [](http::request& q) -> tern::task<http::response> {
    co_return http::response(200, size_and_sum(q.body()));
  });
  // An upgrade to a protocol that echoes, through the connection's TLS.
  r.get("/echo", [](http::request&) -> tern::task<http::response> {
    http::response resp(http::status::switching_protocols);
    resp.headers.set("Upgrade", "echo");
    resp.upgrade = [](http::upgraded_stream s) -> tern::task<void> {
      EXPECT_TRUE(s.secure());
      char buf[1024];
      for (;;) {
        auto [ec, n] = co_await s.read_some(tern::mutable_buffer(buf, sizeof buf));
        if (ec || (co_await s.write_all(tern::const_buffer(buf, n))).ec) break;
      }
      (void)co_await s.shutdown_send();
    };
    co_return resp;
  });
  add_pattern_route(r, 50000);
  return r;
}

std::string pattern(std::size_t n) {
  std::string s(n, ' ');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + i % 26);
  return s;
}

http::server_options tls_server_options(const tls::context& ctx) {
  http::server_options o;
  o.transport = http::tls_server(ctx);
  return o;
}

http::client_options tls_client_options(tls::context ctx = client_context()) {
  http::client_options o;
  o.tls = http::tls_client(std::move(ctx));
  return o;
}

std::string https_url(const server_thread& s, std::string_view path) {
  return "https://localhost:" + std::to_string(s.port()) + std::string(path);
}

std::string shell_quote(const std::string& s) { return "'" + s + "'"; }

// A blocking TCP connection to the server's port, for bytes that are not TLS.
int raw_connect(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Reads until the peer closes (or 5 s pass); what arrived.
std::string read_to_end(int fd) {
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  return got;
}

TEST_P(https_test, tern_client_and_server) {
  server_thread s(GetParam(), https_routes(), tls_server_options(server_context()));
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& s) -> tern::task<void> {
    http::client c(ctx, tls_client_options());
    auto [ec, r] = co_await c.get(https_url(s, "/hello"));
    CO_ASSERT_OK(ec);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "hello\n");
    const std::string body = pattern(300000);
    for (int i = 0; i < 3; ++i) {
      auto [pec, p] = co_await c.post(https_url(s, "/sum"), body, "application/octet-stream");
      CO_ASSERT_OK(pec);
      EXPECT_EQ(p.body, size_and_sum(body));
    }
    auto [gec, g] = co_await c.get(https_url(s, "/pattern/1000000"));
    CO_ASSERT_OK(gec);
    EXPECT_EQ(g.body.size(), 1000000u);
    EXPECT_TRUE(g.body == pattern(1000000)) << "the chunked body came back intact";
    EXPECT_EQ(s.connections(), 1u) << "every request went over one TLS connection";
    EXPECT_EQ(c.idle_connections(), 1u);
  }(ctx, s));
}

TEST_P(https_test, plain_and_tls_connections_are_pooled_apart) {
  server_thread plain(GetParam(), https_routes());
  server_thread secure(GetParam(), https_routes(), tls_server_options(server_context()));
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& plain, server_thread& secure) -> tern::task<void> {
    http::client c(ctx, tls_client_options());
    auto [pec, p] = co_await c.get("http://localhost:" + std::to_string(plain.port()) + "/hello");
    CO_ASSERT_OK(pec);
    EXPECT_EQ(p.body, "hello\n");
    // The same host and port over TLS must not take the plain connection (and the reverse).
    auto [tec, t] = co_await c.get("https://localhost:" + std::to_string(plain.port()) + "/hello");
    EXPECT_TRUE(tec) << "TLS to a plain HTTP port fails its handshake";
    auto [sec, sr] = co_await c.get(https_url(secure, "/hello"));
    CO_ASSERT_OK(sec);
    EXPECT_EQ(sr.body, "hello\n");
    auto [xec, x] = co_await c.get("http://localhost:" + std::to_string(secure.port()) + "/hello");
    EXPECT_TRUE(xec) << "plain HTTP to the TLS port is no response";
    EXPECT_EQ(c.idle_connections(), 2u);
  }(ctx, plain, secure));
}

TEST_P(https_test, a_client_resumes_its_session_on_the_next_connection) {
  std::atomic<int> full{0}, resumed{0};
  tls::context sctx = server_context();
  // The server counts its handshakes by kind (OpenSSL's callback, on the server's loop).
  struct counters {
    std::atomic<int>* full;
    std::atomic<int>* resumed;
  };
  static counters* seen = nullptr;
  counters mine{&full, &resumed};
  seen = &mine;
  SSL_CTX_set_info_callback(sctx.native_handle(), [](const SSL* ssl, int where, int) {
    if ((where & SSL_CB_HANDSHAKE_DONE) != 0) (SSL_session_reused(const_cast<SSL*>(ssl)) ? *seen->resumed : *seen->full)++;
  });
  server_thread s(GetParam(), https_routes(), tls_server_options(sctx));
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& s) -> tern::task<void> {
    http::client c(ctx, tls_client_options());
    for (int i = 0; i < 3; ++i) {
      auto [ec, r] = co_await c.get(https_url(s, "/hello"));
      CO_ASSERT_OK(ec);
      EXPECT_EQ(r.body, "hello\n");
      c.close_idle();  // the next request makes a new connection
    }
  }(ctx, s));
  s.stop(2000ms);
  EXPECT_EQ(full.load(), 1);
  EXPECT_EQ(resumed.load(), 2) << "the later connections offered the kept session and the server took it";
  seen = nullptr;
}

TEST_P(https_test, curl_against_the_server) {
  server_thread s(GetParam(), https_routes(), tls_server_options(server_context()));
  int status = 0;
  const std::string curl = "curl -sS --http1.1 --cacert " + shell_quote(pki().ca) + " ";
  // Two URLs, one connection (num_connects 0 for the second); the name checked against the certificate.
  std::string out = command_output(curl + "-w ' [%{http_code} %{num_connects}]\\n' " + https_url(s, "/hello") + " " +
                                       https_url(s, "/hello"),
                                   status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "hello\n [200 1]\nhello\n [200 0]\n");

  const std::string file = pki().dir + "/upload.bin";
  const std::string data = pattern(3'000'000);
  std::ofstream(file, std::ios::binary) << data;
  out = command_output(curl + "--data-binary @" + shell_quote(file) + " " + https_url(s, "/sum"), status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, size_and_sum(data));
  out = command_output(curl + https_url(s, "/pattern/3000000") + " | md5sum", status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, command_output("head -c 3000000 " + shell_quote(file) + " | md5sum", status))
      << "the same bytes as the first 3 MB of the pattern";

  // curl refuses a server it cannot verify, and the server goes on.
  out = command_output("curl -sS " + https_url(s, "/hello") + " 2>&1", status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("certificate"), std::string::npos) << out;
  out = command_output(curl + https_url(s, "/hello"), status);
  EXPECT_EQ(out, "hello\n");
}

TEST_P(https_test, python_http_client_against_the_server) {
  server_thread s(GetParam(), https_routes(), tls_server_options(server_context()));
  const std::string script =
      "import http.client, ssl, sys\n"
      "ctx = ssl.create_default_context(cafile=sys.argv[1])\n"
      "c = http.client.HTTPSConnection(\"localhost\", int(sys.argv[2]), context=ctx)\n"
      "for i in range(3):\n"
      "    c.request(\"POST\", \"/sum\", body=b\"x\" * (100000 * i + 1))\n"
      "    r = c.getresponse()\n"
      "    print(r.status, r.read().decode())\n"
      "c.request(\"GET\", \"/pattern/100000\")\n"
      "r = c.getresponse()\n"
      "b = r.read()\n"
      "print(r.status, len(b), b[:3].decode(), r.getheader(\"transfer-encoding\"))\n"
      "print(c.sock.version())\n";
  int status = 0;
  const std::string out = command_output(
      "python3 -c " + shell_quote(script) + " " + shell_quote(pki().ca) + " " + std::to_string(s.port()), status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "200 1 120\n200 100001 12000120\n200 200001 24000120\n200 100000 abc chunked\nTLSv1.3\n");
}

TEST_P(https_test, tern_client_against_a_python_https_server) {
  const std::string dir = pki().dir + "/www";
  ::mkdir(dir.c_str(), 0755);
  const std::string data = pattern(500000);
  std::ofstream(dir + "/file.txt", std::ios::binary) << data;
  const std::string script =
      "import http.server, ssl, sys, functools\n"
      "ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
      "ctx.load_cert_chain(sys.argv[1], sys.argv[2])\n"
      "h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[3])\n"
      "s = http.server.HTTPServer(('127.0.0.1', 0), h)\n"
      "s.socket = ctx.wrap_socket(s.socket, server_side=True)\n"
      "print('port', s.server_address[1], flush=True)\n"
      "s.serve_forever()\n";
  child_process py({"python3", "-c", script, pki().server_cert, pki().server_key, dir});
  ASSERT_TRUE(py.started());
  const std::uint16_t port = trailing_port(py.read_until("port"), "port");
  ASSERT_NE(port, 0);
  run_bounded(ctx, [](tern::io_context& ctx, std::uint16_t port, std::string data) -> tern::task<void> {
    http::client c(ctx, tls_client_options());
    const std::string base = "https://localhost:" + std::to_string(port);
    auto [ec, r] = co_await c.get(base + "/file.txt");
    CO_ASSERT_OK(ec);
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.body == data) << "an HTTP/1.0 body ended by the connection's end, after close_notify";
    auto [mec, missing] = co_await c.get(base + "/none.txt");
    CO_ASSERT_OK(mec);
    EXPECT_EQ(missing.status, 404);
  }(ctx, port, data));
}

TEST_P(https_test, certificates_the_client_must_refuse) {
  // An expired certificate for the right name, from the trusted CA (made with a validity ending yesterday).
  int status = 0;
  const std::string dir = pki().dir;
  const std::string made = command_output(
      "cd " + shell_quote(dir) + " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
      "-keyout expired.key -out expired.csr -subj /CN=localhost 2>&1 && printf 'subjectAltName=DNS:localhost\\n' > "
      "expired.ext && openssl x509 -req -in expired.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days -1 "
      "-extfile expired.ext -out expired.pem 2>&1",
      status);
  ASSERT_EQ(status, 0) << made;
  server_thread expired(GetParam(), https_routes(), tls_server_options(server_context(dir + "/expired.pem", dir + "/expired.key")));
  server_thread rogue(GetParam(), https_routes(), tls_server_options(server_context(pki().rogue_cert, pki().rogue_key)));
  server_thread other(GetParam(), https_routes(), tls_server_options(server_context(pki().other_cert, pki().other_key)));
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& expired, server_thread& rogue,
                      server_thread& other) -> tern::task<void> {
    http::client c(ctx, tls_client_options());
    auto [eec, e] = co_await c.get(https_url(expired, "/hello"));
    EXPECT_EQ(eec.message(), "certificate has expired");
    auto [rec, r] = co_await c.get(https_url(rogue, "/hello"));
    EXPECT_EQ(rec.message(), "unable to get local issuer certificate");
    auto [oec, o] = co_await c.get(https_url(other, "/hello"));  // other.test's certificate, asked for localhost
    EXPECT_EQ(oec.message(), "hostname mismatch");
    EXPECT_EQ(c.idle_connections(), 0u);

    http::client no_tls(ctx);
    auto [nec, n] = co_await no_tls.get(https_url(other, "/hello"));
    EXPECT_EQ(nec, std::errc::protocol_not_supported);
  }(ctx, expired, rogue, other));
  // Each server still answers a client that trusts it (here: one that does not check).
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& expired) -> tern::task<void> {
    tls::context lax(tls::role::client);
    lax.set_verify_mode(tls::verify_mode::none);
    http::client c(ctx, tls_client_options(lax));
    auto [ec, r] = co_await c.get(https_url(expired, "/hello"));
    CO_ASSERT_OK(ec);
    EXPECT_EQ(r.body, "hello\n");
  }(ctx, expired));
}

TEST_P(https_test, bad_clients_cost_the_server_only_their_own_connection) {
  http::server_options o = tls_server_options(server_context());
  o.header_timeout = 500ms;
  server_thread s(GetParam(), https_routes(), o);
  // Silent: connects and never shakes hands. Dropped at the header timeout.
  const int silent = raw_connect(s.port());
  ASSERT_GE(silent, 0);
  // Plain HTTP to the TLS port: the handshake fails on the first bytes (OpenSSL answers with an alert, or nothing).
  const int plain = raw_connect(s.port());
  ASSERT_GE(plain, 0);
  const std::string get = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(plain, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));
  EXPECT_EQ(read_to_end(plain).find("HTTP/1.1"), std::string::npos) << "no plain HTTP answer over TLS";
  // Half a ClientHello, then the connection's end.
  const int half = raw_connect(s.port());
  ASSERT_GE(half, 0);
  const unsigned char hello_start[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03};
  ASSERT_EQ(::send(half, hello_start, sizeof hello_start, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof hello_start));
  ::shutdown(half, SHUT_WR);
  const std::string answer = read_to_end(half);
  EXPECT_TRUE(answer.empty() || answer[0] == 0x15) << "nothing, or a TLS alert record, then the end";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(read_to_end(silent), "");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s) << "the silent client was dropped, not kept";
  ::close(silent);
  ::close(plain);
  ::close(half);
  // Meanwhile and after, a good client is served.
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& s) -> tern::task<void> {
    http::client c(ctx, tls_client_options());
    auto [ec, r] = co_await c.get(https_url(s, "/hello"));
    CO_ASSERT_OK(ec);
    EXPECT_EQ(r.body, "hello\n");
    EXPECT_EQ(s.connections(), 1u) << "only the good client's connection is left";
  }(ctx, s));
}

TEST_P(https_test, a_server_that_closes_in_the_middle_of_the_handshake) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    net::tcp_acceptor acceptor(ctx);
    CO_ASSERT_OK(acceptor.listen(net::endpoint::loopback_v4(0)));
    const std::uint16_t port = acceptor.local_endpoint().value.port();
    // Takes the ClientHello, answers with the start of a record, and closes.
    auto server = tern::spawn(ctx, [](net::tcp_acceptor& a) -> tern::task<void> {
      auto [ec, socket] = co_await a.accept();
      if (ec) co_return;
      char buf[512];
      (void)co_await socket.read_some(tern::mutable_buffer(buf, sizeof buf));
      const char partial[] = {0x16, 0x03, 0x03, 0x00, 0x7a, 0x02};
      (void)co_await socket.write_all(tern::const_buffer(partial, sizeof partial));
      socket.close();
    }(acceptor));
    http::client c(ctx, tls_client_options());
    auto [ec, r] = co_await c.get("https://localhost:" + std::to_string(port) + "/hello");
    EXPECT_TRUE(ec) << "a handshake cut short is an error, not a hang";
    co_await std::move(server);
  }(ctx));
}

TEST_P(https_test, shutdown_closes_tls_connections_with_close_notify) {
  server_thread s(GetParam(), https_routes(), tls_server_options(server_context()));
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& s) -> tern::task<void> {
    // A TLS stream of the test's own, to see how the server ends the connection.
    auto [cec, socket] = co_await net::connect(ctx, net::endpoint::loopback_v4(s.port()));
    CO_ASSERT_OK(cec);
    tls_tcp t(std::move(socket), client_context());
    CO_ASSERT_OK(t.set_host_name("localhost"));
    CO_ASSERT_OK(co_await t.handshake());
    const std::string req = "GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    CO_ASSERT_OK((co_await t.write_all(tern::const_buffer(req.data(), req.size()))).ec);
    std::string got;
    char buf[1024];
    for (;;) {
      auto [ec, n] = co_await t.read_some(tern::mutable_buffer(buf, sizeof buf));
      got.append(buf, n);
      if (ec) {
        EXPECT_EQ(ec, tern::error::eof) << "close_notify, not a truncation: " << ec.message();
        break;
      }
    }
    EXPECT_NE(got.find("HTTP/1.1 200 OK\r\n"), std::string::npos);
    EXPECT_NE(got.find("\r\n\r\nhello\n"), std::string::npos);
  }(ctx, s));
}

TEST_P(https_test, an_upgraded_connection_goes_on_through_tls) {
  server_thread s(GetParam(), https_routes(), tls_server_options(server_context()));
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& s) -> tern::task<void> {
    auto [cec, socket] = co_await net::connect(ctx, net::endpoint::loopback_v4(s.port()));
    CO_ASSERT_OK(cec);
    tls_tcp t(std::move(socket), client_context());
    CO_ASSERT_OK(t.set_host_name("localhost"));
    const std::string req = "GET /echo HTTP/1.1\r\nHost: localhost\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n";
    CO_ASSERT_OK((co_await t.write_all(tern::const_buffer(req.data(), req.size()))).ec);
    std::string got;
    char buf[1024];
    while (got.find("\r\n\r\n") == std::string::npos) {
      auto [ec, n] = co_await t.read_some(tern::mutable_buffer(buf, sizeof buf));
      CO_ASSERT_OK(ec);
      got.append(buf, n);
    }
    EXPECT_EQ(got.rfind("HTTP/1.1 101 Switching Protocols\r\n", 0), 0u) << got;
    got.erase(0, got.find("\r\n\r\n") + 4);
    const std::string msg = pattern(100000);
    CO_ASSERT_OK((co_await t.write_all(tern::const_buffer(msg.data(), msg.size()))).ec);
    while (got.size() < msg.size()) {
      auto [ec, n] = co_await t.read_some(tern::mutable_buffer(buf, sizeof buf));
      CO_ASSERT_OK(ec);
      got.append(buf, n);
    }
    EXPECT_TRUE(got == msg) << "echoed through TLS after the upgrade";
    CO_ASSERT_OK(co_await t.shutdown());  // close_notify both ways: the protocol ended its side too
  }(ctx, s));
}

}  // namespace
