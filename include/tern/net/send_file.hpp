// tern/net/send_file.hpp
//
// send_file: sends part of a file over a stream socket without copying it through user space: a static file
// server's inner loop. On io_uring the bytes go file -> pipe -> socket by two splices at a time, through a pipe
// that the loop keeps for the next call once it is empty again (one that a failed or cancelled transfer left with
// bytes in it is closed instead, so they never reach the next socket); under epoll by sendfile(2), waiting for the socket to take more. The result counts the bytes
// sent, also on error or cancellation; a file that ends before count bytes is tern::error::eof. Like a write to a
// pipe, a splice or sendfile to a socket whose peer has gone raises SIGPIPE, so the calling thread blocks it
// (see fs/pipe.hpp) and the error is broken_pipe.
#pragma once

#include <cstdint>
#include <system_error>

#include "tern/detail/io_op.hpp"
#include "tern/error.hpp"
#include "tern/fs/file.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/net/socket.hpp"

namespace tern::net {

namespace detail {

class [[nodiscard]] send_file_awaiter {
 public:
  send_file_awaiter(basic_stream_socket& socket, fs::file& file, std::uint64_t offset, std::uint64_t count) noexcept;
  send_file_awaiter(const send_file_awaiter& o) noexcept;
  send_file_awaiter& operator=(const send_file_awaiter&) = delete;
  ~send_file_awaiter();

  bool await_ready() noexcept;
  bool await_suspend(std::coroutine_handle<> h) noexcept {
    op_.handle = h;
    return !issue();
  }
  io_result<std::uint64_t> await_resume() const noexcept { return {ec_, sent_}; }
  void cancel() noexcept {
    canceled_ = true;
    op_.ctx->cancel(op_);
  }
  io_context& context() const noexcept { return *op_.ctx; }

 private:
  struct piece_op : tern::detail::splice_op {
    send_file_awaiter* self;
  };
  bool issue() noexcept;
  bool finish_piece() noexcept;
  // The transfer is over: the pipe goes back to the loop if it is known to be empty, else it is closed.
  void release_pipe() noexcept;
  static void on_piece(tern::detail::work_item* w);

  piece_op op_;
  int file_fd_;
  std::uint64_t offset_;
  std::uint64_t count_;
  std::uint64_t sent_ = 0;
  std::uint32_t in_pipe_ = 0;  // io_uring: bytes spliced into the pipe and not yet out of it
  int pipe_[2] = {-1, -1};     // io_uring: read end, write end
  bool into_pipe_ = true;      // io_uring: the current splice is file -> pipe
  bool canceled_ = false;
  std::error_code ec_;
};

}  // namespace detail

// Awaitable: sends count bytes of file, from offset, on socket; yields io_result<uint64_t>, the bytes sent before any
// error. Awaited by a task running on the socket's loop; the file may belong to any loop (only its descriptor is
// used).
inline detail::send_file_awaiter send_file(basic_stream_socket& socket, fs::file& file, std::uint64_t offset,
                                           std::uint64_t count) noexcept {
  return {socket, file, offset, count};
}

}  // namespace tern::net
