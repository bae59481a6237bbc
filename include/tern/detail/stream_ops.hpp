// tern/detail/stream_ops.hpp
//
// The awaiters of byte-stream operations on any descriptor (sockets, pipes): read_some, write_some, read_exact
// and write_all. Each holds its io_op, so starting one allocates nothing; they model cancellable_operation.
#pragma once

#include <cerrno>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <system_error>

#include "tern/buffer.hpp"
#include "tern/detail/io_op.hpp"
#include "tern/detail/op_awaiter.hpp"
#include "tern/error.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/leased_buffer.hpp"

namespace tern::detail {

// read_some: recv on a socket, read on anything else (a pipe, a terminal). 0 bytes is eof.
class [[nodiscard]] read_awaiter : public op_awaiter {
 public:
  read_awaiter(io_context& ctx, descriptor* d, mutable_buffer b, op_code code = op_code::recv) noexcept
      : op_awaiter(ctx, d, code, b.data(), b.size()) {}
  io_result<std::size_t> await_resume() const noexcept {
    if (op_.res < 0) return {error(), 0};
    if (op_.res == 0 && op_.len != 0) return {make_error_code(error::eof), 0};
    return {{}, static_cast<std::size_t>(op_.res)};
  }
};

// write_some: send on a socket (MSG_NOSIGNAL), write on anything else. aux: send_plain_only for a datagram
// socket's send (io_op.hpp).
class [[nodiscard]] write_awaiter : public op_awaiter {
 public:
  write_awaiter(io_context& ctx, descriptor* d, const_buffer b, op_code code = op_code::send,
                std::uint8_t aux = 0) noexcept
      : op_awaiter(ctx, d, code, const_cast<void*>(b.data()), b.size()) {
    op_.aux = aux;
  }
  io_result<std::size_t> await_resume() const noexcept {
    if (op_.res < 0) return {error(), 0};
    return {{}, static_cast<std::size_t>(op_.res)};
  }
};

// receive: the next bytes of the stream in a buffer of the loop's receive pool, leased to the caller (see
// leased_buffer.hpp and detail/receive_pool.hpp). Holds its receive_op like every awaiter; cancellable, and a
// cancelled receive loses nothing: bytes the socket's multishot receive already queued stay queued for the next.
// A copy is a new receive: no buffer, no result.
class [[nodiscard]] receive_awaiter : public basic_op_awaiter<receive_op> {
 public:
  receive_awaiter(io_context& ctx, descriptor* d) noexcept : basic_op_awaiter(ctx, d, op_code::receive) {}
  // The bytes (at least one), or eof when the peer has closed and every byte before has been received.
  io_result<leased_buffer> await_resume() noexcept {
    if (op_.res < 0) return {error(), {}};
    if (op_.res == 0) return {make_error_code(error::eof), {}};
    return {{}, leased_buffer(op_.ctx->receive_pool(), op_.buffer_id(), static_cast<std::size_t>(op_.res))};
  }
};
// What the frame of every idle connection's task holds while it waits.
static_assert(sizeof(receive_awaiter) == sizeof(receive_op));

// read_exact and write_all: one io_op issued again for the rest of the buffer after each partial transfer. The
// pieces are chained from the op's own completion, so the awaiting coroutine is resumed once, at the end, and the
// operation needs no frame of its own (it used to be a task looping over read_some/write_some, one frame and one
// resumption per call and one per piece). Cancellation is remembered, so a cancel that arrives while the next
// piece is queued (between two kernel operations) still ends the transfer with operation_canceled; so does a close
// of the descriptor then; bytes moved before it are counted in the result either way.
class [[nodiscard]] transfer_awaiter {
 public:
  transfer_awaiter(io_context& ctx, descriptor* d, op_code code, void* base,
                   std::size_t size) noexcept
      : base_(static_cast<unsigned char*>(base)), size_(size) {
    op_.ctx = &ctx;
    op_.desc = d;
    op_.code = code;
    op_.run = &on_piece;
    op_.self = this;
    if (d != nullptr) generation_ = d->generation;
  }
  transfer_awaiter(const transfer_awaiter& o) noexcept
      : transfer_awaiter(*o.op_.ctx, o.op_.desc, o.op_.code, o.base_, o.size_) {}
  transfer_awaiter& operator=(const transfer_awaiter&) = delete;
  ~transfer_awaiter() { op_.ctx->forget(op_); }

  bool await_ready() noexcept {
    if (const int refused = refusal(*op_.ctx, op_.desc)) [[unlikely]] {
      ec_ = result_error(refused);
      return true;
    }
    return size_ == 0;
  }
  bool await_suspend(std::coroutine_handle<> h) noexcept {
    op_.handle = h;
    return !issue();
  }
  // The byte count moved before any error; ec is eof when a read meets the end of the stream first.
  io_result<std::size_t> await_resume() const noexcept { return {ec_, done_}; }
  void cancel() noexcept {
    canceled_ = true;
    op_.ctx->cancel(op_);
  }
  io_context& context() const noexcept { return *op_.ctx; }

 private:
  struct piece_op : buffer_op {
    transfer_awaiter* self;
  };
  // Starts pieces until one is pending (false) or the transfer has ended (true).
  bool issue() noexcept;
  // Takes in the result of the piece that just finished; true when the transfer has ended.
  bool finish_piece() noexcept;
  static void on_piece(work_item* w);

  piece_op op_;
  unsigned char* base_;
  std::size_t size_;
  std::size_t done_ = 0;
  std::error_code ec_;
  // The descriptor's generation when the transfer was made: a close() that finds no piece pending (the next one
  // is queued, not started) leaves the descriptor closed, or reused under a newer generation, and the transfer
  // must not start another piece on it.
  std::uint32_t generation_ = 0;
  bool canceled_ = false;
};

// Wraps fd (a new connection, or a socket handed over) in a descriptor of ctx, first putting it in the blocking
// mode ctx's backend needs when `fix_mode`. Closes fd on failure. Any thread.
// watched false: a regular file, which the backend does not watch (and whose blocking mode does not matter).
// tcp_stream: see io_context::open_descriptor.
io_result<descriptor*> wrap_fd(io_context& ctx, int fd, bool fix_mode, bool watched = true,
                               bool tcp_stream = false) noexcept;

}  // namespace tern::detail
