// tern::redis against a server written here (a tern acceptor that answers with bytes the test chooses): replies that
// break the protocol, an unsolicited reply, blob errors, replies cut into single bytes, a server that stops
// answering (the health check), and a server that refuses RESP3 with NOPROTO.
#include "redis/redis_support.hpp"

#include <functional>
#include <string>
#include <vector>

namespace {

using namespace tern_test;
using tern::task;
using namespace std::chrono_literals;

class redis_fake_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(redis_fake_test);

// What the server answers to a command (its arguments); nullopt: nothing.
using answer_fn = std::function<std::optional<std::string>(const std::vector<std::string>& command, int connection)>;

const std::string hello_reply = "%2\r\n+server\r\n+fake\r\n+version\r\n+0.1\r\n";

struct fake_options {
  bool byte_by_byte = false;  // each answer written one byte per write
};

// Serves one connection: reads commands (arrays of bulk strings), answers each.
task<void> serve_connection(tern::net::tcp_socket s, answer_fn answer, int id, fake_options o) {
  redis::resp::parser parser;
  std::string in;
  std::vector<std::string> command;
  char buf[4096];
  for (;;) {
    auto [ec, n] = co_await s.read_some(tern::mutable_buffer(buf, sizeof buf));
    if (ec) co_return;
    in.append(buf, n);
    for (;;) {
      const auto r = parser.next(in);
      if (r.what != redis::resp::parser::status::node) break;
      if (r.n.depth == 1) command.emplace_back(r.n.value);
      in.erase(0, r.consumed);
      if (!parser.at_reply_boundary()) continue;
      std::optional<std::string> out = answer(command, id);
      command.clear();
      if (!out) continue;
      if (o.byte_by_byte) {
        for (char c : *out) {
          if ((co_await s.write_all(tern::const_buffer(&c, 1))).ec) co_return;
          co_await tern::yield();
        }
      } else if ((co_await s.write_all(tern::const_buffer(*out))).ec) {
        co_return;
      }
    }
  }
}

// Accepts connections until the acceptor is closed; counts them.
task<void> serve(tern::net::tcp_acceptor& acceptor, answer_fn answer, int& connections, fake_options o = {}) {
  for (;;) {
    auto [ec, s] = co_await acceptor.accept();
    if (ec) co_return;
    tern::spawn(here(), serve_connection(std::move(s), answer, connections++, o)).detach();
  }
}

redis::config config_for(const tern::net::endpoint& ep) {
  redis::config c;
  c.host = "127.0.0.1";
  c.port = ep.port();
  c.reconnect_min = 5ms;
  c.reconnect_max = 10ms;
  return c;
}

// HELLO answered; then each command gets answer(command).
answer_fn with_hello(std::function<std::optional<std::string>(const std::vector<std::string>&, int)> f) {
  return [f](const std::vector<std::string>& c, int id) -> std::optional<std::string> {
    if (!c.empty() && c[0] == "HELLO") return hello_reply;
    return f(c, id);
  };
}

TEST_P(redis_fake_test, a_malformed_reply_fails_its_command_and_the_connection_recovers) {
  run_bounded(ctx, []() -> task<void> {
    tern::net::tcp_acceptor acceptor(here());
    const tern::net::endpoint ep = listen_loopback(acceptor);
    int connections = 0;
    auto server = tern::spawn(here(), serve(acceptor, with_hello([](const std::vector<std::string>& c, int) {
      if (c[0] == "BAD") return std::string(":12x\r\n");
      return "+" + c.back() + "\r\n";
    }), connections));
    redis::connection conn(here(), config_for(ep));
    CO_ASSERT_OK(co_await conn.connect());
    EXPECT_EQ(conn.server_version(), "0.1");
    auto after = tern::spawn(here(), conn.command<std::string>("ECHO", "after"));  // sent with BAD
    auto bad = co_await conn.command<std::string>("BAD");
    EXPECT_EC(bad.ec, redis::error::protocol_error);
    EXPECT_EC((co_await std::move(after)).ec, redis::error::connection_lost);
    auto [ec, v] = co_await conn.command<std::string>("ECHO", "again");
    EXPECT_OK(ec);
    EXPECT_EQ(v, "again");
    EXPECT_EQ(connections, 2);
    conn.close();
    acceptor.close();
    co_await std::move(server);
  }());
}

TEST_P(redis_fake_test, a_reply_nobody_asked_for_breaks_the_connection) {
  run_bounded(ctx, []() -> task<void> {
    tern::net::tcp_acceptor acceptor(here());
    const tern::net::endpoint ep = listen_loopback(acceptor);
    int connections = 0;
    auto server = tern::spawn(here(), serve(acceptor, with_hello([](const std::vector<std::string>& c, int id) {
      if (id == 0 && c[0] == "TWICE") return std::string("+one\r\n+two\r\n");
      return "+" + c.back() + "\r\n";
    }), connections));
    redis::connection conn(here(), config_for(ep));
    CO_ASSERT_OK(co_await conn.connect());
    auto [ec, one] = co_await conn.command<std::string>("TWICE");
    EXPECT_OK(ec);
    EXPECT_EQ(one, "one");
    while (conn.stats().connects < 2) co_await tern::sleep_for(1ms);
    auto [eec, v] = co_await conn.command<std::string>("ECHO", "fine");
    EXPECT_OK(eec);
    EXPECT_EQ(v, "fine");
    conn.close();
    acceptor.close();
    co_await std::move(server);
  }());
}

TEST_P(redis_fake_test, blob_errors_and_replies_in_single_bytes) {
  run_bounded(ctx, []() -> task<void> {
    tern::net::tcp_acceptor acceptor(here());
    const tern::net::endpoint ep = listen_loopback(acceptor);
    int connections = 0;
    auto server = tern::spawn(here(), serve(acceptor, with_hello([](const std::vector<std::string>& c, int) {
      if (c[0] == "BLOB") return std::string("!21\r\nSYNTAX invalid syntax\r\n");
      if (c[0] == "MAP") return std::string("%2\r\n$1\r\na\r\n*2\r\n:1\r\n:2\r\n$1\r\nb\r\n*0\r\n");
      return "$" + std::to_string(c.back().size()) + "\r\n" + c.back() + "\r\n";
    }), connections, {.byte_by_byte = true}));
    redis::connection conn(here(), config_for(ep));
    CO_ASSERT_OK(co_await conn.connect());
    auto blob = co_await conn.command<std::string>("BLOB");
    EXPECT_EC(blob.ec, redis::error::server_error);
    EXPECT_EQ(blob.message, "SYNTAX invalid syntax");
    auto [mec, m] = co_await conn.command<std::map<std::string, std::vector<int>>>("MAP");
    EXPECT_OK(mec);
    EXPECT_EQ(m, (std::map<std::string, std::vector<int>>{{"a", {1, 2}}, {"b", {}}}));
    // The arguments of a spawned command must outlive it, like the buffers of any operation.
    std::vector<std::string> texts;
    for (int i = 0; i < 20; ++i) texts.push_back(std::to_string(i * 997));
    std::vector<tern::join_handle<redis::result<std::string>>> echoes;
    for (int i = 0; i < 20; ++i) echoes.push_back(tern::spawn(here(), conn.command<std::string>("ECHO", texts[i])));
    for (int i = 0; i < 20; ++i) EXPECT_EQ((co_await std::move(echoes[i])).value, std::to_string(i * 997));
    conn.close();
    acceptor.close();
    co_await std::move(server);
  }());
}

TEST_P(redis_fake_test, a_server_that_stops_answering_is_found_out_by_the_health_check) {
  run_bounded(ctx, []() -> task<void> {
    tern::net::tcp_acceptor acceptor(here());
    const tern::net::endpoint ep = listen_loopback(acceptor);
    int connections = 0;
    // The first connection answers HELLO and nothing else; later ones answer everything.
    auto server = tern::spawn(here(), serve(acceptor, with_hello([](const std::vector<std::string>& c, int id) -> std::optional<std::string> {
      if (id == 0) return std::nullopt;
      return "+" + c.back() + "\r\n";
    }), connections));
    redis::config cfg = config_for(ep);
    cfg.health_interval = 20ms;
    redis::connection conn(here(), cfg);
    CO_ASSERT_OK(co_await conn.connect());
    const auto start = clock_type::now();
    auto stuck = co_await conn.command<std::string>("ECHO", "into the void");
    EXPECT_EC(stuck.ec, redis::error::connection_lost);
    EXPECT_LT(clock_type::now() - start, 2s);
    EXPECT_GE(conn.stats().health_pings, 1u);
    auto [ec, v] = co_await conn.command<std::string>("ECHO", "heard");
    EXPECT_OK(ec);
    EXPECT_EQ(v, "heard");
    // An idle healthy connection just pings (every other interval: a PONG is input). Two more pings take about
    // 80 ms; waited for up to 5 s, since a loaded machine can leave the loop unscheduled for a while.
    const std::uint64_t pings = conn.stats().health_pings;
    for (int i = 0; i < 250 && conn.stats().health_pings < pings + 2; ++i) co_await tern::sleep_for(20ms);
    EXPECT_TRUE(conn.connected());
    EXPECT_GE(conn.stats().health_pings, pings + 2);
    EXPECT_EQ(conn.stats().connects, 2u);
    conn.close();
    acceptor.close();
    co_await std::move(server);
  }());
}

TEST_P(redis_fake_test, noproto_means_resp2) {
  run_bounded(ctx, []() -> task<void> {
    tern::net::tcp_acceptor acceptor(here());
    const tern::net::endpoint ep = listen_loopback(acceptor);
    int connections = 0;
    auto server = tern::spawn(here(), serve(acceptor, [](const std::vector<std::string>& c, int) -> std::optional<std::string> {
      if (c[0] == "HELLO") return std::string("-NOPROTO sorry, this protocol version is not supported\r\n");
      return "+" + c.back() + "\r\n";
    }, connections));
    redis::connection conn(here(), config_for(ep));
    CO_ASSERT_OK(co_await conn.connect());
    EXPECT_EQ(conn.protocol(), 2);
    auto [ec, v] = co_await conn.command<std::string>("ECHO", "two");
    EXPECT_OK(ec);
    EXPECT_EQ(v, "two");
    conn.close();
    acceptor.close();
    co_await std::move(server);
  }());
}

TEST_P(redis_fake_test, a_server_that_never_finishes_hello_runs_into_connect_timeout) {
  run_bounded(ctx, []() -> task<void> {
    tern::net::tcp_acceptor acceptor(here());
    const tern::net::endpoint ep = listen_loopback(acceptor);
    int connections = 0;
    auto server = tern::spawn(here(), serve(acceptor, [](const std::vector<std::string>&, int) -> std::optional<std::string> {
      return std::nullopt;
    }, connections));
    redis::config cfg = config_for(ep);
    cfg.connect_timeout = 30ms;
    redis::connection conn(here(), cfg);
    EXPECT_EC(co_await conn.connect(), tern::error::timed_out);
    conn.close();
    acceptor.close();
    co_await std::move(server);
  }());
}

}  // namespace
