// tern/sync/semaphore.hpp
//
// semaphore: a counting semaphore for coroutines, on any loops and threads; bounds how many coroutines do
// something at once (connections, in-flight requests).
//
//   tern::sync::semaphore slots(8);
//   if (std::error_code ec = co_await slots.acquire(); !ec) { ...; slots.release(); }
//
// Semantics:
// - acquire() takes one permit, waiting while there is none. release(n) returns n permits: each goes straight to
//   the oldest waiter if there is one (hand-off, FIFO), and only what no waiter takes is added to the count. So a
//   coroutine that acquires in a loop cannot overtake the waiters.
// - An acquire is cancellable (cancel(), with_timeout, with_stop) and then reports operation_canceled (timed_out)
//   without a permit. If the cancellation loses the race against a release that handed it a permit, the acquire
//   succeeds (and the permit must be released). A waiter whose coroutine is destroyed after it was handed a permit
//   releases it, so no permit is lost.
// - Nothing caps the count: release() more than was acquired raises it above the initial value.
//
// Invariant (under the lock): coroutines wait only while the count is zero. Why this shape: one spinlock, a count
// and an intrusive FIFO of waiters (see detail/sync_waiter.hpp): no allocation, O(1) acquire and release of one.
//
// A waiting coroutine does not keep its loop's run() from returning. The semaphore must outlive its waiters.
#pragma once

#include <cassert>
#include <cstddef>
#include <mutex>

#include "tern/detail/biased_lock.hpp"
#include "tern/detail/sync_waiter.hpp"

namespace tern::sync {

class semaphore {
 public:
  // The awaiter of acquire(): yields std::error_code, empty once a permit is held.
  using acquire_awaiter = detail::primitive_wait<semaphore>;

  // A semaphore with initial permits.
  explicit semaphore(std::size_t initial) noexcept : count_(initial) {}
  semaphore(const semaphore&) = delete;
  semaphore& operator=(const semaphore&) = delete;
  // No coroutine may be waiting.
  ~semaphore() { assert(waiters_.empty() && "tern::sync::semaphore destroyed with coroutines waiting"); }

  // Awaitable: takes a permit, waiting until one is available; yields std::error_code (operation_canceled if
  // cancelled first).
  acquire_awaiter acquire() noexcept { return acquire_awaiter(*this); }
  // Takes a permit if one is available now; never waits.
  [[nodiscard]] bool try_acquire() noexcept {
    std::lock_guard<detail::biased_lock> g(lock_);
    return try_take_locked();
  }
  // Returns n permits, handing them to the oldest waiters first. Any thread.
  void release(std::size_t n = 1) noexcept {
    detail::sync_waiter* woken;
    {
      std::lock_guard<detail::biased_lock> g(lock_);
      std::size_t handed = 0;
      woken = waiters_.release_front(n, handed);
      count_ += n - handed;
    }
    detail::resume_all(woken);
  }
  // The permits available now (a snapshot).
  std::size_t available() const noexcept {
    std::lock_guard<detail::biased_lock> g(lock_);
    return count_;
  }

 private:
  friend class detail::primitive_wait<semaphore>;

  bool try_take_locked() noexcept {
    if (count_ == 0) return false;
    --count_;
    return true;
  }
  void give_back() noexcept { release(1); }

  mutable detail::biased_lock lock_;
  std::size_t count_;
  detail::waiter_list waiters_;  // only while count_ is zero
};

}  // namespace tern::sync
