// tern/net/socket_option.hpp
//
// Typed socket options, for every socket type (TCP, UDP, Unix) through one pair of calls:
//
//   if (auto ec = socket.set_option(net::option::no_delay{true})) ...
//   auto [ec, size] = socket.get_option<net::option::receive_buffer_size>();   // size.value
//
// An option type knows its level and name, the value type the kernel takes, and how to convert it; the options
// whose level depends on the address family (multicast TTL and loop, group membership) look the family up on the
// socket itself (SO_DOMAIN), so the same option works on IPv4 and IPv6 sockets. A wrong option for the socket gets
// the kernel's error (ENOPROTOOPT, EINVAL), never a silent no-op.
#pragma once

#include <chrono>
#include <system_error>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include "tern/io_result.hpp"
#include "tern/net/address.hpp"

namespace tern::net {

// O can be given to set_option: o.apply(fd) sets it on a socket.
template <class O>
concept settable_socket_option = requires(const O& o, int fd) {
  { o.apply(fd) } -> std::same_as<std::error_code>;
};
// O can be read with get_option<O>(): O::read(fd) gets it from a socket.
template <class O>
concept readable_socket_option = requires(int fd) {
  { O::read(fd) } -> std::same_as<io_result<O>>;
};

namespace detail {
std::error_code set_int_option(int fd, int level, int name, int value) noexcept;
io_result<int> get_int_option(int fd, int level, int name) noexcept;
// The socket's address family (SO_DOMAIN).
io_result<int> socket_family(int fd) noexcept;
}  // namespace detail

namespace option {

// An on/off option whose level and name are fixed.
template <int Level, int Name>
struct boolean {
  bool value = true;
  std::error_code apply(int fd) const noexcept { return detail::set_int_option(fd, Level, Name, value ? 1 : 0); }
  static io_result<boolean> read(int fd) noexcept {
    auto [ec, v] = detail::get_int_option(fd, Level, Name);
    return {ec, boolean{v != 0}};
  }
};

// An integer option whose level and name are fixed.
template <int Level, int Name>
struct integer {
  int value = 0;
  std::error_code apply(int fd) const noexcept { return detail::set_int_option(fd, Level, Name, value); }
  static io_result<integer> read(int fd) noexcept {
    auto [ec, v] = detail::get_int_option(fd, Level, Name);
    return {ec, integer{v}};
  }
};

// SO_REUSEADDR: bind while old connections of the address sit in TIME_WAIT.
using reuse_address = boolean<SOL_SOCKET, SO_REUSEADDR>;
// SO_REUSEPORT: several sockets bound to one port; the kernel spreads connections or datagrams over them.
using reuse_port = boolean<SOL_SOCKET, SO_REUSEPORT>;
// SO_KEEPALIVE: probe idle TCP connections.
using keep_alive = boolean<SOL_SOCKET, SO_KEEPALIVE>;
// SO_BROADCAST: a UDP socket may send to broadcast addresses.
using broadcast = boolean<SOL_SOCKET, SO_BROADCAST>;
// SO_SNDBUF / SO_RCVBUF: the kernel doubles what is set and caps it at wmem_max / rmem_max; read gives the result.
using send_buffer_size = integer<SOL_SOCKET, SO_SNDBUF>;
using receive_buffer_size = integer<SOL_SOCKET, SO_RCVBUF>;
// TCP_NODELAY: send small writes at once instead of coalescing them (Nagle).
using no_delay = boolean<IPPROTO_TCP, TCP_NODELAY>;
// IPV6_V6ONLY: an IPv6 socket bound to [::] takes IPv6 only (off: IPv4 too, as mapped addresses).
using v6_only = boolean<IPPROTO_IPV6, IPV6_V6ONLY>;

// UDP_SEGMENT (UDP generic segmentation offload): a send of more than `value` bytes leaves as consecutive
// datagrams of `value` bytes (the last may be shorter), cut by the kernel after one pass through the stack; 0 turns
// it off. The bytes of one send must fit one IP datagram (about 64 KiB) and make at most 64 segments; a route whose
// device cannot compute checksums refuses it (EIO). Equal-size datagrams to one peer: the cheapest way to send many.
using udp_segment = integer<IPPROTO_UDP, UDP_SEGMENT>;
// UDP_GRO: the receive side's counterpart; coalesced datagrams arrive as one buffer. Off by default; tern's receive
// operations do not split such buffers, so turn it on only to read the segment size from a control message of
// your own.
using udp_gro = boolean<IPPROTO_UDP, UDP_GRO>;

// SO_LINGER: on close, wait up to timeout for unsent data; enabled with a zero timeout resets the connection.
struct linger {
  bool enabled = false;
  std::chrono::seconds timeout{0};
  std::error_code apply(int fd) const noexcept;
  static io_result<linger> read(int fd) noexcept;
};

// IP_MULTICAST_TTL / IPV6_MULTICAST_HOPS: how many hops a multicast datagram may travel (1: this network).
struct multicast_hops {
  int value = 1;
  std::error_code apply(int fd) const noexcept;
  static io_result<multicast_hops> read(int fd) noexcept;
};

// IP_MULTICAST_LOOP / IPV6_MULTICAST_LOOP: whether this host's own members receive what it sends to a group.
struct multicast_loop {
  bool value = true;
  std::error_code apply(int fd) const noexcept;
  static io_result<multicast_loop> read(int fd) noexcept;
};

// IP_MULTICAST_IF / IPV6_MULTICAST_IF: the interface (by index, if_nametoindex) that multicast datagrams leave by;
// 0 lets the routes decide.
struct multicast_interface {
  unsigned index = 0;
  std::error_code apply(int fd) const noexcept;
};

// Joins (IP_ADD_MEMBERSHIP / IPV6_JOIN_GROUP) or leaves a multicast group, on the interface of that index (0: the
// one the kernel's routes pick). The group's family must be the socket's.
struct join_group {
  ip_address group;
  unsigned interface_index = 0;
  std::error_code apply(int fd) const noexcept;
};
struct leave_group {
  ip_address group;
  unsigned interface_index = 0;
  std::error_code apply(int fd) const noexcept;
};

}  // namespace option

}  // namespace tern::net
