// tern/cancel.hpp
//
// Deadlines and stop tokens for any operation.
//
// An operation here is an awaiter that can be cancelled while suspended: it has cancel(), which makes it complete
// soon with operation_canceled, and context(), the loop it runs on. Every socket operation, accept, connect, timer
// wait and sleep is one. The wrappers suspend the caller on the operation itself (no extra coroutine, no
// allocation) and add one thing beside it:
// - with_timeout(op, d): a node on the loop's timer wheel; if it fires first it cancels op, and op's
//   operation_canceled becomes std::errc::timed_out. If op finishes first the node is removed.
// - with_stop(op, token): a std::stop_callback; a stop request cancels op (directly on the loop's thread, through
//   the loop's inbox from any other thread).
// If op completes before the cancellation reaches it, its own result is returned unchanged.
#pragma once

#include <chrono>
#include <concepts>
#include <coroutine>
#include <optional>
#include <stop_token>
#include <system_error>
#include <type_traits>
#include <utility>

#include "tern/detail/frame_pool.hpp"
#include "tern/detail/timer_wheel.hpp"
#include "tern/detail/work_queue.hpp"
#include "tern/io_context.hpp"
#include "tern/timer.hpp"

namespace tern {

// An awaiter that can be cancelled while suspended.
template <class Op>
concept cancellable_operation = requires(Op& op, const Op& cop) {
  { op.await_ready() } -> std::convertible_to<bool>;
  op.await_resume();
  op.cancel();
  { cop.context() } -> std::same_as<io_context&>;
};

namespace detail {

// Calls op.await_suspend(h) and reports whether the caller stays suspended.
template <class Op>
bool suspend_on(Op& op, std::coroutine_handle<> h) {
  using R = decltype(op.await_suspend(h));
  if constexpr (std::is_void_v<R>) {
    op.await_suspend(h);
    return true;
  } else {
    static_assert(std::is_same_v<R, bool>, "operations suspend with void or bool");
    return op.await_suspend(h);
  }
}

// Rewrites a cancellation into another error (timed_out), leaving every other result alone.
inline void replace_canceled(std::error_code& ec, std::errc with) noexcept {
  if (ec == std::errc::operation_canceled) ec = std::make_error_code(with);
}
template <class R>
void replace_canceled(R& r, std::errc with) noexcept {
  replace_canceled(r.ec, with);
}

template <class Op>
class timeout_awaiter : private timer_node {
 public:
  timeout_awaiter(Op op, std::uint64_t deadline_ns) noexcept(std::is_nothrow_move_constructible_v<Op>)
      : op_(std::move(op)) {
    this->deadline_ns = deadline_ns;
    fire = &on_fire;
  }
  timeout_awaiter(const timeout_awaiter& o) : timer_node(), op_(o.op_) {
    deadline_ns = o.deadline_ns;
    fire = &on_fire;
  }
  timeout_awaiter& operator=(const timeout_awaiter&) = delete;
  ~timeout_awaiter() { disarm(); }

  bool await_ready() { return op_.await_ready(); }
  bool await_suspend(std::coroutine_handle<> h) {
    if (!suspend_on(op_, h)) return false;
    if (!op_.context().timers().insert(this)) {  // the deadline has already passed
      timed_out_ = true;
      op_.cancel();
    }
    return true;
  }
  auto await_resume() {
    disarm();
    auto r = op_.await_resume();
    if (timed_out_) replace_canceled(r, std::errc::timed_out);
    return r;
  }
  // Cancels the wrapped operation (so a timeout can itself be wrapped).
  void cancel() noexcept { op_.cancel(); }
  io_context& context() const noexcept { return op_.context(); }

 private:
  static void on_fire(timer_node* n) noexcept {
    auto* self = static_cast<timeout_awaiter*>(n);
    self->timed_out_ = true;
    self->op_.cancel();
  }
  void disarm() noexcept {
    if (linked()) op_.context().timers().remove(this);
  }

  Op op_;
  bool timed_out_ = false;
};

template <class Op>
class stop_awaiter {
 public:
  stop_awaiter(Op op, std::stop_token token) noexcept(std::is_nothrow_move_constructible_v<Op>)
      : op_(std::move(op)), token_(std::move(token)) {}
  stop_awaiter(const stop_awaiter& o) : op_(o.op_), token_(o.token_) {}
  stop_awaiter& operator=(const stop_awaiter&) = delete;
  ~stop_awaiter() { unregister(); }

  bool await_ready() { return op_.await_ready(); }
  bool await_suspend(std::coroutine_handle<> h) {
    if (!suspend_on(op_, h)) return false;
    if (token_.stop_possible()) registration_.emplace(token_, on_stop{this});  // runs at once if already stopped
    return true;
  }
  auto await_resume() {
    unregister();
    return op_.await_resume();
  }
  void cancel() noexcept { op_.cancel(); }
  io_context& context() const noexcept { return op_.context(); }

 private:
  // A cancellation sent from another thread: it owns itself and finds its target only while the target lives.
  struct remote_cancel final : work_item {
    stop_awaiter* target;
    explicit remote_cancel(stop_awaiter* t) noexcept : target(t) {
      run = &invoke;
      discard = &drop;
    }
    static void invoke(work_item* w) {
      auto* self = static_cast<remote_cancel*>(w);
      if (self->target != nullptr) {
        self->target->remote_ = nullptr;
        self->target->op_.cancel();
      }
      drop(w);
    }
    static void drop(work_item* w) noexcept {
      auto* self = static_cast<remote_cancel*>(w);
      self->~remote_cancel();
      frame_pool::deallocate(self, sizeof(remote_cancel));
    }
  };

  struct on_stop {
    stop_awaiter* self;
    void operator()() const noexcept {
      io_context& ctx = self->op_.context();
      if (io_context::current() == &ctx) {
        self->op_.cancel();
      } else {
        auto* item = ::new (frame_pool::allocate(sizeof(remote_cancel))) remote_cancel(self);
        self->remote_ = item;
        ctx.enqueue(item);
      }
    }
  };

  void unregister() noexcept {
    // Destroying the callback waits for one running on another thread, so remote_ is settled afterwards.
    registration_.reset();
    if (remote_ != nullptr) {
      remote_->target = nullptr;
      remote_ = nullptr;
    }
  }

  Op op_;
  std::stop_token token_;
  std::optional<std::stop_callback<on_stop>> registration_;
  remote_cancel* remote_ = nullptr;
};

}  // namespace detail

// Awaitable: op with a deadline d from now; on expiry op is cancelled and reports std::errc::timed_out.
template <cancellable_operation Op>
detail::timeout_awaiter<std::decay_t<Op>> with_timeout(Op&& op, clock::duration d) {
  return {std::forward<Op>(op), detail::deadline_after(d)};
}

// Awaitable: op with an absolute deadline tp.
template <cancellable_operation Op>
detail::timeout_awaiter<std::decay_t<Op>> with_deadline(Op&& op, clock::time_point tp) {
  return {std::forward<Op>(op), detail::to_ns(tp)};
}

// Awaitable: op that a stop request on token cancels (it then reports operation_canceled).
template <cancellable_operation Op>
detail::stop_awaiter<std::decay_t<Op>> with_stop(Op&& op, std::stop_token token) {
  return {std::forward<Op>(op), std::move(token)};
}

}  // namespace tern
