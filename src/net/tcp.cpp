// TCP sockets and acceptors: what is TCP's own (the address family, listening options, endpoints); everything a
// socket shares is in socket.cpp.
#include "tern/net/tcp.hpp"

#include <cerrno>
#include <sys/socket.h>

namespace tern::net {

io_result<tcp_socket> tcp_socket::adopt(io_context& ctx, unique_fd fd) noexcept {
  return adopt_as<tcp_socket>(ctx, std::move(fd));
}

std::error_code tcp_socket::open(int family) { return open_socket(family, SOCK_STREAM, IPPROTO_TCP); }

io_result<endpoint> tcp_socket::local_endpoint() const noexcept {
  return detail::socket_name<endpoint>(native_handle(), false);
}
io_result<endpoint> tcp_socket::remote_endpoint() const noexcept {
  return detail::socket_name<endpoint>(native_handle(), true);
}

std::error_code tcp_acceptor::listen(const endpoint& ep, acceptor_options opts) {
  if (desc_ != nullptr) return std::make_error_code(std::errc::already_connected);
  return listen_on(ep.family(), ep.data(), ep.size(), opts.backlog, [&](int fd) -> std::error_code {
    if (opts.reuse_address) {
      if (auto ec = option::reuse_address{true}.apply(fd)) return ec;
    }
    if (opts.reuse_port) {
      if (auto ec = option::reuse_port{true}.apply(fd)) return ec;
    }
    if (ep.is_v6()) return option::v6_only{opts.v6_only}.apply(fd);
    return {};
  });
}

io_result<endpoint> tcp_acceptor::local_endpoint() const noexcept {
  return detail::socket_name<endpoint>(native_handle(), false);
}

task<io_result<tcp_socket>> connect(io_context& ctx, endpoint ep) {
  tcp_socket s(ctx);
  std::error_code ec = co_await s.connect(ep);
  if (ec) co_return io_result<tcp_socket>{ec, tcp_socket(ctx)};
  co_return io_result<tcp_socket>{{}, std::move(s)};
}

}  // namespace tern::net
