// tern/sync/mutex.hpp
//
// mutex: mutual exclusion between coroutines, on any loops and threads. Waiting for it suspends the coroutine,
// never the thread.
//
//   tern::sync::mutex m;
//   if (std::error_code ec = co_await m.lock(); !ec) { ...; m.unlock(); }
//   {
//     auto guard = co_await m.scoped_lock();          // unlocks when it goes out of scope
//     ...
//   }
//   auto guard = co_await tern::with_timeout(m.scoped_lock(), 10ms);
//   if (!guard) { /* guard.ec == std::errc::timed_out */ }
//
// Semantics:
// - Hand-off: unlock() with coroutines waiting passes ownership straight to the oldest one (the mutex never
//   becomes free in between), so waiters are served in FIFO order and a coroutine that keeps re-locking cannot
//   starve them. The cost is that the next owner runs only when its loop gets to it.
// - The owner is not recorded: any coroutine or thread may unlock (after a lock that succeeded). Not re-entrant.
// - A lock is cancellable (cancel(), with_timeout, with_stop) and then reports operation_canceled (timed_out) and
//   does not own the mutex. If the cancellation loses the race against an unlock that handed the mutex over, the
//   lock succeeds (and must be unlocked). A waiter whose coroutine is destroyed after it was handed the mutex
//   unlocks it, so the mutex is never left locked by a coroutine that cannot run.
//
// Invariant (under the lock): coroutines wait only while the mutex is locked. Why this shape: one spinlock, a flag
// and an intrusive FIFO of waiters (see detail/sync_waiter.hpp): no allocation, O(1) lock and unlock.
//
// Not BasicLockable: lock() returns an awaitable, so never use it with std::lock_guard or std::unique_lock.
// A waiting coroutine does not keep its loop's run() from returning. The mutex must outlive its waiters.
#pragma once

#include <cassert>
#include <mutex>
#include <system_error>
#include <utility>

#include "tern/detail/biased_lock.hpp"
#include "tern/detail/sync_waiter.hpp"

namespace tern::sync {

class mutex {
 public:
  // The result of scoped_lock(), and its awaitable (below).
  class guard;
  class scoped_lock_awaiter;
  // The awaiter of lock(): yields std::error_code, empty once the mutex is owned.
  using lock_awaiter = detail::primitive_wait<mutex>;

  mutex() noexcept = default;
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;
  // No coroutine may be waiting.
  ~mutex() { assert(waiters_.empty() && "tern::sync::mutex destroyed with coroutines waiting"); }

  // Awaitable: waits until the mutex is owned; yields std::error_code (operation_canceled if cancelled first).
  lock_awaiter lock() noexcept { return lock_awaiter(*this); }
  // Awaitable: like lock(), but yields a guard that owns the mutex and unlocks it when destroyed.
  scoped_lock_awaiter scoped_lock() noexcept;
  // Takes the mutex if it is free now; never waits.
  [[nodiscard]] bool try_lock() noexcept {
    std::lock_guard<detail::biased_lock> g(lock_);
    return try_take_locked();
  }
  // Releases the mutex (which must be locked), handing it to the oldest waiter if there is one. Any thread.
  void unlock() noexcept {
    detail::sync_waiter* next;
    {
      std::lock_guard<detail::biased_lock> g(lock_);
      assert(locked_ && "tern::sync::mutex unlocked while not locked");
      next = waiters_.pop_front();
      if (next != nullptr) {
        next->state = detail::wait_state::granted;  // ownership passes on: locked_ stays true
      } else {
        locked_ = false;
      }
    }
    if (next != nullptr) detail::resume_waiter(next);
  }
  // True while some coroutine owns the mutex (a snapshot).
  bool is_locked() const noexcept {
    std::lock_guard<detail::biased_lock> g(lock_);
    return locked_;
  }

 private:
  friend class detail::primitive_wait<mutex>;

  bool try_take_locked() noexcept {
    if (locked_) return false;
    locked_ = true;
    return true;
  }
  void give_back() noexcept { unlock(); }

  mutable detail::biased_lock lock_;
  bool locked_ = false;
  detail::waiter_list waiters_;  // only while locked_
};

// Owns a locked mutex, or holds why it could not be locked; unlocks on destruction. Move-only.
class mutex::guard {
 public:
  // Why the mutex is not owned (operation_canceled, timed_out); empty when it is.
  std::error_code ec;

  // A guard that owns nothing.
  guard() noexcept = default;
  // Takes over o's ownership (o then owns nothing).
  guard(guard&& o) noexcept : ec(o.ec), m_(std::exchange(o.m_, nullptr)) {}
  // Unlocks what this guard owns, then takes over o's ownership.
  guard& operator=(guard&& o) noexcept {
    if (this != &o) {
      unlock();
      ec = o.ec;
      m_ = std::exchange(o.m_, nullptr);
    }
    return *this;
  }
  // Unlocks the mutex if the guard owns it.
  ~guard() { unlock(); }

  // True while the guard owns its mutex.
  bool owns_lock() const noexcept { return m_ != nullptr; }
  // Same as owns_lock().
  explicit operator bool() const noexcept { return owns_lock(); }
  // Unlocks now (if owned); the guard then owns nothing.
  void unlock() noexcept {
    if (m_ != nullptr) std::exchange(m_, nullptr)->unlock();
  }
  // Gives up ownership without unlocking; returns the mutex (nullptr if none was owned).
  mutex* release() noexcept { return std::exchange(m_, nullptr); }

 private:
  friend class mutex::scoped_lock_awaiter;
  guard(mutex* m, std::error_code e) noexcept : ec(e), m_(m) {}

  mutex* m_ = nullptr;
};

// The awaiter of scoped_lock(): a lock wait whose result is a guard.
class [[nodiscard]] mutex::scoped_lock_awaiter : public detail::primitive_wait<mutex> {
 public:
  // Constructed by mutex::scoped_lock().
  using detail::primitive_wait<mutex>::primitive_wait;
  // A guard owning the mutex, or an empty guard whose ec says why not.
  guard await_resume() noexcept {
    std::error_code e = detail::primitive_wait<mutex>::await_resume();
    return e ? guard(nullptr, e) : guard(p_, e);
  }
};

inline mutex::scoped_lock_awaiter mutex::scoped_lock() noexcept { return scoped_lock_awaiter(*this); }

}  // namespace tern::sync
