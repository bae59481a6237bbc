// Endpoint parsing and formatting (inet_pton/inet_ntop do the address work; this file handles ports and brackets).
#include "tern/net/endpoint.hpp"

#include <arpa/inet.h>
#include <charconv>
#include <cstring>

namespace tern::net {

namespace {
sockaddr_in* v4(sockaddr_storage& s) noexcept { return reinterpret_cast<sockaddr_in*>(&s); }
sockaddr_in6* v6(sockaddr_storage& s) noexcept { return reinterpret_cast<sockaddr_in6*>(&s); }
const sockaddr_in* v4(const sockaddr_storage& s) noexcept { return reinterpret_cast<const sockaddr_in*>(&s); }
const sockaddr_in6* v6(const sockaddr_storage& s) noexcept { return reinterpret_cast<const sockaddr_in6*>(&s); }

std::optional<std::uint16_t> parse_port(std::string_view s) noexcept {
  if (s.empty() || s.size() > 5) return std::nullopt;
  unsigned value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc{} || end != s.data() + s.size() || value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}
}  // namespace

endpoint::endpoint() noexcept { v4(storage_)->sin_family = AF_INET; }

endpoint::endpoint(const sockaddr* addr, socklen_t len) noexcept : endpoint() {
  if (addr == nullptr) return;
  if (addr->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    std::memcpy(&storage_, addr, sizeof(sockaddr_in));
  } else if (addr->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    std::memcpy(&storage_, addr, sizeof(sockaddr_in6));
  }
}

std::optional<endpoint> endpoint::parse(std::string_view address, std::uint16_t port) noexcept {
  if (address.size() >= 2 && address.front() == '[' && address.back() == ']') {
    address = address.substr(1, address.size() - 2);
  }
  char buf[INET6_ADDRSTRLEN + 1];
  if (address.empty() || address.size() >= sizeof buf) return std::nullopt;
  std::memcpy(buf, address.data(), address.size());
  buf[address.size()] = '\0';
  endpoint ep;
  if (::inet_pton(AF_INET, buf, &v4(ep.storage_)->sin_addr) == 1) {
    v4(ep.storage_)->sin_family = AF_INET;
    v4(ep.storage_)->sin_port = htons(port);
    return ep;
  }
  ep.storage_ = {};
  if (::inet_pton(AF_INET6, buf, &v6(ep.storage_)->sin6_addr) == 1) {
    v6(ep.storage_)->sin6_family = AF_INET6;
    v6(ep.storage_)->sin6_port = htons(port);
    return ep;
  }
  return std::nullopt;
}

std::optional<endpoint> endpoint::parse(std::string_view text) noexcept {
  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') return std::nullopt;
    host = text.substr(0, close + 1);
    port = text.substr(close + 2);
    if (host.find(':') == std::string_view::npos) return std::nullopt;  // brackets are for IPv6 only
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return std::nullopt;  // bare IPv6 needs brackets
  }
  auto p = parse_port(port);
  if (!p) return std::nullopt;
  return parse(host, *p);
}

endpoint endpoint::loopback_v4(std::uint16_t port) noexcept {
  endpoint ep;
  v4(ep.storage_)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  v4(ep.storage_)->sin_port = htons(port);
  return ep;
}

endpoint endpoint::loopback_v6(std::uint16_t port) noexcept {
  endpoint ep;
  ep.storage_ = {};
  v6(ep.storage_)->sin6_family = AF_INET6;
  v6(ep.storage_)->sin6_addr = in6addr_loopback;
  v6(ep.storage_)->sin6_port = htons(port);
  return ep;
}

endpoint endpoint::any_v4(std::uint16_t port) noexcept {
  endpoint ep;
  v4(ep.storage_)->sin_addr.s_addr = htonl(INADDR_ANY);
  v4(ep.storage_)->sin_port = htons(port);
  return ep;
}

endpoint endpoint::any_v6(std::uint16_t port) noexcept {
  endpoint ep;
  ep.storage_ = {};
  v6(ep.storage_)->sin6_family = AF_INET6;
  v6(ep.storage_)->sin6_addr = in6addr_any;
  v6(ep.storage_)->sin6_port = htons(port);
  return ep;
}

endpoint::endpoint(const ip_address& address, std::uint16_t port) noexcept : endpoint() {
  if (address.is_v6()) {
    storage_ = {};
    v6(storage_)->sin6_family = AF_INET6;
    v6(storage_)->sin6_addr = address.to_v6();
    v6(storage_)->sin6_scope_id = address.scope_id();
    v6(storage_)->sin6_port = htons(port);
  } else {
    v4(storage_)->sin_addr = address.to_v4();
    v4(storage_)->sin_port = htons(port);
  }
}

ip_address endpoint::address() const noexcept {
  if (is_v6()) return ip_address(v6(storage_)->sin6_addr, v6(storage_)->sin6_scope_id);
  return ip_address(v4(storage_)->sin_addr);
}

std::uint16_t endpoint::port() const noexcept {
  return ntohs(is_v6() ? v6(storage_)->sin6_port : v4(storage_)->sin_port);
}

std::string endpoint::to_string() const {
  char buf[INET6_ADDRSTRLEN];
  std::string out;
  if (is_v6()) {
    ::inet_ntop(AF_INET6, &v6(storage_)->sin6_addr, buf, sizeof buf);
    out.append("[").append(buf).append("]");
  } else {
    ::inet_ntop(AF_INET, &v4(storage_)->sin_addr, buf, sizeof buf);
    out.append(buf);
  }
  out.append(":").append(std::to_string(port()));
  return out;
}

bool operator==(const endpoint& a, const endpoint& b) noexcept {
  if (a.family() != b.family()) return false;
  if (a.is_v6()) {
    return std::memcmp(&v6(a.storage_)->sin6_addr, &v6(b.storage_)->sin6_addr, sizeof(in6_addr)) == 0 &&
           a.port() == b.port();
  }
  return v4(a.storage_)->sin_addr.s_addr == v4(b.storage_)->sin_addr.s_addr && a.port() == b.port();
}

}  // namespace tern::net
