// tern::sync::mutex on one loop: lock/try_lock/unlock, FIFO hand-off (no barging), scoped_lock guards,
// cancellation by with_timeout and with_stop (also after the mutex was handed over), and lock waits destroyed with
// their loop.
#include "sync/sync_support.hpp"

#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace tern_test;
using tern::sync::mutex;

class mutex_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(mutex_test);

tern::task<void> lock_record_unlock(mutex& m, int id, std::vector<int>& order) {
  std::error_code ec = co_await m.lock();
  EXPECT_OK(ec);
  order.push_back(id);
  co_await tern::yield();  // hold it across a suspension
  m.unlock();
}

TEST_P(mutex_test, lock_try_lock_unlock) {
  run_bounded(ctx, []() -> tern::task<void> {
    mutex m;
    EXPECT_FALSE(m.is_locked());
    EXPECT_OK(co_await m.lock());
    EXPECT_TRUE(m.is_locked());
    EXPECT_FALSE(m.try_lock());
    m.unlock();
    EXPECT_FALSE(m.is_locked());
    EXPECT_TRUE(m.try_lock());
    m.unlock();
  }());
}

TEST_P(mutex_test, unlock_hands_the_mutex_to_waiters_in_fifo_order) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    mutex m;
    std::vector<int> order;
    EXPECT_OK(co_await m.lock());
    auto a = tern::spawn(ctx, lock_record_unlock(m, 1, order));
    auto b = tern::spawn(ctx, lock_record_unlock(m, 2, order));
    auto c = tern::spawn(ctx, lock_record_unlock(m, 3, order));
    co_await tern::yield();  // all three wait
    m.unlock();
    // Handed over, not released: nobody can barge in before the first waiter runs.
    EXPECT_TRUE(m.is_locked());
    EXPECT_FALSE(m.try_lock());
    co_await std::move(a);
    co_await std::move(b);
    co_await std::move(c);
    EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
    EXPECT_FALSE(m.is_locked());
  }(ctx));
}

TEST_P(mutex_test, scoped_lock_guard_unlocks_when_it_goes) {
  run_bounded(ctx, []() -> tern::task<void> {
    mutex m;
    {
      auto guard = co_await m.scoped_lock();
      EXPECT_TRUE(guard.owns_lock());
      EXPECT_TRUE(static_cast<bool>(guard));
      EXPECT_OK(guard.ec);
      EXPECT_TRUE(m.is_locked());
      auto moved = std::move(guard);
      EXPECT_FALSE(guard.owns_lock());
      EXPECT_TRUE(moved.owns_lock());
      EXPECT_TRUE(m.is_locked());
    }
    EXPECT_FALSE(m.is_locked());
    {
      auto guard = co_await m.scoped_lock();
      guard.unlock();
      EXPECT_FALSE(m.is_locked());
      EXPECT_FALSE(guard.owns_lock());
    }
    {
      auto guard = co_await m.scoped_lock();
      mutex* released = guard.release();
      EXPECT_EQ(released, &m);
    }
    EXPECT_TRUE(m.is_locked()) << "release() must not unlock";
    m.unlock();
  }());
}

TEST_P(mutex_test, lock_with_timeout_times_out_while_held) {
  run_bounded(ctx, []() -> tern::task<void> {
    mutex m;
    EXPECT_OK(co_await m.lock());
    auto before = clock_type::now();
    EXPECT_EC(co_await tern::with_timeout(m.lock(), 20ms), std::errc::timed_out);
    EXPECT_GE(clock_type::now() - before, 20ms);
    auto guard = co_await tern::with_timeout(m.scoped_lock(), 5ms);
    EXPECT_FALSE(guard.owns_lock());
    EXPECT_EC(guard.ec, std::errc::timed_out);
    EXPECT_TRUE(m.is_locked()) << "a timed-out lock released the holder's mutex";
    m.unlock();
    EXPECT_FALSE(m.is_locked()) << "the mutex went to a timed-out waiter";
    auto second = co_await tern::with_timeout(m.scoped_lock(), 1h);
    EXPECT_TRUE(second.owns_lock());
  }());
}

TEST_P(mutex_test, lock_with_stop_requested_from_another_thread) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    mutex m;
    EXPECT_TRUE(m.try_lock());
    std::stop_source source;
    // The wait alone does not keep the loop running while the stop is on its way from the other thread.
    auto busy = ctx.make_work_guard();
    stop_from_thread other(source, 20ms);
    EXPECT_EC(co_await tern::with_stop(m.lock(), source.get_token()), std::errc::operation_canceled);
    busy.reset();
    m.unlock();
    EXPECT_FALSE(m.is_locked());
    // A stop already requested does not cancel a lock that succeeds at once.
    EXPECT_OK(co_await tern::with_stop(m.lock(), source.get_token()));
    m.unlock();
  }(ctx));
}

tern::task<void> lock_with_stop(mutex& m, std::stop_token token, std::error_code& out, bool& owned) {
  auto guard = co_await tern::with_stop(m.scoped_lock(), std::move(token));
  out = guard.ec;
  owned = guard.owns_lock();
}

TEST_P(mutex_test, stop_after_the_hand_off_keeps_the_lock) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    mutex m;
    EXPECT_TRUE(m.try_lock());
    std::stop_source source;
    std::error_code ec = std::make_error_code(std::errc::io_error);
    bool owned = false;
    auto waiter = tern::spawn(ctx, lock_with_stop(m, source.get_token(), ec, owned));
    co_await tern::yield();
    m.unlock();              // handed to the waiter, which is queued but has not run
    source.request_stop();   // too late
    co_await std::move(waiter);
    EXPECT_OK(ec);
    EXPECT_TRUE(owned);
    EXPECT_FALSE(m.is_locked()) << "the guard did not unlock";
  }(ctx));
}

TEST_P(mutex_test, cancelled_waiter_leaves_the_queue) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    mutex m;
    EXPECT_TRUE(m.try_lock());
    std::stop_source source;
    std::vector<int> order;
    std::error_code ec;
    bool owned = true;
    auto a = tern::spawn(ctx, lock_record_unlock(m, 1, order));
    auto b = tern::spawn(ctx, lock_with_stop(m, source.get_token(), ec, owned));
    auto c = tern::spawn(ctx, lock_record_unlock(m, 3, order));
    co_await tern::yield();
    source.request_stop();
    m.unlock();
    co_await std::move(a);
    co_await std::move(b);
    co_await std::move(c);
    EXPECT_EC(ec, std::errc::operation_canceled);
    EXPECT_FALSE(owned);
    EXPECT_EQ(order, (std::vector<int>{1, 3}));
    EXPECT_FALSE(m.is_locked());
  }(ctx));
}

tern::task<void> lock_and_report(mutex& m, std::error_code& out) {
  out = co_await m.lock();  // binds the task's own token (no with_stop on the operation)
  if (!out) m.unlock();
}

// A task stopped while its lock waits: the wait leaves the queue, the waiters behind it keep their order.
TEST_P(mutex_test, a_stopped_task_cancels_its_waiting_lock) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    mutex m;
    EXPECT_TRUE(m.try_lock());
    std::stop_source source;
    std::vector<int> order;
    std::error_code ec;
    auto b = tern::spawn(ctx, tern::with_stop(lock_and_report(m, ec), source.get_token()));
    auto c = tern::spawn(ctx, lock_record_unlock(m, 3, order));
    co_await tern::yield();
    source.request_stop();
    co_await std::move(b);
    EXPECT_EC(ec, std::errc::operation_canceled);
    m.unlock();
    co_await std::move(c);
    EXPECT_EQ(order, (std::vector<int>{3}));
    EXPECT_FALSE(m.is_locked());
  }(ctx));
}

tern::task<void> lock_forever(mutex& m) {
  (void)co_await m.lock();
  ADD_FAILURE() << "the lock completed on a loop that was never run again";
}

TEST_P(mutex_test, lock_destroyed_while_waiting_unlinks_itself) {
  mutex m;
  EXPECT_TRUE(m.try_lock());
  {
    tern::io_context local(options());
    tern::spawn(local, lock_forever(m)).detach();
    EXPECT_TRUE(run_context_bounded(local));
  }
  m.unlock();
  EXPECT_FALSE(m.is_locked()) << "the mutex was handed to a destroyed waiter";
}

TEST_P(mutex_test, lock_handed_over_but_destroyed_before_running_unlocks) {
  mutex m;
  EXPECT_TRUE(m.try_lock());
  {
    tern::io_context local(options());
    tern::spawn(local, lock_forever(m)).detach();
    EXPECT_TRUE(run_context_bounded(local));
    m.unlock();  // handed to the waiter and queued on local, which never runs it
    EXPECT_TRUE(m.is_locked());
  }
  EXPECT_FALSE(m.is_locked()) << "the mutex stayed locked by a coroutine that can never run";
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

}  // namespace
