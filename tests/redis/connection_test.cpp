// tern::redis against a real redis-server: connecting (TCP, Unix socket, by name), HELLO 3 and its options (AUTH,
// SETNAME, SELECT; RESP2 with a server that has no HELLO), commands and their conversions, server errors, close.
#include "redis/redis_support.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace tern_test;
using tern::task;

TERN_INSTANTIATE_BACKENDS(redis_test);

TEST_P(redis_test, set_and_get_over_tcp) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(*tern::io_context::current(), server.tcp_config());
    CO_ASSERT_OK(co_await conn.connect());
    EXPECT_EQ(conn.protocol(), 3);
    EXPECT_FALSE(conn.server_version().empty());
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
  }(server));
}

}  // namespace
