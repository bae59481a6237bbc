// Cancellation of whole tasks (stop tokens carried through awaits), task_group, when_all, when_any, and
// with_timeout on tasks.
#include "support.hpp"
#include "net_support.hpp"

#include <atomic>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <variant>
#include <vector>

namespace {

using namespace tern_test;

class task_group_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(task_group_test);

tern::task<std::error_code> sleep_hours() { co_return co_await tern::sleep_for(std::chrono::hours(1)); }

tern::task<std::error_code> nested_sleep(int depth) {
  if (depth == 0) co_return co_await sleep_hours();
  co_return co_await nested_sleep(depth - 1);
}

TEST_P(task_group_test, stop_token_reaches_an_operation_deep_in_the_task_tree) {
  std::stop_source source;
  std::error_code result;
  auto h = tern::spawn(ctx, [](std::error_code& out) -> tern::task<void> { out = co_await nested_sleep(5); }(result),
                       source.get_token());
  run_bounded(ctx, [](std::stop_source& s) -> tern::task<void> {
    co_await tern::sleep_for(5ms);
    s.request_stop();
  }(source));
  EXPECT_EC(result, std::errc::operation_canceled);
  EXPECT_TRUE(h.done());
}

// The stop comes once the pair is connected (a stop during the connect or the accept would cancel those instead:
// under a loaded sanitizer build they took longer than a fixed delay), 20 ms later, so that the read is usually
// pending when it arrives; a stop that comes before the read starts cancels it too.
TEST_P(task_group_test, stop_from_another_thread_cancels_a_read) {
  std::stop_source source;
  std::error_code result;
  std::atomic<bool> connected{false};
  auto guard = ctx.make_work_guard();
  std::thread stopper([&] {
    for (int i = 0; i < 10000 && !connected.load(std::memory_order_acquire); ++i) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);
    source.request_stop();
  });
  auto h = tern::spawn(ctx, [](tern::io_context& ctx, std::error_code& out, tern::io_context::work_guard& g,
                               std::atomic<bool>& connected) -> tern::task<void> {
    auto pair = co_await connected_pair(ctx);
    connected.store(true, std::memory_order_release);
    char buf[8];
    auto [ec, n] = co_await pair.client.read_some(buf);
    out = ec;
    g.reset();
  }(ctx, result, guard, connected), source.get_token());
  EXPECT_TRUE(run_context_bounded(ctx));
  stopper.join();
  EXPECT_EC(result, std::errc::operation_canceled);
}

TEST_P(task_group_test, first_failure_cancels_siblings_and_wait_rethrows_it) {
  std::atomic<int> cancelled{0};
  std::string what;
  run_bounded(ctx, [](tern::io_context& ctx, std::atomic<int>& cancelled, std::string& what) -> tern::task<void> {
    tern::task_group g(ctx);
    for (int i = 0; i < 3; ++i) {
      g.spawn([](std::atomic<int>& c) -> tern::task<void> {
        auto ec = co_await tern::sleep_for(std::chrono::hours(1));
        if (ec == std::errc::operation_canceled) c.fetch_add(1);
      }(cancelled));
    }
    g.spawn([]() -> tern::task<void> {
      co_await tern::sleep_for(5ms);
      throw std::runtime_error("child failed");
    }());
    EXPECT_EQ(g.size(), 4u);
    try {
      co_await g.wait();
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    EXPECT_EQ(g.size(), 0u);
  }(ctx, cancelled, what));
  EXPECT_EQ(what, "child failed");
  EXPECT_EQ(cancelled.load(), 3);
}

TEST_P(task_group_test, cancel_stops_every_child_and_wait_returns_normally) {
  int finished = 0;
  run_bounded(ctx, [](tern::io_context& ctx, int& finished) -> tern::task<void> {
    tern::task_group g(ctx);
    for (int i = 0; i < 10; ++i) {
      g.spawn([](int& f) -> tern::task<void> {
        auto ec = co_await nested_sleep(2);
        EXPECT_EC(ec, std::errc::operation_canceled);
        ++f;
      }(finished));
    }
    co_await tern::yield();
    g.cancel();
    co_await g.wait();
  }(ctx, finished));
  EXPECT_EQ(finished, 10);
}

TEST_P(task_group_test, empty_group_wait_completes_at_once) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tern::task_group g(ctx);
    co_await g.wait();
    EXPECT_EQ(g.size(), 0u);
  }(ctx));
}

TEST_P(task_group_test, when_all_returns_every_result_in_order) {
  run_bounded(ctx, []() -> tern::task<void> {
    auto [a, b, c] = co_await tern::when_all(
        []() -> tern::task<int> {
          co_await tern::sleep_for(3ms);
          co_return 1;
        }(),
        []() -> tern::task<std::string> { co_return "two"; }(), []() -> tern::task<void> { co_return; }());
    EXPECT_EQ(a, 1);
    EXPECT_EQ(b, "two");
    EXPECT_TRUE((std::is_same_v<decltype(c), std::monostate>));
    std::vector<tern::task<int>> many;
    for (int i = 0; i < 50; ++i) {
      many.push_back([](int i) -> tern::task<int> {
        co_await tern::sleep_for(std::chrono::microseconds((50 - i) * 20));
        co_return i * i;
      }(i));
    }
    auto squares = co_await tern::when_all(std::move(many));
    CO_ASSERT(squares.size() == 50u);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(squares[static_cast<std::size_t>(i)], i * i);
  }());
}

TEST_P(task_group_test, when_all_failure_cancels_the_rest) {
  bool other_cancelled = false;
  bool caught = false;
  run_bounded(ctx, [](bool& other, bool& caught) -> tern::task<void> {
    try {
      co_await tern::when_all(
          [](bool& other) -> tern::task<void> {
            other = (co_await tern::sleep_for(std::chrono::hours(1))) == std::errc::operation_canceled;
          }(other),
          []() -> tern::task<int> {
            co_await tern::sleep_for(2ms);
            throw std::logic_error("no");
          }());
    } catch (const std::logic_error&) {
      caught = true;
    }
  }(other_cancelled, caught));
  EXPECT_TRUE(caught);
  EXPECT_TRUE(other_cancelled);
}

TEST_P(task_group_test, when_any_returns_the_first_and_awaits_the_cancelled_losers) {
  bool loser_finished = false;
  run_bounded(ctx, [](bool& loser_finished) -> tern::task<void> {
    auto [index, value] = co_await tern::when_any(
        [](bool& done) -> tern::task<int> {
          auto ec = co_await tern::sleep_for(std::chrono::hours(1));
          EXPECT_EC(ec, std::errc::operation_canceled);
          done = true;
          co_return -1;
        }(loser_finished),
        []() -> tern::task<std::string> {
          co_await tern::sleep_for(2ms);
          co_return "fast";
        }());
    EXPECT_EQ(index, 1u);
    EXPECT_EQ(std::get<1>(value), "fast");
    EXPECT_TRUE(loser_finished) << "when_any returns only after the losers have finished";
  }(loser_finished));
}

TEST_P(task_group_test, when_any_range_under_a_cancellation_storm) {
  run_bounded(ctx, []() -> tern::task<void> {
    for (int round = 0; round < 300; ++round) {
      std::vector<tern::task<int>> racers;
      for (int i = 0; i < 4; ++i) {
        racers.push_back([](int i, int round) -> tern::task<int> {
          // Different racers win in different rounds; every loser is cancelled mid-sleep or mid-yield.
          for (int k = 0; k < (i + round) % 4; ++k) co_await tern::yield();
          auto ec = co_await tern::sleep_for(std::chrono::microseconds(((i * 7 + round) % 5) * 100));
          if (ec) co_return -1;
          co_return i;
        }(i, round));
      }
      auto [index, value] = co_await tern::when_any(std::move(racers));
      CO_ASSERT(index < 4u);
      EXPECT_EQ(value, static_cast<int>(index)) << "the winner's own result is returned";
    }
  }());
}

TEST_P(task_group_test, with_timeout_on_a_task_cancels_what_it_waits_on) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto pair = co_await connected_pair(ctx);
    std::array<char, 16> buf{};
    auto before = clock_type::now();
    auto r = co_await tern::with_timeout(pair.client.read_exact(buf), 20ms);
    EXPECT_GE(clock_type::now() - before, 20ms);
    EXPECT_EC(r.ec, std::errc::timed_out);
    // The socket still works afterwards.
    auto w = co_await pair.server.write_all(std::string_view("0123456789abcdef"));
    EXPECT_OK(w.ec);
    auto r2 = co_await pair.client.read_exact(buf);
    EXPECT_OK(r2.ec);
    EXPECT_EQ(std::string_view(buf.data(), 16), "0123456789abcdef");
    // A task that finishes in time returns its own result.
    int v = co_await tern::with_timeout([]() -> tern::task<int> {
      co_await tern::sleep_for(1ms);
      co_return 9;
    }(), 5s);
    EXPECT_EQ(v, 9);
  }(ctx));
}

// ---- task_group::run: the scoped form, which never lets a child outlive it ----

// What a child saw, and whether it had finished when run() handed control back.
struct child_log {
  int finished = 0;
  int canceled = 0;
};

tern::task<void> child_sleeping(child_log& log, std::chrono::milliseconds d) {
  auto ec = co_await tern::sleep_for(d);
  if (ec == std::errc::operation_canceled) ++log.canceled;
  ++log.finished;
}

TEST_P(task_group_test, scoped_run_waits_for_the_children_and_returns_the_body_value) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    child_log log;
    int v = co_await tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<int> {
      for (int i = 0; i < 3; ++i) g.spawn(child_sleeping(log, 5ms));
      g.spawn([&log, extra = std::string("x")]() -> tern::task<void> {  // the callable form, with captures
        co_await tern::sleep_for(2ms);
        log.finished += static_cast<int>(extra.size());
      });
      co_return 11;
    });
    EXPECT_EQ(v, 11);
    EXPECT_EQ(log.finished, 4) << "every child had finished when run returned";
    EXPECT_EQ(log.canceled, 0);
  }(ctx));
}

TEST_P(task_group_test, scoped_run_cancels_and_joins_the_children_before_a_throw_leaves_it) {
  run_bounded(ctx, [](tern::io_context&) -> tern::task<void> {
    child_log log;
    try {
      co_await tern::task_group::run([&](tern::task_group& g) -> tern::task<void> {
        for (int i = 0; i < 5; ++i) g.spawn(child_sleeping(log, std::chrono::hours(1)));
        co_await tern::yield();
        throw std::runtime_error("body failed");
      });
      ADD_FAILURE() << "run must rethrow the body's exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "body failed");
      EXPECT_EQ(log.finished, 5) << "the children were joined before the exception reached the caller";
      EXPECT_EQ(log.canceled, 5);
    }
  }(ctx));
}

TEST_P(task_group_test, scoped_run_cancels_the_body_when_a_child_fails) {
  run_bounded(ctx, [](tern::io_context&) -> tern::task<void> {
    std::error_code body_wait;
    child_log log;
    try {
      co_await tern::task_group::run([&](tern::task_group& g) -> tern::task<void> {
        g.spawn(child_sleeping(log, std::chrono::hours(1)));
        g.spawn([]() -> tern::task<void> {
          co_await tern::sleep_for(2ms);
          throw std::logic_error("child failed");
        }());
        body_wait = co_await tern::sleep_for(std::chrono::hours(1));
      });
      ADD_FAILURE() << "run must rethrow the child's exception";
    } catch (const std::logic_error& e) {
      EXPECT_STREQ(e.what(), "child failed");
    }
    EXPECT_EC(body_wait, std::errc::operation_canceled);
    EXPECT_EQ(log.canceled, 1);
  }(ctx));
}

TEST_P(task_group_test, scoped_run_under_a_stopped_parent_cancels_everything) {
  run_bounded(ctx, [](tern::io_context&) -> tern::task<void> {
    child_log log;
    auto ec = co_await tern::with_timeout(
        [](child_log& log) -> tern::task<std::error_code> {
          co_return co_await tern::task_group::run([&log](tern::task_group& g) -> tern::task<std::error_code> {
            g.spawn(child_sleeping(log, std::chrono::hours(1)));
            co_return co_await tern::sleep_for(std::chrono::hours(1));
          });
        }(log),
        5ms);
    EXPECT_EC(ec, std::errc::timed_out);
    EXPECT_EQ(log.finished, 1);
    EXPECT_EQ(log.canceled, 1);
  }(ctx));
}

}  // namespace
