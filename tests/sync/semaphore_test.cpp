// tern::sync::semaphore on one loop: counting, FIFO hand-off of released permits, release(n) waking n waiters,
// cancellation by with_timeout and with_stop (also after a permit was handed over), and acquires destroyed with
// their loop.
#include "sync/sync_support.hpp"

#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace tern_test;
using tern::sync::semaphore;

class semaphore_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(semaphore_test);

tern::task<void> acquire_record(semaphore& s, int id, std::vector<int>& order) {
  EXPECT_OK(co_await s.acquire());
  order.push_back(id);
}

TEST_P(semaphore_test, counts_permits) {
  run_bounded(ctx, []() -> tern::task<void> {
    semaphore s(2);
    EXPECT_EQ(s.available(), 2u);
    EXPECT_OK(co_await s.acquire());
    EXPECT_TRUE(s.try_acquire());
    EXPECT_EQ(s.available(), 0u);
    EXPECT_FALSE(s.try_acquire());
    s.release();
    EXPECT_EQ(s.available(), 1u);
    s.release(3);
    EXPECT_EQ(s.available(), 4u) << "release above the initial count is allowed";
  }());
}

TEST_P(semaphore_test, release_hands_permits_to_waiters_in_fifo_order) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    semaphore s(0);
    std::vector<int> order;
    std::vector<tern::join_handle<void>> waiters;
    for (int i = 1; i <= 4; ++i) waiters.push_back(tern::spawn(ctx, acquire_record(s, i, order)));
    co_await tern::yield();
    EXPECT_TRUE(order.empty());
    s.release();
    EXPECT_FALSE(s.try_acquire()) << "a permit released to a waiter was taken by another coroutine";
    co_await tern::yield();
    EXPECT_EQ(order, (std::vector<int>{1}));
    s.release(5);  // three go to the waiters, two remain
    EXPECT_EQ(s.available(), 2u);
    for (auto& w : waiters) co_await std::move(w);
    EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}));
  }(ctx));
}

TEST_P(semaphore_test, acquire_with_timeout_times_out_and_no_permit_is_lost) {
  run_bounded(ctx, []() -> tern::task<void> {
    semaphore s(0);
    auto before = clock_type::now();
    EXPECT_EC(co_await tern::with_timeout(s.acquire(), 20ms), std::errc::timed_out);
    EXPECT_GE(clock_type::now() - before, 20ms);
    s.release();
    EXPECT_EQ(s.available(), 1u) << "the permit went to a timed-out acquire";
    EXPECT_OK(co_await tern::with_timeout(s.acquire(), 1h));
    EXPECT_EQ(s.available(), 0u);
  }());
}

TEST_P(semaphore_test, acquire_with_stop_requested_from_another_thread) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    semaphore s(0);
    std::stop_source source;
    // The wait alone does not keep the loop running while the stop is on its way from the other thread.
    auto busy = ctx.make_work_guard();
    stop_from_thread other(source, 20ms);
    EXPECT_EC(co_await tern::with_stop(s.acquire(), source.get_token()), std::errc::operation_canceled);
    busy.reset();
    s.release();
    EXPECT_EQ(s.available(), 1u);
  }(ctx));
}

tern::task<void> acquire_with_stop(semaphore& s, std::stop_token token, std::error_code& out) {
  out = co_await tern::with_stop(s.acquire(), std::move(token));
}

TEST_P(semaphore_test, stop_after_the_hand_off_keeps_the_permit) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    semaphore s(0);
    std::stop_source source;
    std::error_code ec = std::make_error_code(std::errc::io_error);
    auto waiter = tern::spawn(ctx, acquire_with_stop(s, source.get_token(), ec));
    co_await tern::yield();
    s.release();
    source.request_stop();
    co_await std::move(waiter);
    EXPECT_OK(ec);
    EXPECT_EQ(s.available(), 0u) << "the permit was counted twice";
  }(ctx));
}

tern::task<void> acquire_forever(semaphore& s) {
  (void)co_await s.acquire();
  ADD_FAILURE() << "the acquire completed on a loop that was never run again";
}

TEST_P(semaphore_test, acquire_destroyed_while_waiting_unlinks_itself) {
  semaphore s(0);
  {
    tern::io_context local(options());
    tern::spawn(local, acquire_forever(s)).detach();
    EXPECT_TRUE(run_context_bounded(local));
  }
  s.release();
  EXPECT_EQ(s.available(), 1u) << "the permit went to a destroyed waiter";
}

TEST_P(semaphore_test, permit_handed_to_an_acquire_that_never_runs_is_returned) {
  semaphore s(0);
  {
    tern::io_context local(options());
    tern::spawn(local, acquire_forever(s)).detach();
    EXPECT_TRUE(run_context_bounded(local));
    s.release();
    EXPECT_EQ(s.available(), 0u);
  }
  EXPECT_EQ(s.available(), 1u) << "a permit was lost with a destroyed waiter";
}

}  // namespace
