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
// If op completes before the cancellation reaches it, its own result is returned unchanged. Both wrappers also take
// a task (with_timeout(t, d), with_stop(t, token)): then every operation the task waits on is cancelled, through
// the task's stop token.
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
#include "tern/detail/stop_binding.hpp"
#include "tern/detail/timer_wheel.hpp"
#include "tern/detail/work_queue.hpp"
#include "tern/error.hpp"
#include "tern/io_context.hpp"
#include "tern/task.hpp"
#include "tern/timer.hpp"

namespace tern {

// An awaiter that can be cancelled while suspended: cancel() makes it complete soon with operation_canceled;
// context() is the loop it runs on.
template <class Op>
concept cancellable_operation = detail::cancellable<Op>;

namespace detail {

// Rewrites a cancellation into a timeout, leaving every other result alone.
inline void cancel_to_timeout(std::error_code& ec) noexcept {
  if (ec == std::errc::operation_canceled) ec = make_error_code(error::timed_out);
}
template <class R>
void cancel_to_timeout(R& r) noexcept {
  cancel_to_timeout(r.ec);
}

template <class Op>
class [[nodiscard]] timeout_awaiter : private timer_node {
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
    if (timed_out_) cancel_to_timeout(r);
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

}  // namespace detail

namespace detail {
// A wheel node that requests stop on a source when it fires (with_timeout on a task).
struct stop_timer : timer_node {
  std::stop_source* source = nullptr;
  bool fired = false;
  static void on_fire(timer_node* n) noexcept {
    auto* self = static_cast<stop_timer*>(n);
    self->fired = true;
    self->source->request_stop();
  }
};

template <class T>
concept has_error_code = std::is_same_v<T, std::error_code> || requires(T& r) {
  { r.ec } -> std::same_as<std::error_code&>;
};

// A std::stop_source from the loop's cache for the duration of a wrapper on a task: declared first in the wrapper's
// frame, so destroyed last, after everything that refers to the source; it goes back to the cache unless it was
// stopped (a stopped source cannot serve again).
struct cached_stop_source {
  io_context& ctx;
  std::stop_source source;
  explicit cached_stop_source(io_context& c) : ctx(c), source(c.take_stop_source()) {}
  cached_stop_source(const cached_stop_source&) = delete;
  cached_stop_source& operator=(const cached_stop_source&) = delete;
  ~cached_stop_source() {
    if (ctx.running_here() && !source.stop_requested()) ctx.give_stop_source(std::move(source));
  }
};

// Requests stop on a source when another token is stopped (from whichever thread stops it).
struct forward_stop {
  std::stop_source* source;
  void operator()() const noexcept { source->request_stop(); }
};
}  // namespace detail

// A task with a deadline: when d passes, every operation the task (and the tasks it awaits) is suspended on is
// cancelled, so the task unwinds through its own error handling. If its result is an error_code or carries one
// (io_result), operation_canceled caused by the deadline becomes tern::error::timed_out. Stops of the calling task
// reach it too. Its std::stop_source comes from a small cache of the loop's and goes back there unless it was
// stopped, so a deadline that does not fire allocates nothing in steady state; a token copied out of the task
// (through current_stop_token()) must therefore not be kept past it.
template <class T>
task<T> with_timeout(task<T> t, clock::duration d) {
  const std::stop_token* parent = co_await current_stop_token();
  io_context& ctx = *io_context::current();
  detail::cached_stop_source held(ctx);
  std::stop_source& source = held.source;
  std::optional<std::stop_callback<detail::forward_stop>> link;
  if (parent != nullptr && parent->stop_possible()) link.emplace(*parent, detail::forward_stop{&source});
  const std::stop_token token = source.get_token();
  detail::stop_timer deadline;
  deadline.deadline_ns = detail::deadline_after(ctx, d);
  deadline.fire = &detail::stop_timer::on_fire;
  deadline.source = &source;
  if (!ctx.timers().insert(&deadline)) deadline.fire(&deadline);
  struct disarm {
    io_context& ctx;
    detail::stop_timer& node;
    ~disarm() {
      if (node.linked()) ctx.timers().remove(&node);
    }
  } guard{ctx, deadline};
  if constexpr (std::is_void_v<T>) {
    co_await detail::await_with_token<T>{t, &token};
  } else {
    T result = co_await detail::await_with_token<T>{t, &token};
    if constexpr (detail::has_error_code<T>) {
      if (deadline.fired) detail::cancel_to_timeout(result);
    }
    co_return result;
  }
}

// A task with an absolute deadline tp (with_timeout above, for the time left until tp).
template <class T>
task<T> with_deadline(task<T> t, clock::time_point tp) {
  return with_timeout(std::move(t), tp - clock::now());
}

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
detail::stop_binding<std::decay_t<Op>, std::stop_token> with_stop(Op&& op, std::stop_token token) {
  return {std::decay_t<Op>(std::forward<Op>(op)), std::move(token)};
}

// A task that a stop request on token cancels, as with_timeout(t, d) does when d passes: every operation the task
// (and the tasks it awaits) is suspended on is cancelled and reports operation_canceled, and the task unwinds
// through its own error handling. Stops of the calling task reach it too. A task that finishes first returns its
// own result. Where the calling task can be stopped as well, the two are joined through a std::stop_source from
// the loop's cache (see with_timeout: a token copied out of the task must not be kept past it); otherwise token
// itself is the task's.
template <class T>
task<T> with_stop(task<T> t, std::stop_token token) {
  const std::stop_token* parent = co_await current_stop_token();
  if (parent == nullptr || !parent->stop_possible() || !token.stop_possible()) {
    const std::stop_token* only = token.stop_possible() ? &token : parent;
    co_return co_await detail::await_with_token<T>{t, only};
  }
  detail::cached_stop_source held(*io_context::current());
  std::stop_source& source = held.source;
  const std::stop_callback<detail::forward_stop> from_parent(*parent, detail::forward_stop{&source});
  const std::stop_callback<detail::forward_stop> from_token(token, detail::forward_stop{&source});
  const std::stop_token joined = source.get_token();
  co_return co_await detail::await_with_token<T>{t, &joined};
}

}  // namespace tern
