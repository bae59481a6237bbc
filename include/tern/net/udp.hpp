// tern/net/udp.hpp
//
// UDP sockets: datagrams to and from any peer (send_to, receive_from), or to one connected peer (send, receive),
// over IPv4 or IPv6, with broadcast and multicast through the options of socket_option.hpp (option::broadcast,
// join_group, leave_group, multicast_hops, multicast_loop).
//
// A datagram arrives whole or not at all: one longer than the buffer is reported as tern::error::message_truncated
// with the bytes that fit (never silently cut). On a connected socket, an ICMP "port unreachable" from the peer
// is reported by the next receive as connection_refused. receive_batch and send_batch move several datagrams per
// system call through a net::datagram_batch (datagram_batch.hpp). What every socket shares (close, cancel, options,
// moving between loops, which thread may use it) is in socket.hpp.
#pragma once

#include <cstddef>
#include <system_error>

#include "tern/buffer.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/net/datagram_batch.hpp"
#include "tern/net/endpoint.hpp"
#include "tern/net/socket.hpp"
#include "tern/unique_fd.hpp"

namespace tern::net {

struct udp_bind_options {
  bool reuse_address = false;  // SO_REUSEADDR: several sockets on one multicast port
  bool reuse_port = false;     // SO_REUSEPORT: several sockets on one port, the kernel spreads the datagrams
  bool v6_only = false;        // IPV6_V6ONLY for [::]
};

class udp_socket : public basic_socket {
 public:
  using receive_from_awaiter = detail::datagram_receive_awaiter<endpoint, true>;
  using receive_awaiter = detail::datagram_receive_awaiter<endpoint, false>;
  using send_to_awaiter = detail::datagram_send_awaiter<endpoint>;

  // A closed socket on ctx; open(), bind() or connect() opens it.
  explicit udp_socket(io_context& ctx) noexcept : basic_socket(ctx) {}

  // Takes ownership of an open datagram socket, in the mode ctx's backend needs; on failure the fd is closed.
  [[nodiscard]] static io_result<udp_socket> adopt(io_context& ctx, unique_fd fd) noexcept;
  // Creates the kernel socket for AF_INET or AF_INET6, so options can be set before bind or the first send.
  [[nodiscard]] std::error_code open(int family);
  // Binds to ep (port 0: any free port), opening the socket for ep's family first if needed.
  [[nodiscard]] std::error_code bind(const endpoint& ep, udp_bind_options opts = {});
  // Fixes the peer: send() and receive() then go to and come from ep only. Immediate (no handshake); opens the
  // socket for ep's family first if needed.
  [[nodiscard]] std::error_code connect(const endpoint& ep);

  // Awaitable: the next datagram, into b; yields io_result<datagram<endpoint>> (size, and the sender).
  receive_from_awaiter receive_from(mutable_buffer b) noexcept { return {*ctx_, desc_, b}; }
  // Awaitable: sends b as one datagram to `to`; yields io_result<size_t>.
  send_to_awaiter send_to(const_buffer b, const endpoint& to) noexcept { return {*ctx_, desc_, b, to}; }
  // Awaitable (connected socket): the next datagram from the peer; yields io_result<size_t>.
  receive_awaiter receive(mutable_buffer b) noexcept { return {*ctx_, desc_, b}; }
  // Awaitable (connected socket): sends b as one datagram to the peer; yields io_result<size_t>.
  detail::write_awaiter send(const_buffer b) noexcept {
    return {*ctx_, desc_, b, tern::detail::op_code::send, tern::detail::send_plain_only};
  }

  // Awaitable: the datagrams waiting, into the slots of batch (recvmmsg); yields io_result<size_t>, how many
  // arrived: at least one (it waits for the first), at most batch.capacity(). Each slot has its own size, sender and
  // truncation flag (batch.truncated(i): never a silent cut).
  detail::batch_receive_awaiter receive_batch(datagram_batch& batch) noexcept { return {*ctx_, desc_, batch}; }
  // Awaitable: sends the first n slots of batch, each as set with batch.set() (sendmmsg); yields io_result<size_t>,
  // how many went out, in order: at least one unless it fails (invalid_argument for n > batch.capacity()).
  detail::batch_send_awaiter send_batch(datagram_batch& batch, std::size_t n) noexcept {
    return {*ctx_, desc_, batch, n};
  }

  [[nodiscard]] io_result<endpoint> local_endpoint() const noexcept;
  [[nodiscard]] io_result<endpoint> remote_endpoint() const noexcept;

 private:
  std::error_code open_if_closed(int family) { return desc_ == nullptr ? open(family) : std::error_code{}; }
};

}  // namespace tern::net
