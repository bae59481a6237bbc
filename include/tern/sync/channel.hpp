// tern/sync/channel.hpp
//
// channel<T>: a FIFO queue of values between coroutines, many producers and many consumers, on any loops and
// threads.
//
//   tern::sync::channel<job> jobs(64);                       // bounded: send waits while 64 items are buffered
//   auto queue = tern::sync::channel<job>::unbounded();      // unbounded: send never waits
//   std::error_code ec = co_await jobs.send(j);              // empty, or sync::error::closed
//   auto [ec, item] = co_await jobs.receive();               // item is a std::optional<job>, set iff !ec
//   jobs.close();                                            // wakes every waiting sender and receiver
//
// Semantics:
// - A bounded channel has a capacity of at least 1 (0 is rejected: an unbuffered rendezvous is a different thing)
//   and allocates its ring buffer once, so it never allocates afterwards. An unbounded one is made by unbounded()
//   and doubles its buffer when full (the values are moved under the lock then: amortised O(1) per send).
// - send() completes at once if a receiver is waiting (the value goes straight to the oldest one) or if there is
//   room; otherwise it waits, and a receive that frees a slot moves the oldest waiting sender's value into the
//   buffer and wakes it. So values come out in the order their sends completed, and waiting senders and receivers
//   are served first come, first served.
// - receive() takes the oldest buffered value, or waits for one. After close(), values still buffered are received
//   normally; once the buffer is empty every receive reports sync::error::closed.
// - close() refuses every later send with sync::error::closed and wakes every waiting sender (its value is not
//   delivered) and every waiting receiver (the buffer is empty if one waits) with sync::error::closed.
// - Every wait is cancellable (cancel(), with_timeout, with_stop) and then reports operation_canceled (timed_out
//   under with_timeout). A cancellation that loses the race against a wake-up from another thread is ignored: the
//   receive gets its value, the send counts as delivered. A receive whose coroutine is destroyed after a value was
//   handed to it drops that value.
//
// Invariants (under the lock): receivers wait only while the buffer is empty; senders wait only while a bounded
// buffer is full; neither waits on a closed channel. Why this shape: one spinlock around a ring buffer and two
// intrusive waiter lists keeps every operation O(1), allocation-free for a bounded channel, and simple enough to
// be obviously right when cancellations race wake-ups across threads (see detail/sync_waiter.hpp).
//
// T must be nothrow move constructible (it is moved under the lock). A waiting coroutine does not keep its loop's
// run() from returning: a loop whose coroutines wait for another thread needs a work_guard (or a runtime).
// The channel must outlive its waiters and must not be destroyed while any coroutine waits on it.
#pragma once

#include <cassert>
#include <cstddef>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "tern/detail/ring_buffer.hpp"
#include "tern/detail/biased_lock.hpp"
#include "tern/detail/sync_waiter.hpp"
#include "tern/sync/error.hpp"

namespace tern::sync {

// What co_await channel<T>::receive() yields: a value, or why there is none.
template <class T>
struct receive_result {
  std::error_code ec;        // empty, sync::error::closed, operation_canceled or timed_out
  std::optional<T> value;    // set iff ec is empty
};

template <class T>
class channel {
 public:
  // The type of the values carried.
  using value_type = T;

  // What capacity() reports for an unbounded channel.
  static constexpr std::size_t unbounded_capacity = std::numeric_limits<std::size_t>::max();

  // The awaitables of send() and receive() (below).
  class send_awaiter;
  class receive_awaiter;

  // A bounded channel holding up to capacity values; throws std::invalid_argument if capacity is 0.
  explicit channel(std::size_t capacity) : buffer_(checked(capacity)), bounded_(true) {}
  // An unbounded channel: send never waits; the buffer grows as needed.
  static channel unbounded() { return channel(unbounded_tag{}); }
  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;
  // Destroys the values still buffered. No coroutine may be waiting.
  ~channel() {
    assert(senders_.empty() && receivers_.empty() && "tern::sync::channel destroyed with coroutines waiting");
  }

  // Awaitable: sends value, waiting while a bounded channel is full; yields std::error_code (empty when the value
  // was delivered or buffered, sync::error::closed if the channel is or gets closed first).
  send_awaiter send(T value) noexcept { return send_awaiter(*this, std::move(value)); }

  // Awaitable: receives the oldest value, waiting while there is none; yields receive_result<T>.
  receive_awaiter receive() noexcept { return receive_awaiter(*this); }

  // Sends without waiting: empty on success (value moved from), sync::error::full or sync::error::closed (value
  // left untouched).
  [[nodiscard]] std::error_code try_send(T&& value) {
    const bool biased = lock_.lock_biased();
    detail::wait_state s =
        step_and_unlock(biased, [&](detail::sync_waiter*& wake) { return send_locked(value, wake); });
    if (s == detail::wait_state::waiting) return error::full;
    return s == detail::wait_state::closed ? make_error_code(error::closed) : tern::detail::success;
  }
  // Sends a copy of value without waiting; same results.
  [[nodiscard]] std::error_code try_send(const T& value) {
    T copy(value);
    return try_send(std::move(copy));
  }

  // Receives the oldest buffered value without waiting; nullopt if there is none (empty, or closed and drained).
  [[nodiscard]] std::optional<T> try_receive() {
    std::optional<T> out;
    detail::sync_waiter* wake = nullptr;
    {
      detail::biased_guard guard(lock_);
      if (receive_locked(out, wake) == detail::wait_state::waiting) return out;
    }
    if (wake != nullptr) detail::resume_waiter(wake);
    return out;
  }

  // Closes the channel: later sends fail, receives drain what is buffered; every waiter is woken with
  // sync::error::closed. Idempotent; any thread. True if this call closed it, false if it was closed already.
  //
  // Why it returns a value: clang 15 and 16 take any call of a function returning void with one pointer argument
  // and the coroutine's own (fast) calling convention for a possible symmetric-transfer resume, and while checking
  // whether a return follows it they fold the branches after it for that one path, in place, for every path. A
  // close() of a channel whose element type has internal linkage (a type in an unnamed namespace: its close()
  // gets the fast calling convention) in a coroutine's failure path then took the loops around it apart at -O1;
  // see docs/design.md, "Coroutines". A bool return keeps close() out of that search.
  bool close() noexcept {
    detail::sync_waiter* senders;
    detail::sync_waiter* receivers;
    {
      detail::biased_guard guard(lock_);
      if (closed_) return false;
      closed_ = true;
      senders = senders_.release_all(detail::wait_state::closed);
      receivers = receivers_.release_all(detail::wait_state::closed);
    }
    detail::resume_all(senders);
    detail::resume_all(receivers);
    return true;
  }

  // The number of values buffered now.
  std::size_t size() const noexcept {
    detail::biased_guard guard(lock_);
    return buffer_.size();
  }
  // The capacity of a bounded channel, unbounded_capacity for an unbounded one.
  std::size_t capacity() const noexcept {
    detail::biased_guard guard(lock_);
    return bounded_ ? buffer_.capacity() : unbounded_capacity;
  }
  // True once close() has been called.
  bool is_closed() const noexcept {
    detail::biased_guard guard(lock_);
    return closed_;
  }

  // The awaiter of send(): owns the value until it is delivered.
  class [[nodiscard]] send_awaiter : public detail::sync_wait {
   public:
    // Moves a send that has not been awaited yet (into with_timeout, with_stop).
    send_awaiter(send_awaiter&& o) noexcept
        : detail::sync_wait(std::move(o)), ch_(o.ch_), value_(std::move(o.value_)) {}
    // Unlinks a send destroyed while waiting (before value_ goes, which a receiver could otherwise still take).
    ~send_awaiter() { abandon(); }

    // Sends now if the value can go without waiting. The common case, room in the buffer and nobody waiting, is
    // inlined into the awaiting coroutine (clang's heuristics otherwise keep it a call); the rest is out of line.
    // Only the path through the lock's bias (a channel used by one thread) is inline: it then needs no flag of
    // how the lock was taken (6 instructions a send and receive pair).
    [[gnu::always_inline]] bool await_ready() {
      channel& ch = *ch_;
      if (!ch.lock_.try_lock_bias()) [[unlikely]] return ready_locked(ch.lock_.lock_unbiased());
      if (!ch.closed_ && ch.receivers_.empty() && !ch.buffer_.full()) [[likely]] {
        ch.buffer_.push_back(std::move(value_));
        ch.lock_.unlock(true);
        state = detail::wait_state::granted;
        return true;
      }
      return ready_locked(true);
    }
    // Tries again under the lock, and waits if the channel is still full.
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
      return suspend_bound(h, [this](std::coroutine_handle<> c) { return suspend(c); });
    }
    // Empty when delivered; sync::error::closed; operation_canceled.
    std::error_code await_resume() noexcept { return detail::wait_error(resumed(), error::closed); }

   private:
    friend class channel;
    // await_suspend's work: tries again under the lock and links the wait if it still cannot complete.
    bool suspend(std::coroutine_handle<> h) {
      io_context& loop = detail::waiting_loop();
      detail::sync_waiter* wake = nullptr;
      {
        detail::biased_guard guard(ch_->lock_);
        detail::wait_state s = ch_->send_locked(value_, wake);
        if (s == detail::wait_state::waiting) {
          link(ch_->lock_, ch_->senders_, loop, h);
          return true;
        }
        state = s;
      }
      if (wake != nullptr) detail::resume_waiter(wake);
      return false;
    }

    send_awaiter(channel& ch, T&& value) noexcept : ch_(&ch), value_(std::move(value)) {}

    // await_ready with the lock held, for every case but the common one; releases the lock.
    [[gnu::noinline]] bool ready_locked(bool biased) {
      detail::wait_state s = ch_->step_and_unlock(
          biased, [this](detail::sync_waiter*& wake) { return ch_->send_locked(value_, wake); });
      if (s == detail::wait_state::waiting) return false;
      state = s;
      return true;
    }

    channel* ch_;
    T value_;
  };

  // The awaiter of receive(): the slot a sender hands its value into.
  class [[nodiscard]] receive_awaiter : public detail::sync_wait {
   public:
    // Moves a receive that has not been awaited yet (into with_timeout, with_stop).
    receive_awaiter(receive_awaiter&& o) noexcept : detail::sync_wait(std::move(o)), ch_(o.ch_) {}
    // Unlinks a receive destroyed while waiting (before value_ goes, which a sender could otherwise still fill).
    ~receive_awaiter() { abandon(); }

    // Receives now if a value is buffered or the channel is closed. As for send, the common case (a value
    // buffered, no sender waiting) is inline and the rest out of line.
    [[gnu::always_inline]] bool await_ready() {
      channel& ch = *ch_;
      if (!ch.lock_.try_lock_bias()) [[unlikely]] return ready_locked(ch.lock_.lock_unbiased());
      if (!ch.buffer_.empty() && ch.senders_.empty()) [[likely]] {
        ch.buffer_.pop_front_into(value_);
        ch.lock_.unlock(true);
        state = detail::wait_state::granted;
        return true;
      }
      return ready_locked(true);
    }
    // Tries again under the lock, and waits if there is still nothing to receive.
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
      return suspend_bound(h, [this](std::coroutine_handle<> c) { return suspend(c); });
    }
    // The value, or sync::error::closed / operation_canceled.
    receive_result<T> await_resume() noexcept {
      std::error_code ec = detail::wait_error(resumed(), error::closed);
      return {ec, std::move(value_)};
    }

   private:
    friend class channel;
    // await_suspend's work: tries again under the lock and links the wait if it still cannot complete.
    bool suspend(std::coroutine_handle<> h) {
      io_context& loop = detail::waiting_loop();
      detail::sync_waiter* wake = nullptr;
      {
        detail::biased_guard guard(ch_->lock_);
        detail::wait_state s = ch_->receive_locked(value_, wake);
        if (s == detail::wait_state::waiting) {
          link(ch_->lock_, ch_->receivers_, loop, h);
          return true;
        }
        state = s;
      }
      if (wake != nullptr) detail::resume_waiter(wake);
      return false;
    }

    explicit receive_awaiter(channel& ch) noexcept : ch_(&ch) {}

    // await_ready with the lock held, for every case but the common one; releases the lock.
    [[gnu::noinline]] bool ready_locked(bool biased) noexcept {
      detail::wait_state s = ch_->step_and_unlock(
          biased, [this](detail::sync_waiter*& wake) { return ch_->receive_locked(value_, wake); });
      if (s == detail::wait_state::waiting) return false;
      state = s;
      return true;
    }

    channel* ch_;
    std::optional<T> value_;  // written by the sender that grants this receive
  };

 private:
  struct unbounded_tag {};
  explicit channel(unbounded_tag) noexcept : bounded_(false) {}

  static std::size_t checked(std::size_t capacity) {
    if (capacity == 0) throw std::invalid_argument("tern::sync::channel: capacity must be at least 1");
    return capacity;
  }

  // With lock_ held (adopted here; biased as lock_biased() said): runs step, a send_locked or receive_locked that
  // may free a waiter, releases the lock, and only then resumes that waiter. Returns the step's state.
  template <class Step>
  detail::wait_state step_and_unlock(bool biased, Step step) {
    detail::sync_waiter* wake = nullptr;
    detail::wait_state s;
    {
      detail::biased_guard guard(lock_, biased);
      s = step(wake);
    }
    if (wake != nullptr) detail::resume_waiter(wake);
    return s;
  }

  // With lock_ held: delivers value to the oldest waiting receiver (returned in wake, to be resumed after the
  // lock is released) or buffers it. Returns granted, closed, or waiting if a bounded buffer is full (value is
  // then left untouched). Throws only std::bad_alloc when an unbounded buffer cannot grow, changing nothing.
  detail::wait_state send_locked(T& value, detail::sync_waiter*& wake) {
    if (closed_) return detail::wait_state::closed;
    if (detail::sync_waiter* w = receivers_.pop_front()) {
      auto* r = static_cast<receive_awaiter*>(w);
      r->value_.emplace(std::move(value));
      r->state = detail::wait_state::granted;
      wake = r;
      return detail::wait_state::granted;
    }
    if (buffer_.full()) {
      if (bounded_) return detail::wait_state::waiting;
      buffer_.grow();
    }
    buffer_.push_back(std::move(value));
    return detail::wait_state::granted;
  }

  // With lock_ held: moves the oldest value into out and refills the freed slot from the oldest waiting sender
  // (returned in wake). Returns granted, closed (closed and drained), or waiting (nothing buffered).
  detail::wait_state receive_locked(std::optional<T>& out, detail::sync_waiter*& wake) noexcept {
    if (buffer_.empty()) return closed_ ? detail::wait_state::closed : detail::wait_state::waiting;
    buffer_.pop_front_into(out);
    if (detail::sync_waiter* w = senders_.pop_front()) {
      auto* s = static_cast<send_awaiter*>(w);
      buffer_.push_back(std::move(s->value_));
      s->state = detail::wait_state::granted;
      wake = s;
    }
    return detail::wait_state::granted;
  }

  mutable detail::biased_lock lock_;
  detail::ring_buffer<T> buffer_;
  detail::waiter_list senders_;    // only while a bounded buffer is full
  detail::waiter_list receivers_;  // only while the buffer is empty
  bool bounded_;
  bool closed_ = false;
};

}  // namespace tern::sync
