// What every socket shares (see tern/net/socket.hpp) beyond basic_descriptor: creating a socket in the mode of
// the loop's backend, shutdown, available, and the completion side of descriptor passing.
#include "tern/net/socket.hpp"

#include "last_error.hpp"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

namespace tern::net {

namespace {
using tern::detail::last_error;

// Under epoll every fd is non-blocking (operations try the syscall first). Under io_uring fds stay blocking:
// the ring polls internally, and a blocking fd keeps connect() inside the ring instead of answering EINPROGRESS.
int mode_flags(io_context& ctx) noexcept { return ctx.backend() == backend_kind::epoll ? SOCK_NONBLOCK : 0; }
}  // namespace

namespace detail {

gather_write_awaiter::gather_write_awaiter(io_context& ctx, tern::detail::descriptor* d,
                                           std::span<const const_buffer> bufs) noexcept
    : op_awaiter(ctx, d, tern::detail::op_code::sendmsg, nullptr, 0),
      count_(std::min(bufs.size(), max_gather_buffers)) {
  for (std::size_t i = 0; i < count_; ++i) iov_[i] = {const_cast<void*>(bufs[i].data()), bufs[i].size()};
  point();
}

gather_write_awaiter::gather_write_awaiter(const gather_write_awaiter& o) noexcept
    : op_awaiter(o), count_(o.count_) {
  std::copy_n(o.iov_, count_, iov_);
  point();
}

void gather_write_awaiter::point() noexcept {
  msg_ = {};
  msg_.msg_iov = iov_;
  msg_.msg_iovlen = count_;
  op_.buf = &msg_;
}

send_fds_awaiter::send_fds_awaiter(io_context& ctx, tern::detail::descriptor* d, const_buffer b,
                                   std::span<const int> fds) noexcept
    : op_awaiter(ctx, d, tern::detail::op_code::sendmsg, nullptr, 0),
      iov_{const_cast<void*>(b.data()), b.size()},
      count_(fds.size()) {
  std::memset(control_, 0, sizeof control_);
  if (count_ <= max_passed_fds && count_ != 0) {
    cmsghdr* c = reinterpret_cast<cmsghdr*>(control_);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * count_);
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * count_);
  }
  point();
}

send_fds_awaiter::send_fds_awaiter(const send_fds_awaiter& o) noexcept
    : op_awaiter(o), iov_(o.iov_), count_(o.count_) {
  std::memcpy(control_, o.control_, sizeof control_);
  point();
}

void send_fds_awaiter::point() noexcept {
  msg_ = {};
  msg_.msg_iov = &iov_;
  msg_.msg_iovlen = 1;
  if (count_ != 0 && count_ <= max_passed_fds) {
    msg_.msg_control = control_;
    msg_.msg_controllen = CMSG_SPACE(sizeof(int) * count_);
  }
  op_.buf = &msg_;
}

receive_fds_awaiter::receive_fds_awaiter(io_context& ctx, tern::detail::descriptor* d, mutable_buffer b,
                                         std::span<unique_fd> out, bool stream) noexcept
    : op_awaiter(ctx, d, tern::detail::op_code::recvmsg, nullptr, 0),
      iov_{b.data(), b.size()},
      out_(out),
      stream_(stream) {
  point();
}

receive_fds_awaiter::receive_fds_awaiter(const receive_fds_awaiter& o) noexcept
    : op_awaiter(o), iov_(o.iov_), out_(o.out_), stream_(o.stream_) {
  point();
}

void receive_fds_awaiter::point() noexcept {
  msg_ = {};
  msg_.msg_iov = &iov_;
  msg_.msg_iovlen = 1;
  msg_.msg_control = control_;
  msg_.msg_controllen = CMSG_SPACE(sizeof(int) * std::min(out_.size(), max_passed_fds));
  if (out_.empty()) {
    // Room for one, so that descriptors sent to a receiver that expects none are reported, not silently closed.
    msg_.msg_controllen = CMSG_SPACE(sizeof(int));
  }
  op_.buf = &msg_;
  op_.msg_flags = MSG_CMSG_CLOEXEC;
}

io_result<fd_message> receive_fds_awaiter::await_resume() noexcept {
  if (op_.res < 0) return {error(), {}};
  fd_message m{static_cast<std::size_t>(op_.res), 0};
  bool truncated = (msg_.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg_); c != nullptr; c = CMSG_NXTHDR(&msg_, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char* data = CMSG_DATA(c);
    for (std::size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, data + i * sizeof(int), sizeof fd);
      if (m.fds < out_.size()) {
        out_[m.fds++].reset(fd);
      } else {
        ::close(fd);  // the room for one of a receiver that expects none
        truncated = true;
      }
    }
  }
  if (truncated) return {make_error_code(tern::error::message_truncated), m};
  if (stream_ && m.size == 0 && m.fds == 0 && iov_.iov_len != 0) return {make_error_code(tern::error::eof), m};
  return {{}, m};
}

}  // namespace detail

// ---- basic_socket ----

std::error_code basic_socket::open_socket(int family, int type, int protocol) {
  if (desc_ != nullptr) return std::make_error_code(std::errc::already_connected);
  const int fd = ::socket(family, type | SOCK_CLOEXEC | mode_flags(*ctx_), protocol);
  if (fd < 0) return last_error();
  const bool tcp_stream = type == SOCK_STREAM && (family == AF_INET || family == AF_INET6);
  auto [ec, d] = detail::wrap_fd(*ctx_, fd, false, true, tcp_stream);  // from any thread: nothing written after
  desc_ = d;
  return ec;
}

// ---- basic_stream_socket ----

std::error_code basic_stream_socket::shutdown(shutdown_how how) noexcept {
  if (desc_ == nullptr) return std::make_error_code(std::errc::bad_file_descriptor);
  if (::shutdown(desc_->fd, static_cast<int>(how)) < 0) return last_error();
  return {};
}

io_result<std::size_t> basic_stream_socket::available() const noexcept {
  if (desc_ == nullptr) return {std::make_error_code(std::errc::bad_file_descriptor), 0};
  int n = 0;
  if (::ioctl(desc_->fd, FIONREAD, &n) < 0) return {last_error(), 0};
  return {std::error_code{}, static_cast<std::size_t>(n)};
}

}  // namespace tern::net
