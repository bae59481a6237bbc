// tern/sync/event.hpp
//
// manual_reset_event and auto_reset_event: a flag that coroutines wait on, set from any loop or thread.
//
//   tern::sync::manual_reset_event ready;        // a gate: set() releases every waiter, and later waits pass
//   co_await ready.wait();  ...  ready.set();
//   tern::sync::auto_reset_event work;           // a doorbell: each set() lets one wait through
//   co_await work.wait();  ...  work.set();
//
// Semantics:
// - manual_reset_event: set() wakes every waiter and the event stays set, so waits complete at once until reset().
// - auto_reset_event: set() wakes the oldest waiter if there is one (the event stays unset), otherwise leaves the
//   event set, and the next wait consumes it. Setting an event that is already set does nothing (signals do not
//   accumulate; use a semaphore to count them). If a woken waiter's coroutine is destroyed before it runs, the
//   signal it consumed is set again.
// - Waits are cancellable (cancel(), with_timeout, with_stop) and then report operation_canceled (timed_out); a
//   cancellation that loses the race against set() is ignored and the wait succeeds.
//
// Invariant (under the lock): coroutines wait only while the event is unset. Why this shape: one spinlock, a flag
// and an intrusive FIFO of waiters (see detail/sync_waiter.hpp): no allocation per wait.
//
// A waiting coroutine does not keep its loop's run() from returning. An event must outlive its waiters.
#pragma once

#include <atomic>
#include <cassert>
#include <mutex>

#include "tern/detail/biased_lock.hpp"
#include "tern/detail/sync_waiter.hpp"

namespace tern::sync {

class manual_reset_event {
 public:
  // The awaiter of wait(): yields std::error_code, empty once the event is set.
  using wait_awaiter = detail::primitive_wait<manual_reset_event>;

  // An event, unset unless initially_set.
  explicit manual_reset_event(bool initially_set = false) noexcept : set_(initially_set) {}
  manual_reset_event(const manual_reset_event&) = delete;
  manual_reset_event& operator=(const manual_reset_event&) = delete;
  // No coroutine may be waiting.
  ~manual_reset_event() { assert(waiters_.empty() && "tern::sync::manual_reset_event destroyed with waiters"); }

  // Awaitable: waits until the event is set; yields std::error_code (operation_canceled if cancelled first).
  wait_awaiter wait() noexcept { return wait_awaiter(*this); }
  // Sets the event and wakes every waiter. Any thread.
  void set() noexcept {
    detail::sync_waiter* woken;
    {
      std::lock_guard<detail::biased_lock> g(lock_);
      set_.store(true, std::memory_order_relaxed);
      woken = waiters_.release_all(detail::wait_state::granted);
    }
    detail::resume_all(woken);
  }
  // Unsets the event; later waits wait. Any thread.
  void reset() noexcept {
    std::lock_guard<detail::biased_lock> g(lock_);
    set_.store(false, std::memory_order_relaxed);
  }
  // True while the event is set (a snapshot).
  bool is_set() const noexcept {
    std::lock_guard<detail::biased_lock> g(lock_);
    return set_.load(std::memory_order_relaxed);
  }

 private:
  friend class detail::primitive_wait<manual_reset_event>;

  bool try_take_locked() const noexcept { return set_.load(std::memory_order_relaxed); }
  bool maybe_available() const noexcept { return set_.load(std::memory_order_relaxed); }
  void give_back() noexcept {}

  mutable detail::biased_lock lock_;
  std::atomic<bool> set_;  // written under the lock; read without it only as a hint
  detail::waiter_list waiters_;  // only while unset
};

class auto_reset_event {
 public:
  // The awaiter of wait(): yields std::error_code, empty once a signal was consumed.
  using wait_awaiter = detail::primitive_wait<auto_reset_event>;

  // An event, unset unless initially_set.
  explicit auto_reset_event(bool initially_set = false) noexcept : set_(initially_set) {}
  auto_reset_event(const auto_reset_event&) = delete;
  auto_reset_event& operator=(const auto_reset_event&) = delete;
  // No coroutine may be waiting.
  ~auto_reset_event() { assert(waiters_.empty() && "tern::sync::auto_reset_event destroyed with waiters"); }

  // Awaitable: waits until the event is set and unsets it; yields std::error_code (operation_canceled if
  // cancelled first).
  wait_awaiter wait() noexcept { return wait_awaiter(*this); }
  // Wakes the oldest waiter, or sets the event if none waits. Any thread.
  void set() noexcept {
    detail::sync_waiter* next;
    {
      std::lock_guard<detail::biased_lock> g(lock_);
      next = waiters_.pop_front();
      if (next != nullptr) {
        next->state = detail::wait_state::granted;  // the signal goes to it: the event stays unset
      } else {
        set_.store(true, std::memory_order_relaxed);
      }
    }
    if (next != nullptr) detail::resume_waiter(next);
  }
  // Unsets the event. Any thread. An unset event is left alone without the lock (a set() racing with the reset
  // may as well come after it): a connection that resets its streams' events for reuse found them unset nearly
  // every time, and paid an unbiased lock for each.
  void reset() noexcept {
    if (!set_.load(std::memory_order_relaxed)) return;
    std::lock_guard<detail::biased_lock> g(lock_);
    set_.store(false, std::memory_order_relaxed);
  }
  // True while the event is set (a snapshot).
  bool is_set() const noexcept {
    std::lock_guard<detail::biased_lock> g(lock_);
    return set_.load(std::memory_order_relaxed);
  }

 private:
  friend class detail::primitive_wait<auto_reset_event>;

  bool try_take_locked() noexcept {
    if (!set_.load(std::memory_order_relaxed)) return false;
    set_.store(false, std::memory_order_relaxed);
    return true;
  }
  bool maybe_available() const noexcept { return set_.load(std::memory_order_relaxed); }
  void give_back() noexcept { set(); }

  mutable detail::biased_lock lock_;
  std::atomic<bool> set_;  // written under the lock; read without it only as a hint
  detail::waiter_list waiters_;  // only while unset
};

}  // namespace tern::sync
