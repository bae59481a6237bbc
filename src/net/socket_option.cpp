// Socket options (see tern/net/socket_option.hpp): the setsockopt/getsockopt calls, and the options whose level
// follows the socket's address family.
#include "tern/net/socket_option.hpp"

#include <cerrno>
#include <cstring>

namespace tern::net {

namespace detail {

std::error_code set_int_option(int fd, int level, int name, int value) noexcept {
  if (::setsockopt(fd, level, name, &value, sizeof value) < 0) return {errno, std::system_category()};
  return {};
}

io_result<int> get_int_option(int fd, int level, int name) noexcept {
  int value = 0;
  socklen_t len = sizeof value;
  if (::getsockopt(fd, level, name, &value, &len) < 0) return {{errno, std::system_category()}, 0};
  return {{}, value};
}

io_result<int> socket_family(int fd) noexcept { return get_int_option(fd, SOL_SOCKET, SO_DOMAIN); }

}  // namespace detail

namespace option {

namespace {
// Level and name of an option that exists once per IP family; EAFNOSUPPORT for any other family.
struct family_option {
  int level;
  int name;
};
io_result<family_option> for_family(int fd, family_option v4, family_option v6) noexcept {
  auto [ec, family] = detail::socket_family(fd);
  if (ec) return {ec, {}};
  if (family == AF_INET) return {{}, v4};
  if (family == AF_INET6) return {{}, v6};
  return {std::make_error_code(std::errc::address_family_not_supported), {}};
}

std::error_code membership(int fd, const ip_address& group, unsigned interface_index, bool join) noexcept {
  auto [ec, family] = detail::socket_family(fd);
  if (ec) return ec;
  if (family != group.family()) return std::make_error_code(std::errc::address_family_not_supported);
  int rc;
  if (family == AF_INET) {
    ip_mreqn req{};
    req.imr_multiaddr = group.to_v4();
    req.imr_ifindex = static_cast<int>(interface_index);
    rc = ::setsockopt(fd, IPPROTO_IP, join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP, &req, sizeof req);
  } else {
    ipv6_mreq req{};
    req.ipv6mr_multiaddr = group.to_v6();
    req.ipv6mr_interface = interface_index;
    rc = ::setsockopt(fd, IPPROTO_IPV6, join ? IPV6_JOIN_GROUP : IPV6_LEAVE_GROUP, &req, sizeof req);
  }
  if (rc < 0) return {errno, std::system_category()};
  return {};
}
}  // namespace

std::error_code linger::apply(int fd) const noexcept {
  ::linger l{enabled ? 1 : 0, static_cast<int>(timeout.count())};
  if (::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l) < 0) return {errno, std::system_category()};
  return {};
}

io_result<linger> linger::read(int fd) noexcept {
  ::linger l{};
  socklen_t len = sizeof l;
  if (::getsockopt(fd, SOL_SOCKET, SO_LINGER, &l, &len) < 0) return {{errno, std::system_category()}, {}};
  return {{}, linger{l.l_onoff != 0, std::chrono::seconds(l.l_linger)}};
}

std::error_code multicast_hops::apply(int fd) const noexcept {
  auto [ec, o] = for_family(fd, {IPPROTO_IP, IP_MULTICAST_TTL}, {IPPROTO_IPV6, IPV6_MULTICAST_HOPS});
  return ec ? ec : detail::set_int_option(fd, o.level, o.name, value);
}

io_result<multicast_hops> multicast_hops::read(int fd) noexcept {
  auto [ec, o] = for_family(fd, {IPPROTO_IP, IP_MULTICAST_TTL}, {IPPROTO_IPV6, IPV6_MULTICAST_HOPS});
  if (ec) return {ec, {}};
  auto [gec, v] = detail::get_int_option(fd, o.level, o.name);
  return {gec, multicast_hops{v}};
}

std::error_code multicast_loop::apply(int fd) const noexcept {
  auto [ec, o] = for_family(fd, {IPPROTO_IP, IP_MULTICAST_LOOP}, {IPPROTO_IPV6, IPV6_MULTICAST_LOOP});
  return ec ? ec : detail::set_int_option(fd, o.level, o.name, value ? 1 : 0);
}

io_result<multicast_loop> multicast_loop::read(int fd) noexcept {
  auto [ec, o] = for_family(fd, {IPPROTO_IP, IP_MULTICAST_LOOP}, {IPPROTO_IPV6, IPV6_MULTICAST_LOOP});
  if (ec) return {ec, {}};
  auto [gec, v] = detail::get_int_option(fd, o.level, o.name);
  return {gec, multicast_loop{v != 0}};
}

std::error_code multicast_interface::apply(int fd) const noexcept {
  auto [ec, family] = detail::socket_family(fd);
  if (ec) return ec;
  int rc;
  if (family == AF_INET) {
    ip_mreqn req{};
    req.imr_ifindex = static_cast<int>(index);
    rc = ::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &req, sizeof req);
  } else if (family == AF_INET6) {
    const int value = static_cast<int>(index);
    rc = ::setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &value, sizeof value);
  } else {
    return std::make_error_code(std::errc::address_family_not_supported);
  }
  if (rc < 0) return {errno, std::system_category()};
  return {};
}

std::error_code join_group::apply(int fd) const noexcept { return membership(fd, group, interface_index, true); }
std::error_code leave_group::apply(int fd) const noexcept { return membership(fd, group, interface_index, false); }

}  // namespace option

}  // namespace tern::net
