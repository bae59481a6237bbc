// Pools on both backends: 10000 queries from 200 tasks on a runtime of two workers through a pool of 8, every
// result checked and the bound kept; the wait queue's timeout; connections that come back dirty (in a transaction,
// listening, with a cancelled query in flight) cleaned before anyone else gets them; a connection the server
// closed replaced; and the server restarted under load: every query has its outcome, and the pool recovers.
#include "pg_support.hpp"

#include <tern/pg/pool.hpp>

#include <atomic>
#include <filesystem>
#include <thread>

namespace {

using namespace tern_test;
using namespace tern_test::pg;

class pg_pool_test : public pg_test {};
TERN_INSTANTIATE_BACKENDS(pg_pool_test);

TEST_P(pg_pool_test, ten_thousand_queries_from_two_hundred_tasks_on_two_workers_through_eight_connections) {
  pgl::pool dbpool({.conninfo = db().socket_conninfo(), .max_size = 8});
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  std::atomic<int> checked{0};
  std::atomic<std::size_t> most{0};
  constexpr int tasks = 200, each = 50;
  rt.block_on([](tern::runtime& rt, pgl::pool& dbpool, std::atomic<int>& checked,
                 std::atomic<std::size_t>& most) -> tern::task<void> {
    std::vector<tern::join_handle<void>> handles;
    for (int task = 0; task < tasks; ++task) {
      handles.push_back(rt.spawn_on(static_cast<std::size_t>(task % 2), [](pgl::pool& dbpool, int task,
                                                                          std::atomic<int>& checked,
                                                                          std::atomic<std::size_t>& most)
                                                                           -> tern::task<void> {
        for (int i = 0; i < each; ++i) {
          const int v = task * each + i;
          auto [ec, r] = co_await dbpool.query("SELECT $1::int4 + 1, pg_backend_pid()", v);
          PG_ASSERT_OK(ec, r);
          EXPECT_EQ(r[0][0].as<int>(), v + 1);
          checked.fetch_add(1, std::memory_order_relaxed);
          const std::size_t size = dbpool.stats().size;
          std::size_t seen = most.load();
          while (size > seen && !most.compare_exchange_weak(seen, size)) {
          }
        }
      }(dbpool, task, checked, most)));
    }
    for (auto& h : handles) co_await std::move(h);
  }(rt, dbpool, checked, most));
  EXPECT_EQ(checked.load(), tasks * each);
  EXPECT_LE(most.load(), 8u);
  const pgl::pool_stats s = dbpool.stats();
  EXPECT_LE(s.connects, 8u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(s.waiting, 0u);
  dbpool.close();
  rt.shutdown(std::chrono::seconds(5));
}

TEST_P(pg_pool_test, a_waiter_gives_up_after_the_acquire_timeout) {
  run_bounded(ctx, [](pg_pool_test& t, tern::io_context&) -> tern::task<void> {
    pgl::pool dbpool({.conninfo = t.db().socket_conninfo(), .max_size = 1, .acquire_timeout = 100ms});
    auto [ec, held] = co_await dbpool.acquire();
    CO_ASSERT_OK(ec);
    const auto start = clock_type::now();
    auto [wec, none] = co_await dbpool.acquire();
    EXPECT_EC(wec, tern::error::timed_out);
    EXPECT_GE(clock_type::now() - start, 90ms);
    EXPECT_EQ(dbpool.stats().timeouts, 1u);
    EXPECT_EQ(dbpool.stats().waiting, 0u);
    // Given back, it goes to the next waiter.
    auto next = tern::spawn(*tern::io_context::current(), dbpool.acquire());
    co_await tern::sleep_for(10ms);
    held = pgl::pooled_connection();
    auto [nec, lease] = co_await std::move(next);
    EXPECT_OK(nec);
    EXPECT_EQ(dbpool.stats().connects, 1u);
  }(*this, ctx));
}

TEST_P(pg_pool_test, connections_come_back_clean) {
  run_bounded(ctx, [](pg_pool_test& t, tern::io_context&) -> tern::task<void> {
    pgl::pool dbpool({.conninfo = t.db().socket_conninfo(), .max_size = 1});
    int pid = 0;
    {
      auto [ec, c] = co_await dbpool.acquire();
      CO_ASSERT_OK(ec);
      pid = c->backend_pid();
      // A LISTEN, and a transaction begun with a query and left aborted.
      CO_ASSERT_OK(co_await c->listen("pool_channel"));
      CO_ASSERT_OK(co_await c->execute("BEGIN"));
      auto [qec, r] = co_await c->query("SELECT 1 / 0");
      EXPECT_EC(qec, pgl::sqlstate::division_by_zero);
      EXPECT_TRUE(c->in_transaction());
    }
    {
      auto [ec, c] = co_await dbpool.acquire();
      CO_ASSERT_OK(ec);
      EXPECT_EQ(c->backend_pid(), pid) << "the same connection, cleaned";
      EXPECT_FALSE(c->in_transaction());
      EXPECT_EQ(co_await scalar<int>(*c, "SELECT 8"), 8);
      EXPECT_EQ(co_await scalar<std::int64_t>(*c, "SELECT count(*) FROM pg_listening_channels()"), 0);
      // A query abandoned by its task (a deadline) is still in flight when the lease ends.
      auto [tec, tr] = co_await tern::with_timeout(c->query("SELECT pg_sleep(60)"), 50ms);
      EXPECT_EC(tec, tern::error::timed_out);
    }
    auto [ec, c] = co_await dbpool.acquire();
    CO_ASSERT_OK(ec);
    EXPECT_EQ(c->backend_pid(), pid);
    const auto start = clock_type::now();
    EXPECT_EQ(co_await scalar<int>(*c, "SELECT 9"), 9);
    EXPECT_LT(clock_type::now() - start, 20s);
    EXPECT_EQ(dbpool.stats().dropped, 0u);
  }(*this, ctx), 60s);
}

TEST_P(pg_pool_test, a_connection_whose_stream_outlives_the_lease_is_not_lent_again) {
  run_bounded(ctx, [](pg_pool_test& t, tern::io_context&) -> tern::task<void> {
    pgl::pool dbpool({.conninfo = t.db().socket_conninfo(), .max_size = 1});
    int pid = 0;
    std::optional<pgl::row_stream> kept;
    {
      auto [ec, c] = co_await dbpool.acquire();
      CO_ASSERT_OK(ec);
      pid = c->backend_pid();
      auto [sec, rows] = co_await c->stream("SELECT generate_series(1, 3)");
      CO_ASSERT_OK(sec);
      int count = 0;
      for (;;) {
        auto [rec, row] = co_await rows.next();
        if (rec == tern::error::eof) break;
        CO_ASSERT_OK(rec);
        ++count;
      }
      EXPECT_EQ(count, 3);
      kept.emplace(std::move(rows));  // the stream, ended, outlives the lease
    }
    // The connection is not idle in the pool while the stream holds its state: the next lease is another one.
    auto [ec, c] = co_await dbpool.acquire();
    CO_ASSERT_OK(ec);
    EXPECT_NE(c->backend_pid(), pid);
    EXPECT_EQ(dbpool.stats().dropped, 1u);
    EXPECT_EQ(co_await scalar<int>(*c, "SELECT 7"), 7);
    kept.reset();
  }(*this, ctx), 60s);
}

TEST_P(pg_pool_test, a_connection_the_server_closed_is_replaced) {
  run_bounded(ctx, [](pg_pool_test& t, tern::io_context&) -> tern::task<void> {
    pgl::pool dbpool({.conninfo = t.db().socket_conninfo(), .max_size = 2});
    int pid = 0;
    {
      auto [ec, c] = co_await dbpool.acquire();
      CO_ASSERT_OK(ec);
      pid = c->backend_pid();
    }
    pgl::connection admin = co_await connect_to(*tern::io_context::current(), t.db().socket_conninfo());
    EXPECT_TRUE(co_await scalar<bool>(admin, "SELECT pg_terminate_backend($1)", pid));
    co_await tern::sleep_for(50ms);
    auto [ec, c] = co_await dbpool.acquire();
    CO_ASSERT_OK(ec);
    EXPECT_NE(c->backend_pid(), pid);
    EXPECT_EQ(co_await scalar<int>(*c, "SELECT 10"), 10);
    EXPECT_EQ(dbpool.stats().dropped, 1u);
    EXPECT_EQ(dbpool.stats().connects, 2u);
    // A connection that breaks while lent is dropped when it comes back.
    EXPECT_TRUE(co_await scalar<bool>(admin, "SELECT pg_terminate_backend($1)", c->backend_pid()));
    co_await tern::sleep_for(50ms);
    auto [qec, r] = co_await c->query("SELECT 1");
    EXPECT_TRUE(qec == pgl::error::connection_lost || qec == pgl::sqlstate::admin_shutdown) << describe(qec);
    c = pgl::pooled_connection();
    EXPECT_EQ(dbpool.stats().dropped, 2u);
    EXPECT_EQ(dbpool.stats().size, 0u);
  }(*this, ctx));
}

TEST_P(pg_pool_test, the_server_restarted_under_load_every_query_has_its_outcome_and_the_pool_recovers) {
  char dir[] = "/tmp/tern-pg-restart-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const cluster own = db().clone(dir);
  struct cleanup {
    const cluster& c;
    ~cleanup() { c.destroy(); }
  } cleaned{own};
  pgl::pool dbpool({.conninfo = own.socket_conninfo(), .max_size = 4, .acquire_timeout = 20s});
  std::atomic<bool> restarted{false};
  std::thread restarter([&] {
    std::this_thread::sleep_for(300ms);
    run(as_server_user() + own.bin + "/pg_ctl -D " + own.data() + " -m fast -w -t 60 -o \"-p " +
        std::to_string(own.port) + " -k " + own.dir + "\" restart > /dev/null");
    restarted = true;
  });
  struct tally {
    int ok = 0, failed = 0, after_ok = 0;
  } counts;
  run_bounded(ctx, [](pgl::pool& dbpool, std::atomic<bool>& restarted, tally& counts) -> tern::task<void> {
    tern::task_group group(*tern::io_context::current());
    for (int task = 0; task < 32; ++task) {
      group.spawn([](pgl::pool& dbpool, std::atomic<bool>& restarted, tally& counts, int task) -> tern::task<void> {
        // Queries until the restart is over, each with its outcome; then a last one that must succeed.
        for (int i = 0; !restarted.load(); ++i) {
          auto [ec, r] = co_await dbpool.query("SELECT $1::int", task * 100000 + i);
          if (ec) {
            ++counts.failed;
            co_await tern::sleep_for(5ms);
          } else {
            EXPECT_EQ(r[0][0].as<int>(), task * 100000 + i);
            ++counts.ok;
          }
        }
        auto [ec, r] = co_await dbpool.query("SELECT $1::int", task);
        PG_ASSERT_OK(ec, r);
        EXPECT_EQ(r[0][0].as<int>(), task);
        ++counts.after_ok;
      }(dbpool, restarted, counts, task));
    }
    co_await group.wait();
  }(dbpool, restarted, counts), 60s);
  restarter.join();
  EXPECT_GT(counts.ok, 0);
  EXPECT_GT(counts.failed, 0) << "the restart went unnoticed";
  EXPECT_EQ(counts.after_ok, 32);
  EXPECT_GT(dbpool.stats().dropped, 0u);
  EXPECT_LE(dbpool.stats().size, 4u);
}

}  // namespace
