// UDP sockets on both backends: send_to/receive_from over IPv4 and IPv6 with the sender's endpoint, connected
// send/receive, truncated and empty datagrams, the refused peer of a connected socket, cancellation and timeouts,
// options (broadcast, buffer sizes, multicast over the loopback interface), bind errors, and a sequence of
// datagrams verified byte by byte.
#include "net_support.hpp"

#include <net/if.h>

#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace tern_test;
using tern::net::endpoint;
using tern::net::udp_socket;

class udp_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(udp_test);

// A socket bound to an ephemeral loopback port; returns the bound endpoint.
endpoint bind_loopback(udp_socket& s, bool v6 = false) {
  EXPECT_OK(s.bind(v6 ? endpoint::loopback_v6(0) : endpoint::loopback_v4(0)));
  auto [ec, ep] = s.local_endpoint();
  EXPECT_OK(ec);
  EXPECT_NE(ep.port(), 0);
  return ep;
}

void exchange_both_ways(tern::io_context& ctx, bool v6) {
  run_bounded(ctx, [](tern::io_context& ctx, bool v6) -> tern::task<void> {
    udp_socket a(ctx), b(ctx);
    const endpoint a_ep = bind_loopback(a, v6);
    const endpoint b_ep = bind_loopback(b, v6);
    auto [sec, sent] = co_await a.send_to(tern::const_buffer("ping"), b_ep);
    CO_ASSERT_OK(sec);
    EXPECT_EQ(sent, 4u);
    char buf[64];
    auto [rec, got] = co_await tern::with_timeout(b.receive_from(buf), 10s);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(std::string_view(buf, got.size), "ping");
    EXPECT_EQ(got.from, a_ep) << got.from.to_string() << " vs " << a_ep.to_string();
    // Answer the sender at the address the datagram came from.
    CO_ASSERT_OK((co_await b.send_to(tern::const_buffer("pong"), got.from)).ec);
    auto [aec, back] = co_await tern::with_timeout(a.receive_from(buf), 10s);
    CO_ASSERT_OK(aec);
    EXPECT_EQ(std::string_view(buf, back.size), "pong");
    EXPECT_EQ(back.from, b_ep);
  }(ctx, v6));
}

TEST_P(udp_test, send_to_and_receive_from_over_ipv4) { exchange_both_ways(ctx, false); }
TEST_P(udp_test, send_to_and_receive_from_over_ipv6) { exchange_both_ways(ctx, true); }

TEST_P(udp_test, connected_socket_sends_and_receives_its_peer_only) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    udp_socket server(ctx), client(ctx), stranger(ctx);
    const endpoint server_ep = bind_loopback(server);
    const endpoint client_ep = bind_loopback(client);
    bind_loopback(stranger);
    CO_ASSERT_OK(client.connect(server_ep));
    auto [rec, remote] = client.remote_endpoint();
    CO_ASSERT_OK(rec);
    EXPECT_EQ(remote, server_ep);
    // A datagram from anyone but the peer is filtered out by the kernel.
    CO_ASSERT_OK((co_await stranger.send_to(tern::const_buffer("noise"), client_ep)).ec);
    CO_ASSERT_OK((co_await server.send_to(tern::const_buffer("hello"), client_ep)).ec);
    char buf[16];
    auto [ec, n] = co_await tern::with_timeout(client.receive(buf), 10s);
    CO_ASSERT_OK(ec);
    EXPECT_EQ(std::string_view(buf, n), "hello");
    CO_ASSERT_OK((co_await client.send(tern::const_buffer("reply"))).ec);
    auto [sec, got] = co_await tern::with_timeout(server.receive_from(buf), 10s);
    CO_ASSERT_OK(sec);
    EXPECT_EQ(std::string_view(buf, got.size), "reply");
    EXPECT_EQ(got.from, client_ep);
  }(ctx));
}

TEST_P(udp_test, a_datagram_longer_than_the_buffer_is_reported_truncated) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    udp_socket a(ctx), b(ctx);
    bind_loopback(a);
    const endpoint b_ep = bind_loopback(b);
    const std::vector<char> big = make_pattern(1000);
    CO_ASSERT_OK((co_await a.send_to(big, b_ep)).ec);
    CO_ASSERT_OK((co_await a.send_to(tern::const_buffer("next"), b_ep)).ec);
    char small[10];
    auto [ec, got] = co_await tern::with_timeout(b.receive_from(small), 10s);
    EXPECT_EC(ec, tern::error::message_truncated);
    EXPECT_TRUE(ec == std::errc::message_size);
    EXPECT_EQ(got.size, sizeof small);
    EXPECT_EQ(std::string_view(small, sizeof small), std::string_view(big.data(), sizeof small));
    auto [a_ep_ec, a_ep] = a.local_endpoint();
    EXPECT_EQ(got.from, a_ep) << "the sender is known even when the datagram was cut";
    // The rest of the long datagram is gone; the next one arrives whole.
    auto [ec2, next] = co_await tern::with_timeout(b.receive_from(small), 10s);
    CO_ASSERT_OK(ec2);
    EXPECT_EQ(std::string_view(small, next.size), "next");
    (void)a_ep_ec;
  }(ctx));
}

TEST_P(udp_test, an_empty_datagram_is_a_datagram) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    udp_socket a(ctx), b(ctx);
    bind_loopback(a);
    const endpoint b_ep = bind_loopback(b);
    CO_ASSERT_OK((co_await a.send_to(tern::const_buffer(), b_ep)).ec);
    char buf[8];
    auto [ec, got] = co_await tern::with_timeout(b.receive_from(buf), 10s);
    EXPECT_OK(ec);
    EXPECT_EQ(got.size, 0u);
  }(ctx));
}

TEST_P(udp_test, refused_peer_is_reported_on_the_next_receive_of_a_connected_socket) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    endpoint closed_ep;
    {
      udp_socket gone(ctx);
      closed_ep = bind_loopback(gone);
    }  // nothing listens on that port any more
    udp_socket client(ctx);
    CO_ASSERT_OK(client.connect(closed_ep));
    CO_ASSERT_OK((co_await client.send(tern::const_buffer("anyone?"))).ec);
    char buf[8];
    auto [ec, n] = co_await tern::with_timeout(client.receive(buf), 10s);
    EXPECT_EC(ec, std::errc::connection_refused);
    EXPECT_EQ(n, 0u);
    // The error is reported once; the socket stays usable.
    EXPECT_TRUE(client.is_open());
  }(ctx));
}

TEST_P(udp_test, pending_receive_is_cancelled_and_timed_out_with_tern_codes) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    udp_socket s(ctx);
    bind_loopback(s);
    char buf[8];
    auto [tec, tgot] = co_await tern::with_timeout(s.receive_from(buf), 5ms);
    EXPECT_EC(tec, tern::error::timed_out);
    auto pending = tern::spawn(ctx, s.receive_from(buf));
    co_await tern::sleep_for(2ms);
    s.cancel();
    auto [cec, cgot] = co_await std::move(pending);
    EXPECT_EC(cec, tern::error::operation_canceled);
    auto closing = tern::spawn(ctx, s.receive_from(buf));
    co_await tern::sleep_for(2ms);
    s.close();
    auto [xec, xgot] = co_await std::move(closing);
    EXPECT_EC(xec, tern::error::operation_canceled);
    auto [bec, bgot] = co_await s.receive_from(buf);
    EXPECT_EC(bec, std::errc::bad_file_descriptor);
    (void)tgot, (void)cgot, (void)xgot, (void)bgot;
  }(ctx));
}

TEST_P(udp_test, many_datagrams_arrive_in_order_and_intact) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    udp_socket a(ctx), b(ctx);
    const endpoint a_ep = bind_loopback(a);
    const endpoint b_ep = bind_loopback(b);
    CO_ASSERT_OK(a.connect(b_ep));
    CO_ASSERT_OK(b.connect(a_ep));
    auto receiver = tern::spawn(ctx, [](udp_socket& b) -> tern::task<int> {
      std::vector<char> buf(2000);
      int good = 0;
      for (int i = 0; i < 500; ++i) {
        auto [ec, n] = co_await tern::with_timeout(b.receive(buf), 10s);
        if (ec) break;
        const std::vector<char> want = make_pattern(static_cast<std::size_t>(i % 1400) + 1, i);
        if (n == want.size() && std::equal(want.begin(), want.end(), buf.begin())) ++good;
        // Acknowledge, so that the sender never overruns the receive buffer.
        if ((co_await b.send(tern::const_buffer("k"))).ec) break;
      }
      co_return good;
    }, std::ref(b));
    char ack[2];
    for (int i = 0; i < 500; ++i) {
      const std::vector<char> payload = make_pattern(static_cast<std::size_t>(i % 1400) + 1, i);
      CO_ASSERT_OK((co_await a.send(payload)).ec);
      auto [ec, n] = co_await tern::with_timeout(a.receive(ack), 10s);
      CO_ASSERT_OK(ec);
      (void)n;
    }
    EXPECT_EQ(co_await std::move(receiver), 500);
  }(ctx));
}

TEST_P(udp_test, options_round_trip_and_bind_errors_are_clear) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    udp_socket s(ctx);
    EXPECT_EC(s.set_option(tern::net::option::broadcast{true}), std::errc::bad_file_descriptor);
    const endpoint ep = bind_loopback(s);
    CO_ASSERT_OK(s.set_option(tern::net::option::broadcast{true}));
    auto [bec, b] = s.get_option<tern::net::option::broadcast>();
    EXPECT_OK(bec);
    EXPECT_TRUE(b.value);
    CO_ASSERT_OK(s.set_option(tern::net::option::receive_buffer_size{64 * 1024}));
    auto [rec, r] = s.get_option<tern::net::option::receive_buffer_size>();
    EXPECT_OK(rec);
    EXPECT_GE(r.value, 64 * 1024) << "the kernel doubles what is set";
    // TCP's option on a UDP socket is the kernel's error, not a silent no-op.
    EXPECT_FALSE(!s.set_option(tern::net::option::no_delay{true}));
    // The same port again, without SO_REUSEADDR: in use.
    udp_socket other(ctx);
    EXPECT_EC(other.bind(ep), std::errc::address_in_use);
  }(ctx));
}

TEST_P(udp_test, segmentation_offload_sends_one_buffer_as_several_datagrams) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    udp_socket sender(ctx), receiver(ctx);
    const endpoint receiver_ep = bind_loopback(receiver);
    bind_loopback(sender);
    CO_ASSERT_OK(sender.connect(receiver_ep));
    CO_ASSERT_OK(sender.set_option(tern::net::option::udp_segment{100}));
    auto [gec, segment] = sender.get_option<tern::net::option::udp_segment>();
    CO_ASSERT_OK(gec);
    EXPECT_EQ(segment.value, 100);
    // 350 bytes in one send: four datagrams of 100, 100, 100 and 50 bytes, in order.
    const std::vector<char> data = make_pattern(350);
    auto [sec, sent] = co_await sender.send(tern::const_buffer(data.data(), data.size()));
    CO_ASSERT_OK(sec);
    EXPECT_EQ(sent, 350u);
    char buf[512];
    std::size_t offset = 0;
    for (std::size_t expected : {100u, 100u, 100u, 50u}) {
      auto [rec, got] = co_await tern::with_timeout(receiver.receive_from(buf), 10s);
      CO_ASSERT_OK(rec);
      EXPECT_EQ(got.size, expected);
      EXPECT_TRUE(std::equal(buf, buf + got.size, data.begin() + static_cast<long>(offset)));
      offset += got.size;
    }
    // Off again: one send is one datagram.
    CO_ASSERT_OK(sender.set_option(tern::net::option::udp_segment{0}));
    CO_ASSERT_OK((co_await sender.send(tern::const_buffer(data.data(), 300))).ec);
    auto [rec, got] = co_await tern::with_timeout(receiver.receive_from(buf), 10s);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(got.size, 300u);
  }(ctx));
}

TEST_P(udp_test, multicast_over_the_loopback_interface) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    const unsigned lo = ::if_nametoindex("lo");
    CO_ASSERT(lo != 0);
    const auto group = tern::net::ip_address::parse("239.255.77.1");
    CO_ASSERT(group && group->is_multicast());
    udp_socket member(ctx);
    CO_ASSERT_OK(member.bind(endpoint::any_v4(0), {.reuse_address = true}));
    auto [lec, local] = member.local_endpoint();
    CO_ASSERT_OK(lec);
    CO_ASSERT_OK(member.set_option(tern::net::option::join_group{*group, lo}));

    udp_socket sender(ctx);
    CO_ASSERT_OK(sender.open(AF_INET));
    CO_ASSERT_OK(sender.set_option(tern::net::option::multicast_interface{lo}));
    CO_ASSERT_OK(sender.set_option(tern::net::option::multicast_hops{1}));
    CO_ASSERT_OK(sender.set_option(tern::net::option::multicast_loop{true}));
    auto [hec, hops] = sender.get_option<tern::net::option::multicast_hops>();
    EXPECT_OK(hec);
    EXPECT_EQ(hops.value, 1);
    auto [mec, loop] = sender.get_option<tern::net::option::multicast_loop>();
    EXPECT_OK(mec);
    EXPECT_TRUE(loop.value);

    CO_ASSERT_OK((co_await sender.send_to(tern::const_buffer("to the group"), endpoint(*group, local.port()))).ec);
    char buf[32];
    auto [ec, got] = co_await tern::with_timeout(member.receive_from(buf), 10s);
    CO_ASSERT_OK(ec);
    EXPECT_EQ(std::string_view(buf, got.size), "to the group");

    CO_ASSERT_OK(member.set_option(tern::net::option::leave_group{*group, lo}));
    EXPECT_FALSE(!member.set_option(tern::net::option::leave_group{*group, lo})) << "not a member any more";
    // An IPv6 group on an IPv4 socket is refused before the kernel is asked.
    EXPECT_EC(member.set_option(tern::net::option::join_group{*tern::net::ip_address::parse("ff02::1"), lo}),
              std::errc::address_family_not_supported);
  }(ctx));
}

}  // namespace
