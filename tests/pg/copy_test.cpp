// COPY on both backends: a million rows in through copy_in and back out through copy_out, every row checked;
// bad data refused by the server at finish(); an aborted COPY rolled back; a reader abandoned part way; a COPY
// given up while it starts, in both directions, alone and on a pooled connection; a COPY given up while its
// statement or its data are still being sent, or while the server finishes or aborts it (the server's process held
// still), with other tasks' queries waiting behind it; finish() and abort() from another loop refused, the writer
// kept; a reader given up between the data's end and the statement's result (a proxy holds the result back); a
// COPY of the other direction answered at once and ended behind its caller; and the connection serving queries
// after each.
#include "pg_proxy.hpp"
#include "pg_support.hpp"

#include <tern/pg/pool.hpp>

#include <charconv>
#include <stop_token>

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

// Starts a COPY on c and cancels its task at once, while the server has not yet confirmed the COPY: the task ends
// with operation_canceled (or, if the confirmation won the race, with the stream, which is then dropped). True
// when it was cancelled while starting.
tern::task<bool> give_up_starting(tern::io_context& ctx, pgl::connection& c, const std::string& sql, bool in) {
  std::stop_source stop;
  std::error_code ec;
  if (in) {
    auto h = tern::spawn(ctx, c.copy_in(sql), stop.get_token());
    co_await tern::yield();  // the COPY statement is sent; its task waits for the server's answer
    stop.request_stop();
    ec = (co_await std::move(h)).ec;
  } else {
    auto h = tern::spawn(ctx, c.copy_out(sql), stop.get_token());
    co_await tern::yield();
    stop.request_stop();
    ec = (co_await std::move(h)).ec;
  }
  if (ec && ec != tern::error::operation_canceled) ADD_FAILURE() << sql << ": " << describe(ec);
  co_return ec == tern::error::operation_canceled;
}

TEST_P(pg_copy_test, a_copy_given_up_while_it_starts_leaves_the_connection_in_step) {
  run_bounded(ctx, [](pg_copy_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::string tbl = t.table();
    CO_ASSERT_OK(co_await c.execute("CREATE TABLE " + tbl + " (id int)"));
    const std::string in = "COPY " + tbl + " FROM STDIN";
    const std::string out = "COPY (SELECT generate_series(1, 10000000)) TO STDOUT";
    // Whether a stop lands while the COPY starts depends on how soon the server answers: rounds go on (each one
    // checked) until several have, so that a loaded machine, where the answer often comes first, still tests it.
    int cancelled = 0;
    for (int round = 0; round < 200 && (round < 5 || cancelled < 3); ++round) {
      for (const bool direction_in : {true, false}) {
        const bool given_up = co_await give_up_starting(ctx, c, direction_in ? in : out, direction_in);
        cancelled += given_up;
        auto [ec, r] = co_await c.query("SELECT 1");
        CO_ASSERT_OK(ec);
        EXPECT_EQ(r[0][0].as<int>(), 1);
      }
    }
    EXPECT_GT(cancelled, 0) << "no COPY was given up while it started";
    // And the COPYs still work in both directions, nothing having been copied by the ones given up.
    {
      auto [ec, w] = co_await c.copy_in(in);
      CO_ASSERT_OK(ec);
      CO_ASSERT_OK(co_await w.write("8\n9\n"));
      auto [fec, n] = co_await w.finish();
      CO_ASSERT_OK(fec);
      EXPECT_EQ(n, 2u);
    }
    {
      auto [ec, r] = co_await c.copy_out("COPY " + tbl + " TO STDOUT");
      CO_ASSERT_OK(ec);
      std::string all;
      for (;;) {
        auto [rec, data] = co_await r.read();
        if (rec == tern::error::eof) break;
        CO_ASSERT_OK(rec);
        all += data;
      }
      EXPECT_EQ(all, "8\n9\n");
    }
    CO_ASSERT_OK(co_await c.execute("DROP TABLE " + tbl));
  }(*this, ctx), 60s);
}

TEST_P(pg_copy_test, a_pooled_connection_whose_copy_was_given_up_while_it_started_is_lent_again) {
  run_bounded(ctx, [](pg_copy_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::pool dbpool({.conninfo = t.db().socket_conninfo(), .max_size = 1});
    const std::string out = "COPY (SELECT generate_series(1, 10000000)) TO STDOUT";
    // Whether a stop lands while the COPY starts depends on how soon the server answers: rounds go on (each one
    // checked) until several have, so that a loaded machine, where the answer often comes first, still tests it.
    int cancelled = 0;
    for (int round = 0; round < 200 && (round < 5 || cancelled < 3); ++round) {
      for (const bool direction_in : {true, false}) {
        auto [ec, lease] = co_await dbpool.acquire();
        CO_ASSERT_OK(ec);
        const std::string tbl = t.table("p" + std::to_string(round) + (direction_in ? "i" : "o"));
        CO_ASSERT_OK(co_await lease->execute("CREATE TEMP TABLE " + tbl + " (id int)"));
        const std::string sql = direction_in ? "COPY " + tbl + " FROM STDIN" : out;
        const bool given_up = co_await give_up_starting(ctx, *lease, sql, direction_in);
        cancelled += given_up;
      }
      auto [qec, r] = co_await dbpool.query("SELECT 1");
      CO_ASSERT_OK(qec);
      EXPECT_EQ(r[0][0].as<int>(), 1);
    }
    EXPECT_GT(cancelled, 0) << "no COPY was given up while it started";
    // The one connection came back in step every time: never dropped, never replaced.
    EXPECT_EQ(dbpool.stats().dropped, 0u);
    EXPECT_EQ(dbpool.stats().connects, 1u);
  }(*this, ctx), 60s);
}

// Gives up (a stop) the operation op (a task returning E) while the server is held still (and, with sending, while
// op's bytes are still being sent), with other tasks' queries waiting behind it on c; then lets the server go on.
// Those queries must get their own results soon.
template <class E>
tern::task<void> give_up_while_held(tern::io_context& ctx, pgl::connection& c, tern::task<E> op, bool sending) {
  held_still server(c.backend_pid());
  std::stop_source stop;
  auto given_up = tern::spawn(ctx, std::move(op), stop.get_token());
  std::vector<tern::join_handle<void>> others;
  for (int i = 1; i <= 3; ++i) others.push_back(tern::spawn(ctx, expect_own_result(c, i)));
  co_await tern::sleep_for(100ms);
  EXPECT_FALSE(given_up.done()) << "it ended while the server was held still";
  EXPECT_EQ(still_sending(c), sending);
  stop.request_stop();
  const E outcome = co_await std::move(given_up);
  if constexpr (std::is_same_v<E, std::error_code>) {
    EXPECT_EC(outcome, tern::error::operation_canceled);
  } else {
    EXPECT_EC(outcome.ec, tern::error::operation_canceled);
  }
  const auto start = clock_type::now();
  server.release();
  for (auto& h : others) co_await std::move(h);
  EXPECT_LT(clock_type::now() - start, 20s);
  EXPECT_TRUE(c.is_open()) << c.error_message();
  EXPECT_EQ(co_await scalar<int>(c, "SELECT 7"), 7);
}

// A script's COPY has no stream: the data of one TO STDOUT is read and dropped, one FROM STDIN is failed (it needs
// copy_in()); the script goes on, or ends, as the server says, and the connection serves the next queries.
TEST_P(pg_copy_test, a_scripts_copy_has_its_data_dropped_or_is_refused) {
  run_bounded(ctx, [](pg_copy_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    pgl::result report;
    CO_ASSERT_OK(co_await c.execute("COPY (SELECT generate_series(1, 200000)) TO STDOUT; SELECT 42", &report));
    EXPECT_EQ(report[0][0].as<int>(), 42);
    const std::string tbl = t.table();
    CO_ASSERT_OK(co_await c.execute("CREATE TABLE " + tbl + " (id int)"));
    EXPECT_EC(co_await c.execute("COPY " + tbl + " FROM STDIN; SELECT 43", &report), pgl::sqlstate::query_canceled);
    EXPECT_NE(report.error_message().find("copy_in()"), std::string_view::npos) << report.error_message();
    EXPECT_EQ(co_await scalar<int>(c, "SELECT 44"), 44);
    CO_ASSERT_OK(co_await c.execute("DROP TABLE " + tbl));
  }(*this, ctx), 60s);
}

// Writes data, then drops the writer (with this task's frame).
tern::task<std::error_code> write_then_drop(pgl::copy_writer w, const std::string& data) {
  co_return co_await w.write(data);
}

TEST_P(pg_copy_test, a_copy_given_up_while_it_is_sent_or_ends_leaves_the_connection_in_step) {
  run_bounded(ctx, [](pg_copy_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::string tbl = t.table();
    CO_ASSERT_OK(co_await c.execute("CREATE TABLE " + tbl + " (id int)"));
    const std::string in = "COPY " + tbl + " FROM STDIN";
    const std::string count_sql = "SELECT count(*) FROM " + tbl;
    auto count = [&]() { return scalar<std::int64_t>(c, count_sql.c_str()); };
    // Many times the socket's buffers (a few hundred KiB on a Unix socket): it cannot all go to a held server.
    std::string rows;
    for (int i = 0; i < (2 << 20); ++i) rows += "1\n";
    // A COPY statement still being sent.
    const std::string big_out = "COPY (SELECT length('" + std::string(8 << 20, 'x') + "')) TO STDOUT";
    co_await give_up_while_held(ctx, c, c.copy_out(big_out), true);
    // A write still being sent: the writer, destroyed with the write's task, aborts the COPY.
    {
      auto [ec, w] = co_await c.copy_in(in);
      CO_ASSERT_OK(ec);
      co_await give_up_while_held(ctx, c, write_then_drop(std::move(w), rows), true);
    }
    EXPECT_EQ(co_await count(), 0);
    // finish() given up while the server ends the COPY: the connection goes on whether or not the rows made it,
    // never with a part of them.
    {
      auto [ec, w] = co_await c.copy_in(in);
      CO_ASSERT_OK(ec);
      CO_ASSERT_OK(co_await w.write("1\n2\n"));
      co_await give_up_while_held(ctx, c, w.finish(), false);
    }
    const std::int64_t after_finish = co_await count();
    EXPECT_TRUE(after_finish == 0 || after_finish == 2) << after_finish;
    // abort() given up while the server aborts the COPY.
    {
      auto [ec, w] = co_await c.copy_in(in);
      CO_ASSERT_OK(ec);
      CO_ASSERT_OK(co_await w.write("3\n"));
      co_await give_up_while_held(ctx, c, w.abort("given up"), false);
    }
    EXPECT_EQ(co_await count(), after_finish);
    CO_ASSERT_OK(co_await c.execute("DROP TABLE " + tbl));
  }(*this, ctx), 90s);
}

// finish() and abort() called from another loop's thread are refused with wrong_loop and leave the writer as it was
// (before, the writer gave itself up first and handed the connection back from the wrong thread): on its own loop
// the same writer then aborts, or finishes with every row in.
TEST_P(pg_copy_test, finish_or_abort_from_another_loop_is_refused_and_the_writer_goes_on) {
  run_bounded(ctx, [](pg_copy_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::string tbl = t.table();
    CO_ASSERT_OK(co_await c.execute("CREATE UNLOGGED TABLE " + tbl + " (id int8)"));
    // From elsewhere: the call's outcome, on a loop of its own on another thread (this loop waits meanwhile).
    const auto from_elsewhere = [](pgl::copy_writer& w, bool finish) {
      std::error_code out;
      std::thread other([&] {
        tern::io_context elsewhere;
        elsewhere.block_on([](pgl::copy_writer& w, bool finish, std::error_code& out) -> tern::task<void> {
          if (finish) {
            out = (co_await w.finish()).ec;
          } else {
            out = co_await w.abort("from elsewhere");
          }
        }(w, finish, out));
      });
      other.join();
      return out;
    };
    for (const bool finish : {false, true}) {
      auto [ec, w] = co_await c.copy_in("COPY " + tbl + " FROM STDIN");
      CO_ASSERT_OK(ec);
      CO_ASSERT_OK(co_await w.write(std::string_view("1\n2\n3\n")));
      EXPECT_EC(from_elsewhere(w, finish), tern::error::wrong_loop);
      if (finish) {
        auto [fec, n] = co_await w.finish();
        CO_ASSERT_OK(fec);
        EXPECT_EQ(n, 3u);
      } else {
        CO_ASSERT_OK(co_await w.abort("given up here"));
      }
    }
    EXPECT_EQ(co_await scalar<std::int64_t>(c, ("SELECT count(*) FROM " + tbl).c_str()), 3);
    CO_ASSERT_OK(co_await c.execute("DROP TABLE " + tbl));
  }(*this, ctx));
}

// A connection through the proxy, with one exchange done (the proxy holds nothing back yet).
tern::task<pgl::connection> connect_through(pg_proxy& proxy, tern::io_context& ctx) {
  pgl::connection c = co_await connect_to(ctx, proxy.conninfo());
  if (c.is_open()) {
    EXPECT_EQ(co_await scalar<int>(c, "SELECT 1"), 1);
  }
  co_return c;
}

// True once the proxy holds a message back (waiting up to 10 s), and 20 ms more have passed for what the client
// does with the messages before it.
tern::task<bool> held_back(pg_proxy& proxy) {
  for (int i = 0; i < 10000 && !proxy.holding(); ++i) co_await tern::sleep_for(1ms);
  if (!proxy.holding()) co_return false;
  co_await tern::sleep_for(20ms);
  co_return true;
}

// A reader given up in the one window the server never leaves open: the COPY's data has ended (CopyDone is in) and
// read() waits for the statement's result, which a proxy holds back (the server sends both in one write). read()
// ends with operation_canceled; the result is read and dropped by a task of its own once it comes, and other
// tasks' queries, queued meanwhile, get their own results after it.
TEST_P(pg_copy_test, a_reader_given_up_between_the_data_and_the_result_leaves_the_connection_in_step) {
  pg_proxy proxy(db().dir, db().port);
  run_bounded(ctx, [](pg_proxy& proxy, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_through(proxy, ctx);
    CO_ASSERT(c.is_open());
    proxy.hold_after('c');  // CopyDone
    auto [ec, r] = co_await c.copy_out("COPY (SELECT generate_series(1, 3)) TO STDOUT");
    CO_ASSERT_OK(ec);
    for (const char* want : {"1\n", "2\n", "3\n"}) {
      auto [rec, line] = co_await r.read();
      CO_ASSERT_OK(rec);
      EXPECT_EQ(line, want);
    }
    std::stop_source stop;
    auto last = tern::spawn(ctx, r.read(), stop.get_token());
    CO_ASSERT(co_await held_back(proxy));  // the data's end is in: read() waits for the result
    EXPECT_FALSE(last.done());
    stop.request_stop();
    auto [lec, piece] = co_await std::move(last);
    EXPECT_EC(lec, tern::error::operation_canceled);
    std::vector<tern::join_handle<void>> others;
    for (int i = 1; i <= 3; ++i) others.push_back(tern::spawn(ctx, expect_own_result(c, i)));
    co_await tern::sleep_for(20ms);
    proxy.release();
    for (auto& h : others) co_await std::move(h);
    EXPECT_TRUE(c.is_open()) << c.error_message();
    EXPECT_EQ(co_await scalar<int>(c, "SELECT 4"), 4);
    auto [aec, again] = co_await c.copy_out("COPY (SELECT generate_series(1, 2)) TO STDOUT");
    CO_ASSERT_OK(aec);
    int lines = 0;
    for (;;) {
      auto [rec, line] = co_await again.read();
      if (rec == tern::error::eof) break;
      CO_ASSERT_OK(rec);
      ++lines;
    }
    EXPECT_EQ(lines, 2);
  }(proxy, ctx), 60s);
}

// A COPY of the other direction than asked for: the caller has not_in_copy as soon as the server's answer says so,
// while the statement (its data held back by a proxy) is cancelled and drained behind it by a task of its own; a
// stop of the caller's task meanwhile does not cut that short, and other tasks' queries wait for it, then get their
// own results.
TEST_P(pg_copy_test, a_copy_of_the_other_direction_answers_at_once_and_is_ended_behind_it) {
  pg_proxy proxy(db().dir, db().port);
  run_bounded(ctx, [](pg_proxy& proxy, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_through(proxy, ctx);
    CO_ASSERT(c.is_open());
    proxy.hold_after('H');  // CopyOutResponse: the data and the statement's end wait behind it
    std::stop_source stop;
    auto h = tern::spawn(ctx, c.copy_in("COPY (SELECT generate_series(1, 10000000)) TO STDOUT"), stop.get_token());
    CO_ASSERT(co_await held_back(proxy));
    EXPECT_TRUE(h.done()) << "the caller waited for the statement's end";
    stop.request_stop();
    auto [ec, w] = co_await std::move(h);
    EXPECT_EC(ec, pgl::error::not_in_copy);
    std::vector<tern::join_handle<void>> others;
    for (int i = 1; i <= 3; ++i) others.push_back(tern::spawn(ctx, expect_own_result(c, i)));
    co_await tern::sleep_for(20ms);
    EXPECT_FALSE(others.front().done()) << "a query went ahead of the statement's end";
    proxy.release();
    for (auto& o : others) co_await std::move(o);
    EXPECT_TRUE(c.is_open()) << c.error_message();
    EXPECT_GE(c.stats().cancels_sent, 1u);
    EXPECT_EQ(co_await scalar<int>(c, "SELECT 4"), 4);
  }(proxy, ctx), 60s);
}

}  // namespace
