// COPY on both backends: a million rows in through copy_in and back out through copy_out, every row checked;
// bad data refused by the server at finish(); an aborted COPY rolled back; a reader abandoned part way; and the
// connection serving queries after each.
#include "pg_support.hpp"

#include <charconv>

namespace {

using namespace tern_test;
using namespace tern_test::pg;

class pg_copy_test : public pg_test {};
TERN_INSTANTIATE_BACKENDS(pg_copy_test);

TEST_P(pg_copy_test, a_million_rows_go_in_and_come_out_intact) {
  run_bounded(ctx, [](pg_copy_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::string tbl = t.table();
    CO_ASSERT_OK(co_await c.execute("CREATE UNLOGGED TABLE " + tbl + " (id int8, name text)"));
    constexpr std::int64_t rows = 1000000;
    {
      auto [ec, w] = co_await c.copy_in("COPY " + tbl + " (id, name) FROM STDIN");
      CO_ASSERT_OK(ec);
      std::string chunk;
      for (std::int64_t i = 0; i < rows; ++i) {
        chunk += std::to_string(i);
        chunk += "\tname-";
        chunk += std::to_string(i * 7);
        chunk += '\n';
        if (chunk.size() >= 64 * 1024) {
          CO_ASSERT_OK(co_await w.write(chunk));
          chunk.clear();
        }
      }
      CO_ASSERT_OK(co_await w.write(chunk));
      auto [fec, n] = co_await w.finish();
      CO_ASSERT_OK(fec);
      EXPECT_EQ(n, static_cast<std::uint64_t>(rows));
    }
    EXPECT_EQ(co_await scalar<std::int64_t>(c, ("SELECT sum(id) FROM " + tbl).c_str()), rows * (rows - 1) / 2);
    {
      auto [ec, r] = co_await c.copy_out("COPY (SELECT id, name FROM " + tbl + " ORDER BY id) TO STDOUT");
      CO_ASSERT_OK(ec);
      std::int64_t expected = 0;
      for (;;) {
        auto [rec, line] = co_await r.read();
        if (rec == tern::error::eof) break;
        CO_ASSERT_OK(rec);
        const std::string want = std::to_string(expected) + "\tname-" + std::to_string(expected * 7) + "\n";
        if (line != want) {
          ADD_FAILURE() << "row " << expected << ": " << line;
          co_return;
        }
        ++expected;
      }
      EXPECT_EQ(expected, rows);
      EXPECT_EQ(r.final_result().affected_rows(), static_cast<std::uint64_t>(rows));
    }
    EXPECT_EQ(co_await scalar<int>(c, "SELECT 3"), 3);
    CO_ASSERT_OK(co_await c.execute("DROP TABLE " + tbl));
  }(*this, ctx), 90s);
}

TEST_P(pg_copy_test, bad_data_an_abort_and_an_abandoned_reader_leave_the_connection_usable) {
  run_bounded(ctx, [](pg_copy_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::string tbl = t.table();
    CO_ASSERT_OK(co_await c.execute("CREATE TABLE " + tbl + " (id int)"));
    {
      auto [ec, w] = co_await c.copy_in("COPY " + tbl + " FROM STDIN");
      CO_ASSERT_OK(ec);
      CO_ASSERT_OK(co_await w.write("1\nnot a number\n"));
      auto [fec, n] = co_await w.finish();
      EXPECT_EC(fec, pgl::sqlstate::invalid_text_representation);
      EXPECT_NE(w.final_result().error_message().find("not a number"), std::string_view::npos);
    }
    {
      auto [ec, w] = co_await c.copy_in("COPY " + tbl + " FROM STDIN");
      CO_ASSERT_OK(ec);
      CO_ASSERT_OK(co_await w.write("5\n6\n"));
      CO_ASSERT_OK(co_await w.abort("changed my mind"));
    }
    {
      auto [ec, w] = co_await c.copy_in("COPY " + tbl + " FROM STDIN");
      CO_ASSERT_OK(ec);
      CO_ASSERT_OK(co_await w.write("7\n"));
      // Destroyed without finish(): aborted.
    }
    EXPECT_EQ(co_await scalar<std::int64_t>(c, ("SELECT count(*) FROM " + tbl).c_str()), 0);
    {
      auto [ec, r] = co_await c.copy_out("COPY (SELECT generate_series(1, 10000000)) TO STDOUT");
      CO_ASSERT_OK(ec);
      auto [rec, line] = co_await r.read();
      CO_ASSERT_OK(rec);
      EXPECT_EQ(line, "1\n");
      // Destroyed part way: the server is asked to cancel, the rest is dropped.
    }
    const auto start = clock_type::now();
    EXPECT_EQ(co_await scalar<int>(c, "SELECT 4"), 4);
    EXPECT_LT(clock_type::now() - start, 20s);
    // A COPY statement that fails at once, and one of the wrong direction.
    auto [nec, nw] = co_await c.copy_in("COPY no_such_table FROM STDIN");
    EXPECT_EC(nec, pgl::sqlstate::undefined_table);
    auto [dec, dw] = co_await c.copy_in("COPY " + tbl + " TO STDOUT");
    EXPECT_EC(dec, pgl::error::not_in_copy);
    EXPECT_EQ(co_await scalar<int>(c, "SELECT 6"), 6);
    CO_ASSERT_OK(co_await c.execute("DROP TABLE " + tbl));
  }(*this, ctx), 60s);
}

}  // namespace
