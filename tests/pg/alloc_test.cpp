// Steady state of tern::pg: once warm, a query costs no heap allocation of tern's (libpq's own PGresult is malloc'd
// and not counted): queries with parameters from one task, from 16 tasks pipelined on one connection, prepared
// statements with binary results, and a pool's query(). Each checks its results; both backends.
#include "counting_new.hpp"
#include "pg_support.hpp"

#include <tern/pg/pool.hpp>

namespace {

using namespace tern_test;
using namespace tern_test::pg;

class pg_alloc_test : public pg_test {};
TERN_INSTANTIATE_BACKENDS(pg_alloc_test);

constexpr int warmup = 500;
constexpr int measured = 2000;

// Runs round(count) once to warm up, then once counted; the allocations of the counted one.
template <class Round>
tern::task<std::size_t> counted(Round round) {
  co_await round(warmup);
  start_counting();
  co_await round(measured);
  co_return stop_counting();
}

TEST_P(pg_alloc_test, queries_with_parameters_from_one_task_allocate_nothing_once_warm) {
  std::size_t allocations = ~std::size_t{0};
  run_bounded(ctx, [](pg_alloc_test& t, tern::io_context& ctx, std::size_t& allocations) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    long long sum = 0, expected = 0;
    allocations = co_await counted([&](int n) -> tern::task<void> {
      for (int i = 0; i < n; ++i) {
        auto [ec, r] = co_await c.query("SELECT $1::int4 + 1, $2::text", i, std::string_view("text param"));
        PG_ASSERT_OK(ec, r);
        sum += r[0][0].as<int>() + static_cast<long long>(r[0][1].as<std::string_view>().size());
        expected += i + 1 + 10;
      }
    });
    EXPECT_EQ(sum, expected);
  }(*this, ctx, allocations), 60s);
  EXPECT_EQ(allocations, 0u) << "heap allocations over " << measured << " queries";
}

TEST_P(pg_alloc_test, pipelined_queries_of_many_tasks_and_prepared_statements_allocate_nothing_once_warm) {
  std::size_t allocations = ~std::size_t{0};
  run_bounded(ctx, [](pg_alloc_test& t, tern::io_context& ctx, std::size_t& allocations) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const pgl::statement st("SELECT $1::int8 * 3", pgl::format::binary);
    constexpr int tasks = 16;
    long long sum = 0, expected = 0;
    auto worker = [](pgl::connection& c, const pgl::statement& st, int n, int task, long long& sum,
                     long long& expected) -> tern::task<void> {
      for (int i = 0; i < n; ++i) {
        const std::int64_t v = std::int64_t{task} * 100'000 + i;
        auto [ec, r] = co_await c.query(st, v);
        PG_ASSERT_OK(ec, r);
        sum += r[0][0].as<std::int64_t>();
        expected += v * 3;
      }
    };
    tern::task_group group(ctx);  // made once: its stop state is the test's, not the queries'
    allocations = co_await counted([&](int n) -> tern::task<void> {
      for (int task = 0; task < tasks; ++task) group.spawn(worker(c, st, n / tasks, task, sum, expected));
      co_await group.wait();
    });
    EXPECT_EQ(sum, expected);
    EXPECT_EQ(c.stats().prepared, 1u);
    EXPECT_LT(c.stats().syncs * 4, c.stats().queries) << "the tasks' queries were not pipelined";
  }(*this, ctx, allocations), 60s);
  EXPECT_EQ(allocations, 0u) << "heap allocations over " << measured << " pipelined queries";
}

TEST_P(pg_alloc_test, a_pools_queries_allocate_nothing_once_warm) {
  std::size_t allocations = ~std::size_t{0};
  run_bounded(ctx, [](pg_alloc_test& t, tern::io_context&, std::size_t& allocations) -> tern::task<void> {
    pgl::pool_options opts;
    opts.conninfo = t.db().socket_conninfo();
    opts.max_size = 2;
    pgl::pool db(opts);
    long long sum = 0, expected = 0;
    allocations = co_await counted([&](int n) -> tern::task<void> {
      for (int i = 0; i < n; ++i) {
        auto [ec, r] = co_await db.query("SELECT $1::int4 - 1", i);
        PG_ASSERT_OK(ec, r);
        sum += r[0][0].as<int>();
        expected += i - 1;
      }
    });
    EXPECT_EQ(sum, expected);
  }(*this, ctx, allocations), 60s);
  EXPECT_EQ(allocations, 0u) << "heap allocations over " << measured << " pool queries";
}

}  // namespace
