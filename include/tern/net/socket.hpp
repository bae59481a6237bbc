// tern/net/socket.hpp
//
// What every socket type of tern shares: basic_socket (a basic_descriptor, which owns the descriptor of one loop
// and closes, cancels, releases and moves it, with socket options), basic_stream_socket (the byte-stream operations
// of TCP and Unix stream sockets) and basic_acceptor (accept, for TCP and Unix listeners).
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
#include <span>
#include <system_error>
#include <utility>

#include <sys/socket.h>

#include "tern/basic_descriptor.hpp"
#include "tern/buffer.hpp"
#include "tern/detail/io_op.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/net/detail/socket_ops.hpp"
#include "tern/net/socket_option.hpp"
#include "tern/unique_fd.hpp"

namespace tern::net {

enum class shutdown_how { receive = SHUT_RD, send = SHUT_WR, both = SHUT_RDWR };

// A socket: a descriptor of one loop (basic_descriptor) with socket options.
class basic_socket : public basic_descriptor {
 public:
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

 protected:
  using basic_descriptor::basic_descriptor;
  // Creates the kernel socket in the mode the loop's backend needs (non-blocking under epoll); already_connected
  // if the socket is open.
  std::error_code open_socket(int family, int type, int protocol);
};

// The byte-stream operations of connected stream sockets (TCP, Unix stream).
class basic_stream_socket : public basic_socket {
 public:
  // Awaitable: reads what is available, at least one byte; yields io_result<size_t> (eof when the peer closed).
  detail::read_awaiter read_some(mutable_buffer b) noexcept { return {*ctx_, desc_, b}; }
  // Awaitable: the next bytes of the stream, in a buffer of the loop's receive pool lent to the caller; yields
  // io_result<leased_buffer> (eof when the peer closed). No buffer is tied up while the socket waits: under
  // io_uring the kernel picks one from a provided-buffer ring when bytes arrive, and the socket keeps a multishot
  // receive armed from its first receive() on, so a stream of reads costs no submission each. Bytes that arrive
  // between two receive() calls are queued for the next (up to io_context_options::receive_queue buffers; the
  // rest waits in the kernel until those are taken). A socket read with receive() must not also be read with
  // read_some/read_exact (they would find the bytes the queue holds gone): such a read fails with
  // operation_in_progress. See leased_buffer.hpp for the pool's sizing (io_context_options) and its fallbacks.
  detail::receive_awaiter receive() noexcept { return {*ctx_, desc_}; }
  // Awaitable: writes some of b; yields io_result<size_t>.
  detail::write_awaiter write_some(const_buffer b) noexcept { return {*ctx_, desc_, b}; }
  // Awaitable: writes some of the bytes of bufs, in order, with one system call (sendmsg), so that parts which
  // live apart leave without being copied together; takes at most the first detail::max_gather_buffers (8) of
  // them. Yields io_result<size_t>: the bytes written, which may end inside any of the buffers. The awaitable
  // copies the span's buffers (pointers and sizes), so the span may go with the call; the bytes must stay until
  // the write completes, as with write_some(b).
  detail::gather_write_awaiter write_some(std::span<const const_buffer> bufs) noexcept {
    return {*ctx_, desc_, bufs};
  }
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
  // The bytes in the kernel's receive queue of this socket, which a read would take without waiting (FIONREAD);
  // io_result<size_t>, bad_file_descriptor when closed. Bytes a read or receive() has already taken from the
  // queue, and whose completion the loop has not handled yet, are not counted.
  [[nodiscard]] io_result<std::size_t> available() const noexcept;

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
