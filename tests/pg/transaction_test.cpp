// Transactions on both backends: commit, a rollback by an exception (and by an early return), isolation levels and
// access modes, other tasks' queries waiting for the transaction, a commit of an aborted transaction reported as
// rolled back, and a batch inside a transaction.
#include "pg_support.hpp"

#include <stdexcept>

namespace {

using namespace tern_test;
using namespace tern_test::pg;

class pg_transaction_test : public pg_test {};
TERN_INSTANTIATE_BACKENDS(pg_transaction_test);

tern::task<std::int64_t> count_rows(pgl::connection& c, const std::string& tbl) {
  co_return co_await scalar<std::int64_t>(c, ("SELECT count(*) FROM " + tbl).c_str());
}

TEST_P(pg_transaction_test, a_committed_transaction_keeps_its_work) {
  run_bounded(ctx, [](pg_transaction_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::string tbl = t.table();
    CO_ASSERT_OK(co_await c.execute("CREATE TABLE " + tbl + " (v int)"));
    {
      auto [ec, tx] = co_await c.begin();
      CO_ASSERT_OK(ec);
      EXPECT_TRUE(c.in_transaction());
      for (int v = 0; v < 5; ++v) {
        auto [qec, r] = co_await tx.query("INSERT INTO " + tbl + " VALUES ($1)", v);
        PG_ASSERT_OK(qec, r);
      }
      CO_ASSERT_OK(co_await tx.commit());
      EXPECT_FALSE(tx.active());
    }
    EXPECT_FALSE(c.in_transaction());
    EXPECT_EQ(co_await count_rows(c, tbl), 5);
    CO_ASSERT_OK(co_await c.execute("DROP TABLE " + tbl));
  }(*this, ctx));
}

tern::task<void> insert_then_throw(pgl::connection& c, const std::string& tbl) {
  auto [ec, tx] = co_await c.begin();
  if (ec) co_return;
  auto [qec, r] = co_await tx.query("INSERT INTO " + tbl + " VALUES (1)");
  EXPECT_OK(qec);
  throw std::runtime_error("the work failed half way");
}

TEST_P(pg_transaction_test, an_exception_rolls_the_transaction_back) {
  run_bounded(ctx, [](pg_transaction_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::string tbl = t.table();
    CO_ASSERT_OK(co_await c.execute("CREATE TABLE " + tbl + " (v int)"));
    bool thrown = false;
    try {
      co_await insert_then_throw(c, tbl);
    } catch (const std::runtime_error&) {
      thrown = true;
    }
    EXPECT_TRUE(thrown);
    EXPECT_EQ(co_await count_rows(c, tbl), 0) << "the ROLLBACK went out before this query";
    EXPECT_FALSE(c.in_transaction());
    // An early return does the same.
    {
      auto [ec, tx] = co_await c.begin();
      CO_ASSERT_OK(ec);
      auto [qec, r] = co_await tx.query("INSERT INTO " + tbl + " VALUES (2)");
      EXPECT_OK(qec);
    }
    EXPECT_EQ(co_await count_rows(c, tbl), 0);
    CO_ASSERT_OK(co_await c.execute("DROP TABLE " + tbl));
  }(*this, ctx));
}

TEST_P(pg_transaction_test, isolation_levels_and_access_modes_are_the_servers) {
  run_bounded(ctx, [](pg_transaction_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    struct level {
      pgl::isolation isolation;
      const char* name;
    };
    for (const level& l : {level{pgl::isolation::read_committed, "read committed"},
                           level{pgl::isolation::repeatable_read, "repeatable read"},
                           level{pgl::isolation::serializable, "serializable"}}) {
      auto [ec, tx] = co_await c.begin({.level = l.isolation, .read_only = true});
      CO_ASSERT_OK(ec);
      auto [qec, r] = co_await tx.query("SHOW transaction_isolation");
      PG_ASSERT_OK(qec, r);
      EXPECT_EQ(r[0][0].as<std::string>(), l.name);
      auto [wec, wr] = co_await tx.query("CREATE TEMP TABLE nope (v int)");
      EXPECT_EC(wec, pgl::sqlstate::read_only_transaction);
      // The transaction is aborted now: commit reports that it rolled back.
      EXPECT_EC(co_await tx.commit(), pgl::error::transaction_rolled_back);
    }
  }(*this, ctx));
}

TEST_P(pg_transaction_test, other_tasks_queries_wait_for_the_transaction_and_go_after_it) {
  run_bounded(ctx, [](pg_transaction_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::string tbl = t.table();
    CO_ASSERT_OK(co_await c.execute("CREATE TABLE " + tbl + " (v int)"));
    auto [ec, tx] = co_await c.begin();
    CO_ASSERT_OK(ec);
    // Another task's count, started while the transaction runs: it must see the transaction's end, not its middle.
    auto counted = tern::spawn(ctx, [](pgl::connection& c, std::string tbl) -> tern::task<std::int64_t> {
      co_return co_await count_rows(c, tbl);
    }(c, tbl));
    co_await tern::sleep_for(20ms);
    EXPECT_FALSE(counted.done()) << "it ran inside the transaction";
    auto [qec, r] = co_await tx.query("INSERT INTO " + tbl + " VALUES (1), (2)");
    PG_ASSERT_OK(qec, r);
    CO_ASSERT_OK(co_await tx.commit());
    EXPECT_EQ(co_await std::move(counted), 2);
    CO_ASSERT_OK(co_await c.execute("DROP TABLE " + tbl));
  }(*this, ctx));
}

TEST_P(pg_transaction_test, a_batch_inside_a_transaction_is_the_transactions) {
  run_bounded(ctx, [](pg_transaction_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::string tbl = t.table();
    CO_ASSERT_OK(co_await c.execute("CREATE TABLE " + tbl + " (v int)"));
    {
      auto [ec, tx] = co_await c.begin();
      CO_ASSERT_OK(ec);
      pgl::batch b(tx);
      for (int v = 0; v < 100; ++v) b.add("INSERT INTO " + tbl + " VALUES ($1)", v);
      CO_ASSERT_OK(co_await b.run());
      CO_ASSERT_OK(co_await tx.rollback());
    }
    EXPECT_EQ(co_await count_rows(c, tbl), 0);
    CO_ASSERT_OK(co_await c.execute("DROP TABLE " + tbl));
  }(*this, ctx));
}

// begin() given up after its BEGIN went out (here it waits behind a slow query of another task): the BEGIN still
// runs, and must not leave the connection inside a transaction that nobody holds.
TEST_P(pg_transaction_test, a_begin_given_up_after_it_was_sent_leaves_no_transaction_open) {
  run_bounded(ctx, [](pg_transaction_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    auto before = tern::spawn(ctx, c.query("SELECT pg_sleep(0.3)"));
    co_await tern::sleep_for(std::chrono::milliseconds(20));  // the slow query has gone out
    auto [bec, tx] = co_await tern::with_timeout(c.begin(), std::chrono::milliseconds(50));
    EXPECT_EC(bec, tern::error::timed_out);
    auto [ec, r] = co_await std::move(before);
    PG_ASSERT_OK(ec, r);
    EXPECT_EQ(co_await scalar<int>(c, "SELECT 1"), 1);
    EXPECT_FALSE(c.in_transaction());
  }(*this, ctx));
}

}  // namespace
