// Pipelining against a real redis-server: commands of many tasks coalesced into few writes with every reply on its
// own command, 10000 commands from 100 tasks on two workers, cancellation and timeouts in the middle of a pipeline
// (the replies that follow still land on their commands; an unsent command is never sent), commands from another
// worker when their connection is closed or destroyed under them, explicit pipelines and MULTI/EXEC transactions
// (queued errors, run-time errors, WATCH).
#include "redis/redis_support.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace {

using namespace tern_test;
using tern::task;
using namespace std::chrono_literals;

class redis_pipeline_test : public redis_test {};
TERN_INSTANTIATE_BACKENDS(redis_pipeline_test);

std::string value_of(int task, int i) { return "value-" + std::to_string(task) + "-" + std::to_string(i); }

// SET then GET of keys of its own, each reply checked against its request; returns the mismatches.
task<int> set_and_get(redis::connection& conn, int id, int rounds) {
  int wrong = 0;
  for (int i = 0; i < rounds; ++i) {
    const std::string key = "key:" + std::to_string(id) + ":" + std::to_string(i);
    const std::string value = value_of(id, i);
    auto set = co_await conn.command<std::string>("SET", key, value);
    if (set.ec || set.value != "OK") ++wrong;
    auto get = co_await conn.command<std::string>("GET", key);
    if (get.ec || get.value != value) ++wrong;
  }
  co_return wrong;
}

TEST_P(redis_pipeline_test, commands_of_many_tasks_leave_in_few_writes_and_each_gets_its_reply) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(here(), server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    const auto before = conn.stats();
    std::vector<tern::join_handle<int>> tasks;
    for (int t = 0; t < 100; ++t) tasks.push_back(tern::spawn(here(), set_and_get(conn, t, 5)));
    int wrong = 0;
    for (auto& h : tasks) wrong += co_await std::move(h);
    EXPECT_EQ(wrong, 0);
    const auto after = conn.stats();
    const std::uint64_t commands = after.commands_sent - before.commands_sent;
    const std::uint64_t writes = after.writes - before.writes;
    EXPECT_EQ(commands, 1000u);
    // Each round of the 100 tasks gathers into a handful of writes, not one per command.
    EXPECT_LE(writes, commands / 10) << writes << " writes for " << commands << " commands";
    conn.close();
  }(server));
}

TEST_P(redis_pipeline_test, ten_thousand_commands_from_100_tasks_on_two_workers) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  const redis::config cfg = server.unix_config();
  const int wrong = rt.block_on([](tern::runtime& rt, redis::config cfg) -> task<int> {
    redis::connection conn(here(), cfg);  // on worker 0
    if (co_await conn.connect()) co_return -1;
    std::vector<tern::join_handle<int>> tasks;
    for (int t = 0; t < 100; ++t) {
      tasks.push_back(rt.spawn_on(static_cast<std::size_t>(t % 2), set_and_get, std::ref(conn), t, 50));
    }
    int wrong = 0;
    for (auto& h : tasks) wrong += co_await std::move(h);
    EXPECT_EQ(conn.stats().commands_sent, 10000u);
    EXPECT_LT(conn.stats().writes, 5000u);
    conn.close();
    co_return wrong;
  }(rt, cfg));
  EXPECT_EQ(wrong, 0);
}

task<redis::result<std::string>> get(redis::connection& conn, std::string key) {
  co_return co_await conn.command<std::string>("GET", key);
}

TEST_P(redis_pipeline_test, cancelled_commands_in_the_middle_of_a_pipeline_leave_the_others_in_step) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(here(), server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    redis::pipeline setup;
    for (int i = 0; i < 10; ++i) setup.push("SET", "k" + std::to_string(i), "v" + std::to_string(i));
    CO_ASSERT_OK((co_await conn.execute(setup)).ec);
    // The server sleeps, so the GETs below are sent and wait behind it.
    auto sleeping = tern::spawn(here(), conn.command<std::string>("DEBUG", "SLEEP", "0.1"));
    std::vector<std::stop_source> stops(10);
    std::vector<tern::join_handle<redis::result<std::string>>> gets;
    for (int i = 0; i < 10; ++i) gets.push_back(tern::spawn(here(), get(conn, "k" + std::to_string(i)), stops[i].get_token()));
    co_await tern::sleep_for(20ms);
    const std::uint64_t writes = conn.stats().writes;
    for (int i : {2, 5, 6}) stops[i].request_stop();
    for (int i : {2, 5, 6}) {
      auto r = co_await std::move(gets[i]);
      EXPECT_EC(r.ec, tern::error::operation_canceled) << i;
    }
    EXPECT_FALSE(sleeping.done()) << "the cancelled commands completed before the server answered anything";
    EXPECT_EQ((co_await std::move(sleeping)).value, "OK");
    for (int i = 0; i < 10; ++i) {
      if (i == 2 || i == 5 || i == 6) continue;
      auto [ec, v] = co_await std::move(gets[i]);
      EXPECT_OK(ec) << i;
      EXPECT_EQ(v, "v" + std::to_string(i));
    }
    auto [ec, v] = co_await conn.command<std::string>("GET", "k9");
    EXPECT_OK(ec);
    EXPECT_EQ(v, "v9");
    EXPECT_EQ(conn.stats().replies_dropped, 3u);
    EXPECT_EQ(conn.stats().writes, writes + 1);  // nothing sent for the cancelled ones
    conn.close();
  }(server));
}

task<redis::result<std::int64_t>> incr(redis::connection& conn, std::string key) {
  co_return co_await conn.command<std::int64_t>("INCR", key);
}

TEST_P(redis_pipeline_test, a_command_cancelled_before_it_is_sent_is_never_sent) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(here(), server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    std::stop_source stop;
    auto before = tern::spawn(here(), incr(conn, "first"));
    auto cancelled = tern::spawn(here(), incr(conn, "never"), stop.get_token());
    auto after = tern::spawn(here(), incr(conn, "last"));
    co_await tern::yield();  // the three have formatted their commands; the writer has not run
    stop.request_stop();
    EXPECT_EC((co_await std::move(cancelled)).ec, tern::error::operation_canceled);
    EXPECT_EQ((co_await std::move(before)).value, 1);
    EXPECT_EQ((co_await std::move(after)).value, 1);
    auto [ec, never] = co_await conn.command<std::optional<std::string>>("GET", "never");
    EXPECT_OK(ec);
    EXPECT_FALSE(never.has_value()) << "the cancelled INCR ran";
    EXPECT_EQ(conn.stats().replies_dropped, 0u);
    conn.close();
  }(server));
}

TEST_P(redis_pipeline_test, a_timeout_on_one_command_leaves_the_next_one_its_own_reply) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(here(), server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    auto slow = co_await tern::with_timeout(conn.command<std::string>("DEBUG", "SLEEP", "0.1"), 20ms);
    EXPECT_EC(slow.ec, tern::error::timed_out);
    auto [ec, echo] = co_await conn.command<std::string>("ECHO", "mine");
    EXPECT_OK(ec);
    EXPECT_EQ(echo, "mine");
    EXPECT_EQ(conn.stats().replies_dropped, 1u);
    conn.close();
  }(server));
}

TEST_P(redis_pipeline_test, timeouts_of_commands_from_another_worker) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  const redis::config cfg = server.unix_config();
  rt.block_on([](tern::runtime& rt, redis::config cfg) -> task<void> {
    redis::connection conn(here(), cfg);
    EXPECT_OK(co_await conn.connect());
    auto remote = [](redis::connection& conn) -> task<void> {
      auto slow = co_await tern::with_timeout(conn.command<std::string>("DEBUG", "SLEEP", "0.1"), 20ms);
      EXPECT_EC(slow.ec, tern::error::timed_out);
      for (int i = 0; i < 20; ++i) {
        auto [ec, echo] = co_await conn.command<std::string>("ECHO", std::to_string(i));
        EXPECT_OK(ec);
        EXPECT_EQ(echo, std::to_string(i));
      }
      auto gone = co_await tern::with_timeout(conn.command<std::string>("DEBUG", "SLEEP", "0.05"), 0ms);
      EXPECT_EC(gone.ec, tern::error::timed_out);
    };
    co_await rt.spawn_on(1, remote(conn));
    auto [ec, v] = co_await conn.command<std::string>("ECHO", "after");
    EXPECT_OK(ec);
    EXPECT_EQ(v, "after");
    conn.close();
  }(rt, cfg));
}

// What the commands of a task on another worker came to.
struct remote_outcome {
  int values = 0;  // the right reply
  int ended = 0;   // error::closed (or timed_out, for those awaited under a timeout)
  int wrong = 0;   // anything else: a wrong reply or another error
};

void count(remote_outcome& o, const redis::result<std::string>& r, const std::string& expected, bool timed) {
  if (!r.ec) {
    (r.value == expected ? o.values : o.wrong) += 1;
  } else if (r.ec == redis::error::closed || (timed && r.ec == tern::error::timed_out)) {
    ++o.ended;
  } else {
    ADD_FAILURE() << describe(r.ec);
    ++o.wrong;
  }
}

// The connection as the tasks of worker 1 reach it: under a lock, so that the test can destroy it between two of
// their calls; a command is made under the lock and awaited outside it, possibly after the connection is gone.
struct shared_connection {
  std::mutex lock;
  std::unique_ptr<redis::connection> conn;
  using echo_op = decltype(std::declval<redis::connection&>().command<std::string>("ECHO", std::string()));
  // The ECHO of text, or nothing once the connection is gone.
  std::optional<echo_op> echo(const std::string& text) {
    std::lock_guard guard(lock);
    std::optional<echo_op> op;
    if (conn) op.emplace(conn->command<std::string>("ECHO", text));
    return op;
  }
};

// ECHOes until a command ends in error or the connection is gone; every fourth under a timeout of 0 (cancelled as
// it leaves, or in flight).
task<remote_outcome> echo_until_gone(shared_connection& shared, int id, std::atomic<int>& replies) {
  remote_outcome o;
  for (int i = 0;; ++i) {
    const std::string text = value_of(id, i);
    std::optional<shared_connection::echo_op> op = shared.echo(text);
    if (!op) co_return o;
    const bool timed = i % 4 == 3;
    redis::result<std::string> r;
    if (timed) {
      r = co_await tern::with_timeout(std::move(*op), 0ms);
    } else {
      r = co_await std::move(*op);
    }
    count(o, r, text, timed);
    if (r.ec == redis::error::closed) co_return o;
    if (!r.ec) replies.fetch_add(1, std::memory_order_relaxed);
  }
}

// A command made while the connection lives and awaited once it is destroyed.
task<remote_outcome> echo_after_the_end(shared_connection& shared, int id, std::atomic<int>& made,
                                        std::atomic<bool>& go) {
  remote_outcome o;
  const std::string text = value_of(id, 0);
  std::optional<shared_connection::echo_op> op = shared.echo(text);
  made.fetch_add(1);
  if (!op) co_return o;
  while (!go.load()) co_await tern::yield();
  const redis::result<std::string> r = co_await std::move(*op);
  count(o, r, text, false);
  co_return o;
}

TEST_P(redis_pipeline_test, commands_from_another_worker_end_when_their_connection_is_closed_or_destroyed) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  const redis::config cfg = server.unix_config();
  rt.block_on([](tern::runtime& rt, redis::config cfg) -> task<void> {
    for (const bool destroy : {false, true}) {
      shared_connection shared;
      shared.conn = std::make_unique<redis::connection>(here(), cfg);  // on worker 0
      CO_ASSERT_OK(co_await shared.conn->connect());
      std::atomic<int> replies{0};
      std::atomic<int> made{0};
      std::atomic<bool> go{false};
      std::vector<tern::join_handle<remote_outcome>> looping;
      std::vector<tern::join_handle<remote_outcome>> late;
      for (int t = 0; t < 40; ++t) looping.push_back(rt.spawn_on(1, echo_until_gone, std::ref(shared), t, std::ref(replies)));
      for (int t = 0; t < 20; ++t) {
        late.push_back(rt.spawn_on(1, echo_after_the_end, std::ref(shared), 100 + t, std::ref(made), std::ref(go)));
      }
      // Mid-flight: commands queued to this loop, sent, and awaiting their replies.
      for (int i = 0; i < 10000 && (replies.load() < 2000 || made.load() < 20); ++i) co_await tern::sleep_for(1ms);
      EXPECT_GE(replies.load(), 2000);
      if (destroy) {
        std::lock_guard guard(shared.lock);
        shared.conn.reset();
      } else {
        shared.conn->close();
      }
      // The connection's background task ends meanwhile; then the commands made before the end are awaited.
      co_await tern::sleep_for(50ms);
      go.store(true);
      remote_outcome all;
      for (auto* handles : {&looping, &late}) {
        for (auto& h : *handles) {
          const remote_outcome o = co_await std::move(h);
          all.values += o.values;
          all.ended += o.ended;
          all.wrong += o.wrong;
        }
      }
      EXPECT_EQ(all.wrong, 0) << (destroy ? "destroyed" : "closed");
      EXPECT_GE(all.values, 2000);
      EXPECT_GE(all.ended, 20) << "the late commands end with error::closed";
      shared.conn.reset();
    }
  }(rt, cfg));
}

TEST_P(redis_pipeline_test, an_explicit_pipeline_keeps_each_reply) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(here(), server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    redis::pipeline p;
    p.push("SET", "a", "1").push("INCR", "a").push("LPUSH", "a", "x").push("GET", "a");
    EXPECT_EQ(p.size(), 4u);
    auto r = co_await conn.execute(p);
    EXPECT_OK(r.ec);
    EXPECT_EQ(p.reply(0).to<std::string>().value, "OK");
    EXPECT_EQ(p.reply(1).to<std::int64_t>().value, 2);
    EXPECT_TRUE(p.reply(2).is_error());
    EXPECT_EC(p.reply(2).to<std::int64_t>().ec, redis::error::wrong_type);
    EXPECT_EQ(p.reply(3).to<std::string>().value, "2");
    // Again, with other commands: the storage is reused, the replies are new.
    p.clear();
    p.push("INCR", "a");
    EXPECT_OK((co_await conn.execute(p)).ec);
    EXPECT_EQ(p.reply(0).to<std::int64_t>().value, 3);
    redis::pipeline empty;
    EXPECT_EC((co_await conn.execute(empty)).ec, std::errc::invalid_argument);
    conn.close();
  }(server));
}

TEST_P(redis_pipeline_test, multi_exec_runs_the_commands_together) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(here(), server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    redis::transaction t;
    t.push("SET", "n", 10).push("INCRBY", "n", 5).push("LPUSH", "n", "x").push("HSET", "h", "f", "v").push("HGETALL", "h");
    auto r = co_await conn.execute(t);
    EXPECT_OK(r.ec);
    EXPECT_EQ(t.reply(0).to<std::string>().value, "OK");
    EXPECT_EQ(t.reply(1).to<std::int64_t>().value, 15);
    EXPECT_EC(t.reply(2).to<std::int64_t>().ec, redis::error::wrong_type);  // a run-time error of one command
    EXPECT_EQ(t.reply(3).to<std::int64_t>().value, 1);
    auto h = t.reply(4).to<std::map<std::string, std::string>>();
    EXPECT_OK(h.ec);
    EXPECT_EQ(h.value, (std::map<std::string, std::string>{{"f", "v"}}));

    // A command refused when queued aborts the whole transaction.
    redis::transaction bad;
    bad.push("INCR", "n").push("SET", "only-a-key").push("INCR", "n");
    auto aborted = co_await conn.execute(bad);
    EXPECT_EC(aborted.ec, redis::error::exec_abort);
    EXPECT_EQ(aborted.message.substr(0, 9), "EXECABORT");
    EXPECT_TRUE(bad.reply(1).is_error());
    auto [ec, n] = co_await conn.command<std::int64_t>("GET", "n");
    EXPECT_OK(ec);
    EXPECT_EQ(n, 15) << "a command of the aborted transaction ran";
    conn.close();
  }(server));
}

TEST_P(redis_pipeline_test, a_watched_key_that_changes_aborts_the_transaction) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection conn(here(), server.unix_config());
    redis::connection other(here(), server.unix_config());
    CO_ASSERT_OK(co_await conn.connect());
    CO_ASSERT_OK(co_await other.connect());
    EXPECT_OK((co_await conn.command<redis::ignore_t>("WATCH", "w")).ec);
    EXPECT_OK((co_await other.command<redis::ignore_t>("SET", "w", "theirs")).ec);
    redis::transaction t;
    t.push("SET", "w", "mine");
    EXPECT_EC((co_await conn.execute(t)).ec, redis::error::transaction_aborted);
    auto [ec, w] = co_await conn.command<std::string>("GET", "w");
    EXPECT_OK(ec);
    EXPECT_EQ(w, "theirs");
    EXPECT_OK((co_await conn.execute(t)).ec);  // no WATCH any more
    conn.close();
    other.close();
  }(server));
}

}  // namespace
