// ip_address: inet_pton/inet_ntop do the text work.
#include "tern/net/address.hpp"

#include <arpa/inet.h>

#include <cstring>

namespace tern::net {

ip_address::ip_address(const in_addr& a) noexcept { std::memcpy(bytes_.data(), &a, sizeof a); }

ip_address::ip_address(const in6_addr& a, std::uint32_t scope_id) noexcept : scope_id_(scope_id), v6_(true) {
  std::memcpy(bytes_.data(), &a, sizeof a);
}

std::optional<ip_address> ip_address::parse(std::string_view text) noexcept {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  char buf[INET6_ADDRSTRLEN + 1];
  if (text.empty() || text.size() >= sizeof buf) return std::nullopt;
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  in_addr v4{};
  if (::inet_pton(AF_INET, buf, &v4) == 1) return ip_address(v4);
  in6_addr v6{};
  if (::inet_pton(AF_INET6, buf, &v6) == 1) return ip_address(v6);
  return std::nullopt;
}

ip_address ip_address::loopback_v4() noexcept {
  in_addr a{};
  a.s_addr = htonl(INADDR_LOOPBACK);
  return ip_address(a);
}
ip_address ip_address::loopback_v6() noexcept { return ip_address(in6addr_loopback); }
ip_address ip_address::any_v4() noexcept { return ip_address(); }
ip_address ip_address::any_v6() noexcept { return ip_address(in6addr_any); }

in_addr ip_address::to_v4() const noexcept {
  in_addr a{};
  std::memcpy(&a, bytes_.data(), sizeof a);
  return a;
}

in6_addr ip_address::to_v6() const noexcept {
  in6_addr a{};
  std::memcpy(&a, bytes_.data(), sizeof a);
  return a;
}

bool ip_address::is_loopback() const noexcept {
  if (!v6_) return bytes_[0] == 127;
  const in6_addr a = to_v6();
  return IN6_IS_ADDR_LOOPBACK(&a);
}

bool ip_address::is_multicast() const noexcept { return v6_ ? bytes_[0] == 0xff : (bytes_[0] & 0xf0) == 0xe0; }

bool ip_address::is_unspecified() const noexcept {
  for (std::size_t i = 0; i < (v6_ ? 16u : 4u); ++i) {
    if (bytes_[i] != 0) return false;
  }
  return true;
}

std::string ip_address::to_string() const {
  char buf[INET6_ADDRSTRLEN];
  if (v6_) {
    const in6_addr a = to_v6();
    ::inet_ntop(AF_INET6, &a, buf, sizeof buf);
  } else {
    const in_addr a = to_v4();
    ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  }
  return buf;
}

}  // namespace tern::net
