// UDP sockets: setup (open, bind, connect) and endpoints; the datagram operations are awaiters (socket_ops.hpp).
#include "tern/net/udp.hpp"

#include <cerrno>
#include <sys/socket.h>

namespace tern::net {

io_result<udp_socket> udp_socket::adopt(io_context& ctx, unique_fd fd) noexcept {
  return adopt_as<udp_socket>(ctx, std::move(fd));
}

std::error_code udp_socket::open(int family) { return open_socket(family, SOCK_DGRAM, IPPROTO_UDP); }

std::error_code udp_socket::bind(const endpoint& ep, udp_bind_options opts) {
  if (std::error_code ec = open_if_closed(ep.family())) return ec;
  const int fd = desc_->fd;
  if (opts.reuse_address) {
    if (auto ec = option::reuse_address{true}.apply(fd)) return ec;
  }
  if (opts.reuse_port) {
    if (auto ec = option::reuse_port{true}.apply(fd)) return ec;
  }
  if (ep.is_v6()) {
    if (auto ec = option::v6_only{opts.v6_only}.apply(fd)) return ec;
  }
  if (::bind(fd, ep.data(), ep.size()) < 0) return {errno, std::system_category()};
  return {};
}

std::error_code udp_socket::connect(const endpoint& ep) {
  if (std::error_code ec = open_if_closed(ep.family())) return ec;
  if (::connect(desc_->fd, ep.data(), ep.size()) < 0) return {errno, std::system_category()};
  return {};
}

io_result<endpoint> udp_socket::local_endpoint() const noexcept {
  return detail::socket_name<endpoint>(native_handle(), false);
}
io_result<endpoint> udp_socket::remote_endpoint() const noexcept {
  return detail::socket_name<endpoint>(native_handle(), true);
}

}  // namespace tern::net
