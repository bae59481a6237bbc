// tern::redis against a real redis-server: connecting (TCP, Unix socket, by name), HELLO 3 and its options (AUTH,
// SETNAME, SELECT; RESP2 with a server that has no HELLO), every reply type and the conversions, server errors,
// reserved commands, large values, fail-fast and bounded waits without a server, close.
#include "redis/redis_support.hpp"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using namespace tern_test;
using tern::task;
using namespace std::chrono_literals;

TERN_INSTANTIATE_BACKENDS(redis_test);

TEST_P(redis_test, set_and_get_over_tcp) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(here(), server.tcp_config());
    CO_ASSERT_OK(co_await conn.connect());
    EXPECT_TRUE(conn.connected());
    EXPECT_EQ(conn.protocol(), 3);
    EXPECT_EQ(conn.server_version().substr(0, 2), "7.");
    auto set = co_await conn.command<std::string>("SET", "greeting", "hello");
    EXPECT_OK(set.ec);
    EXPECT_EQ(set.value, "OK");
    auto [ec, value] = co_await conn.command<std::string>("GET", "greeting");
    EXPECT_OK(ec);
    EXPECT_EQ(value, "hello");
    auto [iec, n] = co_await conn.command<std::int64_t>("INCRBY", "counter", 41);
    EXPECT_OK(iec);
    EXPECT_EQ(n, 41);
    conn.close();
    EXPECT_FALSE(conn.connected());
  }(server));
}

TEST_P(redis_test, over_a_unix_socket_and_by_name) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection local(here(), server.unix_config());
    CO_ASSERT_OK(co_await local.connect());
    EXPECT_OK((co_await local.command<redis::ignore_t>("SET", "k", "over unix")).ec);
    redis::config by_name = server.tcp_config();
    by_name.host = "localhost";
    redis::connection named(here(), by_name);
    CO_ASSERT_OK(co_await named.connect());
    auto [ec, v] = co_await named.command<std::string>("GET", "k");
    EXPECT_OK(ec);
    EXPECT_EQ(v, "over unix");
    local.close();
    named.close();
  }(server));
}

// DEBUG PROTOCOL makes the server answer with each RESP3 type in turn.
TEST_P(redis_test, every_reply_type_reaches_the_caller) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(here(), server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    auto type_of = [&](const char* what) -> task<redis::reply> {
      auto [ec, r] = co_await conn.command("DEBUG", "PROTOCOL", what);
      EXPECT_OK(ec) << what;
      co_return std::move(r);
    };
    redis::reply r = co_await type_of("string");
    EXPECT_EQ(r.type(), redis::resp::type::blob_string);
    EXPECT_EQ(r.root().value, "Hello World");
    r = co_await type_of("integer");
    EXPECT_EQ(r.type(), redis::resp::type::integer);
    EXPECT_EQ(r.root().integer, 12345);
    r = co_await type_of("double");
    EXPECT_EQ(r.type(), redis::resp::type::double_type);
    EXPECT_DOUBLE_EQ(r.root().number, 3.141);
    r = co_await type_of("bignum");
    EXPECT_EQ(r.type(), redis::resp::type::big_number);
    EXPECT_EQ(r.root().value, "1234567999999999999999999999999999999");
    r = co_await type_of("null");
    EXPECT_TRUE(r.is_null());
    r = co_await type_of("true");
    EXPECT_EQ(r.type(), redis::resp::type::boolean);
    EXPECT_EQ(r.root().integer, 1);
    r = co_await type_of("false");
    EXPECT_EQ(r.root().integer, 0);
    r = co_await type_of("verbatim");
    EXPECT_EQ(r.type(), redis::resp::type::verbatim_string);
    EXPECT_EQ(r.root().format, "txt");
    EXPECT_EQ(r.root().value, "This is a verbatim\nstring");
    r = co_await type_of("array");
    EXPECT_EQ(r.type(), redis::resp::type::array);
    EXPECT_EQ(r.root().size, 3u);
    r = co_await type_of("set");
    EXPECT_EQ(r.type(), redis::resp::type::set);
    r = co_await type_of("map");
    EXPECT_EQ(r.type(), redis::resp::type::map);
    auto m = r.to<std::map<std::int64_t, bool>>();
    EXPECT_OK(m.ec);
    EXPECT_EQ(m.value, (std::map<std::int64_t, bool>{{0, false}, {1, true}, {2, false}}));
    // An attribute before the value: kept by reply, skipped by the typed conversions.
    r = co_await type_of("attrib");
    EXPECT_EQ(r.node(0).type, redis::resp::type::attribute);
    EXPECT_TRUE(r.node(0).in_attribute);
    EXPECT_EQ(r.root().value, "Some real reply following the attribute");
    auto [aec, text] = co_await conn.command<std::string>("DEBUG", "PROTOCOL", "attrib");
    EXPECT_OK(aec);
    EXPECT_EQ(text, "Some real reply following the attribute");
    // A push, out of band, then the command's own reply: the reply reaches the command, the push does not.
    auto [pec, after_push] = co_await conn.command<std::string>("DEBUG", "PROTOCOL", "push");
    EXPECT_OK(pec);
    EXPECT_EQ(after_push, "Some real reply following the push reply");
    // Simple strings and errors.
    auto [sec, pong] = co_await conn.command<std::string>("PING");
    EXPECT_OK(sec);
    EXPECT_EQ(pong, "PONG");
    auto err = co_await conn.command("NO-SUCH-COMMAND");
    EXPECT_EC(err.ec, redis::error::server_error);
    EXPECT_TRUE(redis::is_server_error(err.ec));
    EXPECT_TRUE(err.value.is_error());
    EXPECT_EQ(err.message.substr(0, 19), "ERR unknown command");
    conn.close();
  }(server));
}

TEST_P(redis_test, replies_convert_to_strings_numbers_optionals_and_containers) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(here(), server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    redis::pipeline setup;
    setup.push("SET", "number", 123456);
    setup.push("RPUSH", "list", std::vector<std::string>{"a", "b", "c"});
    setup.push("HSET", "hash", std::map<std::string, std::string>{{"f1", "v1"}, {"f2", "v2"}});
    setup.push("SADD", "set", "x", "y");
    setup.push("SET", "float", 2.5);
    CO_ASSERT_OK((co_await conn.execute(setup)).ec);

    auto [nec, n] = co_await conn.command<int>("GET", "number");  // a bulk string holding an integer
    EXPECT_OK(nec);
    EXPECT_EQ(n, 123456);
    auto [sec, small] = co_await conn.command<std::int16_t>("GET", "number");
    EXPECT_EC(sec, redis::error::not_a_number);  // out of the type's range
    auto [dec, d] = co_await conn.command<double>("INCRBYFLOAT", "float", 0.25);
    EXPECT_OK(dec);
    EXPECT_DOUBLE_EQ(d, 2.75);
    auto [oec, missing] = co_await conn.command<std::optional<std::string>>("GET", "no-such-key");
    EXPECT_OK(oec);
    EXPECT_FALSE(missing.has_value());
    auto [mec, must] = co_await conn.command<std::string>("GET", "no-such-key");
    EXPECT_EC(mec, redis::error::null_value);
    auto [lec, list] = co_await conn.command<std::vector<std::string>>("LRANGE", "list", 0, -1);
    EXPECT_OK(lec);
    EXPECT_EQ(list, (std::vector<std::string>{"a", "b", "c"}));
    auto [hec, hash] = co_await conn.command<std::unordered_map<std::string, std::string>>("HGETALL", "hash");
    EXPECT_OK(hec);
    EXPECT_EQ(hash, (std::unordered_map<std::string, std::string>{{"f1", "v1"}, {"f2", "v2"}}));
    auto [smec, members] = co_await conn.command<std::set<std::string>>("SMEMBERS", "set");
    EXPECT_OK(smec);
    EXPECT_EQ(members, (std::set<std::string>{"x", "y"}));
    auto [bec, exists] = co_await conn.command<bool>("EXISTS", "list");
    EXPECT_OK(bec);
    EXPECT_TRUE(exists);
    auto [vec, mixed] = co_await conn.command<std::vector<std::optional<std::string>>>("MGET", "number", "none");
    EXPECT_OK(vec);
    EXPECT_EQ(mixed, (std::vector<std::optional<std::string>>{"123456", std::nullopt}));
    auto [tec, wrong] = co_await conn.command<std::int64_t>("LRANGE", "list", 0, -1);
    EXPECT_EC(tec, redis::error::unexpected_type);
    // command_into reuses the caller's value.
    std::string into;
    into.reserve(64);
    const char* storage = into.data();
    auto r = co_await conn.command_into(into, "LINDEX", "list", 1);
    EXPECT_OK(r.ec);
    EXPECT_EQ(into, "b");
    EXPECT_EQ(into.data(), storage);
    conn.close();
  }(server));
}

TEST_P(redis_test, server_errors_keep_their_text_and_kind) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(here(), server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    EXPECT_OK((co_await conn.command<redis::ignore_t>("SET", "text", "v")).ec);
    auto wrong = co_await conn.command<std::int64_t>("LPUSH", "text", "x");
    EXPECT_EC(wrong.ec, redis::error::wrong_type);
    EXPECT_TRUE(wrong.ec == redis::condition::server_error);
    EXPECT_EQ(wrong.message, "WRONGTYPE Operation against a key holding the wrong kind of value");
    auto arity = co_await conn.command<redis::ignore_t>("GET");
    EXPECT_EC(arity.ec, redis::error::server_error);
    EXPECT_NE(arity.message.find("wrong number of arguments"), std::string::npos);
    // The connection goes on.
    auto [ec, v] = co_await conn.command<std::string>("GET", "text");
    EXPECT_OK(ec);
    EXPECT_EQ(v, "v");
    conn.close();
  }(server));
}

TEST_P(redis_test, commands_that_would_desynchronise_the_connection_are_refused) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(here(), server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    for (const char* name : {"SUBSCRIBE", "psubscribe", "Monitor", "HELLO", "RESET", "MULTI", "exec", "DISCARD"}) {
      auto r = co_await conn.command(name, "x");
      EXPECT_EC(r.ec, redis::error::reserved_command) << name;
      EXPECT_EC(r.ec, std::errc::invalid_argument) << name;
    }
    redis::pipeline p;
    p.push("SUBSCRIBE", "x");
    EXPECT_EC((co_await conn.execute(p)).ec, redis::error::reserved_command);
    auto [ec, pong] = co_await conn.command<std::string>("PING");
    EXPECT_OK(ec);
    EXPECT_EQ(pong, "PONG");
    EXPECT_EQ(conn.stats().commands_sent, 1u);  // the PING alone: the refused ones were never formatted
    conn.close();
  }(server));
}

// CLIENT REPLY OFF and SKIP make the server leave out replies: on a connection whose replies are matched to its
// requests in order, every reply after them would go to the wrong request.
TEST_P(redis_test, client_reply_off_and_skip_are_refused) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(here(), server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    for (const char* mode : {"SKIP", "off"}) {
      auto r = co_await tern::with_timeout(conn.command("client", "Reply", mode), 500ms);
      EXPECT_EC(r.ec, redis::error::reserved_command) << mode;
    }
    redis::pipeline p;
    p.push("CLIENT", "REPLY", "SKIP");
    p.push("PING");
    EXPECT_EC((co_await tern::with_timeout(conn.execute(p), 500ms)).ec, redis::error::reserved_command);
    EXPECT_OK((co_await tern::with_timeout(conn.command<redis::ignore_t>("SET", "a", "1"), 500ms)).ec);
    auto [ec, a] = co_await tern::with_timeout(conn.command<std::string>("GET", "a"), 500ms);
    EXPECT_OK(ec);
    EXPECT_EQ(a, "1");
    auto [lec, list] = co_await tern::with_timeout(conn.command<std::string>("CLIENT", "LIST"), 500ms);
    EXPECT_OK(lec);  // other CLIENT subcommands go through
    conn.close();
  }(server));
}

TEST_P(redis_test, a_64_mib_value_goes_and_comes_back_whole) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(here(), server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    const std::vector<char> pattern = make_pattern(64 << 20);
    const std::string_view big(pattern.data(), pattern.size());
    EXPECT_OK((co_await conn.command<redis::ignore_t>("SET", "big", big)).ec);
    auto [ec, back] = co_await conn.command<std::string>("GET", "big");
    EXPECT_OK(ec);
    EXPECT_EQ(back.size(), big.size());
    EXPECT_EQ(fnv1a(back), fnv1a(big));
    auto [lec, length] = co_await conn.command<std::size_t>("STRLEN", "big");
    EXPECT_OK(lec);
    EXPECT_EQ(length, big.size());
    conn.close();
  }(server), 60s);
}

TEST_P(redis_test, a_value_over_the_bulk_limit_fails_its_command_and_the_connection_recovers) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::config cfg = server.unix_config();
    cfg.limits.max_bulk = 1000;
    redis::connection conn(here(), cfg);
    CO_ASSERT_OK(co_await conn.connect());
    EXPECT_OK((co_await conn.command<redis::ignore_t>("SET", "big", std::string(1001, 'x'))).ec);
    auto r = co_await conn.command<std::string>("GET", "big");
    EXPECT_EC(r.ec, redis::error::bulk_too_large);
    auto [ec, n] = co_await conn.command<std::size_t>("STRLEN", "big");  // waits for the new connection
    EXPECT_OK(ec);
    EXPECT_EQ(n, 1001u);
    EXPECT_EQ(conn.stats().connects, 2u);
    conn.close();
  }(server));
}

TEST_P(redis_test, client_name_and_database) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::config cfg = server.tcp_config();
    cfg.client_name = "tern-test";
    cfg.database = 3;
    redis::connection conn(here(), cfg);
    CO_ASSERT_OK(co_await conn.connect());
    auto [ec, name] = co_await conn.command<std::string>("CLIENT", "GETNAME");
    EXPECT_OK(ec);
    EXPECT_EQ(name, "tern-test");
    EXPECT_OK((co_await conn.command<redis::ignore_t>("SET", "in-db-3", "yes")).ec);
    redis::connection db0(here(), server.tcp_config());
    CO_ASSERT_OK(co_await db0.connect());
    auto [oec, in0] = co_await db0.command<std::optional<std::string>>("GET", "in-db-3");
    EXPECT_OK(oec);
    EXPECT_FALSE(in0.has_value());
    EXPECT_OK((co_await db0.command<redis::ignore_t>("SELECT", 3)).ec);
    auto [tec, in3] = co_await db0.command<std::string>("GET", "in-db-3");
    EXPECT_OK(tec);
    EXPECT_EQ(in3, "yes");
    conn.close();
    db0.close();
  }(server));
}

class redis_auth_test : public backend_test {
 protected:
  redis_server server{{"--requirepass", "s3cret", "--user", "app", "on", ">app-pass", "~*", "&*", "+@all"}};
};
TERN_INSTANTIATE_BACKENDS(redis_auth_test);

TEST_P(redis_auth_test, a_wrong_password_is_refused_with_the_servers_words) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::config cfg = server.unix_config();
    cfg.password = "wrong";
    cfg.reconnect_min = 10ms;
    redis::connection conn(here(), cfg);
    EXPECT_EC(co_await conn.connect(), redis::error::wrong_pass);
    EXPECT_FALSE(conn.connected());
    conn.close();
    redis::config none = server.unix_config();
    none.fail_fast = true;
    redis::connection anonymous(here(), none);
    EXPECT_EC(co_await anonymous.connect(), redis::error::no_auth);
    auto r = co_await anonymous.command("PING");
    EXPECT_EC(r.ec, redis::error::not_connected);
    anonymous.close();
  }(server));
}

TEST_P(redis_auth_test, the_right_password_and_an_acl_user) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::config cfg = server.unix_config();
    cfg.password = "s3cret";
    redis::connection conn(here(), cfg);
    CO_ASSERT_OK(co_await conn.connect());
    auto [ec, who] = co_await conn.command<std::string>("ACL", "WHOAMI");
    EXPECT_OK(ec);
    EXPECT_EQ(who, "default");
    conn.close();
    cfg.username = "app";
    cfg.password = "app-pass";
    redis::connection app(here(), cfg);
    CO_ASSERT_OK(co_await app.connect());
    auto [aec, user] = co_await app.command<std::string>("ACL", "WHOAMI");
    EXPECT_OK(aec);
    EXPECT_EQ(user, "app");
    app.close();
  }(server));
}

// A server without HELLO (as before Redis 6): RESP2, with AUTH, CLIENT SETNAME and SELECT sent on their own.
class redis_resp2_test : public backend_test {
 protected:
  redis_server server{{"--rename-command", "HELLO", "\"\"", "--requirepass", "pw"}};
};
TERN_INSTANTIATE_BACKENDS(redis_resp2_test);

TEST_P(redis_resp2_test, falls_back_to_resp2) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::config cfg = server.tcp_config();
    cfg.password = "pw";
    cfg.client_name = "old-school";
    cfg.database = 2;
    redis::connection conn(here(), cfg);
    CO_ASSERT_OK(co_await conn.connect());
    EXPECT_EQ(conn.protocol(), 2);
    auto [ec, name] = co_await conn.command<std::string>("CLIENT", "GETNAME");
    EXPECT_OK(ec);
    EXPECT_EQ(name, "old-school");
    EXPECT_OK((co_await conn.command<redis::ignore_t>("HSET", "h", "f", "v")).ec);
    auto [hec, hash] = co_await conn.command<std::map<std::string, std::string>>("HGETALL", "h");  // an array in RESP2
    EXPECT_OK(hec);
    EXPECT_EQ(hash, (std::map<std::string, std::string>{{"f", "v"}}));
    auto [nec, missing] = co_await conn.command<std::optional<std::string>>("GET", "none");  // $-1
    EXPECT_OK(nec);
    EXPECT_FALSE(missing);
    auto [dec, db] = co_await conn.command<redis::reply>("CLIENT", "INFO");
    EXPECT_OK(dec);
    EXPECT_NE(db.root().value.find("db=2"), std::string_view::npos);
    EXPECT_EC((co_await conn.subscribe("news")).ec, redis::error::resp3_required);
    conn.close();
  }(server));
}

TEST_P(redis_test, without_a_server_commands_fail_fast_or_wait_a_bounded_time) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    server.kill();
    redis::config cfg = server.tcp_config();
    cfg.fail_fast = true;
    redis::connection fast(here(), cfg);
    EXPECT_EC(co_await fast.connect(), std::errc::connection_refused);
    auto r = co_await fast.command("PING");
    EXPECT_EC(r.ec, redis::error::not_connected);
    fast.close();

    cfg.fail_fast = false;
    cfg.disconnected_wait = 50ms;
    redis::connection waiting(here(), cfg);
    EXPECT_EC(co_await waiting.connect(), std::errc::connection_refused);
    const auto start = clock_type::now();
    auto w = co_await waiting.command("PING");
    EXPECT_EC(w.ec, redis::error::not_connected);
    EXPECT_GE(clock_type::now() - start, 50ms);
    waiting.close();
  }(server));
}

TEST_P(redis_test, a_command_waiting_for_a_connection_is_sent_once_there_is_one) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    server.kill();
    redis::config cfg = server.tcp_config();
    cfg.reconnect_min = 5ms;
    cfg.reconnect_max = 20ms;
    redis::connection conn(here(), cfg);
    EXPECT_EC(co_await conn.connect(), std::errc::connection_refused);
    auto pending = tern::spawn(here(), conn.command<std::string>("ECHO", "late"));
    co_await tern::sleep_for(30ms);
    EXPECT_FALSE(pending.done());
    server.start();
    auto [ec, v] = co_await std::move(pending);
    EXPECT_OK(ec);
    EXPECT_EQ(v, "late");
    EXPECT_TRUE(conn.connected());
    conn.close();
  }(server));
}

TEST_P(redis_test, close_ends_what_is_pending) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(here(), server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    auto sleeping = tern::spawn(here(), conn.command("DEBUG", "SLEEP", "0.2"));
    auto after = tern::spawn(here(), conn.command("PING"));
    auto message = tern::spawn(here(), conn.receive());
    co_await tern::sleep_for(20ms);
    conn.close();
    EXPECT_EC((co_await std::move(sleeping)).ec, redis::error::closed);
    EXPECT_EC((co_await std::move(after)).ec, redis::error::closed);
    EXPECT_EC((co_await std::move(message)).ec, tern::sync::error::closed);
    EXPECT_EC((co_await conn.command("PING")).ec, redis::error::closed);
    EXPECT_EC(co_await conn.connect(), redis::error::closed);
  }(server));
}

}  // namespace
