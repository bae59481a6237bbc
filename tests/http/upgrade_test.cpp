// Upgrades (upgrade.hpp) on both backends: a handler answers 101 and takes the connection over; the bytes that
// came right after the request reach the new protocol first; a pipelined request before the upgrade is answered
// first; an upgrade the connection cannot make is refused with its status; an upgrade function that throws ends
// only its connection; shutdown cancels an upgraded connection after its grace.
#include "http_support.hpp"

#include <tern/http/router.hpp>
#include <tern/http/upgrade.hpp>

#include <algorithm>
#include <cctype>

namespace {

using namespace tern_test;
namespace http = tern::http;
using namespace std::chrono_literals;

class http_upgrade_test : public ::testing::TestWithParam<tern::backend_kind> {};
TERN_INSTANTIATE_BACKENDS(http_upgrade_test);

// /shout: upgrades to "shout", a protocol that sends back every byte in capitals until the client's end, then
// ends its own side. /throw: upgrades, then throws. /bare: a 101 with no upgrade function.
http::router upgrade_routes(std::atomic<int>* cancelled = nullptr) {
  http::router r;
  r.get("/hello", [](http::request&) -> tern::task<http::response> { co_return http::response(200, "hello\n"); });
  r.get("/shout", [cancelled](http::request& req) -> tern::task<http::response> {
    if (!tern::http::iequals(req.header("upgrade"), "shout")) co_return http::response(426, "upgrade: shout\n");
    http::response resp(http::status::switching_protocols);
    resp.headers.set("Upgrade", "shout");
    resp.upgrade = [cancelled](http::upgraded_stream s) -> tern::task<void> {
      char buf[256];
      for (;;) {
        auto [ec, n] = co_await s.read_some(tern::mutable_buffer(buf, sizeof buf));
        if (ec) {
          if (ec == tern::error::operation_canceled && cancelled != nullptr) ++*cancelled;
          break;
        }
        std::transform(buf, buf + n, buf, [](char c) { return static_cast<char>(std::toupper(c)); });
        if ((co_await s.write_all(tern::const_buffer(buf, n))).ec) co_return;
      }
      (void)co_await s.shutdown_send();
    };
    co_return resp;
  });
  r.get("/throw", [](http::request&) -> tern::task<http::response> {
    http::response resp(http::status::switching_protocols);
    resp.headers.set("Upgrade", "nothing");
    resp.upgrade = [](http::upgraded_stream) -> tern::task<void> {
      throw std::runtime_error("the protocol failed");
      co_return;
    };
    co_return resp;
  });
  r.get("/bare", [](http::request&) -> tern::task<http::response> { co_return http::response(101); });
  return r;
}

const std::string shout_request = "GET /shout HTTP/1.1\r\nHost: x\r\nUpgrade: shout\r\nConnection: Upgrade\r\n\r\n";

TEST_P(http_upgrade_test, the_connection_changes_protocol_after_101) {
  server_thread s(GetParam(), upgrade_routes());
  raw_client c(s.port());
  // A plain request first, then the upgrade with bytes of the new protocol right behind it.
  c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n" + shout_request + "early bytes;");
  auto hello = c.read_response();
  EXPECT_EQ(hello.status, 200);
  EXPECT_EQ(hello.body, "hello\n");
  auto switched = c.read_response();
  ASSERT_EQ(switched.status, 101) << switched.head;
  EXPECT_NE(switched.head.find("\r\nConnection: Upgrade\r\n"), std::string::npos) << switched.head;
  EXPECT_NE(switched.head.find("\r\nUpgrade: shout\r\n"), std::string::npos) << switched.head;
  EXPECT_EQ(switched.head.find("Content-Length"), std::string::npos) << switched.head;
  EXPECT_EQ(c.read_bytes(12), "EARLY BYTES;");
  c.send("and later ones");
  EXPECT_EQ(c.read_bytes(14), "AND LATER ONES");
  ::shutdown(c.fd(), SHUT_WR);
  EXPECT_TRUE(c.server_closed()) << "the protocol ended its side after the client's end";
  // The server goes on.
  raw_client d(s.port());
  d.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(d.read_response().status, 200);
}

TEST_P(http_upgrade_test, upgrades_that_cannot_be_made) {
  server_thread s(GetParam(), upgrade_routes());
  {
    raw_client c(s.port());
    c.send("GET /shout HTTP/1.1\r\nHost: x\r\n\r\n");  // no Upgrade field: the handler refuses
    EXPECT_EQ(c.read_response().status, 426);
  }
  {
    raw_client c(s.port());
    c.send("GET /shout HTTP/1.0\r\nUpgrade: shout\r\nConnection: Upgrade\r\n\r\n");
    EXPECT_EQ(c.read_response().status, 400) << "no upgrade from HTTP/1.0";
  }
  {
    raw_client c(s.port());
    c.send("GET /bare HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(c.read_response().status, 500) << "a 101 without a function to hand the connection to";
    c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(c.read_response().status, 200) << "and the connection goes on as HTTP";
  }
  {
    raw_client c(s.port());
    c.send("GET /throw HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(c.read_response().status, 101);
    EXPECT_TRUE(c.server_closed()) << "the throwing protocol's connection is closed";
  }
  raw_client d(s.port());
  d.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(d.read_response().status, 200) << "the server goes on";
}

TEST_P(http_upgrade_test, shutdown_cancels_an_upgraded_connection_after_its_grace) {
  std::atomic<int> cancelled{0};
  server_thread s(GetParam(), upgrade_routes(&cancelled));
  raw_client c(s.port());
  c.send(shout_request);
  ASSERT_EQ(c.read_response().status, 101);
  c.send("x");
  EXPECT_EQ(c.read_bytes(1), "X");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(s.stop(300ms));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms) << "the upgraded connection had its grace";
  EXPECT_EQ(cancelled.load(), 1) << "then its pending read was cancelled";
  EXPECT_TRUE(c.server_closed());
}

// An upgraded connection that has ended (the protocol closed it after the client's end) leaves nothing in the
// kernel once run() has returned from the shutdown that follows.
TEST_P(http_upgrade_test, run_returns_with_nothing_in_the_kernel_after_an_upgrade) {
  server_thread s(GetParam(), upgrade_routes());
  {
    raw_client c(s.port());
    c.send(shout_request + "bye");
    ASSERT_EQ(c.read_response().status, 101);
    EXPECT_EQ(c.read_bytes(3), "BYE");
    ::shutdown(c.fd(), SHUT_WR);
    EXPECT_TRUE(c.server_closed());
  }
  for (int i = 0; i < 5000 && s.connections() != 0; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(s.connections(), 0u) << "the server has closed its side";
  ASSERT_TRUE(s.stop(2s));
  EXPECT_EQ(s.left_after_run(), "");
}

// An upgrade function that moves to another worker (runtime::switch_to) and ends there: its connection still leaves
// its server on the server's loop. Connections upgrade and end away while others come and go on the server's
// loop; every one is counted gone, the server goes on answering, and its shutdown returns.
TEST_P(http_upgrade_test, an_upgrade_function_that_ends_on_another_worker) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  std::atomic<int> ended_away{0};
  http::router routes = upgrade_routes();
  routes.get("/shout-away", [&rt, &ended_away](http::request&) -> tern::task<http::response> {
    http::response resp(http::status::switching_protocols);
    resp.headers.set("Upgrade", "shout");
    resp.upgrade = [&rt, &ended_away](http::upgraded_stream s) -> tern::task<void> {
      const std::size_t home = rt.current_worker();
      char buf[64];
      auto [ec, n] = co_await s.read_some(tern::mutable_buffer(buf, sizeof buf));
      if (!ec) {
        std::transform(buf, buf + n, buf, [](char c) { return static_cast<char>(std::toupper(c)); });
        (void)co_await s.write_all(tern::const_buffer(buf, n));
      }
      co_await rt.switch_to(1 - home);  // the stream, still open, is closed away when the function ends
      if (rt.current_worker() != home) ++ended_away;
    };
    co_return resp;
  });
  http::server server(rt.worker(0), std::move(routes));
  ASSERT_FALSE(server.listen(tern::net::endpoint::loopback_v4(0)));
  const std::uint16_t port = server.local_endpoint().value.port();
  auto running = rt.spawn_on(0, [](http::server& s) -> tern::task<std::error_code> { co_return co_await s.run(); },
                             std::ref(server));
  constexpr int rounds = 40;
  std::thread plain([port] {
    for (int i = 0; i < rounds; ++i) {
      raw_client c(port);
      c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
      EXPECT_EQ(c.read_response().status, 200);
    }
  });
  for (int i = 0; i < rounds; ++i) {
    raw_client c(port);
    c.send("GET /shout-away HTTP/1.1\r\nHost: x\r\nUpgrade: shout\r\nConnection: Upgrade\r\n\r\n");
    ASSERT_EQ(c.read_response().status, 101);
    c.send("away");
    EXPECT_EQ(c.read_bytes(4), "AWAY");
    EXPECT_TRUE(c.server_closed());
  }
  plain.join();
  // Counted on the server's own loop: every connection, upgraded or not, has left it.
  auto count = [](tern::runtime& rt, http::server& s) -> tern::task<std::size_t> {
    co_await rt.switch_to(0);
    for (int i = 0; i < 5000 && s.connections() != 0; ++i) co_await tern::sleep_for(1ms);
    co_return s.connections();
  };
  EXPECT_EQ(rt.block_on(count(rt, server)), 0u);
  EXPECT_EQ(ended_away.load(), rounds);
  raw_client d(port);
  d.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(d.read_response().status, 200) << "the server goes on";
  auto stop = [](tern::runtime& rt, http::server& s) -> tern::task<void> {
    co_await rt.switch_to(0);
    co_await s.shutdown(2s);
  };
  rt.block_on(stop(rt, server));
  auto join = [](tern::join_handle<std::error_code> h) -> tern::task<std::error_code> {
    co_return co_await std::move(h);
  };
  EXPECT_FALSE(rt.block_on(join(std::move(running))));
}

}  // namespace
