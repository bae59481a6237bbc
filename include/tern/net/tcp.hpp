// tern/net/tcp.hpp
//
// TCP sockets and acceptors. What every socket shares (close, cancel, options, moving between loops, the stream
// operations, and which thread may use a socket) is in socket.hpp.
#pragma once

#include <cstdint>
#include <system_error>

#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/net/endpoint.hpp"
#include "tern/net/error.hpp"
#include "tern/net/socket.hpp"
#include "tern/task.hpp"
#include "tern/unique_fd.hpp"

namespace tern::net {

using tern::io_result;

struct acceptor_options {
  bool reuse_address = true;   // SO_REUSEADDR: rebind while old connections sit in TIME_WAIT
  bool reuse_port = false;     // SO_REUSEPORT: several listeners on one port, the kernel spreads connections
  int backlog = 4096;          // the kernel caps it at net.core.somaxconn
  bool v6_only = false;        // IPV6_V6ONLY for [::] listeners
};

class tcp_socket : public basic_stream_socket {
 public:
  // A closed socket on ctx; connect() opens it.
  explicit tcp_socket(io_context& ctx) noexcept : basic_stream_socket(ctx) {}

  // Takes ownership of an open stream socket (connected, or one end of a socketpair, or one released by another
  // loop) and puts it in the mode ctx's backend needs; on failure the fd is closed and the error returned. Any
  // thread.
  [[nodiscard]] static io_result<tcp_socket> adopt(io_context& ctx, unique_fd fd) noexcept;
  [[nodiscard]] static io_result<tcp_socket> adopt(io_context& ctx, int fd) noexcept { return adopt(ctx, unique_fd(fd)); }
  // Creates the kernel socket for an address family (AF_INET or AF_INET6), so options can be set before connect.
  [[nodiscard]] std::error_code open(int family);
  // Awaitable: connects to ep (opening the socket first if needed); yields std::error_code. A connect that fails
  // (refused, unreachable, cancelled, timed out) closes the socket, because a socket whose connect failed cannot
  // be connected again; the next connect() opens a new one, so options set before must be set again.
  detail::connect_awaiter<tcp_socket, endpoint> connect(const endpoint& ep) noexcept { return {*this, ep}; }

  // TCP_NODELAY: send small writes at once instead of coalescing them (Nagle).
  [[nodiscard]] std::error_code set_no_delay(bool on) noexcept { return set_option(option::no_delay{on}); }
  // SO_KEEPALIVE: probe idle connections.
  [[nodiscard]] std::error_code set_keep_alive(bool on) noexcept { return set_option(option::keep_alive{on}); }
  // SO_SNDBUF / SO_RCVBUF (the kernel doubles the value and caps it at wmem_max / rmem_max).
  [[nodiscard]] std::error_code set_send_buffer_size(int bytes) noexcept {
    return set_option(option::send_buffer_size{bytes});
  }
  [[nodiscard]] std::error_code set_receive_buffer_size(int bytes) noexcept {
    return set_option(option::receive_buffer_size{bytes});
  }
  [[nodiscard]] io_result<endpoint> local_endpoint() const noexcept;
  [[nodiscard]] io_result<endpoint> remote_endpoint() const noexcept;

  // Internal: a socket for an fd already set up for ctx's backend (accept).
  tcp_socket(io_context& ctx, tern::detail::descriptor* d) noexcept : basic_stream_socket(ctx, d) {}
  // Internal (connect): opens the socket for ep's family if it is closed.
  std::error_code open_for(const endpoint& ep) { return open(ep.family()); }
};

class tcp_acceptor : public basic_acceptor<tcp_socket> {
 public:
  // A closed acceptor on ctx; listen() opens it.
  explicit tcp_acceptor(io_context& ctx) noexcept : basic_acceptor(ctx) {}

  // Opens a socket, sets the options, binds to ep and listens. Port 0 picks a free port (see local_endpoint()).
  [[nodiscard]] std::error_code listen(const endpoint& ep, acceptor_options opts = {});
  [[nodiscard]] io_result<endpoint> local_endpoint() const noexcept;
};

// Opens a socket on ctx and connects it to ep. Awaited by a task running on ctx.
task<io_result<tcp_socket>> connect(io_context& ctx, endpoint ep);

}  // namespace tern::net
