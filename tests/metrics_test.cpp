// Loop metrics: each counter counts what it says (posts from the loop and from other threads, wake-ups between
// loops and from outside, operations by kind, timers armed and fired, sampled loop lag), snapshots from other
// threads and of a runtime, process totals that keep a destroyed loop's counts, and a Prometheus exposition that
// follows the text format.
#include "net_support.hpp"
#include "support.hpp"

#include <tern/metrics.hpp>

#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

namespace {

using namespace tern_test;
namespace metrics = tern::metrics;

std::size_t kind_index(std::string_view name) {
  for (std::size_t i = 0; i < metrics::op_kind_count; ++i) {
    if (metrics::op_kind_name(i) == name) return i;
  }
  ADD_FAILURE() << "no operation kind named " << name;
  return 0;
}

class metrics_test : public backend_test {
 protected:
  void SetUp() override {
    if (!metrics::enabled) GTEST_SKIP() << "built with TERN_METRICS=OFF";
  }
};
TERN_INSTANTIATE_BACKENDS(metrics_test);

TEST_P(metrics_test, counts_posts_from_the_loop_and_the_items_run) {
  metrics::loop_snapshot before, after_posting;
  int ran = 0;
  run_bounded(ctx, [&]() -> tern::task<void> {
    before = ctx.metrics();
    for (int i = 0; i < 100; ++i) ctx.post([&ran] { ++ran; });
    after_posting = ctx.metrics();
    co_return;
  }());
  const metrics::loop_snapshot end = ctx.metrics();
  EXPECT_EQ(ran, 100);
  EXPECT_EQ(after_posting.posts_local - before.posts_local, 100u);
  EXPECT_EQ(end.posts_remote, before.posts_remote) << "nothing came from another thread once the task ran";
  EXPECT_EQ(before.posts_remote, 1u) << "the spawn of the task, made before the loop ran, came through the inbox";
  EXPECT_GE(end.items_run - before.items_run, 100u);
  EXPECT_GE(end.turns, 1u);
  EXPECT_EQ(end.loops, 1u);
}

TEST_P(metrics_test, counts_posts_from_another_thread_and_the_wakeups_they_cost) {
  auto guard = std::make_unique<tern::io_context::work_guard>(ctx);
  std::atomic<int> ran{0};
  std::thread loop([this] { ctx.run(); });
  for (int i = 0; i < 20; ++i) {
    ctx.post([&ran] { ran.fetch_add(1); });
    while (ran.load() != i + 1) std::this_thread::yield();
    std::this_thread::sleep_for(2ms);  // the loop parks before the next post
  }
  guard.reset();
  loop.join();
  const metrics::loop_snapshot s = ctx.metrics();
  EXPECT_EQ(s.posts_remote, 20u);
  EXPECT_EQ(s.posts_local, 0u);
  EXPECT_GE(s.parks, 1u);
  EXPECT_GE(s.wakeups_received, 1u) << "a post to a parked loop wakes it";
  EXPECT_LE(s.wakeups_received, 21u);  // one per post at most, and the guard's release
  EXPECT_EQ(s.wakeups_sent, 0u) << "the poster runs no loop";
}

TEST_P(metrics_test, a_loop_that_wakes_another_counts_it_as_sent) {
  tern::io_context other(options());
  auto guard = std::make_unique<tern::io_context::work_guard>(other);
  std::atomic<int> ran{0};
  std::thread other_thread([&other] { other.run(); });
  run_bounded(ctx, [&]() -> tern::task<void> {
    for (int i = 0; i < 10; ++i) {
      other.post([&ran] { ran.fetch_add(1); });
      while (ran.load() != i + 1) std::this_thread::yield();
      std::this_thread::sleep_for(2ms);  // the other loop parks again
    }
    co_return;
  }());
  guard.reset();
  other_thread.join();
  const metrics::loop_snapshot sender = ctx.metrics();
  const metrics::loop_snapshot receiver = other.metrics();
  EXPECT_GE(sender.wakeups_sent, 1u);
  EXPECT_LE(sender.wakeups_sent, 10u);
  EXPECT_GE(receiver.wakeups_received, sender.wakeups_sent) << "every wake-up sent arrives";
  EXPECT_EQ(receiver.posts_remote, 10u);
}

TEST_P(metrics_test, counts_operations_by_kind_and_the_system_calls_they_take) {
  const metrics::loop_snapshot before = ctx.metrics();
  run_bounded(ctx, [&]() -> tern::task<void> {
    auto pair = co_await connected_pair(ctx);
    char byte = 'x';
    for (int i = 0; i < 10; ++i) {
      auto [wec, w] = co_await pair.client.write_all(tern::const_buffer(&byte, 1));
      CO_ASSERT_OK(wec);
      auto [rec, r] = co_await pair.server.read_exact(tern::mutable_buffer(&byte, 1));
      CO_ASSERT_OK(rec);
    }
  }());
  const metrics::loop_snapshot s = ctx.metrics();
  const std::size_t send = kind_index("send");
  const std::size_t recv = kind_index("recv");
  EXPECT_EQ(s.ops[send].started - before.ops[send].started, 10u);
  EXPECT_EQ(s.ops[recv].started - before.ops[recv].started, 10u);
  EXPECT_EQ(s.ops[kind_index("connect")].started, 1u);
  EXPECT_EQ(s.ops[kind_index("accept")].started, 1u);
  for (std::size_t i = 0; i < metrics::op_kind_count; ++i) {
    EXPECT_EQ(s.ops[i].started, s.ops[i].completed) << metrics::op_kind_name(i) << ": every operation finished";
  }
  // Under io_uring the accept waited for the listener's multishot accept, an operation of its own.
  const std::size_t multishot_accepts = s.ops[kind_index("accept_multishot")].started;
  EXPECT_EQ(multishot_accepts, ctx.backend() == tern::backend_kind::io_uring ? 1u : 0u);
  EXPECT_EQ(s.ops_started(), s.ops[send].started + s.ops[recv].started + 2 + multishot_accepts);
  EXPECT_GE(s.kernel_waits, 1u);
  EXPECT_GE(s.syscalls, s.kernel_waits) << "every wait is a system call";
  if (ctx.backend() == tern::backend_kind::epoll) {
    // The sends find room in the socket and finish inside their first attempt, one system call each.
    EXPECT_GE(s.inline_completions, 10u);
    EXPECT_GE(s.syscalls, 20u);
  }
}

TEST_P(metrics_test, counts_timers_armed_and_fired_but_not_cancelled_ones) {
  const metrics::loop_snapshot before = ctx.metrics();
  run_bounded(ctx, []() -> tern::task<void> {
    for (int i = 0; i < 5; ++i) CO_ASSERT_OK(co_await tern::sleep_for(1ms));
    tern::timer t(*tern::io_context::current());
    t.expires_after(10s);
    auto canceller = [](tern::timer& target) -> tern::task<void> {
      CO_ASSERT_OK(co_await tern::sleep_for(1ms));
      EXPECT_EQ(target.cancel(), 1u);
    };
    tern::spawn(*tern::io_context::current(), canceller(t)).detach();  // t outlives it: awaited below
    std::error_code ec = co_await t.wait();
    EXPECT_EC(ec, tern::error::operation_canceled);
  }());
  const metrics::loop_snapshot s = ctx.metrics();
  EXPECT_EQ(s.timers_armed - before.timers_armed, 7u) << "five sleeps, the timer and the canceller's sleep";
  EXPECT_EQ(s.timers_fired - before.timers_fired, 6u) << "the cancelled timer did not fire";
}

TEST_P(metrics_test, samples_the_loop_lag_of_a_busy_loop) {
  int left = 100'000;
  std::function<void()> step = [&] {
    if (--left > 0) ctx.post(step);
  };
  ctx.post(step);
  ASSERT_TRUE(run_context_bounded(ctx));
  const metrics::loop_snapshot s = ctx.metrics();
  // 100k items run 256 a turn: hundreds of turns, one in 64 sampled.
  EXPECT_GE(s.turns, 64u);
  EXPECT_GE(s.loop_lag.count(), 1u);
  EXPECT_LE(s.loop_lag.count(), s.turns / 64 + 1);
  EXPECT_GT(s.loop_lag.quantile_bound_us(1.0), 0u);
}

TEST_P(metrics_test, a_runtime_reports_every_worker) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  std::atomic<int> ran{0};
  for (std::size_t w = 0; w < 2; ++w) {
    for (int i = 0; i < 50; ++i) rt.post_to(w, [&ran] { ran.fetch_add(1); });
  }
  metrics::runtime_snapshot during = rt.metrics();  // while the workers run: any thread may read
  EXPECT_EQ(during.workers.size(), 2u);
  while (ran.load() != 100) std::this_thread::yield();
  const metrics::runtime_snapshot s = rt.metrics();
  ASSERT_EQ(s.workers.size(), 2u);
  for (const auto& w : s.workers) EXPECT_GE(w.posts_remote, 50u) << "posted from the test's thread";
  const metrics::loop_snapshot total = s.total();
  EXPECT_EQ(total.loops, 2u);
  EXPECT_EQ(total.items_run, s.workers[0].items_run + s.workers[1].items_run);
  EXPECT_EQ(total.posts_remote, s.workers[0].posts_remote + s.workers[1].posts_remote);
  rt.shutdown(1s);
}

TEST_P(metrics_test, process_totals_keep_the_counts_of_destroyed_loops) {
  const metrics::loop_snapshot before = metrics::process_snapshot();
  {
    tern::io_context gone(options());
    run_bounded(gone, [&gone]() -> tern::task<void> {
      for (int i = 0; i < 10; ++i) gone.post([] {});
      co_return;
    }());
    const metrics::loop_snapshot live = metrics::process_snapshot();
    EXPECT_EQ(live.loops, before.loops + 1);
  }
  const metrics::loop_snapshot after = metrics::process_snapshot();
  EXPECT_EQ(after.loops, before.loops);
  EXPECT_GE(after.posts_local - before.posts_local, 10u);
  EXPECT_GE(after.items_run - before.items_run, 10u);
}

// ---- the Prometheus text format ----

// Checks the exposition line by line: every sample belongs to a family announced by HELP then TYPE just before,
// names and labels are well formed, values are numbers, histogram buckets grow and end at +Inf with the count.
// Returns the samples by their full series name.
std::map<std::string, std::string> parse_exposition(const std::string& text) {
  static const std::regex help(R"(^# HELP (tern_[a-z_]+) \S.*$)");
  static const std::regex type(R"(^# TYPE (tern_[a-z_]+) (counter|gauge|histogram)$)");
  static const std::regex sample(R"(^(tern_[a-z_]+)\{loop="[0-9a-z_]+"(,[a-z]+="[^"\\]*")*\} (-?[0-9]+(\.[0-9]+)?)$)");
  std::map<std::string, std::string> samples;
  std::string family, family_type;
  std::map<std::string, int> helps;
  double last_bucket = -1;
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, help)) {
      family = m[1];
      family_type.clear();
      ++helps[family];
      last_bucket = -1;
    } else if (std::regex_match(line, m, type)) {
      EXPECT_EQ(m[1], family) << "TYPE right after its HELP: " << line;
      family_type = m[2];
    } else if (std::regex_match(line, m, sample)) {
      const std::string name = m[1];
      EXPECT_FALSE(family_type.empty()) << "a sample before its TYPE: " << line;
      if (family_type == "histogram") {
        EXPECT_TRUE(name == family + "_bucket" || name == family + "_sum" || name == family + "_count") << line;
        if (name == family + "_bucket") {
          const double v = std::stod(m[3]);
          EXPECT_GE(v, last_bucket) << "buckets are cumulative: " << line;
          last_bucket = v;
        }
      } else {
        EXPECT_EQ(name, family) << line;
      }
      samples[line.substr(0, line.rfind(' '))] = m[3];
    } else {
      ADD_FAILURE() << "not a line of the text format: '" << line << "'";
    }
  }
  for (const auto& [name, n] : helps) EXPECT_EQ(n, 1) << name << " announced once";
  EXPECT_FALSE(text.empty() || text.back() != '\n') << "the exposition ends with a line feed";
  return samples;
}

TEST(metrics_prometheus, writes_every_counter_with_its_value) {
  metrics::loop_snapshot s;
  s.turns = 7;
  s.posts_local = 100;
  s.park_ns = 1'500'000'001;
  s.frame_blocks_in_use = -3;
  s.ops[kind_index("recv")] = {12, 11};
  s.loop_lag.buckets[0] = 2;
  s.loop_lag.buckets[3] = 1;
  s.loop_lag.sum_ns = 9000;
  std::string text;
  metrics::write_prometheus(s, text, "main");
  const auto samples = parse_exposition(text);
  EXPECT_EQ(samples.at("tern_loop_turns_total{loop=\"main\"}"), "7");
  EXPECT_EQ(samples.at("tern_loop_posts_local_total{loop=\"main\"}"), "100");
  EXPECT_EQ(samples.at("tern_loop_park_seconds_total{loop=\"main\"}"), "1.500000001");
  EXPECT_EQ(samples.at("tern_frame_pool_blocks_in_use{loop=\"main\"}"), "-3");
  EXPECT_EQ(samples.at("tern_ops_started_total{loop=\"main\",op=\"recv\"}"), "12");
  EXPECT_EQ(samples.at("tern_ops_completed_total{loop=\"main\",op=\"recv\"}"), "11");
  EXPECT_EQ(samples.count("tern_ops_started_total{loop=\"main\",op=\"send\"}"), 0u) << "unused kinds are left out";
  EXPECT_EQ(samples.at("tern_loop_lag_seconds_bucket{loop=\"main\",le=\"0.000001000\"}"), "2");
  EXPECT_EQ(samples.at("tern_loop_lag_seconds_bucket{loop=\"main\",le=\"0.000004000\"}"), "2");
  EXPECT_EQ(samples.at("tern_loop_lag_seconds_bucket{loop=\"main\",le=\"0.000008000\"}"), "3");
  EXPECT_EQ(samples.at("tern_loop_lag_seconds_bucket{loop=\"main\",le=\"+Inf\"}"), "3");
  EXPECT_EQ(samples.at("tern_loop_lag_seconds_count{loop=\"main\"}"), "3");
  EXPECT_EQ(samples.at("tern_loop_lag_seconds_sum{loop=\"main\"}"), "0.000009000");
}

TEST_P(metrics_test, a_runtime_exposition_labels_each_worker) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  std::atomic<int> ran{0};
  rt.post_to(1, [&ran] { ran.fetch_add(1); });
  while (ran.load() != 1) std::this_thread::yield();
  std::string text;
  metrics::write_prometheus(rt.metrics(), text);
  const auto samples = parse_exposition(text);
  EXPECT_EQ(samples.count("tern_loop_turns_total{loop=\"0\"}"), 1u);
  EXPECT_EQ(samples.count("tern_loop_turns_total{loop=\"1\"}"), 1u);
  EXPECT_GE(std::stoull(samples.at("tern_loop_posts_remote_total{loop=\"1\"}")), 1u);
  rt.shutdown(1s);
}

}  // namespace
