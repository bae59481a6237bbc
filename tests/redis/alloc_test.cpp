// Steady state of redis::connection: once a connection has carried a few hundred commands, a command costs no heap
// allocation: not its formatting (into the connection's output buffer), its slot in the queue, the parse of its
// reply, the conversion into a value the caller keeps (command_into a string with room, an integer), a timeout
// around it, a pipeline executed again, nor sixteen tasks pipelining at once. Checked on both backends against a
// real redis-server.
#include "counting_new.hpp"
#include "redis/redis_support.hpp"

#include <tern/sync/event.hpp>
#include <tern/sync/latch.hpp>

#include <string>

namespace {

using namespace tern_test;
using tern::task;
using namespace std::chrono_literals;

class redis_alloc_test : public redis_test {};
TERN_INSTANTIATE_BACKENDS(redis_alloc_test);

constexpr int warmup = 300;
constexpr int measured = 2000;

// One round: SET and GET of a 32-byte value, INCR, a command under a timeout; false on any wrong reply.
task<bool> round(redis::connection& conn, const std::string& key, const std::string& value, std::string& got,
                 std::int64_t& counter) {
  auto set = co_await conn.command_into(got, "SET", key, value);
  if (set.ec || got != "OK") co_return false;
  auto get = co_await conn.command_into(got, "GET", key);
  if (get.ec || got != value) co_return false;
  auto [ec, n] = co_await conn.command<std::int64_t>("INCR", "counter:" + key);
  if (ec || n != ++counter) co_return false;
  auto timed = co_await tern::with_timeout(conn.command<redis::ignore_t>("PING"), 5s);
  co_return !timed.ec;
}

TEST_P(redis_alloc_test, no_allocation_per_command_on_a_warm_connection) {
  std::size_t allocations = 0;
  bool ok = true;
  run_bounded(ctx, [](redis_server& server, std::size_t& allocations, bool& ok) -> task<void> {
    redis::connection conn(*tern::io_context::current(), server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    const std::string key = "the-key";
    const std::string value(32, 'v');
    std::string got;
    got.reserve(64);
    std::int64_t counter = 0;
    redis::pipeline p;
    p.push("SET", "p", value).push("GET", "p").push("INCR", "pc");
    for (int i = 0; i < warmup; ++i) {
      ok = ok && co_await round(conn, key, value, got, counter);
      ok = ok && !(co_await conn.execute(p)).ec;
    }
    start_counting();
    for (int i = 0; i < measured; ++i) {
      ok = ok && co_await round(conn, key, value, got, counter);
      ok = ok && !(co_await conn.execute(p)).ec;
    }
    allocations = stop_counting();
    ok = ok && p.reply(1).root().value == value;
    conn.close();
  }(server, allocations, ok));
  EXPECT_TRUE(ok);
  EXPECT_EQ(allocations, 0u) << "heap allocations over " << measured << " rounds";
}

task<void> pipelining_task(redis::connection& conn, int id, tern::sync::latch& warm, tern::sync::manual_reset_event& go,
                           tern::sync::latch& finished, bool& ok) {
  const std::string key = "task:" + std::to_string(id);
  const std::string value(32, static_cast<char>('a' + id));
  std::string got;
  got.reserve(64);
  std::int64_t counter = 0;
  for (int i = 0; i < warmup / 4; ++i) ok = ok && co_await round(conn, key, value, got, counter);
  warm.count_down();
  (void)co_await go.wait();
  for (int i = 0; i < measured / 8; ++i) ok = ok && co_await round(conn, key, value, got, counter);
  finished.count_down();
}

TEST_P(redis_alloc_test, no_allocation_per_command_with_sixteen_tasks_pipelining) {
  std::size_t allocations = 0;
  bool ok = true;
  run_bounded(ctx, [](redis_server& server, std::size_t& allocations, bool& ok) -> task<void> {
    tern::io_context& here = *tern::io_context::current();
    redis::connection conn(here, server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    constexpr int tasks = 16;
    tern::sync::latch warm(tasks);
    tern::sync::latch finished(tasks);
    tern::sync::manual_reset_event go;
    std::vector<tern::join_handle<void>> handles;
    for (int i = 0; i < tasks; ++i) handles.push_back(tern::spawn(here, pipelining_task(conn, i, warm, go, finished, ok)));
    (void)co_await warm.wait();
    start_counting();
    go.set();
    (void)co_await finished.wait();
    allocations = stop_counting();
    for (auto& h : handles) co_await std::move(h);
    conn.close();
  }(server, allocations, ok));
  EXPECT_TRUE(ok);
  EXPECT_EQ(allocations, 0u) << "heap allocations over " << measured * 2 << " rounds of 16 tasks";
}

}  // namespace
