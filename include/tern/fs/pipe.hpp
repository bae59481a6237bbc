// tern/fs/pipe.hpp
//
// Pipes: make_pipe(ctx) gives a connected pipe_reader and pipe_writer, stream objects with the same operations as
// a stream socket (read_some, read_exact; write_some, write_all). adopt() takes any other descriptor that the
// kernel can poll, such as a child process's stdout or a terminal. A read of zero bytes is tern::error::eof: every
// writer has closed.
//
// SIGPIPE: a write to a pipe whose readers are all gone makes the kernel send SIGPIPE, which kills the process
// unless it is blocked or ignored. So the first pipe write made on a thread blocks SIGPIPE in that thread (and
// leaves it blocked), and a write then reports broken_pipe; the pending signal it left is discarded. Sockets never
// raise SIGPIPE (tern sends with MSG_NOSIGNAL). What every descriptor object shares (close, cancel, release,
// move_to, which thread may use it) is in basic_descriptor.hpp.
#pragma once

#include <system_error>
#include <utility>

#include "tern/basic_descriptor.hpp"
#include "tern/buffer.hpp"
#include "tern/detail/stream_ops.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/unique_fd.hpp"

namespace tern::fs {

namespace detail {
// Blocks SIGPIPE in the calling thread, once per thread.
void block_sigpipe() noexcept;
// Discards a SIGPIPE pending for the calling thread (after a write reported broken_pipe).
void discard_sigpipe() noexcept;

class [[nodiscard]] pipe_write_awaiter : public tern::detail::write_awaiter {
 public:
  using write_awaiter::write_awaiter;
  io_result<std::size_t> await_resume() const noexcept {
    auto r = write_awaiter::await_resume();
    if (r.ec == std::errc::broken_pipe) discard_sigpipe();
    return r;
  }
};

class [[nodiscard]] pipe_transfer_awaiter : public tern::detail::transfer_awaiter {
 public:
  using transfer_awaiter::transfer_awaiter;
  io_result<std::size_t> await_resume() const noexcept {
    auto r = transfer_awaiter::await_resume();
    if (r.ec == std::errc::broken_pipe) discard_sigpipe();
    return r;
  }
};
}  // namespace detail

class pipe_reader : public basic_descriptor {
 public:
  // A closed reader on ctx.
  explicit pipe_reader(io_context& ctx) noexcept : basic_descriptor(ctx) {}
  // Takes ownership of a readable descriptor the kernel can poll (a pipe, a terminal, a character device), in the
  // mode ctx's backend needs; on failure the fd is closed.
  [[nodiscard]] static io_result<pipe_reader> adopt(io_context& ctx, unique_fd fd) noexcept;

  // Awaitable: reads what is available, at least one byte; yields io_result<size_t> (eof once every writer closed).
  tern::detail::read_awaiter read_some(mutable_buffer b) noexcept {
    return {*ctx_, desc_, b, tern::detail::op_code::read};
  }
  // Awaitable: reads until b is full; yields io_result<size_t>, the byte count read before any error.
  tern::detail::transfer_awaiter read_exact(mutable_buffer b) noexcept {
    return {*ctx_, desc_, tern::detail::op_code::read, b.data(), b.size()};
  }

  // Internal: a reader for an fd already set up for ctx's backend.
  pipe_reader(io_context& ctx, tern::detail::descriptor* d) noexcept : basic_descriptor(ctx, d) {}
};

class pipe_writer : public basic_descriptor {
 public:
  // A closed writer on ctx.
  explicit pipe_writer(io_context& ctx) noexcept : basic_descriptor(ctx) {}
  // Takes ownership of a writable descriptor the kernel can poll, in the mode ctx's backend needs.
  [[nodiscard]] static io_result<pipe_writer> adopt(io_context& ctx, unique_fd fd) noexcept;

  // Awaitable: writes some of b; yields io_result<size_t> (broken_pipe once every reader closed).
  detail::pipe_write_awaiter write_some(const_buffer b) noexcept {
    detail::block_sigpipe();
    return {*ctx_, desc_, b, tern::detail::op_code::write};
  }
  // Awaitable: writes all of b; yields io_result<size_t>, the byte count written before any error.
  detail::pipe_transfer_awaiter write_all(const_buffer b) noexcept {
    detail::block_sigpipe();
    return {*ctx_, desc_, tern::detail::op_code::write, const_cast<void*>(b.data()), b.size()};
  }

  // Internal: a writer for an fd already set up for ctx's backend.
  pipe_writer(io_context& ctx, tern::detail::descriptor* d) noexcept : basic_descriptor(ctx, d) {}
};

// A new pipe of ctx (close-on-exec): {reader, writer}.
[[nodiscard]] io_result<std::pair<pipe_reader, pipe_writer>> make_pipe(io_context& ctx) noexcept;

}  // namespace tern::fs
