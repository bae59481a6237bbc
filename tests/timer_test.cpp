// Timers: sleep_for / sleep_until never fire early, timers fire in deadline order (within one wheel tick and
// across wheel levels), re-arming, cancellation with counts, several waiters on one timer, and a million
// armed-then-cancelled timers leaving nothing behind.
#include "net_support.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

namespace {

using namespace tern_test;

class timer_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(timer_test);

TEST_P(timer_test, sleep_for_not_earlier_than_deadline) {
  run_bounded(ctx, []() -> tern::task<void> {
    for (auto d : {20ms, 1ms, 5ms, 0ms}) {
      auto before = clock_type::now();
      std::error_code ec = co_await tern::sleep_for(d);
      auto after = clock_type::now();
      EXPECT_OK(ec);
      EXPECT_GE(after - before, d) << "sleep_for(" << d.count() << "ms) returned early";
    }
  }());
}

TEST_P(timer_test, many_short_sleeps_never_early) {
  run_bounded(ctx, []() -> tern::task<void> {
    std::mt19937 rng(12345);
    std::uniform_int_distribution<int> us(1, 3000);
    for (int i = 0; i < 200; ++i) {
      auto d = std::chrono::microseconds(us(rng));
      auto before = clock_type::now();
      std::error_code ec = co_await tern::sleep_for(d);
      auto after = clock_type::now();
      EXPECT_OK(ec);
      EXPECT_GE(after - before, d) << "sleep_for(" << d.count() << "us) returned early";
    }
  }());
}

// The loop's cheap clock for deadlines (TSC extrapolation where the kernel keeps time with the TSC) is never
// behind the real clock and never far ahead of it: checked around busy spans shorter and longer than its longest
// extrapolation, so that both the extrapolated and the re-read path are exercised.
TEST_P(timer_test, deadline_clock_is_never_behind_the_clock) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    std::mt19937 rng(777);
    std::uniform_int_distribution<int> spin_us(0, 3000);
    std::uint64_t worst_ahead = 0;
    for (int i = 0; i < 400; ++i) {
      const std::uint64_t busy_until = tern::io_context::now_ns() + static_cast<std::uint64_t>(spin_us(rng)) * 1000;
      while (tern::io_context::now_ns() < busy_until) {
      }
      const std::uint64_t before = tern::io_context::now_ns();
      const std::uint64_t estimate = ctx.deadline_now_ns();
      const std::uint64_t after = tern::io_context::now_ns();
      if (estimate < before) {
        ADD_FAILURE() << "deadline clock " << (before - estimate) << " ns behind the clock at sample " << i;
        break;
      }
      if (estimate > after) worst_ahead = std::max(worst_ahead, estimate - after);
      if (i % 50 == 0) co_await tern::yield();
    }
    EXPECT_LT(worst_ahead, 100'000u) << "deadline clock ran too far ahead";
  }(ctx));
}

TEST_P(timer_test, sleep_until_not_earlier_than_deadline) {
  run_bounded(ctx, []() -> tern::task<void> {
    auto deadline = clock_type::now() + 15ms;
    std::error_code ec = co_await tern::sleep_until(deadline);
    EXPECT_OK(ec);
    EXPECT_GE(clock_type::now(), deadline);
  }());
}

TEST_P(timer_test, deadline_in_the_past_completes_without_error) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    std::error_code ec = co_await tern::sleep_until(clock_type::now() - 1s);
    EXPECT_OK(ec);
    tern::timer t(ctx);
    t.expires_at(clock_type::now() - 1h);
    auto before = clock_type::now();
    ec = co_await t.wait();
    EXPECT_OK(ec);
    EXPECT_LT(clock_type::now() - before, 10s);  // hang guard only
  }(ctx));
}

TEST_P(timer_test, timer_wait_not_earlier_than_expiry) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tern::timer t(ctx);
    auto deadline = clock_type::now() + 12ms;
    t.expires_at(deadline);
    std::error_code ec = co_await t.wait();
    EXPECT_OK(ec);
    EXPECT_GE(clock_type::now(), deadline);
  }(ctx));
}

tern::task<void> wait_and_record(tern::timer& t, int id, std::vector<int>& order, clock_type::time_point deadline,
                                 int& early) {
  std::error_code ec = co_await t.wait();
  EXPECT_OK(ec);
  if (clock_type::now() < deadline) ++early;
  order.push_back(id);
}

// Spawned after a batch of waiters, so it runs once they are all suspended (spawn order is FIFO): checks that the
// ordering tests measure timer expiry and not the order in which already-due waits started.
tern::task<void> expect_armed_before(clock_type::time_point first_deadline) {
  EXPECT_LT(clock_type::now(), first_deadline) << "the waiters were not all armed before the first deadline";
  co_return;
}

TEST_P(timer_test, timers_fire_in_deadline_order) {
  std::vector<int> order;
  int early = 0;
  const auto base = clock_type::now();
  std::deque<tern::timer> timers;
  for (int ms : {30, 10, 20}) {
    timers.emplace_back(ctx);
    timers.back().expires_at(base + std::chrono::milliseconds(ms));
    tern::spawn(ctx, wait_and_record(timers.back(), ms, order, base + std::chrono::milliseconds(ms), early)).detach();
  }
  EXPECT_TRUE(run_context_bounded(ctx));
  EXPECT_EQ(order, (std::vector<int>{10, 20, 30}));
  EXPECT_EQ(early, 0);
}

TEST_P(timer_test, sleeps_scheduled_out_of_order_fire_in_deadline_order) {
  std::vector<int> order;
  auto sleeper = [](int ms, std::vector<int>& order) -> tern::task<void> {
    auto before = clock_type::now();
    std::error_code ec = co_await tern::sleep_for(std::chrono::milliseconds(ms));
    EXPECT_OK(ec);
    EXPECT_GE(clock_type::now() - before, std::chrono::milliseconds(ms));
    order.push_back(ms);
  };
  for (int ms : {30, 10, 20}) tern::spawn(ctx, sleeper(ms, order)).detach();
  EXPECT_TRUE(run_context_bounded(ctx));
  EXPECT_EQ(order, (std::vector<int>{10, 20, 30}));
}

// Many random deadlines (microsecond resolution, so several share one wheel tick) within a 50 ms window, armed in
// random order: the firing order must be sorted by deadline, and none may fire early.
TEST_P(timer_test, random_deadlines_fire_sorted) {
  constexpr int n = 500;
  std::mt19937 rng(987654321);
  std::uniform_int_distribution<int> us(0, 50'000);
  // Far enough ahead that every waiter is suspended before the first deadline: a wait whose deadline has already
  // passed completes at once, in the order the waits start rather than in deadline order.
  const auto base = clock_type::now() + 50ms;
  std::vector<clock_type::time_point> deadlines(n);
  for (auto& d : deadlines) d = base + std::chrono::microseconds(us(rng));

  std::vector<int> order;
  int early = 0;
  std::deque<tern::timer> timers;
  for (int i = 0; i < n; ++i) {
    timers.emplace_back(ctx);
    timers.back().expires_at(deadlines[i]);
    tern::spawn(ctx, wait_and_record(timers.back(), i, order, deadlines[i], early)).detach();
  }
  tern::spawn(ctx, expect_armed_before(*std::min_element(deadlines.begin(), deadlines.end()))).detach();
  EXPECT_TRUE(run_context_bounded(ctx));
  ASSERT_EQ(order.size(), static_cast<std::size_t>(n));
  EXPECT_EQ(early, 0);
  for (std::size_t k = 1; k < order.size(); ++k) {
    EXPECT_LE(deadlines[order[k - 1]], deadlines[order[k]])
        << "timer " << order[k - 1] << " fired before timer " << order[k] << " whose deadline is "
        << std::chrono::duration_cast<std::chrono::microseconds>(deadlines[order[k - 1]] - deadlines[order[k]]).count()
        << " us earlier";
  }
}

// Deadlines spread over several levels of a hierarchical wheel (from sub-millisecond to most of a second):
// entries cascading down from upper levels must still fire in order and not early.
TEST_P(timer_test, deadlines_across_wheel_levels_fire_sorted) {
  std::vector<std::chrono::microseconds> offsets;
  for (int us : {1, 70, 100, 900, 4'100, 4'200, 17'000, 65'000, 66'000, 131'000, 262'000, 270'000, 280'000, 500'000,
                 520'000, 700'000})
    offsets.emplace_back(us);
  std::mt19937 rng(4242);
  std::shuffle(offsets.begin(), offsets.end(), rng);
  const auto base = clock_type::now() + 50ms;  // every waiter is suspended before the first deadline
  std::vector<clock_type::time_point> deadlines;
  for (auto o : offsets) deadlines.push_back(base + o);

  std::vector<int> order;
  int early = 0;
  std::deque<tern::timer> timers;
  for (std::size_t i = 0; i < deadlines.size(); ++i) {
    timers.emplace_back(ctx);
    timers.back().expires_at(deadlines[i]);
    tern::spawn(ctx, wait_and_record(timers.back(), static_cast<int>(i), order, deadlines[i], early)).detach();
  }
  tern::spawn(ctx, expect_armed_before(*std::min_element(deadlines.begin(), deadlines.end()))).detach();
  EXPECT_TRUE(run_context_bounded(ctx));
  ASSERT_EQ(order.size(), deadlines.size());
  EXPECT_EQ(early, 0);
  for (std::size_t k = 1; k < order.size(); ++k) EXPECT_LT(deadlines[order[k - 1]], deadlines[order[k]]);
}

TEST_P(timer_test, rearm_after_expiry) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tern::timer t(ctx);
    for (int round = 0; round < 5; ++round) {
      auto before = clock_type::now();
      t.expires_after(3ms);
      std::error_code ec = co_await t.wait();
      EXPECT_OK(ec);
      EXPECT_GE(clock_type::now() - before, 3ms);
    }
  }(ctx));
}

TEST_P(timer_test, rearm_cancels_pending_wait) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tern::timer t(ctx);
    t.expires_after(1h);
    std::error_code first_result;
    bool first_done = false;
    auto first = tern::spawn(ctx, [](tern::timer& t, std::error_code& r, bool& done) -> tern::task<void> {
      r = co_await t.wait();
      done = true;
    }(t, first_result, first_done));
    co_await tern::yield();  // let the first waiter suspend on the hour-long deadline
    EXPECT_FALSE(first_done);

    auto before = clock_type::now();
    t.expires_after(10ms);  // re-arming cancels the pending wait
    co_await std::move(first);
    EXPECT_TRUE(first_done);
    EXPECT_EC(first_result, std::errc::operation_canceled);

    std::error_code ec = co_await t.wait();
    EXPECT_OK(ec);
    EXPECT_GE(clock_type::now() - before, 10ms);
  }(ctx));
}

// A deadline that moves later at every wake-up of the loop, as a connection's timeout re-armed for each request
// does: bytes arrive from another thread every millisecond and each read moves the timer 30 ms past it. The timer
// must fire at its last deadline, not at an earlier one that was passed over while the reads went on, and not
// much after it. On epoll the timerfd expiry already armed serves while the deadline only moves later (the loop
// wakes once when it passes, finds nothing due, and arms the new one), so the waits between the reads make no
// timerfd_settime each: a read costs its wait and its recv. (On a loaded machine a gap between two bytes may
// outlast the timeout: the timer then fires in the middle, which is right as long as it is not early.)
constexpr auto moved_timeout = 30ms;

TEST_P(timer_test, a_deadline_moved_later_at_every_wake_up_fires_on_its_last_deadline) {
  std::optional<socket_pair> pair;
  run_bounded(ctx, [](tern::io_context& ctx, std::optional<socket_pair>& out) -> tern::task<void> {
    out.emplace(co_await connected_pair(ctx));
  }(ctx, pair));
  ASSERT_TRUE(pair.has_value());
  constexpr int sends = 60;
  std::thread sender([fd = pair->client.native_handle()] {
    for (int i = 0; i < sends; ++i) {
      std::this_thread::sleep_for(1ms);
      (void)::send(fd, "x", 1, MSG_NOSIGNAL);
    }
  });
  tern::timer t(ctx);
  clock_type::time_point last_moved{};  // taken before each expires_after: the deadline is no earlier than this + 30 ms
  clock_type::duration fired_after{};   // from last_moved to the firing
  bool fired = false;
  std::uint64_t read_calls = 0;
  std::uint64_t reads = 0;
  run_bounded(ctx, [](tern::io_context& ctx, tern::net::tcp_socket& s, tern::timer& t, clock_type::time_point& last_moved,
                      clock_type::duration& fired_after, bool& fired, std::uint64_t& read_calls,
                      std::uint64_t& reads) -> tern::task<void> {
    last_moved = clock_type::now();
    t.expires_after(moved_timeout);
    auto waiter = tern::spawn(ctx, [](tern::timer& t, const clock_type::time_point& last_moved,
                                      clock_type::duration& fired_after, bool& fired) -> tern::task<void> {
      for (;;) {
        std::error_code ec = co_await t.wait();
        if (ec == std::errc::operation_canceled) continue;  // moved: wait for the new deadline
        EXPECT_OK(ec);
        fired_after = clock_type::now() - last_moved;
        fired = true;
        co_return;
      }
    }(t, last_moved, fired_after, fired));
    const std::uint64_t before = ctx.metrics().syscalls;
    int got = 0;
    while (got < sends) {
      char buf[64];
      auto [ec, n] = co_await s.read_some(tern::mutable_buffer(buf, sizeof buf));
      EXPECT_OK(ec);
      if (ec) co_return;
      got += static_cast<int>(n);
      ++reads;
      // A gap longer than the timeout (see above): the timer has fired, or its completion is queued behind this
      // read's (a move now could not take it back, as with any timer), or it fires at its deadline soon; it is
      // left alone and checked below against the deadline it had. The check and the move run on the loop, where
      // the timer fires, so a deadline still ahead here has not fired.
      if (fired || clock_type::now() - last_moved >= moved_timeout) continue;
      last_moved = clock_type::now();
      t.expires_after(moved_timeout);
    }
    read_calls = ctx.metrics().syscalls - before;
    co_await std::move(waiter);
  }(ctx, pair->server, t, last_moved, fired_after, fired, read_calls, reads));
  sender.join();
  ASSERT_TRUE(fired);
  EXPECT_GE(fired_after, moved_timeout) << "fired before its deadline";
  EXPECT_LT(fired_after, moved_timeout + 1s) << "fired long after its deadline";
  ASSERT_GT(reads, 0u);
  if (GetParam() == tern::backend_kind::epoll) {
    // A read's wait and its recv, and a few re-arms over the whole run (each time an armed expiry passes); a
    // timerfd_settime per wait makes it three (3.08).
    EXPECT_LT(static_cast<double>(read_calls) / static_cast<double>(reads), 2.5)
        << read_calls << " system calls for " << reads << " reads";
  }
}

TEST_P(timer_test, cancel_returns_count_and_waiters_get_operation_canceled) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tern::timer t(ctx);
    EXPECT_EQ(t.cancel(), 0u) << "nothing waits yet";
    t.expires_after(1h);
    std::vector<std::error_code> results(3);
    std::vector<tern::join_handle<void>> waiters;
    for (auto& r : results) {
      waiters.push_back(tern::spawn(ctx, [](tern::timer& t, std::error_code& r) -> tern::task<void> {
        r = co_await t.wait();
      }(t, r)));
    }
    co_await tern::yield();
    EXPECT_EQ(t.cancel(), 3u);
    for (auto& w : waiters) co_await std::move(w);
    for (auto& r : results) EXPECT_EC(r, std::errc::operation_canceled);
    EXPECT_EQ(t.cancel(), 0u) << "cancelled waiters are gone";
  }(ctx));
}

TEST_P(timer_test, a_wait_cancelled_alone_leaves_the_timers_other_waits_and_one_completed_at_once_none) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tern::timer t(ctx);
    // Expired: a wait completes at once and is never one of the timer's waits.
    EXPECT_OK(co_await t.wait());
    EXPECT_EQ(t.cancel(), 0u);
    t.expires_after(1h);
    std::vector<std::error_code> results(4, std::make_error_code(std::errc::io_error));
    std::vector<std::stop_source> stops(4);
    std::vector<tern::join_handle<void>> waiters;
    for (int i = 0; i < 4; ++i) {
      waiters.push_back(tern::spawn(ctx, [](tern::timer& t, std::error_code& r, std::stop_token st)
                                             -> tern::task<void> { r = co_await tern::with_stop(t.wait(), st); }(
                                             t, results[i], stops[i].get_token())));
    }
    co_await tern::yield();
    // The newest, the oldest and then a middle one leave on their own; the timer still reaches the last.
    stops[3].request_stop();
    stops[0].request_stop();
    stops[2].request_stop();
    co_await tern::yield();
    EXPECT_EQ(t.cancel(), 1u);
    for (auto& w : waiters) co_await std::move(w);
    for (auto& r : results) EXPECT_EC(r, std::errc::operation_canceled);
    EXPECT_EQ(t.cancel(), 0u);
    // The only wait again, after the others left.
    t.expires_after(1h);
    std::error_code last = std::make_error_code(std::errc::io_error);
    auto one = tern::spawn(ctx, [](tern::timer& t, std::error_code& r) -> tern::task<void> { r = co_await t.wait(); }(
                                    t, last));
    co_await tern::yield();
    EXPECT_EQ(t.cancel(), 1u);
    co_await std::move(one);
    EXPECT_EC(last, std::errc::operation_canceled);
  }(ctx));
}

TEST_P(timer_test, several_waiters_on_one_timer_all_fire) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tern::timer t(ctx);
    auto deadline = clock_type::now() + 15ms;
    t.expires_at(deadline);
    constexpr int n = 5;
    std::vector<std::error_code> results(n, std::make_error_code(std::errc::io_error));
    std::vector<clock_type::time_point> fired(n);
    std::vector<tern::join_handle<void>> waiters;
    for (int i = 0; i < n; ++i) {
      waiters.push_back(tern::spawn(ctx, [](tern::timer& t, std::error_code& r,
                                            clock_type::time_point& when) -> tern::task<void> {
        r = co_await t.wait();
        when = clock_type::now();
      }(t, results[i], fired[i])));
    }
    for (auto& w : waiters) co_await std::move(w);
    for (int i = 0; i < n; ++i) {
      EXPECT_OK(results[i]);
      EXPECT_GE(fired[i], deadline);
    }
  }(ctx));
}

TEST_P(timer_test, armed_timer_without_waiters_is_not_work) {
  // A timer object destroyed while idle leaves nothing armed.
  {
    tern::timer t(ctx);
    t.expires_after(1h);
  }
  auto start = clock_type::now();
  EXPECT_TRUE(run_context_bounded(ctx, 20s));
  EXPECT_LT(clock_type::now() - start, 10s);  // hang guard only
}

TEST_P(timer_test, far_future_timer_cancelled_lets_run_return) {
  tern::timer t(ctx);
  t.expires_after(std::chrono::hours(5));
  std::error_code result;
  tern::spawn(ctx, [](tern::timer& t, std::error_code& r) -> tern::task<void> { r = co_await t.wait(); }(t, result))
      .detach();
  tern::spawn(ctx, [](tern::timer& t) -> tern::task<void> {
    (void)co_await tern::sleep_for(10ms);
    EXPECT_EQ(t.cancel(), 1u);
  }(t)).detach();
  auto start = clock_type::now();
  EXPECT_TRUE(run_context_bounded(ctx, 20s));
  EXPECT_EC(result, std::errc::operation_canceled);
  EXPECT_LT(clock_type::now() - start, 10s);  // hang guard only
}

TEST_P(timer_test, sleep_far_future_years_cancelled) {
  // Beyond any wheel span: the deadline is clamped or re-filed, and cancelling it still leaves nothing behind.
  tern::timer t(ctx);
  t.expires_after(std::chrono::hours(24 * 365 * 20));
  std::error_code result;
  tern::spawn(ctx, [](tern::timer& t, std::error_code& r) -> tern::task<void> { r = co_await t.wait(); }(t, result))
      .detach();
  tern::spawn(ctx, [](tern::timer& t) -> tern::task<void> {
    co_await tern::yield();
    EXPECT_EQ(t.cancel(), 1u);
  }(t)).detach();
  EXPECT_TRUE(run_context_bounded(ctx, 20s));
  EXPECT_EC(result, std::errc::operation_canceled);
}

// One million timers armed (each with a waiting coroutine, deadlines minutes to hours away) then cancelled, in four
// rounds of 250k: every waiter sees operation_canceled, cancel() counts them all, and afterwards run() returns at
// once because nothing is left in the wheel. Leaked nodes or frames would also show under AddressSanitizer.
TEST_P(timer_test, million_timers_armed_then_cancelled_leave_nothing) {
  constexpr std::size_t per_round = 250'000;
  constexpr int rounds = 4;
  std::deque<tern::timer> timers;
  for (std::size_t i = 0; i < per_round; ++i) timers.emplace_back(ctx);

  std::size_t cancelled_results = 0;
  std::size_t other_results = 0;
  std::size_t cancel_count = 0;
  auto waiter = [](tern::timer& t, std::size_t& cancelled, std::size_t& other) -> tern::task<void> {
    std::error_code ec = co_await t.wait();
    if (ec == std::errc::operation_canceled) ++cancelled; else ++other;
  };
  std::mt19937_64 rng(77);
  std::uniform_int_distribution<long> secs(120, 6 * 3600);  // never due while the test runs
  for (int round = 0; round < rounds; ++round) {
    for (auto& t : timers) {
      t.expires_after(std::chrono::seconds(secs(rng)));
      tern::spawn(ctx, waiter(t, cancelled_results, other_results)).detach();
    }
    std::size_t ran = 0;
    for (std::size_t n = ctx.poll(); n != 0; n = ctx.poll()) ran += n;
    EXPECT_EQ(ran, per_round) << "every waiter runs up to its wait";
    for (auto& t : timers) cancel_count += t.cancel();
    EXPECT_TRUE(run_context_bounded(ctx, 60s));
  }
  EXPECT_EQ(cancel_count, per_round * rounds);
  EXPECT_EQ(cancelled_results, per_round * rounds);
  EXPECT_EQ(other_results, 0u);

  auto start = clock_type::now();
  EXPECT_TRUE(run_context_bounded(ctx, 20s));
  EXPECT_LT(clock_type::now() - start, 10s);  // hang guard only: nothing may still be armed
}

}  // namespace
