// tern::net::endpoint: parsing of the IPv4 and bracketed IPv6 text forms, port range checks, rejection of
// malformed input, the sockaddr it holds, and to_string/parse round trips.
#include <tern/net/endpoint.hpp>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace {

using tern::net::endpoint;

TEST(endpoint, parse_v4) {
  auto ep = endpoint::parse("127.0.0.1:8080");
  ASSERT_TRUE(ep.has_value());
  EXPECT_FALSE(ep->is_v6());
  EXPECT_EQ(ep->port(), 8080);
  EXPECT_EQ(ep->to_string(), "127.0.0.1:8080");
  ASSERT_EQ(ep->size(), sizeof(sockaddr_in));
  const auto* sin = reinterpret_cast<const sockaddr_in*>(ep->data());
  EXPECT_EQ(sin->sin_family, AF_INET);
  EXPECT_EQ(ntohs(sin->sin_port), 8080);
  EXPECT_EQ(ntohl(sin->sin_addr.s_addr), 0x7f000001u);
}

TEST(endpoint, parse_v6_with_brackets) {
  auto ep = endpoint::parse("[::1]:80");
  ASSERT_TRUE(ep.has_value());
  EXPECT_TRUE(ep->is_v6());
  EXPECT_EQ(ep->port(), 80);
  EXPECT_EQ(ep->to_string(), "[::1]:80");
  ASSERT_EQ(ep->size(), sizeof(sockaddr_in6));
  const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(ep->data());
  EXPECT_EQ(sin6->sin6_family, AF_INET6);
  EXPECT_EQ(ntohs(sin6->sin6_port), 80);
  EXPECT_EQ(std::memcmp(&sin6->sin6_addr, &in6addr_loopback, sizeof(in6_addr)), 0);
}

TEST(endpoint, parse_full_v6_address) {
  auto ep = endpoint::parse("[2001:db8:0:0:0:0:0:1]:443");
  ASSERT_TRUE(ep.has_value());
  EXPECT_TRUE(ep->is_v6());
  EXPECT_EQ(ep->port(), 443);
  EXPECT_EQ(ep->to_string(), "[2001:db8::1]:443") << "to_string gives the canonical (compressed) form";
}

TEST(endpoint, port_range) {
  auto max = endpoint::parse("10.0.0.1:65535");
  ASSERT_TRUE(max.has_value());
  EXPECT_EQ(max->port(), 65535);
  auto zero = endpoint::parse("10.0.0.1:0");
  ASSERT_TRUE(zero.has_value());
  EXPECT_EQ(zero->port(), 0);

  EXPECT_FALSE(endpoint::parse("10.0.0.1:65536").has_value());
  EXPECT_FALSE(endpoint::parse("10.0.0.1:70000").has_value());
  EXPECT_FALSE(endpoint::parse("10.0.0.1:99999999999999999999").has_value());
  EXPECT_FALSE(endpoint::parse("10.0.0.1:-1").has_value());
  EXPECT_FALSE(endpoint::parse("[::1]:65536").has_value());
  EXPECT_FALSE(endpoint::parse("[::1]:-80").has_value());
}

TEST(endpoint, rejects_garbage) {
  for (std::string_view text : {
           "",
           ":",
           "abc",
           "localhost:80",
           "127.0.0.1",          // no port
           "127.0.0.1:",         // empty port
           ":80",                // no address
           "127.0.0.1:80x",      // trailing junk in the port
           "127.0.0.1:x80",
           "127.0.0.1:8 0",
           " 127.0.0.1:80",      // leading space
           "127.0.0.1:80 ",      // trailing space
           "127.0.0.1:80:90",
           "1.2.3:80",           // too few octets
           "1.2.3.4.5:80",       // too many octets
           "256.0.0.1:80",       // octet out of range
           "::1:80",             // IPv6 needs brackets
           "[::1]",              // no port
           "[::1]:",             // empty port
           "[::1:80",            // unclosed bracket
           "::1]:80",            // no opening bracket
           "[127.0.0.1]:80",     // brackets are for IPv6 only
           "[::g]:80",           // bad hex digit
           "[1:2:3:4:5:6:7:8:9]:80",
       }) {
    EXPECT_FALSE(endpoint::parse(text).has_value()) << "accepted \"" << text << "\"";
  }
}

TEST(endpoint, rejects_embedded_nul) {
  const char text[] = {'1', '2', '7', '.', '0', '.', '0', '.', '1', ':', '8', '0', '\0', '1'};
  EXPECT_FALSE(endpoint::parse(std::string_view(text, sizeof(text))).has_value());
}

TEST(endpoint, to_string_round_trip) {
  for (std::string_view text : {
           "0.0.0.0:0",
           "127.0.0.1:1",
           "192.168.1.254:8080",
           "255.255.255.255:65535",
           "[::]:0",
           "[::1]:65535",
           "[fe80::1]:443",
           "[2001:db8::8:800:200c:417a]:9000",
           "[::ffff:10.1.2.3]:22",
       }) {
    auto ep = endpoint::parse(text);
    ASSERT_TRUE(ep.has_value()) << text;
    EXPECT_EQ(ep->to_string(), text);
    auto again = endpoint::parse(ep->to_string());
    ASSERT_TRUE(again.has_value()) << text;
    EXPECT_TRUE(*again == *ep) << text;
    ASSERT_EQ(again->size(), ep->size());
    EXPECT_EQ(std::memcmp(again->data(), ep->data(), ep->size()), 0) << text;
  }
}

TEST(endpoint, factories) {
  EXPECT_EQ(endpoint().to_string(), "0.0.0.0:0");
  EXPECT_FALSE(endpoint().is_v6());
  EXPECT_EQ(endpoint::loopback_v4(80).to_string(), "127.0.0.1:80");
  EXPECT_EQ(endpoint::loopback_v6(80).to_string(), "[::1]:80");
  EXPECT_EQ(endpoint::any_v4(8080).to_string(), "0.0.0.0:8080");
  EXPECT_EQ(endpoint::any_v6(8080).to_string(), "[::]:8080");
  EXPECT_TRUE(endpoint::loopback_v6(1).is_v6());
  EXPECT_EQ(endpoint::loopback_v4(65535).port(), 65535);
}

TEST(endpoint, equality) {
  EXPECT_TRUE(*endpoint::parse("127.0.0.1:80") == endpoint::loopback_v4(80));
  EXPECT_FALSE(*endpoint::parse("127.0.0.1:81") == endpoint::loopback_v4(80));
  EXPECT_FALSE(*endpoint::parse("127.0.0.2:80") == endpoint::loopback_v4(80));
  EXPECT_TRUE(*endpoint::parse("[::1]:80") == endpoint::loopback_v6(80));
  EXPECT_FALSE(endpoint::loopback_v6(80) == endpoint::loopback_v4(80));
}

TEST(endpoint, parse_address_and_port) {
  auto a = endpoint::parse("10.1.2.3", 99);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->to_string(), "10.1.2.3:99");
  auto b = endpoint::parse("::1", 7);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->to_string(), "[::1]:7");
  auto c = endpoint::parse("[::1]", 7);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->to_string(), "[::1]:7");
  EXPECT_FALSE(endpoint::parse("10.1.2.3:80", 99).has_value()) << "the address form takes no port";
  EXPECT_FALSE(endpoint::parse("nonsense", 1).has_value());
}

TEST(endpoint, from_sockaddr) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(4321);
  sin.sin_addr.s_addr = htonl(0x0a000001);
  endpoint ep(reinterpret_cast<const sockaddr*>(&sin), sizeof(sin));
  EXPECT_EQ(ep.to_string(), "10.0.0.1:4321");

  sockaddr_in6 sin6{};
  sin6.sin6_family = AF_INET6;
  sin6.sin6_port = htons(5);
  sin6.sin6_addr = in6addr_loopback;
  endpoint ep6(reinterpret_cast<const sockaddr*>(&sin6), sizeof(sin6));
  EXPECT_EQ(ep6.to_string(), "[::1]:5");
}

}  // namespace

namespace {

using tern::net::ip_address;

TEST(ip_address, parse_and_format) {
  auto v4 = ip_address::parse("192.0.2.10");
  ASSERT_TRUE(v4.has_value());
  EXPECT_FALSE(v4->is_v6());
  EXPECT_EQ(v4->family(), AF_INET);
  EXPECT_EQ(v4->to_string(), "192.0.2.10");
  auto v6 = ip_address::parse("2001:db8::1");
  ASSERT_TRUE(v6.has_value());
  EXPECT_TRUE(v6->is_v6());
  EXPECT_EQ(v6->to_string(), "2001:db8::1");
  EXPECT_EQ(ip_address::parse("[2001:db8::1]"), v6) << "brackets are accepted";
  for (std::string_view bad : {"", "1.2.3", "1.2.3.4.5", "256.1.1.1", "::g", "example.com", "1.2.3.4:80"}) {
    EXPECT_FALSE(ip_address::parse(bad).has_value()) << bad;
  }
}

TEST(ip_address, classification) {
  EXPECT_TRUE(ip_address::loopback_v4().is_loopback());
  EXPECT_TRUE(ip_address::loopback_v6().is_loopback());
  EXPECT_TRUE(ip_address::parse("127.8.9.10")->is_loopback());
  EXPECT_FALSE(ip_address::parse("10.0.0.1")->is_loopback());
  EXPECT_TRUE(ip_address::parse("239.1.2.3")->is_multicast());
  EXPECT_TRUE(ip_address::parse("ff02::1")->is_multicast());
  EXPECT_FALSE(ip_address::parse("192.0.2.1")->is_multicast());
  EXPECT_TRUE(ip_address::any_v4().is_unspecified());
  EXPECT_TRUE(ip_address::any_v6().is_unspecified());
  EXPECT_FALSE(ip_address::loopback_v6().is_unspecified());
  EXPECT_FALSE(ip_address::any_v4() == ip_address::any_v6()) << "the families differ";
}

TEST(ip_address, endpoint_from_address_and_back) {
  const auto a = *ip_address::parse("2001:db8::7");
  tern::net::endpoint ep(a, 8443);
  EXPECT_TRUE(ep.is_v6());
  EXPECT_EQ(ep.port(), 8443);
  EXPECT_EQ(ep.address(), a);
  EXPECT_EQ(ep.to_string(), "[2001:db8::7]:8443");
  tern::net::endpoint ep4(ip_address::loopback_v4(), 80);
  EXPECT_EQ(ep4, tern::net::endpoint::loopback_v4(80));
  EXPECT_EQ(ep4.address(), ip_address::loopback_v4());
}

}  // namespace
