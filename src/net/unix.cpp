// Unix domain sockets: endpoints, the stale-file check at bind, socket pairs and credentials. The operations are
// the shared awaiters of socket_ops.hpp.
#include "tern/net/unix.hpp"

#include "last_error.hpp"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace tern::net {

namespace {
using tern::detail::last_error;
}  // namespace

// ---- unix_endpoint ----

unix_endpoint::unix_endpoint() noexcept { addr_.sun_family = AF_UNIX; }

unix_endpoint::unix_endpoint(const sockaddr* addr, socklen_t len) noexcept : unix_endpoint() {
  if (addr == nullptr || addr->sa_family != AF_UNIX || len <= offset) return;
  len_ = len < static_cast<socklen_t>(sizeof addr_) ? len : static_cast<socklen_t>(sizeof addr_);
  std::memcpy(&addr_, addr, len_);
  // A path comes with its terminating NUL counted or not, depending on who made the address: keep it out.
  if (!is_abstract()) {
    const char* p = addr_.sun_path;
    len_ = static_cast<socklen_t>(offset + strnlen(p, len_ - offset));
  }
}

std::optional<unix_endpoint> unix_endpoint::path(std::string_view p) noexcept {
  unix_endpoint ep;
  if (p.empty() || p.size() >= sizeof ep.addr_.sun_path || p.find('\0') != std::string_view::npos) {
    return std::nullopt;
  }
  std::memcpy(ep.addr_.sun_path, p.data(), p.size());
  ep.len_ = static_cast<socklen_t>(offset + p.size());
  return ep;
}

std::optional<unix_endpoint> unix_endpoint::abstract(std::string_view name) noexcept {
  unix_endpoint ep;
  if (name.size() + 1 > sizeof ep.addr_.sun_path) return std::nullopt;
  ep.addr_.sun_path[0] = '\0';
  std::memcpy(ep.addr_.sun_path + 1, name.data(), name.size());
  ep.len_ = static_cast<socklen_t>(offset + 1 + name.size());
  return ep;
}

std::string_view unix_endpoint::name() const noexcept {
  if (is_unnamed()) return {};
  const std::size_t n = len_ - offset;
  return is_abstract() ? std::string_view(addr_.sun_path + 1, n - 1) : std::string_view(addr_.sun_path, n);
}

std::string unix_endpoint::to_string() const {
  if (is_unnamed()) return "(unnamed)";
  return is_abstract() ? "@" + std::string(name()) : std::string(name());
}

// ---- helpers ----

namespace detail {

std::error_code bind_unix(int fd, const unix_endpoint& ep, int type, bool remove_stale) noexcept {
  if (::bind(fd, ep.data(), ep.size()) == 0) return {};
  const std::error_code ec = last_error();
  if (ec != std::errc::address_in_use || ep.is_abstract()) return ec;
  // What is in the way? Only a socket file nobody is bound to may be called stale.
  const std::string file(ep.name());
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return ec;
  const int probe = ::socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (probe < 0) return last_error();
  const bool nobody = ::connect(probe, ep.data(), ep.size()) < 0 && errno == ECONNREFUSED;
  ::close(probe);
  if (!nobody) return ec;  // a live socket (or one that is busy): in use
  if (!remove_stale) return make_error_code(tern::error::stale_socket_file);
  if (::unlink(file.c_str()) != 0 && errno != ENOENT) return last_error();
  if (::bind(fd, ep.data(), ep.size()) != 0) return last_error();
  return {};
}

io_result<std::pair<unique_fd, unique_fd>> unix_pair(io_context& ctx, int type) noexcept {
  int fds[2];
  const int mode = ctx.backend() == backend_kind::epoll ? SOCK_NONBLOCK : 0;
  if (::socketpair(AF_UNIX, type | SOCK_CLOEXEC | mode, 0, fds) < 0) return {last_error(), {}};
  return {{}, {unique_fd(fds[0]), unique_fd(fds[1])}};
}

io_result<credentials> credentials_of(int fd) noexcept {
  if (fd < 0) return {std::make_error_code(std::errc::bad_file_descriptor), {}};
  ucred c{};
  socklen_t len = sizeof c;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) < 0) return {last_error(), {}};
  return {{}, credentials{c.pid, c.uid, c.gid}};
}

// Both ends of a pair as sockets of ctx (the fds are already in the backend's mode).
template <class Socket>
io_result<std::pair<Socket, Socket>> make_pair(io_context& ctx, int type) noexcept {
  auto [ec, fds] = unix_pair(ctx, type);
  if (ec) return {ec, {Socket(ctx), Socket(ctx)}};
  auto [aec, a] = wrap_fd(ctx, fds.first.release(), false);
  if (aec) return {aec, {Socket(ctx), Socket(ctx)}};
  Socket first(ctx, a);
  auto [bec, b] = wrap_fd(ctx, fds.second.release(), false);
  if (bec) return {bec, {Socket(ctx), Socket(ctx)}};
  return {{}, {std::move(first), Socket(ctx, b)}};
}

}  // namespace detail

// ---- unix_stream_socket ----

io_result<std::pair<unix_stream_socket, unix_stream_socket>> unix_stream_socket::pair(io_context& ctx) noexcept {
  return detail::make_pair<unix_stream_socket>(ctx, SOCK_STREAM);
}

io_result<unix_stream_socket> unix_stream_socket::adopt(io_context& ctx, unique_fd fd) noexcept {
  return adopt_as<unix_stream_socket>(ctx, std::move(fd));
}

std::error_code unix_stream_socket::open() { return open_socket(AF_UNIX, SOCK_STREAM, 0); }

io_result<unix_endpoint> unix_stream_socket::local_endpoint() const noexcept {
  return detail::socket_name<unix_endpoint>(native_handle(), false);
}
io_result<unix_endpoint> unix_stream_socket::remote_endpoint() const noexcept {
  return detail::socket_name<unix_endpoint>(native_handle(), true);
}

// ---- unix_acceptor ----

std::error_code unix_acceptor::listen(const unix_endpoint& ep, unix_listen_options opts) {
  if (desc_ != nullptr) return std::make_error_code(std::errc::already_connected);
  if (std::error_code ec = open_socket(AF_UNIX, SOCK_STREAM, 0)) return ec;
  std::error_code ec = detail::bind_unix(desc_->fd, ep, SOCK_STREAM, opts.remove_stale);
  if (!ec && ::listen(desc_->fd, opts.backlog) < 0) ec = last_error();
  if (ec) close();
  return ec;
}

io_result<unix_endpoint> unix_acceptor::local_endpoint() const noexcept {
  return detail::socket_name<unix_endpoint>(native_handle(), false);
}

// ---- unix_datagram_socket ----

io_result<std::pair<unix_datagram_socket, unix_datagram_socket>> unix_datagram_socket::pair(
    io_context& ctx) noexcept {
  return detail::make_pair<unix_datagram_socket>(ctx, SOCK_DGRAM);
}

io_result<unix_datagram_socket> unix_datagram_socket::adopt(io_context& ctx, unique_fd fd) noexcept {
  return adopt_as<unix_datagram_socket>(ctx, std::move(fd));
}

std::error_code unix_datagram_socket::open() { return open_socket(AF_UNIX, SOCK_DGRAM, 0); }

std::error_code unix_datagram_socket::bind(const unix_endpoint& ep, bool remove_stale) {
  if (desc_ == nullptr) {
    if (std::error_code ec = open()) return ec;
  }
  return detail::bind_unix(desc_->fd, ep, SOCK_DGRAM, remove_stale);
}

std::error_code unix_datagram_socket::connect(const unix_endpoint& ep) {
  if (desc_ == nullptr) {
    if (std::error_code ec = open()) return ec;
  }
  if (::connect(desc_->fd, ep.data(), ep.size()) < 0) return last_error();
  return {};
}

io_result<unix_endpoint> unix_datagram_socket::local_endpoint() const noexcept {
  return detail::socket_name<unix_endpoint>(native_handle(), false);
}
io_result<unix_endpoint> unix_datagram_socket::remote_endpoint() const noexcept {
  return detail::socket_name<unix_endpoint>(native_handle(), true);
}

}  // namespace tern::net
