// tern/net/detail/socket_ops.hpp
//
// The awaiters of socket operations, shared by every socket type (TCP, UDP, Unix). Each holds its io_op and
// whatever the kernel reads or writes during the operation (a msghdr and its iovec, the peer's address, a control
// buffer for passed descriptors), so the operation's state lives in the awaiting frame and starting one allocates
// nothing. Awaiters that point into themselves (a msghdr pointing at its iovec) re-point in their copy
// constructors: with_timeout and with_stop copy an awaiter before it is awaited, never after.
#pragma once

#include <cerrno>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <system_error>
#include <utility>

#include <sys/socket.h>
#include <sys/uio.h>

#include "tern/buffer.hpp"
#include "tern/detail/io_op.hpp"
#include "tern/detail/op_awaiter.hpp"
#include "tern/detail/stream_ops.hpp"
#include "tern/error.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/unique_fd.hpp"

namespace tern::net {

// A received datagram: how many bytes were stored, and who sent it.
template <class Endpoint>
struct datagram {
  std::size_t size = 0;
  Endpoint from;
};

// A message received with descriptors: the data bytes stored and the descriptors stored.
struct fd_message {
  std::size_t size = 0;
  std::size_t fds = 0;
};

// The most descriptors one message can carry here (the kernel's own limit, SCM_MAX_FD, is 253).
inline constexpr std::size_t max_passed_fds = 64;

namespace detail {

using tern::detail::op_awaiter;
using tern::detail::read_awaiter;
using tern::detail::receive_awaiter;
using tern::detail::transfer_awaiter;
using tern::detail::wrap_fd;
using tern::detail::write_awaiter;

// getsockname (peer false) or getpeername (peer true) of fd, as an Endpoint.
template <class Endpoint>
io_result<Endpoint> socket_name(int fd, bool peer) noexcept {
  if (fd < 0) return {std::make_error_code(std::errc::bad_file_descriptor), {}};
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (rc < 0) return {{errno, std::system_category()}, {}};
  return {{}, Endpoint(reinterpret_cast<const sockaddr*>(&ss), len)};
}

// accept(): the new connection, as a Socket of the target loop. Socket has a constructor (io_context&,
// descriptor*) and one (io_context&) for a closed socket.
template <class Socket>
class [[nodiscard]] accept_awaiter : public op_awaiter {
 public:
  accept_awaiter(io_context& ctx, tern::detail::descriptor* d, io_context& target) noexcept
      : op_awaiter(ctx, d, tern::detail::op_code::accept, nullptr, 0),
        target_(&target),
        short_read_drains_(d != nullptr && d->short_read_drains) {
    point_at_peer();
  }
  accept_awaiter(const accept_awaiter& o) noexcept
      : op_awaiter(o), target_(o.target_), short_read_drains_(o.short_read_drains_) {
    point_at_peer();
  }
  io_result<Socket> await_resume() {
    io_context& target = *target_;
    if (op_.res < 0) return {error(), Socket(target)};
    // The fd's blocking mode is the acceptor's backend's; a target on the other backend needs the other mode.
    auto [ec, d] = wrap_fd(target, op_.res, target.backend() != op_.ctx->backend());
    if (ec) return {ec, Socket(target)};
    d->short_read_drains = short_read_drains_;  // a TCP listener's connections are TCP
    return {{}, Socket(target, d)};
  }

 private:
  void point_at_peer() noexcept {
    op_.buf = &peer_;
    op_.addr_len = sizeof peer_;
  }
  io_context* target_;
  bool short_read_drains_;  // the listener's (read at the start: a closed listener's descriptor may be reused)
  sockaddr_storage peer_{};
};

// connect(): opens the socket first if it is closed (Socket::open_for(endpoint)), and closes it again if the
// connect fails, because a socket whose connect failed cannot be connected again (POSIX leaves its state
// unspecified, and Linux keeps a TCP socket's error latched). A refusal that never reached the kernel (wrong_loop,
// already connected) leaves the socket alone.
template <class Socket, class Endpoint>
class [[nodiscard]] connect_awaiter : public op_awaiter {
 public:
  connect_awaiter(Socket& s, const Endpoint& ep) noexcept
      : op_awaiter(s.context(), s.descriptor(), tern::detail::op_code::connect, nullptr, 0), socket_(&s), peer_(ep) {
    point_at_peer();
  }
  connect_awaiter(const connect_awaiter& o) noexcept : op_awaiter(o), socket_(o.socket_), peer_(o.peer_) {
    point_at_peer();
  }
  bool await_ready() noexcept {
    if (!op_.ctx->running_here()) {
      op_.res = tern::detail::wrong_loop_res;
      return true;
    }
    if (op_.desc == nullptr) {
      if (std::error_code ec = socket_->open_for(peer_)) {
        op_.res = -ec.value();
        return true;
      }
      op_.desc = socket_->descriptor();
    }
    op_.res = 0;
    return false;
  }
  // Empty on success; on failure the socket is closed.
  std::error_code await_resume() noexcept {
    const int res = op_.res;
    if (res >= 0) return {};
    if (res != tern::detail::wrong_loop_res && res != -EISCONN && res != -EALREADY &&
        socket_->descriptor() == op_.desc) {
      socket_->close();
    }
    return tern::detail::result_error(res);
  }

 private:
  void point_at_peer() noexcept {
    op_.buf = const_cast<sockaddr*>(peer_.data());
    op_.len = peer_.size();
  }
  Socket* socket_;
  Endpoint peer_;
};

// One datagram into one buffer: recvmsg with the sender's address (Endpoint) when WithAddress, else a plain recv
// (a connected socket's peer is known; recv skips recvmsg's header copies, 5% of a UDP round trip). MSG_TRUNC
// makes the kernel report a datagram's full length, so one longer than the buffer is reported as
// message_truncated (with the bytes that fit, and the sender), never silently cut.
template <class Endpoint, bool WithAddress>
class [[nodiscard]] datagram_receive_awaiter : public op_awaiter {
 public:
  datagram_receive_awaiter(io_context& ctx, tern::detail::descriptor* d, mutable_buffer b) noexcept
      : op_awaiter(ctx, d, tern::detail::op_code::recvmsg, nullptr, 0), iov_{b.data(), b.size()} {
    point();
  }
  datagram_receive_awaiter(const datagram_receive_awaiter& o) noexcept : op_awaiter(o), iov_(o.iov_) { point(); }

  auto await_resume() const noexcept {
    std::error_code ec;
    std::size_t size = 0;
    if (op_.res < 0) {
      ec = error();
    } else {
      size = static_cast<std::size_t>(op_.res);
      if (size > iov_.iov_len) {
        ec = make_error_code(error::message_truncated);
        size = iov_.iov_len;
      }
    }
    if constexpr (WithAddress) {
      Endpoint from;
      if (op_.res >= 0) from = Endpoint(reinterpret_cast<const sockaddr*>(&from_), msg_.msg_namelen);
      return io_result<datagram<Endpoint>>{ec, datagram<Endpoint>{size, from}};
    } else {
      return io_result<std::size_t>{ec, size};
    }
  }

 private:
  void point() noexcept {
    op_.msg_flags = MSG_TRUNC;
    if constexpr (WithAddress) {
      msg_ = {};
      msg_.msg_name = &from_;
      msg_.msg_namelen = sizeof from_;
      msg_.msg_iov = &iov_;
      msg_.msg_iovlen = 1;
      op_.buf = &msg_;
    } else {
      op_.code = tern::detail::op_code::recv;
      op_.buf = iov_.iov_base;
      op_.len = iov_.iov_len > tern::detail::max_op_len ? tern::detail::max_op_len
                                                        : static_cast<std::uint32_t>(iov_.iov_len);
    }
  }
  iovec iov_;
  msghdr msg_{};
  sockaddr_storage from_{};
};

// sendmsg of one datagram to an address.
template <class Endpoint>
class [[nodiscard]] datagram_send_awaiter : public op_awaiter {
 public:
  datagram_send_awaiter(io_context& ctx, tern::detail::descriptor* d, const_buffer b, const Endpoint& to) noexcept
      : op_awaiter(ctx, d, tern::detail::op_code::sendmsg, nullptr, 0),
        iov_{const_cast<void*>(b.data()), b.size()},
        to_(to) {
    point();
  }
  datagram_send_awaiter(const datagram_send_awaiter& o) noexcept : op_awaiter(o), iov_(o.iov_), to_(o.to_) {
    point();
  }
  io_result<std::size_t> await_resume() const noexcept {
    if (op_.res < 0) return {error(), 0};
    return {{}, static_cast<std::size_t>(op_.res)};
  }

 private:
  void point() noexcept {
    msg_ = {};
    msg_.msg_name = const_cast<sockaddr*>(to_.data());
    msg_.msg_namelen = to_.size();
    msg_.msg_iov = &iov_;
    msg_.msg_iovlen = 1;
    op_.buf = &msg_;
  }
  iovec iov_;
  Endpoint to_;
  msghdr msg_{};
};

// How many buffers one gather write takes (write_some(std::span<const const_buffer>)); more are left for the next.
inline constexpr std::size_t max_gather_buffers = 8;

// sendmsg of several buffers at once on a stream socket: the gather of writev, in one system call, so that parts
// which live apart (a frame's header and its payload, a response's head and body) leave without being copied
// together first. Takes the first max_gather_buffers of the span; the iovecs live in the awaiter.
class [[nodiscard]] gather_write_awaiter : public op_awaiter {
 public:
  gather_write_awaiter(io_context& ctx, tern::detail::descriptor* d, std::span<const const_buffer> bufs) noexcept;
  gather_write_awaiter(const gather_write_awaiter& o) noexcept;
  io_result<std::size_t> await_resume() const noexcept {
    if (op_.res < 0) return {error(), 0};
    return {{}, static_cast<std::size_t>(op_.res)};
  }

 private:
  void point() noexcept;
  iovec iov_[max_gather_buffers];
  std::size_t count_;
  msghdr msg_{};
};

// sendmsg of data with descriptors (SCM_RIGHTS) over a Unix socket. The kernel duplicates the descriptors into
// the message; the caller keeps its own.
class [[nodiscard]] send_fds_awaiter : public op_awaiter {
 public:
  send_fds_awaiter(io_context& ctx, tern::detail::descriptor* d, const_buffer b, std::span<const int> fds) noexcept;
  send_fds_awaiter(const send_fds_awaiter& o) noexcept;
  io_result<std::size_t> await_resume() const noexcept {
    if (op_.res < 0) return {error(), 0};
    return {{}, static_cast<std::size_t>(op_.res)};
  }
  // Refuses more descriptors than fit in one message (invalid_argument) before anything is sent.
  bool await_ready() noexcept {
    if (count_ > max_passed_fds) {
      op_.res = -EINVAL;
      return true;
    }
    return op_awaiter::await_ready();
  }

 private:
  void point() noexcept;
  iovec iov_;
  std::size_t count_;
  msghdr msg_{};
  alignas(cmsghdr) unsigned char control_[CMSG_SPACE(sizeof(int) * max_passed_fds)];
};

// recvmsg of data with descriptors into out (received descriptors are close-on-exec, owned by out's elements).
// More descriptors than out can hold: the extra ones are closed by the kernel and the result is
// message_truncated (the data and the descriptors that fit are still delivered). On a stream socket, 0 bytes and
// no descriptors means the peer closed (eof).
class [[nodiscard]] receive_fds_awaiter : public op_awaiter {
 public:
  receive_fds_awaiter(io_context& ctx, tern::detail::descriptor* d, mutable_buffer b, std::span<unique_fd> out,
                      bool stream) noexcept;
  receive_fds_awaiter(const receive_fds_awaiter& o) noexcept;
  io_result<fd_message> await_resume() noexcept;

 private:
  void point() noexcept;
  iovec iov_;
  std::span<unique_fd> out_;
  bool stream_;
  msghdr msg_{};
  alignas(cmsghdr) unsigned char control_[CMSG_SPACE(sizeof(int) * max_passed_fds)];
};

}  // namespace detail
}  // namespace tern::net
