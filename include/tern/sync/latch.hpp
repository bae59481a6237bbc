// tern/sync/latch.hpp
//
// latch: a single-use countdown. Coroutines wait until the count reaches zero; anyone (any loop or thread) counts
// it down. Use it to wait for a fixed number of things to happen (N workers started, N replies arrived).
//
//   tern::sync::latch started(workers);
//   ... each worker: started.count_down();
//   co_await started.wait();
//
// Semantics:
// - The count only goes down. When it reaches zero every waiter is woken and every later wait completes at once;
//   counting down past zero is a precondition violation (asserted in debug builds; the count stays at zero).
// - Waits are cancellable (cancel(), with_timeout, with_stop) and then report operation_canceled (timed_out); a
//   cancellation that loses the race against the last count_down() is ignored and the wait succeeds.
//
// Invariant (under the lock): coroutines wait only while the count is above zero. Why this shape: one spinlock, a
// count and an intrusive list of waiters (see detail/sync_waiter.hpp): no allocation per wait. For a count that
// also goes up (tasks started as they come), use wait_group.
//
// A waiting coroutine does not keep its loop's run() from returning. A latch must outlive its waiters.
#pragma once

#include <cassert>
#include <cstddef>
#include <mutex>

#include "tern/detail/biased_lock.hpp"
#include "tern/detail/sync_waiter.hpp"

namespace tern::sync {

class latch {
 public:
  // The awaiter of wait(): yields std::error_code, empty once the count is zero.
  using wait_awaiter = detail::primitive_wait<latch>;

  // A latch that opens after count count_down()s (at once if count is 0).
  explicit latch(std::size_t count) noexcept : count_(count) {}
  latch(const latch&) = delete;
  latch& operator=(const latch&) = delete;
  // No coroutine may be waiting.
  ~latch() { assert(waiters_.empty() && "tern::sync::latch destroyed with coroutines waiting"); }

  // Awaitable: waits until the count reaches zero; yields std::error_code (operation_canceled if cancelled first).
  wait_awaiter wait() noexcept { return wait_awaiter(*this); }
  // Lowers the count by n; at zero, wakes every waiter. Any thread.
  void count_down(std::size_t n = 1) noexcept {
    detail::sync_waiter* woken = nullptr;
    {
      std::lock_guard<detail::biased_lock> g(lock_);
      assert(n <= count_ && "tern::sync::latch counted down below zero");
      count_ = n >= count_ ? 0 : count_ - n;
      if (count_ == 0) woken = waiters_.release_all(detail::wait_state::granted);
    }
    detail::resume_all(woken);
  }
  // True once the count is zero; never waits.
  [[nodiscard]] bool try_wait() const noexcept { return count() == 0; }
  // The current count (a snapshot).
  std::size_t count() const noexcept {
    std::lock_guard<detail::biased_lock> g(lock_);
    return count_;
  }

 private:
  friend class detail::primitive_wait<latch>;

  bool try_take_locked() const noexcept { return count_ == 0; }
  void give_back() noexcept {}

  mutable detail::biased_lock lock_;
  std::size_t count_;
  detail::waiter_list waiters_;  // only while count_ is above zero
};

}  // namespace tern::sync
