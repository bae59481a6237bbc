// tern/detail/op_awaiter.hpp
//
// The common part of every awaiter that performs one kernel operation on a descriptor (socket reads and writes,
// accept, connect, signal reads). It holds the io_op, so the operation's state lives in the awaiting frame; it
// models cancellable_operation (cancel(), context()); and its destructor forgets an operation that is still
// pending, which only happens when a loop destroys a suspended frame at teardown.
#pragma once

#include <cerrno>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <system_error>

#include "tern/detail/io_op.hpp"
#include "tern/io_context.hpp"

namespace tern::detail {

class op_awaiter {
 public:
  op_awaiter(io_context& ctx, descriptor* d, op_code code, void* buf,
             std::size_t len) noexcept {
    op_.ctx = &ctx;
    op_.desc = d;
    op_.code = code;
    op_.buf = buf;
    op_.len = len > max_op_len ? max_op_len : static_cast<std::uint32_t>(len);
    if (d == nullptr) op_.res = -EBADF;
  }
  op_awaiter(const op_awaiter& o) noexcept : op_awaiter(*o.op_.ctx, o.op_.desc, o.op_.code, o.op_.buf, o.op_.len) {
    op_.res = o.op_.res;
  }
  op_awaiter& operator=(const op_awaiter&) = delete;
  ~op_awaiter() { op_.ctx->forget(op_); }

  bool await_ready() const noexcept { return op_.desc == nullptr; }
  bool await_suspend(std::coroutine_handle<> h) noexcept {
    op_.handle = h;
    return !op_.ctx->start(op_);
  }
  // Requests cancellation while suspended: the operation then completes with operation_canceled.
  void cancel() noexcept { op_.ctx->cancel(op_); }
  // The loop the operation runs on.
  io_context& context() const noexcept { return *op_.ctx; }

 protected:
  std::error_code error() const noexcept { return {-op_.res, std::system_category()}; }
  io_op op_;
};

}  // namespace tern::detail
