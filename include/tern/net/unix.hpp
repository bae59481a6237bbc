// tern/net/unix.hpp
//
// Unix domain sockets: unix_endpoint (a filesystem path, or a name in Linux's abstract namespace), stream
// sockets and their acceptor, datagram sockets, socket pairs, and passing descriptors between processes
// (SCM_RIGHTS) with send_fds / receive_fds.
//
// A socket file left behind by a server that is gone makes bind fail. listen() and bind() check what is in the
// way: a live socket is address_in_use; a stale socket file is tern::error::stale_socket_file (which also compares
// equal to std::errc::address_in_use), or, with remove_stale set, it is removed and the bind retried. Anything that
// is not a socket is never removed. What every socket shares (close, cancel, options, moving between loops, the
// stream operations, which thread may use a socket) is in socket.hpp.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <sys/socket.h>
#include <sys/un.h>

#include "tern/buffer.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/net/socket.hpp"
#include "tern/task.hpp"
#include "tern/unique_fd.hpp"

namespace tern::net {

class unix_endpoint {
 public:
  // The unnamed address (an unbound socket, a socket pair's ends).
  unix_endpoint() noexcept;
  // From a kernel address (AF_UNIX); anything else gives the unnamed address.
  unix_endpoint(const sockaddr* addr, socklen_t len) noexcept;

  // A filesystem path; nullopt if it is empty, holds a NUL, or is longer than the kernel takes (107 bytes).
  static std::optional<unix_endpoint> path(std::string_view p) noexcept;
  // A name in the abstract namespace (no file; gone with the last socket bound to it); nullopt if longer than 107
  // bytes.
  static std::optional<unix_endpoint> abstract(std::string_view name) noexcept;

  bool is_abstract() const noexcept { return len_ > offset && addr_.sun_path[0] == '\0'; }
  bool is_unnamed() const noexcept { return len_ <= offset; }
  // The path, or the abstract name (without its leading NUL); empty when unnamed.
  std::string_view name() const noexcept;
  // The path, "@" and the abstract name, or "(unnamed)".
  std::string to_string() const;
  int family() const noexcept { return AF_UNIX; }

  const sockaddr* data() const noexcept { return reinterpret_cast<const sockaddr*>(&addr_); }
  socklen_t size() const noexcept { return len_; }

  friend bool operator==(const unix_endpoint& a, const unix_endpoint& b) noexcept {
    return a.name() == b.name() && a.is_abstract() == b.is_abstract();
  }

 private:
  static constexpr socklen_t offset = offsetof(sockaddr_un, sun_path);
  sockaddr_un addr_{};
  socklen_t len_ = offset;
};

// The credentials of the process at the other end of a connected Unix socket (SO_PEERCRED).
struct credentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

struct unix_listen_options {
  int backlog = 4096;         // the kernel caps it at net.core.somaxconn
  bool remove_stale = false;  // remove a socket file nobody listens on (see above)
};

namespace detail {
// bind() for a Unix address, with the stale-file check described at the top of this header.
std::error_code bind_unix(int fd, const unix_endpoint& ep, int type, bool remove_stale) noexcept;
// socketpair(AF_UNIX, type) in the mode ctx's backend needs.
io_result<std::pair<unique_fd, unique_fd>> unix_pair(io_context& ctx, int type) noexcept;
io_result<credentials> credentials_of(int fd) noexcept;
}  // namespace detail

class unix_stream_socket : public basic_stream_socket {
 public:
  // A closed socket on ctx; connect() opens it.
  explicit unix_stream_socket(io_context& ctx) noexcept : basic_stream_socket(ctx) {}

  // Two connected sockets of ctx (socketpair).
  [[nodiscard]] static io_result<std::pair<unix_stream_socket, unix_stream_socket>> pair(io_context& ctx) noexcept;
  // Takes ownership of an open Unix stream socket, in the mode ctx's backend needs; on failure the fd is closed.
  [[nodiscard]] static io_result<unix_stream_socket> adopt(io_context& ctx, unique_fd fd) noexcept;
  // Creates the kernel socket, so options can be set before connect.
  [[nodiscard]] std::error_code open();
  // Awaitable: connects to ep (opening the socket first if needed); yields std::error_code. A failed connect
  // closes the socket, as for TCP.
  detail::connect_awaiter<unix_stream_socket, unix_endpoint> connect(const unix_endpoint& ep) noexcept {
    return {*this, ep};
  }

  // Awaitable: sends b with the descriptors fds (duplicated by the kernel: the caller keeps its own; at most
  // max_passed_fds); yields io_result<size_t>, the data bytes sent. Send at least one byte with them.
  detail::send_fds_awaiter send_fds(const_buffer b, std::span<const int> fds) noexcept {
    return {*ctx_, desc_, b, fds};
  }
  // Awaitable: receives data into b and descriptors into out (close-on-exec); yields io_result<fd_message>.
  // message_truncated if more descriptors came than out holds (the extra ones are closed); eof when the peer
  // closed.
  detail::receive_fds_awaiter receive_fds(mutable_buffer b, std::span<unique_fd> out) noexcept {
    return {*ctx_, desc_, b, out, true};
  }

  [[nodiscard]] io_result<unix_endpoint> local_endpoint() const noexcept;
  [[nodiscard]] io_result<unix_endpoint> remote_endpoint() const noexcept;
  // Who is at the other end (pid, uid, gid), as the kernel recorded at connect time.
  [[nodiscard]] io_result<credentials> peer_credentials() const noexcept {
    return detail::credentials_of(native_handle());
  }

  // Internal: a socket for an fd already set up for ctx's backend (accept, pair).
  unix_stream_socket(io_context& ctx, tern::detail::descriptor* d) noexcept : basic_stream_socket(ctx, d) {}
  // Internal (connect): opens the socket if it is closed.
  std::error_code open_for(const unix_endpoint&) { return open(); }
};

class unix_acceptor : public basic_acceptor<unix_stream_socket> {
 public:
  // A closed acceptor on ctx; listen() opens it.
  explicit unix_acceptor(io_context& ctx) noexcept : basic_acceptor(ctx) {}
  // Opens a socket, binds it to ep (see the stale-file rule above) and listens.
  [[nodiscard]] std::error_code listen(const unix_endpoint& ep, unix_listen_options opts = {});
  [[nodiscard]] io_result<unix_endpoint> local_endpoint() const noexcept;
};

class unix_datagram_socket : public basic_socket {
 public:
  // A closed socket on ctx; open(), bind() or connect() opens it.
  explicit unix_datagram_socket(io_context& ctx) noexcept : basic_socket(ctx) {}

  // Two connected datagram sockets of ctx (socketpair).
  [[nodiscard]] static io_result<std::pair<unix_datagram_socket, unix_datagram_socket>> pair(
      io_context& ctx) noexcept;
  [[nodiscard]] static io_result<unix_datagram_socket> adopt(io_context& ctx, unique_fd fd) noexcept;
  [[nodiscard]] std::error_code open();
  // Binds to ep (see the stale-file rule above), opening the socket first if needed.
  [[nodiscard]] std::error_code bind(const unix_endpoint& ep, bool remove_stale = false);
  // Fixes the peer for send() and receive(); immediate. Opens the socket first if needed.
  [[nodiscard]] std::error_code connect(const unix_endpoint& ep);

  // Awaitable: the next datagram and its sender; yields io_result<datagram<unix_endpoint>>.
  detail::datagram_receive_awaiter<unix_endpoint, true> receive_from(mutable_buffer b) noexcept {
    return {*ctx_, desc_, b};
  }
  // Awaitable: sends b as one datagram to `to`; yields io_result<size_t>.
  detail::datagram_send_awaiter<unix_endpoint> send_to(const_buffer b, const unix_endpoint& to) noexcept {
    return {*ctx_, desc_, b, to};
  }
  // Awaitable (connected): the next datagram from the peer; yields io_result<size_t>.
  detail::datagram_receive_awaiter<unix_endpoint, false> receive(mutable_buffer b) noexcept {
    return {*ctx_, desc_, b};
  }
  // Awaitable (connected): sends b as one datagram; yields io_result<size_t>.
  detail::write_awaiter send(const_buffer b) noexcept {
    return {*ctx_, desc_, b, tern::detail::op_code::send, tern::detail::send_plain_only};
  }
  // Descriptor passing, as on a stream socket (connected sockets).
  detail::send_fds_awaiter send_fds(const_buffer b, std::span<const int> fds) noexcept {
    return {*ctx_, desc_, b, fds};
  }
  detail::receive_fds_awaiter receive_fds(mutable_buffer b, std::span<unique_fd> out) noexcept {
    return {*ctx_, desc_, b, out, false};
  }

  [[nodiscard]] io_result<unix_endpoint> local_endpoint() const noexcept;
  [[nodiscard]] io_result<unix_endpoint> remote_endpoint() const noexcept;

  // Internal: a socket for an fd already set up for ctx's backend (pair).
  unix_datagram_socket(io_context& ctx, tern::detail::descriptor* d) noexcept : basic_socket(ctx, d) {}
};

}  // namespace tern::net
