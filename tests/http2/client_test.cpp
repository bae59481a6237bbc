// http::client with HTTP/2 (tern::http2) on both backends: many requests multiplexed on one connection to tern's
// server (h2c with prior knowledge, h2 by ALPN over TLS, HTTP/1.1 when ALPN does not pick h2), the server's
// max concurrent streams honoured (requests beyond it wait, none fails), a cancelled request's stream reset with
// the others left running, streaming exchanges both ways, requests a GOAWAY left unprocessed sent again on a new
// connection (a Python h2 server), a status no server may send failing its request alone (another), and nghttpd
// (nghttp2's server) in clear and over TLS.
#include "h2_routes.hpp"
#include "../tls/tls_support.hpp"

#include <tern/http/client.hpp>
#include <tern/http/tls.hpp>
#include <tern/http2/client.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace {

using namespace tern_test;
namespace http = tern::http;
namespace http2 = tern::http2;

class http2_client_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(http2_client_test);

http::client_options h2c_options() {
  http::client_options o;
  o.http2 = http2::client_protocol();
  o.http2_prior_knowledge = true;
  return o;
}

tls::context alpn_client_context() {
  tls::context c = client_context();
  EXPECT_FALSE(c.set_alpn_protocols({"h2", "http/1.1"}));
  return c;
}

std::string base(const server_thread& s, std::string_view scheme = "http") {
  return std::string(scheme) + "://localhost:" + std::to_string(s.port());
}

TEST_P(http2_client_test, concurrent_requests_share_one_connection) {
  h2_server srv(GetParam());
  run_bounded(ctx, [](tern::io_context& ctx, h2_server& srv) -> tern::task<void> {
    http::client c(ctx, h2c_options());
    std::vector<std::string> urls;  // (get() keeps a view of its URL: they outlive the requests)
    for (int i = 0; i < 30; ++i) urls.push_back(base(srv.s) + "/users/" + std::to_string(i));
    std::vector<tern::join_handle<tern::io_result<http::response>>> running;
    for (int i = 0; i < 30; ++i) running.push_back(tern::spawn(ctx, c.get(urls[static_cast<std::size_t>(i)])));
    for (int i = 0; i < 30; ++i) {
      auto [ec, r] = co_await std::move(running[static_cast<std::size_t>(i)]);
      CO_ASSERT_OK(ec);
      EXPECT_EQ(r.status, 200);
      EXPECT_EQ(r.body, "user " + std::to_string(i) + "  localhost:" + std::to_string(srv.s.port()));
    }
    auto [ec, r] = co_await c.get(base(srv.s) + "/hello");
    CO_ASSERT_OK(ec);
    EXPECT_EQ(r.body, "hello over 2.0\n");
    EXPECT_EQ(r.headers.get("content-length"), "15");
    EXPECT_EQ(srv.s.connections(), 1u);  // every request on one connection
    // A body both ways, and a large one.
    auto [pec, posted] = co_await c.post(base(srv.s) + "/echo", std::string(200000, 'p'));
    CO_ASSERT_OK(pec);
    EXPECT_EQ(posted.body, std::string(200000, 'p'));
    auto [bec, big] = co_await c.get(base(srv.s) + "/bytes/3000000");
    CO_ASSERT_OK(bec);
    EXPECT_EQ(fnv1a(big.body), fnv1a(pattern(3000000)));
  }(ctx, srv));
}

TEST_P(http2_client_test, alpn_h2_over_tls_and_http11_when_the_server_does_not_offer_it) {
  tls::context sctx = server_context();
  ASSERT_FALSE(sctx.set_alpn_protocols({"h2", "http/1.1"}));
  http::server_options so = h2_server_options();
  so.transport = http::tls_server(sctx);
  h2_server secure(GetParam(), std::move(so));
  http::server_options plain_tls;
  plain_tls.transport = http::tls_server(server_context());  // no ALPN, no HTTP/2
  h2_server old(GetParam(), std::move(plain_tls));
  run_bounded(ctx, [](tern::io_context& ctx, h2_server& secure, h2_server& old) -> tern::task<void> {
    http::client_options o;
    o.tls = http::tls_client(alpn_client_context());
    o.http2 = http2::client_protocol();
    http::client c(ctx, o);
    for (int i = 0; i < 3; ++i) {
      auto [ec, r] = co_await c.get(base(secure.s, "https") + "/hello");
      CO_ASSERT_OK(ec);
      EXPECT_EQ(r.body, "hello over 2.0\n");
    }
    auto [oec, o11] = co_await c.get(base(old.s, "https") + "/hello");
    CO_ASSERT_OK(oec);
    EXPECT_EQ(o11.body, "hello over 1.1\n");
    EXPECT_EQ(secure.s.connections(), 1u);
  }(ctx, secure, old));
}

TEST_P(http2_client_test, requests_beyond_max_concurrent_streams_wait) {
  http2::server_options h2;
  h2.max_concurrent_streams = 3;
  h2_server srv(GetParam(), h2_server_options(h2));
  run_bounded(ctx, [](tern::io_context& ctx, h2_server& srv) -> tern::task<void> {
    http::client c(ctx, h2c_options());
    // The first request brings the server's SETTINGS; then 12 at once, 3 at a time on the server.
    auto [fec, first] = co_await c.get(base(srv.s) + "/hello");
    CO_ASSERT_OK(fec);
    const auto start = std::chrono::steady_clock::now();
    std::vector<tern::join_handle<tern::io_result<http::response>>> running;
    const std::string slow = base(srv.s) + "/slow";
    for (int i = 0; i < 12; ++i) running.push_back(tern::spawn(ctx, c.get(slow)));
    for (auto& r : running) {
      auto [ec, resp] = co_await std::move(r);
      CO_ASSERT_OK(ec);
      EXPECT_EQ(resp.body, "slow");
    }
    // Four rounds of 300 ms: never more than 3 handlers at once.
    EXPECT_GE(std::chrono::steady_clock::now() - start, 1150ms);
    EXPECT_EQ(srv.p.finished.load(), 12);
  }(ctx, srv));
}

TEST_P(http2_client_test, a_cancelled_request_resets_its_stream_only) {
  h2_server srv(GetParam());
  run_bounded(ctx, [](tern::io_context& ctx, h2_server& srv) -> tern::task<void> {
    http::client c(ctx, h2c_options());
    const std::string slow_url = base(srv.s) + "/slow";
    auto slow = tern::spawn(ctx, c.get(slow_url));
    auto [ec, r] = co_await tern::with_timeout(c.get(base(srv.s) + "/forever"), 100ms);
    EXPECT_EQ(ec, tern::error::timed_out);
    auto [sec, s] = co_await std::move(slow);
    CO_ASSERT_OK(sec);
    EXPECT_EQ(s.body, "slow");
    // The server's handler was cancelled by the RST_STREAM.
    for (int i = 0; i < 200 && srv.p.cancelled.load() == 0; ++i) co_await tern::sleep_for(5ms);
    EXPECT_EQ(srv.p.cancelled.load(), 1);
    EXPECT_EQ(srv.s.connections(), 1u);
  }(ctx, srv));
}

TEST_P(http2_client_test, streaming_exchanges_over_a_stream) {
  h2_server srv(GetParam());
  run_bounded(ctx, [](tern::io_context& ctx, h2_server& srv) -> tern::task<void> {
    http::client c(ctx, h2c_options());
    auto [ec, ex] = co_await c.exchange("localhost", srv.s.port(), http::method::post, "/sha256");
    CO_ASSERT_OK(ec);
    std::string all;
    for (int i = 0; i < 40; ++i) {
      const std::string piece(10000 + i, static_cast<char>('a' + i % 26));
      all += piece;
      CO_ASSERT_OK(co_await ex.write(tern::const_buffer(piece.data(), piece.size())));
    }
    CO_ASSERT_OK(co_await ex.finish());
    EXPECT_EQ(ex.head().status, 200);
    EXPECT_EQ(ex.head().version, http::http2);
    std::string body(100, ' ');
    std::size_t got = 0;
    for (;;) {
      auto [rec, n] = co_await ex.read_some(tern::mutable_buffer(body.data() + got, body.size() - got));
      if (rec == tern::error::eof) break;
      CO_ASSERT_OK(rec);
      got += n;
    }
    body.resize(got);
    EXPECT_EQ(body, sha256_hex(all));
  }(ctx, srv));
}

TEST_P(http2_client_test, unprocessed_requests_are_sent_again_on_a_new_connection) {
  peer_process server(std::string("/usr/bin/python3 ") + TERN_TEST_SOURCE_DIR + "/http2/python_goaway_server.py");
  run_bounded(ctx, [](tern::io_context& ctx, std::uint16_t port) -> tern::task<void> {
    http::client c(ctx, h2c_options());
    const std::string at = "http://127.0.0.1:" + std::to_string(port);
    std::vector<tern::join_handle<tern::io_result<http::response>>> running;
    for (int i = 0; i < 3; ++i) {
      http::client_request req;
      req.method = i == 2 ? http::method::post : http::method::get;  // a POST too: unprocessed is safe to resend
      req.target = "/r" + std::to_string(i);
      running.push_back(tern::spawn(ctx, c.send("127.0.0.1", port, std::move(req))));
    }
    int first_connection = 0;
    for (int i = 0; i < 3; ++i) {
      auto [ec, r] = co_await std::move(running[static_cast<std::size_t>(i)]);
      CO_ASSERT_OK(ec);
      EXPECT_TRUE(r.body.starts_with("/r" + std::to_string(i) + " on ")) << r.body;
      if (r.body.ends_with(" on 1")) ++first_connection;
    }
    EXPECT_EQ(first_connection, 1);  // the one before the GOAWAY's last stream; the others on connection 2
  }(ctx, server.port()));
}

// A :status below 100 ("051": three digits, which is all nghttp2 checks) is no HTTP status: the request fails as
// the same status line fails over HTTP/1.1, its stream is reset, and the connection goes on with the next one.
TEST_P(http2_client_test, a_status_below_100_fails_its_request_only) {
  peer_process server(std::string("/usr/bin/python3 ") + TERN_TEST_SOURCE_DIR + "/http2/python_status_server.py 051");
  run_bounded(ctx, [](tern::io_context& ctx, std::uint16_t port) -> tern::task<void> {
    http::client c(ctx, h2c_options());
    const std::string at = "http://127.0.0.1:" + std::to_string(port);
    auto [ec, r] = co_await c.get(at + "/odd");
    EXPECT_EQ(ec, http::error::bad_status_line) << ec.message() << " status " << r.status;
    auto [ok_ec, ok] = co_await c.get(at + "/ok");
    CO_ASSERT_OK(ok_ec);
    EXPECT_EQ(ok.status, 200);
    EXPECT_EQ(ok.body, "ok on 1");  // the connection of the first: the reset stream took nothing else down
  }(ctx, server.port()));
}

TEST_P(http2_client_test, against_nghttpd_in_clear_and_over_tls) {
  char dir_template[] = "/tmp/tern-nghttpd-XXXXXX";
  const std::string dir = ::mkdtemp(dir_template);
  std::ofstream(dir + "/small.txt") << "small file\n";
  std::ofstream(dir + "/big.bin", std::ios::binary) << pattern(2000000);
  // nghttpd prints nothing useful to read a port from: a free port is chosen here and waited for.
  const auto free_port = [] {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
  };
  const std::uint16_t clear_port = free_port(), tls_port = free_port();
  peer_process clear("nghttpd --no-tls -a 127.0.0.1 -d " + dir + " " + std::to_string(clear_port) +
                     " >/dev/null 2>&1 & echo port " + std::to_string(clear_port) + "; read x; kill $!");
  peer_process secure("nghttpd -a 127.0.0.1 -d " + dir + " " + std::to_string(tls_port) + " " + pki().server_key +
                      " " + pki().server_cert + " >/dev/null 2>&1 & echo port " + std::to_string(tls_port) +
                      "; read x; kill $!");
  // Until both listen.
  for (std::uint16_t p : {clear_port, tls_port}) {
    for (int i = 0; i < 500; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(p);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      ::close(fd);
      if (up) break;
      std::this_thread::sleep_for(10ms);
    }
  }
  run_bounded(ctx, [](tern::io_context& ctx, std::uint16_t clear_port, std::uint16_t tls_port) -> tern::task<void> {
    {
      http::client c(ctx, h2c_options());
      const std::string big = "http://127.0.0.1:" + std::to_string(clear_port) + "/big.bin";
      const std::string small = "http://127.0.0.1:" + std::to_string(clear_port) + "/small.txt";
      std::vector<tern::join_handle<tern::io_result<http::response>>> running;
      for (int i = 0; i < 10; ++i) running.push_back(tern::spawn(ctx, c.get(i % 2 ? big : small)));
      for (int i = 0; i < 10; ++i) {
        auto [ec, r] = co_await std::move(running[static_cast<std::size_t>(i)]);
        CO_ASSERT_OK(ec);
        EXPECT_EQ(r.status, 200);
        if (i % 2) EXPECT_EQ(fnv1a(r.body), fnv1a(pattern(2000000)));
        else EXPECT_EQ(r.body, "small file\n");
      }
      auto [mec, missing] = co_await c.get("http://127.0.0.1:" + std::to_string(clear_port) + "/missing");
      CO_ASSERT_OK(mec);
      EXPECT_EQ(missing.status, 404);
    }
    http::client_options o;
    o.tls = http::tls_client(alpn_client_context());
    o.http2 = http2::client_protocol();
    http::client c(ctx, o);
    auto [ec, r] = co_await c.get("https://localhost:" + std::to_string(tls_port) + "/small.txt");
    CO_ASSERT_OK(ec);
    EXPECT_EQ(r.body, "small file\n");
  }(ctx, clear_port, tls_port));
  std::filesystem::remove_all(dir);
}

}  // namespace
