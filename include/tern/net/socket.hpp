// tern/net/socket.hpp
//
// What every socket type of tern shares: basic_socket (ownership of a descriptor of one loop, close, cancel,
// options, moving to another loop), basic_stream_socket (the byte-stream operations of TCP and Unix stream
// sockets) and basic_acceptor (accept, for TCP and Unix listeners).
//
// Results carry a std::error_code and never throw: `auto [ec, n] = co_await s.read_some(buf);`. Each operation is
// an awaiter holding its io_op, so an operation allocates nothing; it can be cancelled (socket.cancel(),
// with_timeout, with_stop) and then completes with operation_canceled. close() cancels what is pending and the
// pending operations complete with operation_canceled; under io_uring they complete only after the kernel has
// let go of their buffers.
//
// A socket owns a pooled descriptor of its io_context; moving the socket moves that pointer only, so a socket
// may be moved while it has no pending operation. At most one read and one write may be pending on a socket at
// a time; a read and a write may be pending together. The io_context must outlive its sockets.
//
// Which thread: a socket belongs to the loop it was created on, and its operations are awaited by tasks that this
// loop runs. An operation awaited on any other thread completes at once with tern::error::wrong_loop. To hand a
// connection to another loop (another runtime worker), accept it there (acceptor.accept(other)), or move it:
// socket.move_to(other), or release() on one side and adopt() on the other. close(), cancel() and the destructor
// may run on any thread: away from a running loop they are handed to it.
#pragma once

#include <cstddef>
#include <system_error>
#include <utility>

#include <sys/socket.h>

#include "tern/buffer.hpp"
#include "tern/detail/io_op.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/net/detail/socket_ops.hpp"
#include "tern/net/socket_option.hpp"
#include "tern/unique_fd.hpp"

namespace tern::net {

enum class shutdown_how { receive = SHUT_RD, send = SHUT_WR, both = SHUT_RDWR };

class basic_socket {
 public:
  basic_socket(basic_socket&& o) noexcept : ctx_(o.ctx_), desc_(std::exchange(o.desc_, nullptr)) {}
  basic_socket& operator=(basic_socket&& o) noexcept;
  basic_socket(const basic_socket&) = delete;
  basic_socket& operator=(const basic_socket&) = delete;
  // Closes the socket.
  ~basic_socket() { close(); }

  // Cancels pending operations (they complete with operation_canceled) and closes the fd. Idempotent. Any thread
  // (from a thread that does not run the loop while another does, the close happens on the loop, soon).
  void close() noexcept;
  // Cancels pending operations; they complete with operation_canceled. The socket stays open. Any thread.
  void cancel() noexcept;
  // Detaches the socket from its loop and hands its fd to the caller (to adopt() it on another loop). The socket
  // is left closed. Any thread. Fails with operation_in_progress while an operation is pending (the socket is
  // then unchanged), and with bad_file_descriptor when closed.
  [[nodiscard]] io_result<unique_fd> release() noexcept;
  // Moves the socket to another loop (release() here, adopt there): from then on its operations are awaited by
  // tasks of target. Any thread; release()'s errors, and those of registering the fd with target (the socket is
  // then closed).
  [[nodiscard]] std::error_code move_to(io_context& target) noexcept;

  // Sets an option (net::option::no_delay{true}, ...); bad_file_descriptor when closed.
  template <settable_socket_option Option>
  [[nodiscard]] std::error_code set_option(const Option& o) noexcept {
    if (desc_ == nullptr) return std::make_error_code(std::errc::bad_file_descriptor);
    return o.apply(desc_->fd);
  }
  // Reads an option: io_result<Option> (net::option::receive_buffer_size and the like).
  template <readable_socket_option Option>
  [[nodiscard]] io_result<Option> get_option() const noexcept {
    if (desc_ == nullptr) return {std::make_error_code(std::errc::bad_file_descriptor), {}};
    return Option::read(desc_->fd);
  }

  bool is_open() const noexcept { return desc_ != nullptr; }
  // The fd, or -1 when closed.
  int native_handle() const noexcept { return desc_ != nullptr ? desc_->fd : -1; }
  // The loop the socket belongs to.
  io_context& context() const noexcept { return *ctx_; }

  // Internal: the socket's descriptor (null when closed).
  tern::detail::descriptor* descriptor() const noexcept { return desc_; }

 protected:
  explicit basic_socket(io_context& ctx) noexcept : ctx_(&ctx) {}
  basic_socket(io_context& ctx, tern::detail::descriptor* d) noexcept : ctx_(&ctx), desc_(d) {}

  // Creates the kernel socket in the mode the loop's backend needs (non-blocking under epoll); already_connected
  // if the socket is open.
  std::error_code open_socket(int family, int type, int protocol);
  // Takes fd for ctx (already_connected if this socket is open); on failure fd is closed.
  std::error_code adopt_fd(io_context& ctx, int fd) noexcept;

  io_context* ctx_;
  tern::detail::descriptor* desc_ = nullptr;
};

// The byte-stream operations of connected stream sockets (TCP, Unix stream).
class basic_stream_socket : public basic_socket {
 public:
  // Awaitable: reads what is available, at least one byte; yields io_result<size_t> (eof when the peer closed).
  detail::read_awaiter read_some(mutable_buffer b) noexcept { return {*ctx_, desc_, b}; }
  // Awaitable: writes some of b; yields io_result<size_t>.
  detail::write_awaiter write_some(const_buffer b) noexcept { return {*ctx_, desc_, b}; }
  // Awaitable: reads until b is full; yields io_result<size_t>, the byte count read before any error (eof when
  // the peer closed first). Cancellable like read_some; spawn(ctx, s.read_exact(b)) runs it as its own task.
  detail::transfer_awaiter read_exact(mutable_buffer b) noexcept {
    return {*ctx_, desc_, tern::detail::op_code::recv, b.data(), b.size()};
  }
  // Awaitable: writes all of b; yields io_result<size_t>, the byte count written before any error.
  detail::transfer_awaiter write_all(const_buffer b) noexcept {
    return {*ctx_, desc_, tern::detail::op_code::send, const_cast<void*>(b.data()), b.size()};
  }
  // Shuts down one or both directions (send: the peer reads eof after the data already sent).
  [[nodiscard]] std::error_code shutdown(shutdown_how how = shutdown_how::send) noexcept;

 protected:
  using basic_socket::basic_socket;
};

// A listening socket whose accept() yields connected Sockets.
template <class Socket>
class basic_acceptor : public basic_socket {
 public:
  // Awaitable: the next connection; yields io_result<Socket>. A full fd table gives too_many_files_open and
  // leaves both the acceptor and the waiting connection in place, so a later accept can take it.
  detail::accept_awaiter<Socket> accept() noexcept { return {*ctx_, desc_, *ctx_}; }
  // Awaitable: the next connection, as a socket of target (another runtime worker's loop, say): one acceptor can
  // spread connections over loops. Awaited on the acceptor's own loop, like accept().
  detail::accept_awaiter<Socket> accept(io_context& target) noexcept { return {*ctx_, desc_, target}; }

 protected:
  using basic_socket::basic_socket;
  // socket(), options (set before bind), bind(addr), listen(backlog): the descriptor on success; on failure the fd
  // is closed and the error returned.
  template <class Setup>
  std::error_code listen_on(int family, const sockaddr* addr, socklen_t len, int backlog, Setup setup) {
    if (std::error_code ec = open_socket(family, SOCK_STREAM, 0)) return ec;
    std::error_code ec = setup(desc_->fd);
    if (!ec && ::bind(desc_->fd, addr, len) < 0) ec = {errno, std::system_category()};
    if (!ec && ::listen(desc_->fd, backlog) < 0) ec = {errno, std::system_category()};
    if (ec) close();
    return ec;
  }
};

}  // namespace tern::net
