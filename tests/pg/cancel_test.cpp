// Cancellation on both backends: a long pg_sleep ended by a deadline, by a stop and by the connection's
// query_timeout, over the Unix socket and over TCP; each time a cancel request reaches the server (which reports
// the cancel: query_canceled for the dropped query, counted in the connection's stats) and the connection serves
// the next query at once. A query of a later batch is cancelled only once the server gets to its batch, leaving the
// query before it alone; one of the batch the server runs ends that batch, whose other queries run again. A cancel
// request the server drops (it came while the server waited for the query) is sent again, for a query and for a
// script. A script or a query given up while it is still being sent (the server's process held still) is sent in
// full, cancelled and drained, as is a script given up while its COPY's data flows; the other tasks' queries on the
// connection get their own results, and a pooled connection is not dropped. A transaction waits to send its BEGIN
// until the cancel requests on their way have ended (a proxy holds them back).
#include "pg_proxy.hpp"
#include "pg_support.hpp"

#include <tern/pg/pool.hpp>

#include <signal.h>

#include <fstream>
#include <sstream>

namespace {

using namespace tern_test;
using namespace tern_test::pg;

class pg_cancel_test : public pg_test {};
TERN_INSTANTIATE_BACKENDS(pg_cancel_test);

// After a cancelled query: the next one completes long before the sleep would have ended, and the server has
// answered the cancelled one with query_canceled.
tern::task<void> expect_cancelled_on_server(pgl::connection& c, std::uint64_t confirmed) {
  const auto start = clock_type::now();
  EXPECT_EQ(co_await scalar<int>(c, "SELECT 5"), 5);
  EXPECT_LT(clock_type::now() - start, 20s) << "the sleep ran to its end";
  EXPECT_EQ(c.stats().cancels_confirmed, confirmed);
  EXPECT_TRUE(c.is_open());
}

// Whether the process has a SIGINT waiting (it is stopped, so its handler has not run).
bool sigint_pending(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("SigPnd:") || line.starts_with("ShdPnd:")) {
      std::istringstream hex(line.substr(7));
      unsigned long long mask = 0;
      hex >> std::hex >> mask;
      if ((mask & (1ULL << (SIGINT - 1))) != 0) return true;
    }
  }
  return false;
}

TEST_P(pg_cancel_test, a_cancel_request_the_server_dropped_is_sent_again) {
  run_bounded(ctx, [](pg_cancel_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const int pid = c.backend_pid();
    // The server's process is held still until the cancel request has reached it, so that it handles the request
    // before it has read the query: while it waits for a query, PostgreSQL drops a cancel request.
    CO_ASSERT(::kill(pid, SIGSTOP) == 0);
    struct resume {
      int pid;
      ~resume() { ::kill(pid, SIGCONT); }
    } resumed{pid};
    auto [ec, r] = co_await tern::with_timeout(c.query("SELECT pg_sleep(60)"), 50ms);
    EXPECT_EC(ec, tern::error::timed_out);
    for (int i = 0; i < 1000 && !sigint_pending(pid); ++i) co_await tern::sleep_for(10ms);
    CO_ASSERT(sigint_pending(pid));
    ::kill(pid, SIGCONT);
    co_await expect_cancelled_on_server(c, 1);
    EXPECT_GE(c.stats().cancels_sent, 2u);
  }(*this, ctx), 90s);
}

TEST_P(pg_cancel_test, a_deadline_cancels_a_long_sleep_on_the_server) {
  run_bounded(ctx, [](pg_cancel_test& t, tern::io_context& ctx) -> tern::task<void> {
    std::uint64_t round = 0;
    for (const std::string& info : {t.db().socket_conninfo(), t.db().tcp_conninfo()}) {
      pgl::connection c = co_await connect_to(ctx, info);
      const auto start = clock_type::now();
      auto [ec, r] = co_await tern::with_timeout(c.query("SELECT pg_sleep(60)"), 100ms);
      EXPECT_EC(ec, tern::error::timed_out);
      EXPECT_LT(clock_type::now() - start, 10s);
      EXPECT_EQ(c.stats().cancels_sent, 1u);
      EXPECT_EQ(c.stats().cancels_by_thread, 0u) << "libpq's PGcancel was not read: the request went from a thread";
      co_await expect_cancelled_on_server(c, 1);
      ++round;
    }
    EXPECT_EQ(round, 2u);
  }(*this, ctx), 60s);
}

TEST_P(pg_cancel_test, a_stop_and_the_query_timeout_cancel_as_well) {
  run_bounded(ctx, [](pg_cancel_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    std::stop_source stop;
    auto sleeping = tern::spawn(ctx, c.query("SELECT pg_sleep(60)"), stop.get_token());
    co_await tern::sleep_for(50ms);
    stop.request_stop();
    auto [ec, r] = co_await std::move(sleeping);
    EXPECT_EC(ec, tern::error::operation_canceled);
    co_await expect_cancelled_on_server(c, 1);
    // Every query of a connection with a query_timeout has that deadline.
    pgl::connection timed = co_await connect_to(ctx, t.db().socket_conninfo(), {.query_timeout = 100ms});
    auto [tec, tr] = co_await timed.query("SELECT pg_sleep(60)");
    EXPECT_EC(tec, tern::error::timed_out);
    timed.set_query_timeout(std::chrono::milliseconds(0));  // the check's own query: no deadline on a loaded machine
    co_await expect_cancelled_on_server(timed, 1);
    // And a statement's own timeout takes its place.
    const pgl::statement quick("SELECT pg_sleep($1::float8)", pgl::format::text, std::chrono::milliseconds(100));
    auto [sec, sr] = co_await c.query(quick, 60.0);
    EXPECT_EC(sec, tern::error::timed_out);
    co_await expect_cancelled_on_server(c, 2);
  }(*this, ctx), 60s);
}

// A query is an operation of the awaiting frame, not a task: with_stop takes it as it is, a transaction's queries
// have the connection's query_timeout, and one spawned or put under a deadline is a copy made before it starts, which
// encodes its parameters where it runs (under ASan, a pointer left into the copied-from object would be a use after
// its scope).
TEST_P(pg_cancel_test, a_query_operation_is_stopped_copied_and_timed_as_an_operation) {
  run_bounded(ctx, [](pg_cancel_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    std::stop_source stop;
    auto stopper = tern::spawn(ctx, [&stop]() -> tern::task<void> {
      co_await tern::sleep_for(50ms);
      stop.request_stop();
    });
    auto [ec, r] = co_await tern::with_stop(c.query("SELECT pg_sleep(60)"), stop.get_token());
    EXPECT_EC(ec, tern::error::operation_canceled);
    co_await std::move(stopper);
    co_await expect_cancelled_on_server(c, 1);
    const std::int64_t forty_one = 41;
    const int seven = 7;
    auto spawned = tern::spawn(ctx, c.query("SELECT $1::int4 * 2, $2::int8 + 1", seven, forty_one));
    auto [tec, tr] = co_await tern::with_timeout(c.query("SELECT $1::int8 - 1, $2::int4", forty_one, seven), 30s);
    PG_ASSERT_OK(tec, tr);
    EXPECT_EQ(tr[0][0].as<std::int64_t>(), 40);
    EXPECT_EQ(tr[0][1].as<int>(), 7);
    auto [sec, sr] = co_await std::move(spawned);
    PG_ASSERT_OK(sec, sr);
    EXPECT_EQ(sr[0][0].as<int>(), 14);
    EXPECT_EQ(sr[0][1].as<std::int64_t>(), 42);
    pgl::connection timed = co_await connect_to(ctx, t.db().socket_conninfo(), {.query_timeout = 100ms});
    {
      auto [bec, tx] = co_await timed.begin();
      CO_ASSERT(!bec);
      auto [xec, xr] = co_await tx.query("SELECT pg_sleep(60)");
      EXPECT_EC(xec, tern::error::timed_out);
      (void)co_await tx.rollback();
    }
    timed.set_query_timeout(std::chrono::milliseconds(0));
    co_await expect_cancelled_on_server(timed, 1);
  }(*this, ctx), 60s);
}

TEST_P(pg_cancel_test, a_query_cancelled_in_a_later_batch_is_cancelled_when_the_server_gets_to_it) {
  run_bounded(ctx, [](pg_cancel_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    auto before = tern::spawn(ctx, c.query("SELECT pg_sleep(0.3), 'done'"));
    co_await tern::sleep_for(20ms);  // its batch has gone out: the next query is in a batch of its own
    auto behind = tern::spawn(ctx, tern::with_timeout(c.query("SELECT pg_sleep(60)"), 50ms));
    auto [bec, br] = co_await std::move(behind);
    EXPECT_EC(bec, tern::error::timed_out);
    EXPECT_EQ(c.stats().cancels_sent, 0u) << "the server was not running its batch yet";
    auto [ec, r] = co_await std::move(before);
    PG_ASSERT_OK(ec, r);
    EXPECT_EQ(r[0][1].as<std::string>(), "done");
    co_await expect_cancelled_on_server(c, 1);
    EXPECT_GE(c.stats().cancels_sent, 1u);  // more if the batch outlived the first request (sent again)
    EXPECT_EQ(c.stats().resent, 0u) << "the query before it was left alone";
  }(*this, ctx), 60s);
}

TEST_P(pg_cancel_test, a_query_cancelled_in_the_running_batch_ends_the_batch_and_the_others_run_again) {
  run_bounded(ctx, [](pg_cancel_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    // Started in one turn: one batch, whose queries' results all come at its sync point.
    auto before = tern::spawn(ctx, c.query("SELECT pg_sleep(0.2), 'done'"));
    auto behind = tern::spawn(ctx, tern::with_timeout(c.query("SELECT pg_sleep(60)"), 50ms));
    auto [bec, br] = co_await std::move(behind);
    EXPECT_EC(bec, tern::error::timed_out);
    EXPECT_EQ(c.stats().cancels_sent, 1u);
    auto [ec, r] = co_await std::move(before);
    PG_ASSERT_OK(ec, r);
    EXPECT_EQ(r[0][1].as<std::string>(), "done");
    // Again more than once if a second signal of the server (it signals the process and its group) hit it.
    EXPECT_GE(c.stats().resent, 1u) << "the other task's query ran again";
    co_await expect_cancelled_on_server(c, 1);
  }(*this, ctx), 60s);
}

// A script given up (a deadline) while the server runs it: the server is asked to cancel it, and the connection
// serves the next query (other tasks' queries are not failed by a broken connection).
TEST_P(pg_cancel_test, a_script_given_up_is_cancelled_and_the_connection_goes_on) {
  run_bounded(ctx, [](pg_cancel_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const auto start = clock_type::now();
    EXPECT_EC(co_await tern::with_timeout(c.execute("SELECT 1; SELECT pg_sleep(60)"), 50ms), tern::error::timed_out);
    EXPECT_TRUE(c.is_open()) << c.error_message();
    EXPECT_EQ(co_await scalar<int>(c, "SELECT 5"), 5);
    EXPECT_LT(clock_type::now() - start, 20s) << "the script ran to its end";
  }(*this, ctx), 60s);
}

// Many times the socket's buffers (a few hundred KiB on a Unix socket): it cannot all be sent to a held server.
const std::string& huge_text() {
  static const std::string text(8 << 20, 'x');
  return text;
}

// Gives up (a stop, or a deadline) a script that is still being sent while other tasks' queries wait behind it on
// the same connection; then lets the server go on. Those queries get their own results long before the script's
// sleep would have ended (it was cancelled), and the connection stays open.
tern::task<void> give_up_a_script_while_it_is_sent(tern::io_context& ctx, pgl::connection& c, bool by_deadline) {
  const std::string script = "SELECT length('" + huge_text() + "'); SELECT pg_sleep(60)";
  held_still server(c.backend_pid());
  std::stop_source stop;
  auto script_task = by_deadline ? tern::spawn(ctx, tern::with_timeout(c.execute(script), 300ms))
                                 : tern::spawn(ctx, c.execute(script), stop.get_token());
  std::vector<tern::join_handle<void>> others;
  for (int i = 1; i <= 3; ++i) others.push_back(tern::spawn(ctx, expect_own_result(c, i)));
  co_await tern::sleep_for(100ms);
  EXPECT_FALSE(script_task.done());
  EXPECT_TRUE(still_sending(c)) << "the script went out in full to a server held still";
  if (!by_deadline) stop.request_stop();
  EXPECT_EC(co_await std::move(script_task), by_deadline ? tern::error::timed_out : tern::error::operation_canceled);
  co_await release_and_expect_own_results(ctx, c, server, others);
  EXPECT_GE(c.stats().cancels_sent, 1u);
  EXPECT_EQ(co_await scalar<int>(c, "SELECT 7"), 7);
}

TEST_P(pg_cancel_test, a_script_given_up_while_it_is_sent_is_sent_cancelled_and_drained) {
  run_bounded(ctx, [](pg_cancel_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    co_await give_up_a_script_while_it_is_sent(ctx, c, false);
    co_await give_up_a_script_while_it_is_sent(ctx, c, true);
  }(*this, ctx), 90s);
}

TEST_P(pg_cancel_test, a_pooled_connection_whose_script_was_given_up_while_it_was_sent_is_lent_again) {
  run_bounded(ctx, [](pg_cancel_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::pool dbpool({.conninfo = t.db().socket_conninfo(), .max_size = 1});
    for (const bool by_deadline : {false, true}) {
      auto [ec, lease] = co_await dbpool.acquire();
      CO_ASSERT_OK(ec);
      co_await give_up_a_script_while_it_is_sent(ctx, *lease, by_deadline);
    }
    {
      // And a lease given back at once, while its script is still being sent: the pool waits for it to end.
      auto [ec, lease] = co_await dbpool.acquire();
      CO_ASSERT_OK(ec);
      held_still server(lease->backend_pid());
      const std::string script = "SELECT length('" + huge_text() + "'); SELECT pg_sleep(60)";
      EXPECT_EC(co_await tern::with_timeout(lease->execute(script), 100ms), tern::error::timed_out);
      EXPECT_TRUE(still_sending(*lease));
      lease = {};
      server.release();
    }
    auto [qec, r] = co_await dbpool.query("SELECT 1");
    PG_ASSERT_OK(qec, r);
    EXPECT_EQ(r[0][0].as<int>(), 1);
    EXPECT_EQ(dbpool.stats().dropped, 0u);
    EXPECT_EQ(dbpool.stats().connects, 1u);
  }(*this, ctx), 90s);
}

// The cancel request for a script given up reaches the server before the script (the server's process held still
// until it has): the server drops it, so it is sent again, and the script does not run its minute.
TEST_P(pg_cancel_test, a_cancel_request_for_a_script_the_server_dropped_is_sent_again) {
  run_bounded(ctx, [](pg_cancel_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const int pid = c.backend_pid();
    held_still server(pid);
    EXPECT_EC(co_await tern::with_timeout(c.execute("SELECT pg_sleep(60)"), 50ms), tern::error::timed_out);
    for (int i = 0; i < 1000 && !sigint_pending(pid); ++i) co_await tern::sleep_for(10ms);
    CO_ASSERT(sigint_pending(pid));
    const auto start = clock_type::now();
    server.release();
    EXPECT_EQ(co_await scalar<int>(c, "SELECT 5"), 5);
    EXPECT_LT(clock_type::now() - start, 20s) << "the script's sleep ran to its end";
    EXPECT_GE(c.stats().cancels_sent, 2u);
    EXPECT_TRUE(c.is_open()) << c.error_message();
  }(*this, ctx), 90s);
}

// A script whose COPY TO STDOUT (the data dropped: a script has no reader for it) is given up while the data flows:
// the COPY is cancelled and the rest of its data dropped, and the connection serves the next queries.
TEST_P(pg_cancel_test, a_script_given_up_while_its_copy_out_flows_is_cancelled_and_the_connection_goes_on) {
  run_bounded(ctx, [](pg_cancel_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    for (const auto limit : {100ms, 300ms}) {
      const auto start = clock_type::now();
      auto script = c.execute("COPY (SELECT generate_series(1, 1000000000)) TO STDOUT");
      EXPECT_EC(co_await tern::with_timeout(std::move(script), limit), tern::error::timed_out);
      auto other = tern::spawn(ctx, expect_own_result(c, 3));
      co_await std::move(other);
      EXPECT_LT(clock_type::now() - start, 20s) << "the COPY ran to its end";
      EXPECT_TRUE(c.is_open()) << c.error_message();
    }
    EXPECT_EQ(co_await scalar<int>(c, "SELECT 9"), 9);
  }(*this, ctx), 60s);
}

// A pipelined query given up while its bytes are still being sent (the others of its batch and of the next one
// wait behind them): its bytes go out in full, the others get their own results, and its own result is dropped.
TEST_P(pg_cancel_test, a_query_given_up_while_it_is_sent_leaves_the_pipeline_in_step) {
  run_bounded(ctx, [](pg_cancel_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    held_still server(c.backend_pid());
    std::stop_source stop;
    auto big = tern::spawn(ctx, c.query("SELECT length($1::text), pg_sleep(60)", huge_text()), stop.get_token());
    std::vector<tern::join_handle<void>> others;
    for (int i = 1; i <= 3; ++i) others.push_back(tern::spawn(ctx, expect_own_result(c, i)));
    co_await tern::sleep_for(100ms);
    EXPECT_FALSE(big.done());
    EXPECT_TRUE(still_sending(c)) << "the query went out in full to a server held still";
    stop.request_stop();
    auto [ec, r] = co_await std::move(big);
    EXPECT_EC(ec, tern::error::operation_canceled);
    co_await release_and_expect_own_results(ctx, c, server, others);
    EXPECT_EQ(co_await scalar<int>(c, "SELECT 8"), 8);
  }(*this, ctx), 90s);
}

// The server signals a cancelled process twice for one request, and the second signal can come late: a BEGIN
// sent before the request has ended could be the one it cancels, failing begin() for a request meant for another
// query. So begin() sends BEGIN only once no request is on its way. Here the proxy holds the request back until the
// cancelled sleep has run to its end; the BEGIN must not have run by then (the process stays idle, not idle in a
// transaction), and once the request has been let through and ended, the transaction opens and commits.
// The same by the fallback, PQcancel on a thread (where libpq's PGcancel cannot be read; forced here by
// TERN_PG_CANCEL_BY_THREAD as the connection is made): the request counts as on its way until PQcancel has returned.
tern::task<void> begin_after_cancels(pg_cancel_test& t, tern::io_context& ctx, bool by_thread) {
  pg_proxy proxy(t.db().dir, t.db().port);
  if (by_thread) ::setenv("TERN_PG_CANCEL_BY_THREAD", "1", 1);
  pgl::connection c = co_await connect_to(ctx, proxy.conninfo());
  ::unsetenv("TERN_PG_CANCEL_BY_THREAD");
  CO_ASSERT(c.is_open());
  pgl::connection watcher = co_await connect_to(ctx, t.db().socket_conninfo());
  const int pid = c.backend_pid();
  auto state = [&]() { return scalar<std::string>(watcher, "SELECT state FROM pg_stat_activity WHERE pid = $1", pid); };
  proxy.hold_others(true);
  auto [ec, r] = co_await tern::with_timeout(c.query("SELECT pg_sleep(0.5)"), 50ms);
  EXPECT_EC(ec, tern::error::timed_out);
  for (int i = 0; i < 1000 && proxy.others_waiting() == 0; ++i) co_await tern::sleep_for(5ms);
  CO_ASSERT(proxy.others_waiting() > 0);
  auto opening = tern::spawn(ctx, c.begin());
  // The sleep runs to its end, the request held back; then, for a second, the BEGIN must not run.
  std::string now = co_await state();
  for (int i = 0; i < 2000 && now == "active"; ++i) {
    co_await tern::sleep_for(5ms);
    now = co_await state();
  }
  for (int i = 0; i < 100 && now == "idle"; ++i) {
    co_await tern::sleep_for(10ms);
    now = co_await state();
  }
  EXPECT_EQ(now, "idle") << "BEGIN went out while a cancel request was on its way";
  proxy.hold_others(false);
  auto [bec, tx] = co_await std::move(opening);
  CO_ASSERT_OK(bec);
  auto [qec, qr] = co_await tx.query("SELECT 7");
  PG_ASSERT_OK(qec, qr);
  EXPECT_EQ(qr[0][0].as<int>(), 7);
  CO_ASSERT_OK(co_await tx.commit());
  EXPECT_GE(c.stats().cancels_sent, 1u);
  EXPECT_EQ(c.stats().cancels_by_thread, by_thread ? c.stats().cancels_sent : 0u);
  EXPECT_EQ(co_await scalar<int>(c, "SELECT 8"), 8);
}

TEST_P(pg_cancel_test, a_transaction_begins_only_once_the_cancel_requests_on_their_way_have_ended) {
  run_bounded(ctx, begin_after_cancels(*this, ctx, false), 60s);
}

TEST_P(pg_cancel_test, a_cancel_request_made_by_pqcancel_on_a_thread_is_on_its_way_until_it_returns) {
  run_bounded(ctx, begin_after_cancels(*this, ctx, true), 60s);
}

}  // namespace
