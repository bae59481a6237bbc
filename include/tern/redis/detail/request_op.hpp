// tern/redis/detail/request_op.hpp
//
// The machinery under every awaitable of a connection: the request slot the connection queues, and the awaiter
// base that hands it over, from the connection's own loop or from another worker's.
//
// A request lives in its awaiter, in the frame of the task that awaits it: nothing is allocated per request, and
// the awaiter is kept small (a frame holds one for each co_await of a command). The connection keeps a queue of
// pointers to the slots it owes replies to, and calls its operations: write() to format the request into its
// output buffer (again, for an idempotent request replayed after a reconnect), deliver() for each node of each
// reply, and finish() once when it is done with the slot.
//
// On the connection's loop, await_suspend submits the slot directly and finish() queues the task's resumption.
// From another loop, the slot travels as a work item posted to the connection's loop (node_), and finish()
// posts the resumption back. A cancellation there (a timeout, a stop) happens on the awaiting task's loop while
// the slot belongs to the connection's: cancel() posts a second item (cancel_hop_) that withdraws the slot on the
// connection's loop, and two bits of flags_ decide which of the finish and the cancel hop resumes the task, so
// that it resumes exactly once and only after the connection has let go of the slot.
//
// A request made or awaited on another loop holds the connection's state (keep_) until the connection's loop has
// let go of it, so that the connection may be closed or destroyed meanwhile: the hops find the state alive,
// and the request ends with error::closed. The state is let go on the connection's loop (by the finish or the
// cancel hop, whichever resumes the task), so that the state's last owner is, in the normal course, that loop.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <system_error>

#include "tern/detail/timer_wheel.hpp"
#include "tern/detail/work_queue.hpp"
#include "tern/error.hpp"
#include "tern/io_context.hpp"
#include "tern/redis/request.hpp"
#include "tern/redis/resp.hpp"

namespace tern::redis::detail {

class connection_state;

// A request as the connection sees it. The timer node bounds its wait while the connection is down.
struct request_slot : tern::detail::timer_node {
  enum class kind : std::uint8_t {
    command,       // replies are values; `replies` of them
    subscription,  // (P)(UN)SUBSCRIBE: `replies` confirmations arrive as pushes, or one error reply
  };
  // What the connection calls, one table per kind of request (a pointer in each slot, not three).
  struct operations {
    void (*write)(request_slot*, output_buffer&);  // formats the request, forgetting any reply received so far
    void (*deliver)(request_slot*, std::uint32_t reply_index, const resp::node&);  // a node of reply reply_index
    void (*finish)(request_slot*, std::error_code);  // done with the slot: ec empty when every reply arrived
  };

  const operations* ops = nullptr;
  connection_state* state = nullptr;
  std::uint64_t seq = 0;         // its place in the connection's queue, while queued
  std::uint32_t replies = 1;
  kind what = kind::command;
  bool idempotent = false;       // may be sent again when its connection failed before the reply
};

// Implemented by the connection (connection.cpp); on its loop only, but for home_loop and share.
io_context& home_loop(const connection_state& s) noexcept;
// A strong reference to s (which must be alive): any thread.
std::shared_ptr<connection_state> share(connection_state& s) noexcept;
// Queues the slot (formats it, links it): empty, or why it cannot be (then finish() is not called).
std::error_code submit(connection_state& s, request_slot& slot);
// Takes a queued slot back (its request unsent is dropped; sent, its reply will be read and dropped): true if it
// was queued, and finish() will not be called.
bool withdraw(connection_state& s, request_slot& slot) noexcept;

class request_op : public request_slot {
 public:
  // Made on another loop than the connection's, it holds the connection's state from now on (see above).
  explicit request_op(connection_state& s) noexcept {
    state = &s;
    if (io_context::current() != &home_loop(s)) keep_ = share(s);
  }
  // The same, told the connection's loop (a command's hot path: no call to find it). Made by a thread inside that
  // loop's run (even one nested in another loop's), nothing is held: the connection cannot go meanwhile, and
  // await_suspend takes hold if the awaiting loop is another.
  request_op(io_context& home, connection_state& s) noexcept {
    state = &s;
    if (!home.running_here()) keep_ = share(s);
  }
  // Moved before it is awaited (into with_timeout, with_stop), never while suspended.
  request_op(request_op&& o) noexcept : request_slot(o), outcome_(o.outcome_), keep_(std::move(o.keep_)) {}
  request_op(const request_op&) = delete;
  request_op& operator=(const request_op&) = delete;
  request_op& operator=(request_op&&) = delete;

  // Ready at once only when refused before it was sent (a reserved command).
  bool await_ready() const noexcept { return static_cast<bool>(outcome_); }
  bool await_suspend(std::coroutine_handle<> h) {
    caller_ = io_context::current();
    handle_ = h;
    io_context& home = home_loop(*state);
    if (caller_ == &home) {
      outcome_ = submit(*state, *this);
      return !outcome_;
    }
    remote_ = true;
    if (!keep_) keep_ = share(*state);
    node_.self = this;
    node_.run = &on_submit_hop;
    home.enqueue(&node_);
    return true;
  }
  // While suspended, on the awaiting task's loop: ends the request with operation_canceled, unless it has ended.
  void cancel() noexcept {
    if (!remote_) {
      // Finished, the slot is the connection's no more (which may be gone by now).
      if (flags_.load(std::memory_order_relaxed) & done_bit) return;
      if (withdraw(*state, *this)) {
        outcome_ = make_error_code(tern::error::operation_canceled);
        resume_on(*caller_);
      }
      return;
    }
    if (flags_.fetch_or(cancel_bit, std::memory_order_acq_rel) & (done_bit | cancel_bit)) return;
    cancel_hop_.self = this;
    cancel_hop_.run = &on_cancel_hop;
    home_loop(*state).enqueue(&cancel_hop_);
  }
  // The loop of the awaiting task (where a timeout's timer runs).
  io_context& context() const noexcept { return *caller_; }

 protected:
  // The operations table's finish: what every request does when the connection is done with it.
  static void on_finish(request_slot* s, std::error_code ec) {
    auto* self = static_cast<request_op*>(s);
    self->outcome_ = ec;
    if (!self->remote_) {
      self->flags_.store(done_bit, std::memory_order_relaxed);
      self->resume_on(*self->caller_);
      return;
    }
    // A cancel hop posted (or about to be) resumes the task, and lets go of the state: cancel() reads it.
    if (self->flags_.fetch_or(done_bit, std::memory_order_acq_rel) & cancel_bit) return;
    const std::shared_ptr<connection_state> keep = std::move(self->keep_);
    self->resume_on(*self->caller_);
  }

  std::error_code outcome_ = no_error;  // how the request ended as far as the connection is concerned

 private:
  static constexpr std::uint8_t done_bit = 1;    // finished on the connection's loop
  static constexpr std::uint8_t cancel_bit = 2;  // a cancel hop was posted (or is about to be)
  // A hop to the connection's loop, or the task's resumption: the same node serves the submission (which has run
  // long before) and then the resumption.
  struct hop : tern::detail::work_item {
    request_op* self = nullptr;
  };

  // Queues the awaiting coroutine's resumption on loop (from any thread): node_ becomes its resume item.
  void resume_on(io_context& loop) noexcept {
    node_.self = this;
    node_.run = &on_resume;
    loop.enqueue(&node_);
  }
  static void on_resume(tern::detail::work_item* w) { static_cast<hop*>(w)->self->handle_.resume(); }
  static void on_submit_hop(tern::detail::work_item* w) {
    request_op* self = static_cast<hop*>(w)->self;
    if (std::error_code ec = submit(*self->state, *self)) on_finish(self, ec);
  }
  static void on_cancel_hop(tern::detail::work_item* w) {
    request_op* self = static_cast<hop*>(w)->self;
    if ((self->flags_.load(std::memory_order_acquire) & done_bit) == 0 && withdraw(*self->state, *self)) {
      self->outcome_ = make_error_code(tern::error::operation_canceled);
    }
    const std::shared_ptr<connection_state> keep = std::move(self->keep_);
    self->resume_on(*self->caller_);
  }

  io_context* caller_ = nullptr;
  std::coroutine_handle<> handle_;
  hop node_;
  hop cancel_hop_;
  std::shared_ptr<connection_state> keep_;  // while remote: the connection's state (see above)
  std::atomic<std::uint8_t> flags_{0};
  bool remote_ = false;
};

}  // namespace tern::redis::detail
