// tern/timer.hpp
//
// Timers on the loop's timing wheel: sleep_for, sleep_until, and a re-armable timer object.
//
// Each wait is an awaiter that carries its own wheel node, so arming, cancelling and firing never allocate and
// never make a syscall; a completed wait queues its coroutine's handle, in a run queue slot of its own. A wait completes with an empty error_code when its deadline passes (never
// before it) and with operation_canceled when it is cancelled. The wheel only queues fired waits; the coroutine
// resumes from the run queue like any other completion.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <system_error>

#include "tern/detail/timer_wheel.hpp"
#include "tern/error.hpp"
#include "tern/io_context.hpp"

namespace tern {

// The clock of every deadline in tern.
using clock = std::chrono::steady_clock;

class timer;

namespace detail {

inline std::uint64_t to_ns(clock::time_point tp) noexcept {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(tp.time_since_epoch()).count();
  return ns < 0 ? 0 : static_cast<std::uint64_t>(ns);
}

// now + d for a deadline on loop c (null: unknown yet): from the loop's cheap clock when called on its thread,
// else from the real clock. The cheap clock may run a few microseconds ahead, which only delays a deadline; a
// deadline that is due already (d <= 0) takes the loop's last reading instead, which is never ahead, so that it
// is due at once.
inline std::uint64_t deadline_after(io_context* c, clock::duration d) noexcept {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  const bool here = c != nullptr && c->running_here();
  if (ns <= 0) return here ? c->loop_time_ns() : io_context::now_ns();
  std::uint64_t now = here ? c->deadline_now_ns() : io_context::now_ns();
  // A far-future d is cut to 2^62 ns (146 years), so that the sum stays below 2^63 (the clock itself counts from
  // boot); a constant d is folded and pays nothing for it.
  constexpr std::int64_t longest = std::int64_t{1} << 62;
  return now + static_cast<std::uint64_t>(ns < longest ? ns : longest);
}
inline std::uint64_t deadline_after(io_context& ctx, clock::duration d) noexcept { return deadline_after(&ctx, d); }
// For an operation wrapped before it is awaited, whose loop is not known yet: the calling thread's loop, if it
// runs one, provides the cheap clock.
inline std::uint64_t deadline_after(clock::duration d) noexcept { return deadline_after(io_context::current(), d); }

// One pending wait on the wheel. Cancellable while suspended; see cancel.hpp.
class [[nodiscard]] timer_wait : public timer_node {
 public:
  timer_wait(io_context& ctx, std::uint64_t deadline_ns) noexcept : ctx_(&ctx) {
    this->deadline_ns = deadline_ns;
    fire = &on_fire;
  }
  timer_wait(const timer_wait& o) noexcept : timer_node(), ctx_(o.ctx_), owner_(o.owner_) {
    deadline_ns = o.deadline_ns;
    fire = &on_fire;
  }
  timer_wait& operator=(const timer_wait&) = delete;
  ~timer_wait() {
    // Only a wait on the wheel is on its timer's list of waits (completing takes it off both).
    if (linked()) [[unlikely]] {
      ctx_->timers().remove(this);
      unlink_owner();
    }
  }

  // A deadline more than a tick past the loop's last clock reading cannot be due yet, so the common case
  // (a deadline in the future) costs no clock read here; only near deadlines are checked against the clock. A wait
  // awaited on a thread that does not run the timer's loop completes at once with tern::error::wrong_loop (the
  // wheel is the loop's alone).
  bool await_ready() noexcept {
    if (!ctx_->running_here()) [[unlikely]] {
      outcome_ = outcome::wrong_loop;
      return true;
    }
    if (deadline_ns > ctx_->loop_time_ns() + (std::uint64_t{1} << timer_wheel::tick_shift)) return false;
    return deadline_ns <= io_context::now_ns();
  }
  bool await_suspend(std::coroutine_handle<> h) noexcept;
  // Empty when the deadline passed; operation_canceled when cancelled; wrong_loop (see await_ready).
  std::error_code await_resume() const noexcept {
    if (outcome_ == outcome::expired) [[likely]] return success;
    return make_error_code(static_cast<error>(outcome_));
  }

  // The loop the wait runs on.
  io_context& context() const noexcept { return *ctx_; }

  // Completes the wait now with operation_canceled (no effect if it already completed).
  void cancel() noexcept {
    if (!linked()) return;
    unlink_owner();
    complete_canceled();
  }

 private:
  friend class tern::timer;

  // Off the wheel, with operation_canceled, its coroutine queued (the caller has taken it off its timer's list).
  void complete_canceled() noexcept {
    ctx_->timers().remove(this);
    outcome_ = outcome::canceled;
    ctx_->schedule_handle(handle_);
  }

  static void on_fire(timer_node* n) noexcept {
    auto* self = static_cast<timer_wait*>(n);
    self->unlink_owner();
    self->ctx_->schedule_handle(self->handle_);
  }

  // Takes the wait off its timer's list (the wait is on it: it was filed with an owner and has not completed).
  void unlink_owner() noexcept;

  io_context* ctx_;
  std::coroutine_handle<> handle_;  // set by await_suspend
  tern::timer* owner_ = nullptr;  // the timer object whose cancel() reaches this wait, if any (kept after it
                                  // completes: the list is left then, and only a filed wait is linked in again)
  timer_wait* prev_wait_ = nullptr;
  timer_wait* next_wait_ = nullptr;
  // The error's own value, so that the result is made without a choice.
  enum class outcome : unsigned char {
    expired = 0,
    canceled = static_cast<unsigned char>(error::operation_canceled),
    wrong_loop = static_cast<unsigned char>(error::wrong_loop)
  };
  outcome outcome_ = outcome::expired;
};

}  // namespace detail

// A deadline that coroutines can wait on. Several may wait at once; cancel() or re-arming completes them all with
// operation_canceled. Lives on one loop; must outlive its pending waits.
class timer {
 public:
  // A timer on ctx, initially expired.
  explicit timer(io_context& ctx) noexcept : ctx_(&ctx) {}
  timer(const timer&) = delete;
  timer& operator=(const timer&) = delete;
  ~timer() { cancel(); }

  // Sets the deadline to now + d; cancels pending waits. Returns how many were cancelled.
  std::size_t expires_after(clock::duration d) noexcept {
    std::size_t n = waits_ != nullptr ? cancel_pending() : 0;
    deadline_ns_ = detail::deadline_after(*ctx_, d);
    return n;
  }
  // Sets the deadline to tp; cancels pending waits. Returns how many were cancelled.
  std::size_t expires_at(clock::time_point tp) noexcept {
    std::size_t n = waits_ != nullptr ? cancel_pending() : 0;
    deadline_ns_ = detail::to_ns(tp);
    return n;
  }
  // The current deadline.
  clock::time_point expiry() const noexcept {
    return clock::time_point(std::chrono::duration_cast<clock::duration>(std::chrono::nanoseconds(deadline_ns_)));
  }

  // Awaitable: waits for the deadline; yields std::error_code (operation_canceled if cancelled).
  detail::timer_wait wait() noexcept {
    detail::timer_wait w(*ctx_, deadline_ns_);
    w.owner_ = this;
    return w;
  }

  // Completes every pending wait with operation_canceled; returns how many there were.
  std::size_t cancel() noexcept {
    detail::timer_wait* w = waits_;
    if (w == nullptr) return 0;
    if (w->next_wait_ == nullptr) [[likely]] {  // the only wait: the list is emptied here, not through the wait
      waits_ = nullptr;
      w->complete_canceled();
      return 1;
    }
    return cancel_all();
  }

 private:
  friend class detail::timer_wait;
  // Re-arming with waits pending is the rare case: out of line, so that the common re-arm saves no registers.
  [[gnu::noinline]] std::size_t cancel_pending() noexcept { return cancel(); }
  [[gnu::noinline]] std::size_t cancel_all() noexcept {
    std::size_t n = 0;
    while (waits_ != nullptr) {
      waits_->cancel();  // takes it off waits_
      ++n;
    }
    return n;
  }

  io_context* ctx_;
  std::uint64_t deadline_ns_ = 0;
  detail::timer_wait* waits_ = nullptr;
};

namespace detail {

inline bool timer_wait::await_suspend(std::coroutine_handle<> h) noexcept {
  handle_ = h;
  if (!ctx_->timers().insert(this)) return false;  // due already (within the current tick)
  if (owner_ != nullptr) {
    // The timer's only wait (the common case) is its waits_ alone, its links left null; a second one links in.
    timer_wait* first = owner_->waits_;
    owner_->waits_ = this;
    if (first != nullptr) [[unlikely]] {
      next_wait_ = first;
      first->prev_wait_ = this;
    }
  }
  return true;
}

inline void timer_wait::unlink_owner() noexcept {
  if (owner_ == nullptr) return;
  if (prev_wait_ == nullptr && next_wait_ == nullptr) [[likely]] {
    owner_->waits_ = nullptr;  // the timer's only wait
  } else {
    if (prev_wait_ != nullptr) prev_wait_->next_wait_ = next_wait_;
    else owner_->waits_ = next_wait_;
    if (next_wait_ != nullptr) next_wait_->prev_wait_ = prev_wait_;
    prev_wait_ = next_wait_ = nullptr;
  }
}

}  // namespace detail

// Awaitable: suspends the calling coroutine for d on the current loop; yields std::error_code.
inline detail::timer_wait sleep_for(clock::duration d) noexcept {
  io_context& ctx = *io_context::current();
  return detail::timer_wait(ctx, detail::deadline_after(ctx, d));
}

// Awaitable: suspends the calling coroutine until tp on the current loop; yields std::error_code.
inline detail::timer_wait sleep_until(clock::time_point tp) noexcept {
  return detail::timer_wait(*io_context::current(), detail::to_ns(tp));
}

// Same, on a given loop.
inline detail::timer_wait sleep_for(io_context& ctx, clock::duration d) noexcept {
  return detail::timer_wait(ctx, detail::deadline_after(ctx, d));
}

}  // namespace tern
