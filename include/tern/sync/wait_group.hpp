// tern/sync/wait_group.hpp
//
// wait_group: waits for a changing set of activities to finish, as Go's sync.WaitGroup. add() before starting
// one, done() when it ends (on any loop or thread); wait() completes when the count is back at zero.
//
//   tern::sync::wait_group pending;
//   for (auto& c : connections) { pending.add(); tern::spawn(serve(c, pending)).detach(); }  // serve calls done()
//   co_await pending.wait();
//
// Semantics:
// - Unlike a latch, a wait_group is reusable: the count may rise again after reaching zero, and a wait that starts
//   then waits for the new zero. A wait completes at once while the count is zero.
// - When the count reaches zero every waiter is woken. done() below zero is a precondition violation (asserted in
//   debug builds; the count stays at zero).
// - Waits are cancellable (cancel(), with_timeout, with_stop) and then report operation_canceled (timed_out); a
//   cancellation that loses the race against the last done() is ignored and the wait succeeds.
//
// Invariant (under the lock): coroutines wait only while the count is above zero. Why this shape: one spinlock, a
// count and an intrusive list of waiters (see detail/sync_waiter.hpp): no allocation per wait.
//
// A waiting coroutine does not keep its loop's run() from returning. A wait_group must outlive its waiters.
#pragma once

#include <cassert>
#include <cstddef>
#include <mutex>

#include "tern/detail/biased_lock.hpp"
#include "tern/detail/sync_waiter.hpp"

namespace tern::sync {

class wait_group {
 public:
  // The awaiter of wait(): yields std::error_code, empty once the count is zero.
  using wait_awaiter = detail::primitive_wait<wait_group>;

  // A wait_group with a count of zero.
  wait_group() noexcept = default;
  wait_group(const wait_group&) = delete;
  wait_group& operator=(const wait_group&) = delete;
  // No coroutine may be waiting.
  ~wait_group() { assert(waiters_.empty() && "tern::sync::wait_group destroyed with coroutines waiting"); }

  // Awaitable: waits until the count is zero; yields std::error_code (operation_canceled if cancelled first).
  wait_awaiter wait() noexcept { return wait_awaiter(*this); }
  // Raises the count by n. Any thread.
  void add(std::size_t n = 1) noexcept {
    std::lock_guard<detail::biased_lock> g(lock_);
    count_ += n;
  }
  // Lowers the count by one; at zero, wakes every waiter. Any thread.
  void done() noexcept {
    detail::sync_waiter* woken = nullptr;
    {
      std::lock_guard<detail::biased_lock> g(lock_);
      assert(count_ > 0 && "tern::sync::wait_group::done() without a matching add()");
      if (count_ > 0) --count_;
      if (count_ == 0) woken = waiters_.release_all(detail::wait_state::granted);
    }
    detail::resume_all(woken);
  }
  // The current count (a snapshot).
  std::size_t count() const noexcept {
    std::lock_guard<detail::biased_lock> g(lock_);
    return count_;
  }

 private:
  friend class detail::primitive_wait<wait_group>;

  bool try_take_locked() const noexcept { return count_ == 0; }
  void give_back() noexcept {}

  mutable detail::biased_lock lock_;
  std::size_t count_ = 0;
  detail::waiter_list waiters_;  // only while count_ is above zero
};

}  // namespace tern::sync
