// WebSocket over HTTP/2 (RFC 8441, extended CONNECT) on both backends: one route, written with ws::accepted and
// response::upgrade as for HTTP/1.1, answers a WebSocket on an HTTP/2 stream (a 200, then frames as the stream's
// DATA, echoed by ws::stream<http::upgraded_stream>) beside ordinary requests on the same connection, and the same
// route answers an HTTP/1.1 WebSocket (tern's ws client) on the same port. The server says it can
// (SETTINGS_ENABLE_CONNECT_PROTOCOL); closing the WebSocket ends its stream only.
#include "h2_routes.hpp"

#include <tern/http/upgrade.hpp>
#include <tern/ws/stream.hpp>

#include <atomic>
#include <future>
#include <memory>
#include <thread>

namespace {

using namespace tern_test;
namespace http = tern::http;
namespace ws = tern::ws;

class http2_websocket_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(http2_websocket_test);

// /chat: echoes every message, in either version.
http::router chat_routes() {
  http::router r;
  r.get("/chat", [](http::request& req) -> tern::task<http::response> {
    http::response resp(http::status::switching_protocols);
    ws::accepted up(req.head(), resp.headers);
    if (up.error()) co_return http::response(up.status());
    resp.upgrade = [up = std::make_shared<ws::accepted>(std::move(up))](http::upgraded_stream s) -> tern::task<void> {
      ws::stream<http::upgraded_stream> socket(std::move(s), std::move(*up));
      std::string message;
      for (;;) {
        auto [ec, type] = co_await socket.read(message);
        if (ec) break;
        if (co_await socket.write(type, message)) break;
      }
    };
    co_return resp;
  });
  r.get("/hello", [](http::request& q) -> tern::task<http::response> {
    co_return http::response(200, "hello over " + version_name(q.version()) + "\n");
  });
  return r;
}

// A client's (masked) frame.
std::string masked_frame(std::uint8_t opcode, std::string_view payload) {
  std::string f;
  f.push_back(static_cast<char>(0x80 | opcode));
  f.push_back(static_cast<char>(0x80 | payload.size()));  // under 126 bytes here
  const char mask[4] = {0x11, 0x22, 0x33, 0x44};
  f.append(mask, 4);
  for (std::size_t i = 0; i < payload.size(); ++i) f.push_back(static_cast<char>(payload[i] ^ mask[i % 4]));
  return f;
}

TEST_P(http2_websocket_test, a_websocket_on_an_http2_stream_beside_other_requests) {
  server_thread srv(GetParam(), chat_routes(), h2_server_options());
  {
    h2_client c(srv.port());
    c.ping();  // the server's SETTINGS first: it must allow extended CONNECT before the client may use it
    ASSERT_TRUE(c.run_until([&] { return c.pings_acked() == 1; }));
    ASSERT_EQ(c.remote_setting(NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL), 1u);
    const auto id = c.request("CONNECT", "/chat", {{":protocol", "websocket"}, {"sec-websocket-version", "13"}},
                              std::nullopt, true);
    ASSERT_TRUE(c.run_until([&] { return c.answer(id).status != 0; }));
    EXPECT_EQ(c.answer(id).status, 200);
    EXPECT_EQ(c.answer(id).header("sec-websocket-accept"), "");
    c.send_body(id, masked_frame(0x1, "hello over a stream"), false);
    const std::string echo = std::string("\x81\x13", 2) + "hello over a stream";
    ASSERT_TRUE(c.run_until([&] { return c.answer(id).body.size() >= echo.size(); }));
    EXPECT_EQ(c.answer(id).body, echo);
    // Another request on the same connection meanwhile.
    const auto other = c.request("GET", "/hello");
    ASSERT_TRUE(c.finish(other));
    EXPECT_EQ(c.answer(other).body, "hello over 2.0\n");
    c.send_body(id, masked_frame(0x2, std::string(100, 'b')), false);
    ASSERT_TRUE(c.run_until([&] { return c.answer(id).body.size() >= echo.size() + 102; }));
    // The close handshake ends the stream, not the connection.
    c.send_body(id, masked_frame(0x8, "\x03\xe8"), true);
    ASSERT_TRUE(c.finish(id));
    EXPECT_EQ(c.answer(id).body.substr(echo.size() + 102, 2), std::string("\x88\x02", 2));
    const auto after = c.request("GET", "/hello");
    ASSERT_TRUE(c.finish(after));
    EXPECT_EQ(c.answer(after).status, 200);
    EXPECT_FALSE(c.goaway());
  }
  // The client has gone: nothing of the connection is left in the kernel once run() has returned.
  ASSERT_TRUE(srv.stop(std::chrono::milliseconds(2000)));
  EXPECT_EQ(srv.left_after_run(), "");
}

// One WebSocket over HTTP/1.1 with tern's ws client: a message echoed, then the close handshake (the server closes
// the TCP connection first).
tern::task<void> http11_chat(tern::io_context& ctx, std::uint16_t port) {
  auto [ec, socket] = co_await tern::net::connect(ctx, "127.0.0.1", std::to_string(port));
  CO_ASSERT_OK(ec);
  ws::stream<tern::net::tcp_socket> client(std::move(socket), ws::role::client);
  CO_ASSERT_OK(co_await client.handshake("localhost", "/chat"));
  CO_ASSERT_OK(co_await client.write(ws::message_type::text, "over HTTP/1.1"));
  std::string message;
  auto [rec, type] = co_await client.read(message);
  CO_ASSERT_OK(rec);
  EXPECT_EQ(message, "over HTTP/1.1");
  (void)co_await client.close(ws::close_code::normal, "");
}

TEST_P(http2_websocket_test, the_same_route_answers_an_http11_websocket) {
  server_thread srv(GetParam(), chat_routes(), h2_server_options());
  run_bounded(ctx, http11_chat(ctx, srv.port()));
}

// When run() returns, nothing the server started is still in the kernel (the listener's accept included), with
// HTTP/2 on the port and without: its loop may be destroyed on another thread, where the ring could no longer reap
// it, and a read still in the kernel could write into freed memory.
TEST_P(http2_websocket_test, run_returns_with_nothing_in_the_kernel_after_an_http11_websocket) {
  for (const bool http2 : {true, false}) {
    SCOPED_TRACE(http2 ? "with HTTP/2" : "HTTP/1.1 only");
    server_thread srv(GetParam(), chat_routes(), http2 ? h2_server_options() : tern::http::server_options());
    run_bounded(ctx, http11_chat(ctx, srv.port()));
    ASSERT_TRUE(srv.stop(std::chrono::milliseconds(2000)));
    EXPECT_EQ(srv.left_after_run(), "");
  }
}

// An upgrade function that moves to another worker (runtime::switch_to) and ends there: its stream still ends on
// the connection's loop (END_STREAM after the close frame, no reset), and the connection goes on serving.
TEST_P(http2_websocket_test, an_upgrade_function_that_ends_on_another_worker_still_ends_its_stream) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  std::atomic<int> ended_away{0};
  auto routes = std::make_shared<http::router>(chat_routes());
  routes->get("/chat-away", [&rt, &ended_away](http::request& req) -> tern::task<http::response> {
    http::response resp(http::status::switching_protocols);
    ws::accepted up(req.head(), resp.headers);
    if (up.error()) co_return http::response(up.status());
    resp.upgrade = [&rt, &ended_away,
                    up = std::make_shared<ws::accepted>(std::move(up))](http::upgraded_stream s) -> tern::task<void> {
      ws::stream<http::upgraded_stream> socket(std::move(s), std::move(*up));
      const std::size_t home = rt.current_worker();
      std::string message;
      for (;;) {
        auto [ec, type] = co_await socket.read(message);
        if (ec) break;
        if (co_await socket.write(type, message)) break;
      }
      co_await rt.switch_to(1 - home);
      if (rt.current_worker() != home) ++ended_away;
    };
    co_return resp;
  });
  runtime_server server(rt, std::move(routes), h2_server_options());
  const std::uint16_t port = server.port();
  {
    h2_client c(port);
    c.ping();
    EXPECT_TRUE(c.run_until([&] { return c.pings_acked() == 1; }));
    for (int round = 0; round < 3; ++round) {
      SCOPED_TRACE(round);
      const auto id = c.request("CONNECT", "/chat-away", {{":protocol", "websocket"}, {"sec-websocket-version", "13"}},
                                std::nullopt, true);
      c.send_body(id, masked_frame(0x1, "hello"), false);
      const std::string echo = std::string("\x81\x05", 2) + "hello";
      if (!c.run_until([&] { return c.answer(id).body.size() >= echo.size(); })) {
        ADD_FAILURE() << "no echo";
        break;
      }
      EXPECT_EQ(c.answer(id).status, 200);
      EXPECT_EQ(c.answer(id).body, echo);
      c.send_body(id, masked_frame(0x8, "\x03\xe8"), true);
      const bool ended = c.finish(id, std::chrono::seconds(5));
      EXPECT_TRUE(ended) << "the stream of an upgrade function that ended away never ended";
      if (!ended) break;
      EXPECT_EQ(c.answer(id).close_code, 0u) << "ended by END_STREAM, not a reset";
      EXPECT_EQ(c.answer(id).body.substr(echo.size(), 2), std::string("\x88\x02", 2));
      const auto after = c.request("GET", "/hello");
      EXPECT_TRUE(c.finish(after));
      EXPECT_EQ(c.answer(after).body, "hello over 2.0\n");
    }
    EXPECT_FALSE(c.goaway());
  }
  EXPECT_EQ(ended_away.load(), 3);
  EXPECT_TRUE(server.stop());
}

}  // namespace
