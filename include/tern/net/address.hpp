// tern/net/address.hpp
//
// ip_address: an IPv4 or IPv6 address without a port (a multicast group, an interface, what a resolver returns).
// endpoint (endpoint.hpp) is an address with a port. Text forms: "192.0.2.1", "2001:db8::1" (inet_pton's).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <netinet/in.h>

namespace tern::net {

class ip_address {
 public:
  // 0.0.0.0.
  ip_address() noexcept = default;
  explicit ip_address(const in_addr& a) noexcept;
  // scope_id: the interface of a link-local address (0: none).
  explicit ip_address(const in6_addr& a, std::uint32_t scope_id = 0) noexcept;

  // Parses "a.b.c.d" or an IPv6 address (with or without brackets); nullopt on anything else.
  static std::optional<ip_address> parse(std::string_view text) noexcept;
  static ip_address loopback_v4() noexcept;
  static ip_address loopback_v6() noexcept;
  static ip_address any_v4() noexcept;
  static ip_address any_v6() noexcept;

  bool is_v6() const noexcept { return v6_; }
  int family() const noexcept { return v6_ ? AF_INET6 : AF_INET; }
  bool is_loopback() const noexcept;
  bool is_multicast() const noexcept;
  bool is_unspecified() const noexcept;
  std::uint32_t scope_id() const noexcept { return scope_id_; }
  in_addr to_v4() const noexcept;    // meaningful when !is_v6()
  in6_addr to_v6() const noexcept;   // meaningful when is_v6()
  // The text form that parse() accepts (IPv6 without brackets).
  std::string to_string() const;

  friend bool operator==(const ip_address& a, const ip_address& b) noexcept {
    return a.v6_ == b.v6_ && a.bytes_ == b.bytes_ && a.scope_id_ == b.scope_id_;
  }

 private:
  std::array<unsigned char, 16> bytes_{};  // network order; the first 4 for IPv4
  std::uint32_t scope_id_ = 0;
  bool v6_ = false;
};

}  // namespace tern::net
