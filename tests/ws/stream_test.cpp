// ws::stream between two tern ends on one loop, on both backends: handshakes (and what a server refuses), text and
// binary messages, fragments with control frames between them, read_some, pings and pongs, the close handshake
// with codes and reasons, what a peer that breaks the protocol gets (1002, 1007, 1009, sent as raw bytes by the
// test), permessage-deflate with its parameters, subprotocols, a request head handed over by an HTTP server, full
// duplex with a writer stuck on a full socket, and WebSockets over TLS and over a Unix socket.
#include "ws_support.hpp"

#include "tls/tls_support.hpp"

#include <array>
#include <atomic>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace tern_test;
namespace net = tern::net;

class ws_stream_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(ws_stream_test);

template <class S>
tern::task<void> expect_message(ws::stream<S>& s, ws::message_type type, std::string_view expected) {
  std::string got;
  auto [ec, t] = co_await s.read(got);
  EXPECT_OK(ec);
  EXPECT_EQ(t, type);
  EXPECT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);
}

TEST_P(ws_stream_test, text_and_binary_both_ways) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    ws_pair p = co_await ws_over_tcp(ctx);
    EXPECT_TRUE(p.client.is_open());
    EXPECT_EQ(p.client.handshake_status(), 101);
    EXPECT_FALSE(p.client.deflate_agreed());
    CO_ASSERT_OK(co_await p.client.write(ws::message_type::text, "hello, server"));
    co_await expect_message(p.server, ws::message_type::text, "hello, server");
    const std::vector<char> blob = make_pattern(100000);
    CO_ASSERT_OK(co_await p.server.write(ws::message_type::binary, blob));
    co_await expect_message(p.client, ws::message_type::binary, std::string_view(blob.data(), blob.size()));
    CO_ASSERT_OK(co_await p.client.write(ws::message_type::binary, ""));  // empty messages are messages
    co_await expect_message(p.server, ws::message_type::binary, "");
    // Lengths at the header's boundaries, each way.
    for (std::size_t n : {125u, 126u, 65535u, 65536u}) {
      const std::string m(n, 'x');
      CO_ASSERT_OK(co_await p.client.write(ws::message_type::text, m));
      co_await expect_message(p.server, ws::message_type::text, m);
      CO_ASSERT_OK(co_await p.server.write(ws::message_type::text, m));
      co_await expect_message(p.client, ws::message_type::text, m);
    }
  }(ctx));
}

TEST_P(ws_stream_test, one_string_reused_for_messages_of_every_size) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    ws_pair p = co_await ws_over_tcp(ctx);
    // read(std::string&) overwrites the last message's bytes before it grows the string: each message here has
    // bytes of its own, so anything left of the one before, or a size not cut back, shows.
    std::string got;
    const std::size_t sizes[] = {100000, 10, 0, 300000, 5000, 5000, 4999, (1u << 20) + 7, 3};
    for (std::size_t i = 0; i < std::size(sizes); ++i) {
      std::string m(sizes[i], '\0');
      for (std::size_t k = 0; k < m.size(); ++k) m[k] = static_cast<char>('a' + (k * 7 + i) % 26);
      CO_ASSERT_OK(co_await p.client.write(ws::message_type::binary, m));
      auto [ec, t] = co_await p.server.read(got);
      CO_ASSERT_OK(ec);
      EXPECT_EQ(t, ws::message_type::binary);
      EXPECT_EQ(got.size(), m.size()) << "message " << i;
      EXPECT_TRUE(got == m) << "message " << i;
    }
  }(ctx));
}

TEST_P(ws_stream_test, fragments_with_control_frames_between_them) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    ws_pair p = co_await ws_over_tcp(ctx);
    // "κόσμε" split inside its characters, with a ping between the fragments.
    const std::string text = "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5";
    CO_ASSERT_OK(co_await p.client.write_some(false, ws::message_type::text, std::string_view(text).substr(0, 3)));
    CO_ASSERT_OK(co_await p.client.ping("between"));
    CO_ASSERT_OK(co_await p.client.write_some(false, ws::message_type::text, std::string_view(text).substr(3, 4)));
    CO_ASSERT_OK(co_await p.client.write_some(true, ws::message_type::text, std::string_view(text).substr(7)));
    co_await expect_message(p.server, ws::message_type::text, text);
    // The server answered the ping while reading: the client sees the pong when it reads.
    CO_ASSERT_OK(co_await p.server.write(ws::message_type::binary, "after"));
    co_await expect_message(p.client, ws::message_type::binary, "after");
    EXPECT_EQ(p.client.pongs_received(), 1u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(p.client.last_pong().data()), p.client.last_pong().size()),
              "between");
  }(ctx));
}

TEST_P(ws_stream_test, read_some_delivers_parts) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    ws_pair p = co_await ws_over_tcp(ctx);
    const std::vector<char> blob = make_pattern(10000, 7);
    CO_ASSERT_OK(co_await p.server.write(ws::message_type::binary, blob));
    std::string got;
    std::array<char, 999> part;
    for (;;) {
      auto [ec, r] = co_await p.client.read_some(part);
      CO_ASSERT_OK(ec);
      EXPECT_EQ(r.type, ws::message_type::binary);
      EXPECT_LE(r.size, part.size());
      got.append(part.data(), r.size);
      if (r.message_done) break;
    }
    EXPECT_TRUE(got == std::string(blob.begin(), blob.end()));
  }(ctx));
}

TEST_P(ws_stream_test, close_handshake_with_code_and_reason) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    ws_pair p = co_await ws_over_tcp(ctx);
    auto server_side = [](ws_tcp& s) -> tern::task<void> {
      std::string m;
      auto [ec, t] = co_await s.read(m);
      EXPECT_EQ(ec, ws::close_code{4001});
      EXPECT_TRUE(ec == tern::condition::end_of_stream);  // a close frame, whatever its code
      EXPECT_FALSE(std::error_code(ws::error::invalid_utf8) == tern::condition::end_of_stream);
      EXPECT_FALSE(std::error_code(ws::error::closed) == tern::condition::end_of_stream);
      EXPECT_EQ(s.close_code(), 4001);
      EXPECT_EQ(s.close_reason(), "bye now");
      EXPECT_FALSE(s.is_open());
      // Writes after the close handshake are refused; reads keep reporting the close.
      EXPECT_EC(co_await s.write(ws::message_type::text, "late"), ws::error::closed);
      auto [again, t2] = co_await s.read(m);
      EXPECT_EQ(again, ws::close_code{4001});
    };
    auto [closed, unit] =
        co_await tern::when_all(p.client.close(ws::close_code{4001}, "bye now"), server_side(p.server));
    EXPECT_OK(closed);
    EXPECT_EQ(p.client.close_code(), 4001);  // the server echoed the code
    EXPECT_EC(co_await p.client.close(ws::close_code::abnormal), ws::error::bad_close_code);
    EXPECT_EC(co_await p.client.close(ws::close_code{1005}), ws::error::bad_close_code);
    EXPECT_EC(co_await p.client.close(ws::close_code{999}), ws::error::bad_close_code);
  }(ctx));
}

TEST_P(ws_stream_test, every_sendable_close_code_arrives) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    for (int code : {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 4999}) {
      ws_pair p = co_await ws_over_tcp(ctx);
      auto [closed, read] = co_await tern::when_all(p.server.close(ws::close_code(code), "reason"),
                                                   [](ws_tcp& c) -> tern::task<std::error_code> {
                                                     std::string m;
                                                     co_return (co_await c.read(m)).ec;
                                                   }(p.client));
      EXPECT_OK(closed);
      EXPECT_EQ(read, ws::close_code(code));
      EXPECT_EQ(p.client.close_code(), code);
      EXPECT_EQ(p.client.close_reason(), "reason");
    }
  }(ctx));
}

TEST_P(ws_stream_test, a_connection_without_close_frame_is_abnormal) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    ws_pair p = co_await ws_over_tcp(ctx);
    { ws_tcp gone = std::move(p.server); }
    std::string m;
    auto [ec, t] = co_await p.client.read(m);
    EXPECT_EQ(ec, ws::close_code::abnormal);
    EXPECT_TRUE(ec == tern::condition::end_of_stream) << "the one test for every end of a stream";
  }(ctx));
}

// A raw client after a valid handshake with a tern server; the server reads once, and the raw client gets the
// close frame it sent.
tern::task<void> raw_violation(tern::io_context& ctx, std::string bytes, std::error_code expected, int code,
                               ws::stream_options opts = {}) {
  socket_pair p = co_await connected_pair(ctx);
  ws_tcp server(std::move(p.server), ws::role::server, opts);
  const std::string request = upgrade_request();
  CO_ASSERT_OK((co_await p.client.write_all(tern::const_buffer(request.data(), request.size()))).ec);
  CO_ASSERT_OK(co_await server.accept());
  const std::string head = co_await read_head(p.client);
  EXPECT_NE(head.find("101 Switching Protocols"), std::string::npos);
  EXPECT_NE(head.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"), std::string::npos);
  CO_ASSERT_OK((co_await p.client.write_all(tern::const_buffer(bytes.data(), bytes.size()))).ec);
  std::string m;
  auto [ec, t] = co_await server.read(m);
  EXPECT_EQ(ec, expected) << ec.message();
  auto [first, payload] = co_await read_server_frame(p.client);
  EXPECT_EQ(first, 0x88);  // a close frame
  EXPECT_EQ(close_code_of(payload), code);
  EXPECT_FALSE(server.is_open());
}

TEST_P(ws_stream_test, violations_close_with_the_right_code) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    const std::error_code proto = ws::error::protocol_violation;
    co_await raw_violation(ctx, raw_frame(0x81, "unmasked", false), proto, 1002);
    co_await raw_violation(ctx, raw_frame(0xc1, "rsv1 without deflate"), proto, 1002);
    co_await raw_violation(ctx, raw_frame(0xa1, "rsv2"), proto, 1002);
    co_await raw_violation(ctx, raw_frame(0x83, "opcode 3"), proto, 1002);
    co_await raw_violation(ctx, raw_frame(0x80, "continuation first"), proto, 1002);
    co_await raw_violation(ctx, raw_frame(0x09, "fragmented ping"), proto, 1002);
    co_await raw_violation(ctx, raw_frame(0x01, "a") + raw_frame(0x81, "b"), proto, 1002);
    co_await raw_violation(ctx, raw_frame(0x88, "\x03"), proto, 1002);          // a one-byte close payload
    co_await raw_violation(ctx, raw_frame(0x88, "\x03\xed"), proto, 1002);      // close code 1005
    co_await raw_violation(ctx, raw_frame(0x81, "bad \xc0\xaf text"), ws::error::invalid_utf8, 1007);
    // Invalid across fragments: each piece alone could start valid text.
    co_await raw_violation(ctx, raw_frame(0x01, "ok \xe2\x82") + raw_frame(0x80, "\x41"), ws::error::invalid_utf8,
                           1007);
    co_await raw_violation(ctx, raw_frame(0x81, "cut \xe2\x82"), ws::error::invalid_utf8, 1007);
    co_await raw_violation(ctx, raw_frame(0x88, "\x03\xe8\xff"), ws::error::invalid_utf8, 1007);  // close reason
    ws::stream_options small;
    small.max_message_size = 1000;
    co_await raw_violation(ctx, raw_frame(0x82, std::string(1001, 'x')), ws::error::message_too_big, 1009, small);
    co_await raw_violation(ctx, raw_frame(0x02, std::string(600, 'x')) + raw_frame(0x80, std::string(600, 'x')),
                           ws::error::message_too_big, 1009, small);
  }(ctx));
}

TEST_P(ws_stream_test, a_client_refuses_a_masked_server_frame) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    socket_pair p = co_await connected_pair(ctx);
    ws_tcp client(std::move(p.client), ws::role::client);
    auto fake_server = [](net::tcp_socket& s) -> tern::task<void> {
      const std::string request = co_await read_head(s);
      const std::size_t at = request.find("Sec-WebSocket-Key: ") + 19;
      const auto accept = ws::detail::accept_value(request.substr(at, request.find("\r\n", at) - at));
      const std::string answer = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                 "Sec-WebSocket-Accept: " + std::string(accept.data(), accept.size()) + "\r\n\r\n" +
                                 raw_frame(0x81, "masked by a server", true);
      (void)co_await s.write_all(tern::const_buffer(answer.data(), answer.size()));
    };
    auto [hs, unit] = co_await tern::when_all(client.handshake("localhost", "/"), fake_server(p.server));
    CO_ASSERT_OK(hs);
    std::string m;
    auto [ec, t] = co_await client.read(m);
    EXPECT_EC(ec, ws::error::protocol_violation);
    unsigned char close[8];  // the client's close frame: masked, code 1002
    CO_ASSERT_OK((co_await p.server.read_exact(tern::mutable_buffer(close, sizeof close))).ec);
    EXPECT_EQ(close[0], 0x88);
    EXPECT_EQ(close[1], 0x82);
    EXPECT_EQ(((close[6] ^ close[2]) << 8) | (close[7] ^ close[3]), 1002);
  }(ctx));
}

TEST_P(ws_stream_test, a_server_refuses_what_is_not_an_upgrade) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    struct refusal {
      std::string request;
      std::error_code expected;
      std::string status;
    };
    const refusal cases[] = {
        {"GET /chat HTTP/1.1\r\nHost: localhost\r\n\r\n", ws::error::not_upgrade, "400"},
        {"POST /chat HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: "
         "dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nContent-Length: 0\r\n\r\n",
         ws::error::not_upgrade, "400"},
        {"GET /chat HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: "
         "dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n",
         ws::error::bad_version, "426"},
        {"GET /chat HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: "
         "c2hvcnQ=\r\nSec-WebSocket-Version: 13\r\n\r\n",
         ws::error::bad_key, "400"},
        {"GET /chat HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Version: 13\r\n\r\n",
         ws::error::bad_key, "400"},
        {"GET /chat HTTP/1.1\nHost: h\n\n", ws::error::bad_request, "400"},
    };
    for (const refusal& r : cases) {
      socket_pair p = co_await connected_pair(ctx);
      ws_tcp server(std::move(p.server), ws::role::server);
      CO_ASSERT_OK((co_await p.client.write_all(tern::const_buffer(r.request.data(), r.request.size()))).ec);
      EXPECT_EQ(co_await server.accept(), r.expected);
      const std::string head = co_await read_head(p.client);
      EXPECT_EQ(head.substr(0, 12), "HTTP/1.1 " + r.status) << head;
      if (r.status == "426") {
        EXPECT_NE(head.find("Sec-WebSocket-Version: 13\r\n"), std::string::npos);
      }
      EXPECT_FALSE(server.is_open());
    }
  }(ctx));
}

TEST_P(ws_stream_test, a_client_checks_the_answer) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    struct answer_case {
      std::string (*make)(const std::string& accept);
      std::error_code expected;
    };
    const answer_case cases[] = {
        {[](const std::string&) -> std::string { return "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"; },
         ws::error::rejected},
        {[](const std::string&) -> std::string {
           return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
         },
         ws::error::bad_accept},
        {[](const std::string& a) {
           return "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + a + "\r\n\r\n";
         },
         ws::error::bad_response},
        {[](const std::string& a) {
           return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Accept: " + a + "\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n";
         },
         ws::error::bad_extension},  // not offered
        {[](const std::string& a) {
           return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Accept: " + a + "\r\nSec-WebSocket-Protocol: chat\r\n\r\n";
         },
         ws::error::bad_subprotocol},  // not offered
    };
    for (const answer_case& c : cases) {
      socket_pair p = co_await connected_pair(ctx);
      ws_tcp client(std::move(p.client), ws::role::client);
      auto fake_server = [](net::tcp_socket& s, const answer_case& c) -> tern::task<void> {
        const std::string request = co_await read_head(s);
        const std::size_t at = request.find("Sec-WebSocket-Key: ") + 19;
        const auto accept = ws::detail::accept_value(request.substr(at, request.find("\r\n", at) - at));
        const std::string answer = c.make(std::string(accept.data(), accept.size()));
        (void)co_await s.write_all(tern::const_buffer(answer.data(), answer.size()));
      };
      auto [hs, unit] = co_await tern::when_all(client.handshake("localhost", "/"), fake_server(p.server, c));
      EXPECT_EQ(hs, c.expected) << hs.message();
      EXPECT_FALSE(client.is_open());
      std::string m;
      EXPECT_EC((co_await client.read(m)).ec, ws::error::not_open);
    }
  }(ctx));
}

TEST_P(ws_stream_test, subprotocols_agreed) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    socket_pair p = co_await connected_pair(ctx);
    ws_tcp client(std::move(p.client), ws::role::client);
    ws_tcp server(std::move(p.server), ws::role::server);
    const std::string_view offered[] = {"v2.chat", "v1.chat"};
    const std::string_view spoken[] = {"v1.chat", "v2.chat"};
    tern::http::fields extra;
    extra.set("Origin", "http://localhost");
    auto [cec, sec] = co_await tern::when_all(client.handshake("localhost", "/", {offered, &extra}),
                                              server.accept({spoken, nullptr}));
    CO_ASSERT_OK(cec);
    CO_ASSERT_OK(sec);
    EXPECT_EQ(client.subprotocol(), "v2.chat");  // the client's first that the server speaks
    EXPECT_EQ(server.subprotocol(), "v2.chat");
  }(ctx));
}

// An operation copies the strings it is given: a handshake made from host and target strings, and a close from a
// reason, that are gone (their memory written over) before they are awaited still send them.
TEST_P(ws_stream_test, handshake_and_close_keep_copies_of_their_strings) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    const std::string target = "/room/" + std::string(100, 't');
    {
      socket_pair p = co_await connected_pair(ctx);
      ws_tcp client(std::move(p.client), ws::role::client);
      auto shaking = [&] { return client.handshake(std::string("example.test:8080"), std::string(target)); }();
      scribble(target.size());
      auto sent = tern::spawn(ctx, std::move(shaking));
      const std::string head = co_await read_head(p.server);
      EXPECT_NE(head.find("GET " + target + " HTTP/1.1\r\n"), std::string::npos) << head;
      EXPECT_NE(head.find("Host: example.test:8080\r\n"), std::string::npos) << head;
      p.server.close();  // no answer: the handshake fails, as it should
      EXPECT_TRUE(co_await std::move(sent));
    }
    ws_pair p = co_await ws_over_tcp(ctx);
    const std::string reason = "gone for " + std::string(100, 'r');
    auto closing = [&] { return p.client.close(ws::close_code{4002}, std::string(reason)); }();
    scribble(reason.size());
    auto server_side = [](ws_tcp& s, const std::string& reason) -> tern::task<void> {
      std::string m;
      auto [ec, t] = co_await s.read(m);
      EXPECT_EQ(ec, ws::close_code{4002});
      EXPECT_EQ(s.close_reason(), reason);
    };
    auto [closed, unit] = co_await tern::when_all(std::move(closing), server_side(p.server, reason));
    EXPECT_OK(closed);
  }(ctx));
}

TEST_P(ws_stream_test, accept_a_head_read_by_someone_else) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    // What an HTTP server would do: parse the head, then hand the connection and what followed it over.
    const std::string request = upgrade_request();
    const std::string first_frame = raw_frame(0x81, "sent right after the request");
    const std::string arrived = request + first_frame.substr(0, 5);
    tern::http::request_parser parser;
    std::error_code pec;
    CO_ASSERT(parser.parse(arrived, pec));
    socket_pair p = co_await connected_pair(ctx);
    ws_tcp server(std::move(p.server), ws::role::server);
    const std::string rest = first_frame.substr(5);
    CO_ASSERT_OK((co_await p.client.write_all(tern::const_buffer(rest.data(), rest.size()))).ec);
    CO_ASSERT_OK(co_await server.accept(parser.head(), tern::const_buffer(arrived.data() + parser.head().size,
                                                                          arrived.size() - parser.head().size)));
    const std::string head = co_await read_head(p.client);
    EXPECT_NE(head.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"), std::string::npos);
    co_await expect_message(server, ws::message_type::text, "sent right after the request");
  }(ctx));
}

TEST_P(ws_stream_test, an_upgrade_answered_by_an_http_server) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    // What an HTTP handler does: check the request, answer 101 with the fields it gets, then hand the connection
    // over to a stream made from the agreement.
    socket_pair p = co_await connected_pair(ctx);
    ws_tcp client(std::move(p.client), ws::role::client);
    auto http_side = [](net::tcp_socket& socket) -> tern::task<std::optional<ws::accepted>> {
      std::string request;
      char c;
      while (request.find("\r\n\r\n") == std::string::npos) {
        auto [ec, n] = co_await socket.read_some(tern::mutable_buffer(&c, 1));
        if (ec) co_return std::nullopt;
        request += c;
      }
      tern::http::request_parser parser;
      std::error_code pec;
      EXPECT_TRUE(parser.parse(request, pec));
      tern::http::fields answer;
      ws::accepted upgrade(parser.head(), answer);
      EXPECT_OK(upgrade.error());
      EXPECT_EQ(upgrade.status(), 101);
      std::string head = "HTTP/1.1 101 Switching Protocols\r\n";
      for (const tern::http::field f : answer) head += std::string(f.name) + ": " + std::string(f.value) + "\r\n";
      head += "\r\n";
      (void)co_await socket.write_all(tern::const_buffer(head.data(), head.size()));
      co_return std::optional<ws::accepted>(std::move(upgrade));
    };
    auto [hs, upgrade] = co_await tern::when_all(client.handshake("localhost", "/"), http_side(p.server));
    CO_ASSERT_OK(hs);
    CO_ASSERT(upgrade.has_value());
    ws_tcp server(std::move(p.server), std::move(*upgrade));
    EXPECT_TRUE(server.is_open());
    CO_ASSERT_OK(co_await client.write(ws::message_type::text, "through the HTTP server"));
    co_await expect_message(server, ws::message_type::text, "through the HTTP server");
    CO_ASSERT_OK(co_await server.write(ws::message_type::binary, "and back"));
    co_await expect_message(client, ws::message_type::binary, "and back");
    // A request that is not an upgrade gets no fields, and the status to answer.
    tern::http::request_parser parser;
    std::error_code pec;
    CO_ASSERT(parser.parse(std::string_view("GET / HTTP/1.1\r\nHost: h\r\n\r\n"), pec));
    tern::http::fields answer;
    ws::accepted refused(parser.head(), answer);
    EXPECT_EC(refused.error(), ws::error::not_upgrade);
    EXPECT_TRUE(answer.empty());
    EXPECT_EQ(refused.status(), 400);
    socket_pair q = co_await connected_pair(ctx);
    ws_tcp closed(std::move(q.server), std::move(refused));
    EXPECT_FALSE(closed.is_open());
    EXPECT_EC(co_await closed.write(ws::message_type::text, "no"), ws::error::not_open);
  }(ctx));
}

ws::stream_options with_deflate(int client_bits = 15, int server_bits = 15, bool client_nct = false,
                                bool server_nct = false) {
  ws::stream_options o;
  o.deflate.enabled = true;
  o.deflate.client_max_window_bits = client_bits;
  o.deflate.server_max_window_bits = server_bits;
  o.deflate.client_no_context_takeover = client_nct;
  o.deflate.server_no_context_takeover = server_nct;
  o.max_message_size = 32 << 20;
  return o;
}

TEST_P(ws_stream_test, permessage_deflate_between_tern_ends) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    const ws::stream_options variants[] = {with_deflate(), with_deflate(9, 10), with_deflate(15, 15, true, true),
                                           with_deflate(12, 9, false, true)};
    for (const ws::stream_options& o : variants) {
      ws_pair p = co_await ws_over_tcp(ctx, o, with_deflate());
      EXPECT_TRUE(p.client.deflate_agreed());
      EXPECT_TRUE(p.server.deflate_agreed());
      std::string text;
      for (int i = 0; text.size() < 3'000'000; ++i) text += "message " + std::to_string(i % 1000) + " of many; ";
      for (int round = 0; round < 3; ++round) {
        CO_ASSERT_OK(co_await p.client.write(ws::message_type::text, text));
        co_await expect_message(p.server, ws::message_type::text, text);
        CO_ASSERT_OK(co_await p.server.write(ws::message_type::text, text));
        co_await expect_message(p.client, ws::message_type::text, text);
      }
      const std::vector<char> noise = make_pattern(200000, 99);  // incompressible
      CO_ASSERT_OK(co_await p.server.write_some(false, ws::message_type::binary, noise));
      CO_ASSERT_OK(co_await p.server.ping("mid-message"));
      CO_ASSERT_OK(co_await p.server.write_some(true, ws::message_type::binary, noise));
      std::string both(noise.begin(), noise.end());
      both += both;
      co_await expect_message(p.client, ws::message_type::binary, both);
      CO_ASSERT_OK(co_await p.client.write(ws::message_type::binary, ""));
      co_await expect_message(p.server, ws::message_type::binary, "");
    }
    // Not agreed when only one end asks.
    ws_pair plain = co_await ws_over_tcp(ctx, with_deflate(), {});
    EXPECT_FALSE(plain.client.deflate_agreed());
    CO_ASSERT_OK(co_await plain.client.write(ws::message_type::text, "uncompressed"));
    co_await expect_message(plain.server, ws::message_type::text, "uncompressed");
  }(ctx));
}

TEST_P(ws_stream_test, an_inflated_message_over_the_limit_is_refused) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    ws::stream_options small = with_deflate();
    small.max_message_size = 100000;
    ws_pair p = co_await ws_over_tcp(ctx, with_deflate(), small);
    const std::string zeros(1'000'000, '\0');  // a few KiB compressed, a MB inflated
    CO_ASSERT_OK(co_await p.client.write(ws::message_type::binary, zeros));
    std::string m;
    auto [ec, t] = co_await p.server.read(m);
    EXPECT_EC(ec, ws::error::message_too_big);
    auto [cec, ct] = co_await p.client.read(m);
    EXPECT_EQ(cec, ws::close_code::message_too_big);
  }(ctx));
}

TEST_P(ws_stream_test, a_reader_answers_pings_while_the_writer_is_stuck) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    ws::stream_options o;
    o.max_message_size = 64 << 20;
    ws_pair p = co_await ws_over_tcp(ctx, o, o);
    // The server writes far more than the socket buffers hold while the client reads nothing: its write waits.
    const std::string big(32 << 20, 'z');
    bool written = false;
    auto writer = [](ws_tcp& s, const std::string& big, bool& written) -> tern::task<void> {
      EXPECT_OK(co_await s.write(ws::message_type::binary, big));
      written = true;
    };
    auto write_task = tern::spawn(ctx, writer(p.server, big, written));
    co_await tern::sleep_for(20ms);
    EXPECT_FALSE(written);
    // Meanwhile the server's reader gets a ping and a message: it must not wait for the writer.
    CO_ASSERT_OK(co_await p.client.ping("are you there"));
    CO_ASSERT_OK(co_await p.client.write(ws::message_type::text, "and this"));
    co_await expect_message(p.server, ws::message_type::text, "and this");
    EXPECT_FALSE(written);
    // Now the client reads: the big message, and the pong that followed its last frame.
    std::string got;
    auto [ec, t] = co_await p.client.read(got);
    CO_ASSERT_OK(ec);
    EXPECT_EQ(got.size(), big.size());
    co_await std::move(write_task);
    EXPECT_TRUE(written);
    CO_ASSERT_OK(co_await p.server.write(ws::message_type::text, "end"));
    co_await expect_message(p.client, ws::message_type::text, "end");
    EXPECT_EQ(p.client.pongs_received(), 1u);
  }(ctx));
}

TEST_P(ws_stream_test, sixteen_mib_each_way_at_once) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    ws::stream_options o;
    o.max_message_size = 16 << 20;
    ws_pair p = co_await ws_over_tcp(ctx, o, o);
    const std::vector<char> a = make_pattern(16 << 20, 1), b = make_pattern(16 << 20, 2);
    auto send_and_receive = [](ws_tcp& s, const std::vector<char>& out,
                               const std::vector<char>& in) -> tern::task<void> {
      std::string got;
      auto [wec, rr] = co_await tern::when_all(s.write(ws::message_type::binary, out), s.read(got));
      EXPECT_OK(wec);
      EXPECT_OK(rr.ec);
      EXPECT_EQ(fnv1a(got), fnv1a(std::string_view(in.data(), in.size())));
    };
    co_await tern::when_all(send_and_receive(p.client, a, b), send_and_receive(p.server, b, a));
  }(ctx));
}

TEST_P(ws_stream_test, over_tls) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context client_ctx = client_context();
    tls::context server_ctx = server_context();
    tls_pair t = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    auto [chs, shs] = co_await handshake_both(t);
    CO_ASSERT_OK(chs);
    CO_ASSERT_OK(shs);
    ws::stream<tls_tcp> client(std::move(t.client), ws::role::client, with_deflate());
    ws::stream<tls_tcp> server(std::move(t.server), ws::role::server, with_deflate());
    auto [cec, sec] = co_await tern::when_all(client.handshake("localhost", "/secure"), server.accept());
    CO_ASSERT_OK(cec);
    CO_ASSERT_OK(sec);
    EXPECT_TRUE(client.deflate_agreed());
    const std::vector<char> blob = make_pattern(1 << 20, 5);
    CO_ASSERT_OK(co_await client.write(ws::message_type::binary, blob));
    co_await expect_message(server, ws::message_type::binary, std::string_view(blob.data(), blob.size()));
    CO_ASSERT_OK(co_await server.write(ws::message_type::text, "over TLS"));
    co_await expect_message(client, ws::message_type::text, "over TLS");
    auto read_until_closed = [](ws::stream<tls_tcp>& s) -> tern::task<std::error_code> {
      std::string m;
      co_return (co_await s.read(m)).ec;
    };
    auto [closed, read] = co_await tern::when_all(client.close(), read_until_closed(server));
    EXPECT_OK(closed);
    EXPECT_EQ(read, ws::close_code::normal);
  }(ctx));
}

TEST_P(ws_stream_test, over_a_unix_socket) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [pec, ends] = net::unix_stream_socket::pair(ctx);
    CO_ASSERT_OK(pec);
    ws::stream<net::unix_stream_socket> client(std::move(ends.first), ws::role::client);
    ws::stream<net::unix_stream_socket> server(std::move(ends.second), ws::role::server);
    auto [cec, sec] = co_await tern::when_all(client.handshake("localhost", "/"), server.accept());
    CO_ASSERT_OK(cec);
    CO_ASSERT_OK(sec);
    CO_ASSERT_OK(co_await server.write(ws::message_type::text, "over a Unix socket"));
    co_await expect_message(client, ws::message_type::text, "over a Unix socket");
  }(ctx));
}

TEST_P(ws_stream_test, sends_from_another_worker_through_an_outbox) {
  tern::runtime_options ro;
  ro.threads = 2;
  ro.backend = GetParam();
  tern::runtime rt(ro);
  constexpr int count = 300;
  ws::outbox box(4);
  std::atomic<int> queued{0};
  // The producer, on worker 1: the connection is worker 0's.
  auto producer = rt.spawn_on(
      1,
      [](ws::sender to, std::atomic<int>* queued) -> tern::task<std::error_code> {
        for (int i = 0; i < count; ++i) {
          if (auto ec = co_await to.send(ws::message_type::text, "message " + std::to_string(i))) co_return ec;
          queued->fetch_add(1);
        }
        co_return std::error_code{};
      },
      box.sender(), &queued);
  const std::vector<std::string> got = rt.block_on(
      [](tern::runtime& rt, ws::outbox& box, std::atomic<int>* queued) -> tern::task<std::vector<std::string>> {
        co_await rt.switch_to(0);
        tern::io_context& ctx = *tern::io_context::current();
        ws_pair p = co_await ws_over_tcp(ctx);
        // No writer yet: the producer fills the outbox, then waits (backpressure).
        co_await tern::sleep_for(100ms);
        EXPECT_EQ(queued->load(), 4);
        EXPECT_EQ(box.size(), 4u);
        auto writer = tern::spawn(ctx, p.server.write_from(box));
        std::vector<std::string> got;
        std::string m;
        for (int i = 0; i < count; ++i) {
          auto [ec, t] = co_await p.client.read(m);
          if (ec) break;
          got.push_back(m);
        }
        box.close();
        EXPECT_OK(co_await std::move(writer));
        co_return got;
      }(rt, box, &queued));
  auto join = [](auto h) -> tern::task<std::error_code> { co_return co_await std::move(h); };
  EXPECT_OK(rt.block_on(join(std::move(producer))));
  ASSERT_EQ(got.size(), static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) EXPECT_EQ(got[i], "message " + std::to_string(i));
  // A closed outbox refuses more.
  EXPECT_EC(rt.block_on(box.sender().send(ws::message_type::text, "late")), tern::sync::error::closed);
}

// write_from cancelled while it waits for a message: the outbox is closed with it (senders see closed), so a
// producer of another worker does not fill the queue and then wait for ever on a writer that is gone.
TEST_P(ws_stream_test, a_cancelled_write_from_closes_its_outbox) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  ws::outbox box(2);
  const std::error_code writer = rt.block_on([](tern::runtime& rt, ws::outbox& box) -> tern::task<std::error_code> {
    co_await rt.switch_to(0);
    ws_pair p = co_await ws_over_tcp(*tern::io_context::current());
    co_return co_await tern::with_timeout(p.server.write_from(box), 50ms);
  }(rt, box));
  EXPECT_EC(writer, std::errc::timed_out);
  // The producer, on worker 1: three sends into a queue of two, each bounded so that a hang shows as timed_out.
  auto producer = rt.spawn_on(
      1,
      [](ws::sender to) -> tern::task<std::vector<std::error_code>> {
        std::vector<std::error_code> results;
        for (int i = 0; i < 3; ++i) {
          results.push_back(co_await tern::with_timeout(to.send(ws::message_type::text, "late"), 2s));
        }
        co_return results;
      },
      box.sender());
  auto join = [](auto h) -> tern::task<std::vector<std::error_code>> { co_return co_await std::move(h); };
  const std::vector<std::error_code> results = rt.block_on(join(std::move(producer)));
  ASSERT_EQ(results.size(), 3u);
  for (const std::error_code& ec : results) EXPECT_EC(ec, tern::sync::error::closed);
}

// Producers of another worker blocked on a full outbox while write_from is stuck on a peer that does not read:
// cancelling write_from wakes them with closed.
TEST_P(ws_stream_test, cancelling_write_from_wakes_blocked_producers) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  ws::outbox box(2);
  std::atomic<int> queued{0};
  auto producer = rt.spawn_on(
      1,
      [](ws::sender to, std::atomic<int>* queued) -> tern::task<std::error_code> {
        for (;;) {
          if (auto ec = co_await to.send(ws::message_type::binary, std::string(1 << 20, 'm'))) co_return ec;
          queued->fetch_add(1);
        }
      },
      box.sender(), &queued);
  const std::error_code writer =
      rt.block_on([](tern::runtime& rt, ws::outbox& box) -> tern::task<std::error_code> {
        co_await rt.switch_to(0);
        ws_pair p = co_await ws_over_tcp(*tern::io_context::current());
        auto writing = tern::spawn(*tern::io_context::current(), [](ws_tcp& s, ws::outbox& box) -> tern::task<std::error_code> {
          co_return co_await tern::with_timeout(s.write_from(box), 500ms);
        }(p.server, box));
        // The client never reads: the socket fills, then the outbox, then the producer waits.
        co_return co_await std::move(writing);
      }(rt, box));
  EXPECT_EC(writer, std::errc::timed_out);
  auto join = [](auto h) -> tern::task<std::error_code> { co_return co_await std::move(h); };
  EXPECT_EC(rt.block_on(join(std::move(producer))), tern::sync::error::closed);
  EXPECT_GE(queued.load(), 2);
}

// The pattern outbox.hpp shows: write_from detached for the connection's life, and the outbox object gone while
// its senders and the writer go on (the outbox is on the heap here, so that ASan sees any use of it after).
TEST_P(ws_stream_test, a_detached_write_from_outlives_its_outbox_object) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    ws_pair p = co_await ws_over_tcp(ctx);
    auto box = std::make_unique<ws::outbox>(4);
    ws::sender to = box->sender();
    tern::spawn(ctx, p.server.write_from(*box)).detach();
    box.reset();
    std::string m;
    for (const char* text : {"first", "second", "third"}) {
      CO_ASSERT_OK(co_await to.send(ws::message_type::text, text));
      auto [ec, t] = co_await p.client.read(m);
      CO_ASSERT_OK(ec);
      EXPECT_EQ(m, text);
    }
    // The peer goes: a write fails, the writer ends and closes the queue.
    p.client.next_layer().close();
    std::error_code ec;
    for (int i = 0; i < 1000 && !ec; ++i) {
      ec = co_await to.send(ws::message_type::text, "into the void");
      if (!ec) co_await tern::sleep_for(1ms);
    }
    EXPECT_EC(ec, tern::sync::error::closed);
  }(ctx));
}

// A broadcast from another worker to four connections, one of whose clients never reads: try_send never waits,
// so the broadcaster drops that reader when its outbox is full (and closes it) instead of stalling everyone; the
// other three get every message, in order; the dropped connection's writer gives up on its stuck message after
// its deadline. The broadcaster is paced by the readers that do read (a stand-in for messages arriving at a
// human rate), never by the one that does not.
TEST_P(ws_stream_test, a_broadcast_drops_the_reader_that_does_not_read) {
  constexpr int readers = 4;  // reader 0 never reads
  constexpr int count = 600;
  constexpr std::size_t size = 64 * 1024;
  constexpr int window = 8;     // the broadcaster runs at most this far ahead of the slowest reader that reads
  constexpr std::size_t capacity = 16;
  struct shared {
    std::array<std::atomic<int>, readers> read{};
    std::vector<ws::sender> to;
    std::array<int, readers> dropped_at{-1, -1, -1, -1};
  } st;
  auto message = [](int i) {
    std::string m(size, static_cast<char>('a' + i % 26));
    const std::string tag = std::to_string(i) + ":";
    m.replace(0, tag.size(), tag);
    return m;
  };
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  auto broadcast = [](shared& st, decltype(message)& message) -> tern::task<void> {
    std::array<bool, readers> live{};
    live.fill(true);
    for (int i = 0; i < count; ++i) {
      for (int k = 1; k < readers; ++k) {
        while (st.read[k].load() < i - window) co_await tern::sleep_for(1ms);
      }
      const std::string m = message(i);
      for (int k = 0; k < readers; ++k) {
        if (!live[k]) continue;
        const std::error_code ec = st.to[k].try_send(ws::message_type::binary, m);
        if (!ec) continue;
        live[k] = false;
        if (ec == tern::sync::error::full) {
          st.dropped_at[k] = i;
          st.to[k].close();
        }
      }
    }
    for (int k = 0; k < readers; ++k) st.to[k].close();  // the end of the broadcast
  };
  struct results {
    std::array<std::error_code, readers> writers;
    std::array<int, readers> got{};
  };
  const results r = rt.block_on(
      [](tern::runtime& rt, shared& st, decltype(message)& message, decltype(broadcast)& broadcast) -> tern::task<results> {
        co_await rt.switch_to(0);
        tern::io_context& ctx = *tern::io_context::current();
        std::vector<ws_pair> pairs;
        pairs.reserve(readers);  // a stream may not move while its writer runs
        std::vector<tern::join_handle<std::error_code>> writers;
        for (int k = 0; k < readers; ++k) {
          pairs.push_back(co_await ws_over_tcp(ctx));
          ws::outbox box(capacity);
          st.to.push_back(box.sender());
          writers.push_back(tern::spawn(ctx, pairs.back().server.write_from(box, 1s)));
        }
        auto reading = [](ws_tcp& client, std::atomic<int>& read, decltype(message)& message) -> tern::task<int> {
          std::string m;
          int good = 0;
          for (int i = 0; i < count; ++i) {
            auto [ec, t] = co_await client.read(m);
            if (ec) break;
            if (m == message(i)) ++good;
            read.store(i + 1);
          }
          co_return good;
        };
        std::vector<tern::join_handle<int>> clients;
        for (int k = 1; k < readers; ++k) clients.push_back(tern::spawn(ctx, reading(pairs[k].client, st.read[k], message)));
        auto broadcaster = rt.spawn_on(1, broadcast(st, message));
        co_await std::move(broadcaster);
        results r;
        for (int k = 1; k < readers; ++k) r.got[k] = co_await std::move(clients[k - 1]);
        for (int k = 0; k < readers; ++k) r.writers[k] = co_await std::move(writers[k]);
        co_return r;
      }(rt, st, message, broadcast));
  EXPECT_GE(st.dropped_at[0], 0) << "the reader that does not read is dropped";
  EXPECT_EC(r.writers[0], std::errc::timed_out) << "and its stuck write gives up";
  for (int k = 1; k < readers; ++k) {
    EXPECT_EQ(st.dropped_at[k], -1) << "reader " << k;
    EXPECT_EQ(r.got[k], count) << "reader " << k << " got every message, in order";
    EXPECT_OK(r.writers[k]);
  }
}

// try_send: queued while there is room, full when there is none (nothing waits), closed once closed.
TEST_P(ws_stream_test, try_send_never_waits) {
  ws::outbox box(2);
  ws::sender to = box.sender();
  EXPECT_OK(to.try_send(ws::message_type::text, "one"));
  EXPECT_OK(to.try_send(ws::message_type::text, "two"));
  EXPECT_EC(to.try_send(ws::message_type::text, "three"), tern::sync::error::full);
  EXPECT_EQ(box.size(), 2u);
  EXPECT_TRUE(to.close());
  EXPECT_FALSE(box.close()) << "closed already";
  EXPECT_EC(to.try_send(ws::message_type::text, "four"), tern::sync::error::closed);
}

// write_from's frame destroyed with its loop (a connection still open at teardown): the outbox is closed too.
TEST_P(ws_stream_test, write_from_destroyed_with_its_loop_closes_its_outbox) {
  ws::outbox box(2);
  ws::sender to = box.sender();
  {
    tern::io_context loop(options());
    tern::spawn(loop, [](tern::io_context& loop, ws::outbox box) -> tern::task<void> {
      ws_pair p = co_await ws_over_tcp(loop);
      (void)co_await p.server.write_from(box);
    }(loop, box)).detach();
    loop.block_on([]() -> tern::task<void> { (void)co_await tern::sleep_for(50ms); }());
    EXPECT_OK(to.try_send(ws::message_type::text, "queued, then written"));
  }
  EXPECT_EC(to.try_send(ws::message_type::text, "after"), tern::sync::error::closed);
}

TEST_P(ws_stream_test, a_read_is_cancelled_by_a_timeout) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    ws_pair p = co_await ws_over_tcp(ctx);
    std::string m;
    auto [ec, t] = co_await tern::with_timeout(p.client.read(m), 20ms);
    EXPECT_EC(ec, std::errc::timed_out);
  }(ctx));
}

// A chat's readers stopped by a token, from another thread (a WebSocket read is a task, which with_stop takes as
// with_timeout does): each read ends with operation_canceled, and the streams still carry a message after.
TEST_P(ws_stream_test, reads_are_cancelled_by_a_stop_token_from_another_thread) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    ws_pair a = co_await ws_over_tcp(ctx);
    ws_pair b = co_await ws_over_tcp(ctx);
    std::stop_source stop;
    auto reader = [](ws_tcp& s, std::stop_token token) -> tern::task<std::error_code> {
      std::string m;
      co_return (co_await tern::with_stop(s.read(m), token)).ec;
    };
    auto ra = tern::spawn(ctx, reader(a.server, stop.get_token()));
    auto rb = tern::spawn(ctx, reader(b.server, stop.get_token()));
    std::thread stopper([&stop] {
      std::this_thread::sleep_for(20ms);
      stop.request_stop();
    });
    const std::error_code ea = co_await std::move(ra);
    const std::error_code eb = co_await std::move(rb);
    stopper.join();
    EXPECT_EC(ea, std::errc::operation_canceled);
    EXPECT_EC(eb, std::errc::operation_canceled);
    CO_ASSERT_OK(co_await a.client.write(ws::message_type::text, "still open"));
    co_await expect_message(a.server, ws::message_type::text, "still open");
  }(ctx));
}

}  // namespace

namespace {

// A WebSocket used from another worker than its socket's: every operation refuses at once with wrong_loop and
// changes nothing, so the stream goes on on its own loop. (A write from the wrong thread used to fail its send and
// leave every later write failing; a read, every later read.)
TEST_P(ws_stream_test, operations_from_another_worker_are_refused_and_change_nothing) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  const bool ok = rt.block_on([](tern::runtime& rt) -> tern::task<bool> {
    co_await rt.switch_to(0);
    ws_pair p = co_await ws_over_tcp(rt.worker(0));
    co_await rt.switch_to(1);
    std::string m;
    const std::error_code w = co_await p.client.write(ws::message_type::text, "from worker 1");
    const std::error_code ping = co_await p.client.ping("x");
    const auto [r, t] = co_await p.server.read(m);
    const std::error_code closed = co_await p.server.close(ws::close_code::normal, "");
    ws::outbox box(1);
    const std::error_code queued = co_await p.server.write_from(box);
    co_await rt.switch_to(0);
    EXPECT_EC(w, tern::error::wrong_loop);
    EXPECT_EC(ping, tern::error::wrong_loop);
    EXPECT_EC(r, tern::error::wrong_loop);
    EXPECT_EC(closed, tern::error::wrong_loop);
    EXPECT_EC(queued, tern::error::wrong_loop);
    EXPECT_EC(box.sender().try_send(ws::message_type::text, "x"), tern::sync::error::closed);
    EXPECT_TRUE(p.client.is_open() && p.server.is_open());
    EXPECT_OK(co_await p.client.write(ws::message_type::text, "on worker 0 again"));
    co_await expect_message(p.server, ws::message_type::text, "on worker 0 again");
    EXPECT_OK(co_await p.server.write(ws::message_type::binary, "and back"));
    co_await expect_message(p.client, ws::message_type::binary, "and back");
    co_return true;
  }(rt));
  EXPECT_TRUE(ok);
}

}  // namespace
