// Pipelining on both backends: many tasks' queries on one connection sent in batches and matched in order, a
// failing query among other tasks' queries of its batch failing alone (the others rolled back by the server and
// sent again), an explicit batch whose middle query fails (PostgreSQL's semantics: the one before rolled back, the
// one after skipped, the next batch unaffected), and a batch inside a transaction.
#include "pg_support.hpp"

#include <vector>

namespace {

using namespace tern_test;
using namespace tern_test::pg;

class pg_pipeline_test : public pg_test {};
TERN_INSTANTIATE_BACKENDS(pg_pipeline_test);

TEST_P(pg_pipeline_test, many_tasks_share_one_connection_in_batches_and_each_gets_its_own_result) {
  run_bounded(ctx, [](pg_pipeline_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    constexpr int tasks = 200, each = 50;
    int checked = 0;
    tern::task_group group(ctx);
    for (int task = 0; task < tasks; ++task) {
      group.spawn([](pgl::connection& c, int task, int& checked) -> tern::task<void> {
        for (int i = 0; i < each; ++i) {
          const int v = task * 1000 + i;
          auto [ec, r] = co_await c.query("SELECT $1::int4 * 2, $2::text", v, std::to_string(v));
          PG_ASSERT_OK(ec, r);
          EXPECT_EQ(r[0][0].as<int>(), v * 2);
          EXPECT_EQ(r[0][1].as<std::string>(), std::to_string(v));
          ++checked;
        }
      }(c, task, checked));
    }
    co_await group.wait();
    EXPECT_EQ(checked, tasks * each);
    const pgl::connection_stats s = c.stats();
    EXPECT_EQ(s.queries, std::uint64_t{tasks * each});
    EXPECT_EQ(s.resent, 0u);
    // Queries that became ready in the same turn went out together: far fewer sync points than queries.
    EXPECT_LT(s.syncs * 4, s.queries) << s.syncs << " syncs for " << s.queries << " queries";
  }(*this, ctx), 60s);
}

TEST_P(pg_pipeline_test, a_failing_query_among_other_tasks_queries_fails_alone) {
  run_bounded(ctx, [](pg_pipeline_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::string tbl = t.table();
    CO_ASSERT_OK(co_await c.execute("CREATE TABLE " + tbl + " (v int PRIMARY KEY)"));
    const std::string insert = "INSERT INTO " + tbl + " VALUES ($1)";
    // Three tasks started in one turn: their queries share a batch, whose middle query fails. (The arguments are
    // locals: a query's arguments must outlive it, and a spawned query runs after this statement.)
    const int one = 1, zero = 0, three = 3;
    auto first = tern::spawn(ctx, c.query(insert, one));
    auto middle = tern::spawn(ctx, c.query("SELECT 1 / $1::int", zero));
    auto last = tern::spawn(ctx, c.query(insert, three));
    auto [fec, fr] = co_await std::move(first);
    auto [mec, mr] = co_await std::move(middle);
    auto [lec, lr] = co_await std::move(last);
    EXPECT_OK(fec);
    EXPECT_EC(mec, pgl::sqlstate::division_by_zero);
    EXPECT_OK(lec);
    EXPECT_EQ(fr.affected_rows(), 1u);
    EXPECT_EQ(lr.affected_rows(), 1u);
    // The server rolled the first back and skipped the last; both were sent again and are there.
    EXPECT_EQ(co_await scalar<std::int64_t>(c, ("SELECT count(*) FROM " + tbl).c_str()), 2);
    EXPECT_GE(c.stats().resent, 2u);
    CO_ASSERT_OK(co_await c.execute("DROP TABLE " + tbl));
  }(*this, ctx));
}

TEST_P(pg_pipeline_test, an_explicit_batch_whose_middle_query_fails_aborts_only_its_own_part) {
  run_bounded(ctx, [](pg_pipeline_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::string tbl = t.table();
    CO_ASSERT_OK(co_await c.execute("CREATE TABLE " + tbl + " (v int PRIMARY KEY)"));
    const std::string insert = "INSERT INTO " + tbl + " VALUES ($1)";
    pgl::batch b(c);
    b.add(insert, 1);
    b.add("SELECT 1 / $1::int", 0);
    b.add(insert, 3);
    const std::error_code ec = co_await b.run();
    EXPECT_EC(ec, pgl::sqlstate::division_by_zero);
    CO_ASSERT(b.size() == 3);
    EXPECT_OK(b.outcome(0).ec);
    EXPECT_EQ(b.outcome(0).value.affected_rows(), 1u);
    EXPECT_EC(b.outcome(1).ec, pgl::sqlstate::division_by_zero);
    EXPECT_EQ(b.outcome(1).value.sqlstate(), "22012");
    EXPECT_EC(b.outcome(2).ec, pgl::error::pipeline_aborted);
    // One implicit transaction: the first insert went with the failure. The next batch is not affected.
    EXPECT_EQ(co_await scalar<std::int64_t>(c, ("SELECT count(*) FROM " + tbl).c_str()), 0);
    b.clear();
    for (int v = 10; v < 20; ++v) b.add(insert, v);
    CO_ASSERT_OK(co_await b.run());
    for (std::size_t i = 0; i < b.size(); ++i) EXPECT_OK(b.outcome(i).ec);
    EXPECT_EQ(co_await scalar<std::int64_t>(c, ("SELECT count(*) FROM " + tbl).c_str()), 10);
    CO_ASSERT_OK(co_await c.execute("DROP TABLE " + tbl));
  }(*this, ctx));
}

TEST_P(pg_pipeline_test, batches_and_single_queries_of_other_tasks_interleave_in_order) {
  run_bounded(ctx, [](pg_pipeline_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const pgl::statement twice("SELECT $1::int8 * 2");
    tern::task_group group(ctx);
    int batches_ok = 0, singles_ok = 0;
    for (int k = 0; k < 20; ++k) {
      group.spawn([](pgl::connection& c, const pgl::statement& twice, int k, int& ok) -> tern::task<void> {
        pgl::batch b(c);
        for (std::int64_t i = 0; i < 50; ++i) b.add(twice, k * 100 + i);
        auto ec = co_await b.run();
        CO_ASSERT_OK(ec);
        for (std::size_t i = 0; i < b.size(); ++i) {
          EXPECT_EQ(b.outcome(i).value[0][0].as<std::int64_t>(), 2 * (k * 100 + static_cast<std::int64_t>(i)));
        }
        ++ok;
      }(c, twice, k, batches_ok));
      group.spawn([](pgl::connection& c, int k, int& ok) -> tern::task<void> {
        auto [ec, r] = co_await c.query("SELECT $1::int + 1", k);
        PG_ASSERT_OK(ec, r);
        EXPECT_EQ(r[0][0].as<int>(), k + 1);
        ++ok;
      }(c, k, singles_ok));
    }
    co_await group.wait();
    EXPECT_EQ(batches_ok, 20);
    EXPECT_EQ(singles_ok, 20);
  }(*this, ctx));
}

}  // namespace
