// tern/detail/op_awaiter.hpp
//
// The common part of every awaiter that performs one kernel operation on a descriptor (socket reads and writes,
// accept, connect, signal reads, receive() into the loop's receive pool). It holds the operation (an io_op, or the
// receive_op of a receive), so the operation's state lives in the awaiting frame; it models cancellable_operation
// (cancel(), context()); and its destructor forgets an operation that is still pending, which only happens when a
// loop destroys a suspended frame at teardown.
//
// An operation is started only by a thread inside its loop's run: the ring and the epoll set are single-threaded,
// and an operation started elsewhere would race the loop (under io_uring it was lost, and its coroutine never
// resumed). await_ready checks it, and an operation awaited anywhere else completes at once with
// tern::error::wrong_loop. The check is one load and one compare with the thread pointer register.
#pragma once

#include <cerrno>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <system_error>

#include "tern/detail/io_op.hpp"
#include "tern/error.hpp"
#include "tern/io_context.hpp"

namespace tern::detail {

// The error_code of a failed operation's result (-errno, or one of tern's own markers). The kernel's ECANCELED only
// ever answers a cancellation that tern requested, so it is reported as tern::error::operation_canceled like every
// other cancellation.
inline std::error_code result_error(int res) noexcept {
  if (res == -ECANCELED) return make_error_code(error::operation_canceled);
  if (res == wrong_loop_res) return make_error_code(error::wrong_loop);
  return {-res, std::system_category()};
}

// An operation on d may start on the calling thread: d is open and the thread runs ctx. Otherwise the result
// that reports why not (-EBADF or wrong_loop_res).
inline int refusal(const io_context& ctx, const descriptor* d) noexcept {
  if (d == nullptr) return -EBADF;
  return ctx.running_here() ? 0 : wrong_loop_res;
}

// Op is the operation the awaiter holds: the buffer_op of an operation on a caller's buffer, or the receive_op of
// receive() (stream_ops.hpp).
template <class Op>
class [[nodiscard]] basic_op_awaiter {
 public:
  basic_op_awaiter& operator=(const basic_op_awaiter&) = delete;
  ~basic_op_awaiter() { op_.ctx->forget(op_); }

  bool await_ready() noexcept {
    if (op_.desc != nullptr && op_.ctx->running_here()) [[likely]] return false;
    op_.res = refusal(*op_.ctx, op_.desc);
    return true;
  }
  bool await_suspend(std::coroutine_handle<> h) noexcept {
    op_.handle = h;
    return !op_.ctx->start(op_);
  }
  // Requests cancellation while suspended: the operation then completes with operation_canceled.
  void cancel() noexcept { op_.ctx->cancel(op_); }
  // The loop the operation runs on.
  io_context& context() const noexcept { return *op_.ctx; }

 protected:
  basic_op_awaiter(io_context& ctx, descriptor* d, op_code code) noexcept {
    op_.ctx = &ctx;
    op_.desc = d;
    op_.code = code;
  }
  // A copy is a new operation on the same descriptor: never the original's links or state. What else of the op it
  // takes over is the derived awaiter's choice.
  basic_op_awaiter(const basic_op_awaiter& o) noexcept : basic_op_awaiter(*o.op_.ctx, o.op_.desc, o.op_.code) {}

  std::error_code error() const noexcept { return result_error(op_.res); }
  Op op_;
};

// The awaiter of an operation on a caller's buffer (or on a msghdr or sockaddr in buf, which the derived awaiter
// points at its own). A copy keeps the buffer and the result.
class [[nodiscard]] op_awaiter : public basic_op_awaiter<buffer_op> {
 public:
  op_awaiter(io_context& ctx, descriptor* d, op_code code, void* buf, std::size_t len) noexcept
      : basic_op_awaiter(ctx, d, code) {
    op_.buf = buf;
    op_.len = len > max_op_len ? max_op_len : static_cast<std::uint32_t>(len);
  }
  op_awaiter(const op_awaiter& o) noexcept : basic_op_awaiter(o) {
    op_.buf = o.op_.buf;
    op_.len = o.op_.len;
    op_.res = o.op_.res;
    op_.aux = o.op_.aux;  // a send's send_plain_only (the backend resets its own bits at each start)
  }
};
static_assert(sizeof(op_awaiter) == sizeof(buffer_op));

}  // namespace tern::detail
