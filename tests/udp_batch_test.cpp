// UDP batches on both backends (recvmmsg/sendmmsg on epoll; on io_uring the same calls without waiting, and one
// RECVMSG/SENDMSG in the ring when the socket is not ready): several datagrams per call with their own sizes and
// senders over IPv4 and IPv6, a batch larger than what waits, a batch that has to wait for its first datagram,
// truncation inside a batch (also of a datagram that arrived through the ring), connected sockets, bad counts, and
// timeouts.
#include "net_support.hpp"

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

// A named namespace, not an anonymous one: the test sources are compiled in unity batches (tests/CMakeLists.txt),
// where this file's helpers would meet udp_test.cpp's of the same names.
namespace udp_batch_tests {

using namespace tern_test;
using tern::net::datagram_batch;
using tern::net::endpoint;
using tern::net::udp_socket;

class udp_batch_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(udp_batch_test);

endpoint bind_loopback(udp_socket& s, bool v6 = false) {
  EXPECT_OK(s.bind(v6 ? endpoint::loopback_v6(0) : endpoint::loopback_v4(0)));
  auto [ec, ep] = s.local_endpoint();
  EXPECT_OK(ec);
  return ep;
}

// The text of datagram i: "d<i>" followed by i dots, so each has its own size.
std::string text_of(std::size_t i) { return "d" + std::to_string(i) + std::string(i, '.'); }

void put(datagram_batch& b, std::size_t slot, std::string_view text) {
  std::memcpy(b.buffer(slot).data(), text.data(), text.size());
}

std::string_view view(const datagram_batch& b, std::size_t slot) {
  return {reinterpret_cast<const char*>(b.data(slot).data()), b.size(slot)};
}

void batch_both_ways(tern::io_context& ctx, bool v6) {
  run_bounded(ctx, [](tern::io_context& ctx, bool v6) -> tern::task<void> {
    udp_socket a(ctx), b(ctx), c(ctx);
    const endpoint a_ep = bind_loopback(a, v6);
    const endpoint b_ep = bind_loopback(b, v6);
    const endpoint c_ep = bind_loopback(c, v6);
    datagram_batch out(8, 64);
    for (std::size_t i = 0; i < 8; ++i) {
      put(out, i, text_of(i));
      out.set(i, text_of(i).size(), b_ep);
    }
    EXPECT_EQ(out.peer(3), b_ep);
    auto [sec, sent] = co_await a.send_batch(out, 8);
    CO_ASSERT_OK(sec);
    EXPECT_EQ(sent, 8u) << "a loopback socket takes all eight at once";
    CO_ASSERT_OK((co_await c.send_to(tern::const_buffer("from c"), b_ep)).ec);

    datagram_batch in(16, 64);
    auto [rec, n] = co_await tern::with_timeout(b.receive_batch(in), 10s);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(n, 9u) << "every waiting datagram in one call";
    for (std::size_t i = 0; i < n && i < 8; ++i) {
      EXPECT_EQ(view(in, i), text_of(i));
      EXPECT_FALSE(in.truncated(i));
      EXPECT_EQ(in.peer(i), a_ep) << in.peer(i).to_string();
    }
    if (n == 9) {
      EXPECT_EQ(view(in, 8), "from c");
      EXPECT_EQ(in.peer(8), c_ep);
    }
    // The answer goes back to the senders read from the batch.
    for (std::size_t i = 0; i < n; ++i) in.set(i, 2, in.peer(i));
    auto [bec, back] = co_await b.send_batch(in, n);
    CO_ASSERT_OK(bec);
    EXPECT_EQ(back, n);
    datagram_batch replies(16, 64);
    auto [aec, an] = co_await tern::with_timeout(a.receive_batch(replies), 10s);
    CO_ASSERT_OK(aec);
    EXPECT_EQ(an, 8u);
    EXPECT_EQ(view(replies, 5), "d5");
    auto [cec, cn] = co_await tern::with_timeout(c.receive_batch(replies), 10s);
    CO_ASSERT_OK(cec);
    EXPECT_EQ(cn, 1u);
    EXPECT_EQ(view(replies, 0), "fr");
  }(ctx, v6));
}

TEST_P(udp_batch_test, several_datagrams_per_call_over_ipv4) { batch_both_ways(ctx, false); }
TEST_P(udp_batch_test, several_datagrams_per_call_over_ipv6) { batch_both_ways(ctx, true); }

TEST_P(udp_batch_test, a_batch_larger_than_what_waits_takes_what_waits) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    udp_socket a(ctx), b(ctx);
    bind_loopback(a);
    const endpoint b_ep = bind_loopback(b);
    for (int i = 0; i < 3; ++i) CO_ASSERT_OK((co_await a.send_to(tern::const_buffer("abc"), b_ep)).ec);
    datagram_batch in(32, 16);
    auto [ec, n] = co_await tern::with_timeout(b.receive_batch(in), 10s);
    CO_ASSERT_OK(ec);
    EXPECT_EQ(n, 3u);
    // Nothing else waits: the next batch waits until the timeout.
    auto [tec, tn] = co_await tern::with_timeout(b.receive_batch(in), 20ms);
    EXPECT_EC(tec, tern::error::timed_out);
    EXPECT_EQ(tn, 0u);
  }(ctx));
}

TEST_P(udp_batch_test, a_batch_waits_for_its_first_datagram) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    udp_socket a(ctx), b(ctx);
    const endpoint a_ep = bind_loopback(a);
    const endpoint b_ep = bind_loopback(b);
    datagram_batch in(4, 8);
    auto pending = tern::spawn(ctx, b.receive_batch(in));
    co_await tern::sleep_for(5ms);
    // Longer than the slot: cut, and said so, also when it arrives while the batch waits.
    CO_ASSERT_OK((co_await a.send_to(tern::const_buffer("0123456789AB"), b_ep)).ec);
    auto [ec, n] = co_await std::move(pending);
    CO_ASSERT_OK(ec);
    CO_ASSERT(n >= 1);
    EXPECT_TRUE(in.truncated(0));
    EXPECT_EQ(view(in, 0), "01234567");
    EXPECT_EQ(in.peer(0), a_ep);
  }(ctx));
}

TEST_P(udp_batch_test, truncation_is_reported_per_datagram) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    udp_socket a(ctx), b(ctx);
    bind_loopback(a);
    const endpoint b_ep = bind_loopback(b);
    const std::string_view sent[] = {"abcd", "0123456789abcdefghij", "12345678", "123456789", ""};
    for (std::string_view s : sent) {
      CO_ASSERT_OK((co_await a.send_to(tern::const_buffer(s.data(), s.size()), b_ep)).ec);
    }
    datagram_batch in(8, 8);
    auto [ec, n] = co_await tern::with_timeout(b.receive_batch(in), 10s);
    CO_ASSERT_OK(ec);
    CO_ASSERT(n == 5);
    const bool cut[] = {false, true, false, true, false};
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_EQ(in.truncated(i), cut[i]) << "datagram " << i;
      EXPECT_EQ(view(in, i), sent[i].substr(0, 8)) << "datagram " << i;
    }
    EXPECT_EQ(in.size(4), 0u) << "an empty datagram is one datagram of no bytes";
  }(ctx));
}

TEST_P(udp_batch_test, connected_sockets_batch_without_addresses) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    udp_socket server(ctx), client(ctx);
    const endpoint server_ep = bind_loopback(server);
    const endpoint client_ep = bind_loopback(client);
    CO_ASSERT_OK(client.connect(server_ep));
    datagram_batch out(4, 32);
    for (std::size_t i = 0; i < 4; ++i) {
      put(out, i, text_of(i));
      out.set(i, text_of(i).size());
    }
    auto [sec, sent] = co_await client.send_batch(out, 4);
    CO_ASSERT_OK(sec);
    EXPECT_EQ(sent, 4u);
    datagram_batch in(4, 32);
    std::size_t got = 0;
    while (got < 4) {
      auto [ec, n] = co_await tern::with_timeout(server.receive_batch(in), 10s);
      CO_ASSERT_OK(ec);
      for (std::size_t i = 0; i < n; ++i) {
        EXPECT_EQ(view(in, i), text_of(got + i));
        EXPECT_EQ(in.peer(i), client_ep);
      }
      got += n;
    }
  }(ctx));
}

TEST_P(udp_batch_test, bad_counts_and_closed_sockets) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    udp_socket a(ctx);
    const endpoint a_ep = bind_loopback(a);
    datagram_batch out(2, 8);
    out.set(0, 100, a_ep);
    EXPECT_EQ(out.size(0), 8u) << "a size is at most the slot";
    auto [e1, n1] = co_await a.send_batch(out, 3);
    EXPECT_EC(e1, std::errc::invalid_argument);
    auto [e2, n2] = co_await a.send_batch(out, 0);
    EXPECT_OK(e2);
    EXPECT_EQ(n2, 0u);
    udp_socket closed(ctx);
    auto [e3, n3] = co_await closed.receive_batch(out);
    EXPECT_EC(e3, std::errc::bad_file_descriptor);
    (void)n1, (void)n3;
  }(ctx));
  EXPECT_THROW(datagram_batch(0, 8), std::invalid_argument);
  EXPECT_THROW(datagram_batch(4, 0), std::invalid_argument);
  EXPECT_THROW(datagram_batch(datagram_batch::max_capacity + 1, 8), std::invalid_argument);
}

}  // namespace
