// tern/net/endpoint.hpp
//
// An IPv4 or IPv6 address with a port, stored as the sockaddr the kernel takes, so passing it to connect, bind or
// accept copies nothing. Text forms: "127.0.0.1:8080" and "[::1]:8080" (brackets required for IPv6, as in URLs).
//
//   std::optional<net::endpoint> ep = net::endpoint::parse(argv[1]);   // "127.0.0.1:8080", "[::1]:8080"
//   if (!ep) ...                        // not an address with a port: parse() never throws and looks up no name
//   acceptor.listen(*ep);
//
// parse() takes numbers only: a host name ("localhost:80") is nullopt; net::resolver (or net::connect(ctx, host,
// service)) turns names into endpoints.
#pragma once

#include <cstdint>
#include <netinet/in.h>
#include <optional>
#include <string>
#include <string_view>
#include <sys/socket.h>

#include "tern/net/address.hpp"

namespace tern::net {

class endpoint {
 public:
  // 0.0.0.0:0.
  endpoint() noexcept;
  // From a kernel socket address (AF_INET or AF_INET6); other families give 0.0.0.0:0.
  endpoint(const sockaddr* addr, socklen_t len) noexcept;
  // An address and a port.
  endpoint(const ip_address& address, std::uint16_t port) noexcept;

  // Parses "a.b.c.d:port" or "[v6]:port"; std::nullopt on anything else (a missing port, a port over 65535, a bad
  // address, a host name).
  static std::optional<endpoint> parse(std::string_view text) noexcept;
  // Parses an address without a port ("127.0.0.1", "::1", "[::1]") and combines it with port.
  static std::optional<endpoint> parse(std::string_view address, std::uint16_t port) noexcept;
  // 127.0.0.1:port.
  static endpoint loopback_v4(std::uint16_t port) noexcept;
  // [::1]:port.
  static endpoint loopback_v6(std::uint16_t port) noexcept;
  // 0.0.0.0:port.
  static endpoint any_v4(std::uint16_t port) noexcept;
  // [::]:port.
  static endpoint any_v6(std::uint16_t port) noexcept;

  std::uint16_t port() const noexcept;
  // The address without the port.
  ip_address address() const noexcept;
  bool is_v6() const noexcept { return storage_.ss_family == AF_INET6; }
  int family() const noexcept { return storage_.ss_family; }
  // The text form that parse() accepts.
  std::string to_string() const;

  const sockaddr* data() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t size() const noexcept { return is_v6() ? sizeof(sockaddr_in6) : sizeof(sockaddr_in); }

  friend bool operator==(const endpoint& a, const endpoint& b) noexcept;

 private:
  sockaddr_storage storage_{};
};

}  // namespace tern::net
