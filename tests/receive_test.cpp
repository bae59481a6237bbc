// receive() and leased buffers: every byte in order through the loop's receive pool (a provided-buffer ring and a
// multishot receive under io_uring, a pool of free buffers under epoll), a pool that runs dry and overflows, a
// receive cancelled or timed out mid-stream (nothing lost), a peer reset, a lease held across a long await while
// other sockets are served, close with receives pending and bytes queued, and the refusal of plain reads on a
// socket read with receive(); io_uring's bundled receives (several pool buffers in one completion) across many
// sockets and a dry pool, and with bundles turned off; io_uring's ring of free buffers moved to larger ones as the
// pool grows (in order, with the buffers that waited for room), under real traffic and step by step; a socket whose
// reader stopped holds at most its queue's bound of the pool, and its stream then arrives whole.
#include "net_support.hpp"
#include "tern/detail/receive_pool.hpp"

#include <liburing.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace tern_test;
using namespace std::chrono_literals;
using tern::net::tcp_socket;

class receive_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(receive_test);

// A loop on each backend whose pool is sized by `options` (from the backend's own options).
template <tern::io_context_options (*options)(tern::backend_kind)>
class pool_fixture : public ::testing::TestWithParam<tern::backend_kind> {
 protected:
  tern::io_context ctx{options(GetParam())};
};

// A pool of `buffers` buffers of `size` bytes at first, at most `max`.
tern::io_context_options pool_of(tern::backend_kind kind, std::size_t size, unsigned buffers, unsigned max) {
  tern::io_context_options o = options_for(kind);
  o.receive_buffer_size = size;
  o.receive_buffers = buffers;
  o.receive_buffers_max = max;
  return o;
}

// A loop whose pool is small: buffers of 1 KiB, 4 at first, at most 8.
tern::io_context_options small_pool(tern::backend_kind kind) { return pool_of(kind, 1024, 4, 8); }
class small_pool_test : public pool_fixture<small_pool> {};
TERN_INSTANTIATE_BACKENDS(small_pool_test);

// Receives until eof, appending every byte to out; returns the error that ended the stream (eof expected).
tern::task<std::error_code> receive_all(tcp_socket& s, std::vector<char>& out) {
  for (;;) {
    auto [ec, lease] = co_await s.receive();
    if (ec) co_return ec;
    EXPECT_FALSE(lease.empty()) << "a successful receive carries at least one byte";
    out.insert(out.end(), lease.data(), lease.data() + lease.size());
  }
}

// Writes all of payload, then shuts the write side down (the receiver then sees eof).
tern::task<void> write_then_shutdown(tcp_socket& c, const std::vector<char>& payload) {
  auto w = co_await c.write_all(tern::const_buffer(payload));
  EXPECT_OK(w.ec);
  EXPECT_OK(c.shutdown());
}

// payload sent from c (its writing then shut down) while s receives to eof: true if every byte arrived, in order.
tern::task<bool> arrives_whole(tern::io_context& ctx, tcp_socket& c, tcp_socket& s, const std::vector<char>& payload) {
  auto writer = tern::spawn(ctx, write_then_shutdown(c, payload));
  std::vector<char> got;
  EXPECT_EQ(co_await receive_all(s, got), tern::net::error::eof);
  co_await std::move(writer);
  co_return got == payload;
}

TEST_P(receive_test, a_stream_arrives_whole_and_in_order_then_eof) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    const auto payload = make_pattern(4u << 20, 7);
    std::vector<char> got;
    auto reader = tern::spawn(ctx, receive_all(server, got));
    // Writes of uneven sizes, so buffers fill partly and the stream's boundaries fall anywhere.
    std::size_t at = 0;
    for (std::size_t step = 1; at < payload.size(); step = step * 7 % 65521 + 1) {
      const std::size_t n = std::min(step, payload.size() - at);
      auto [wec, wn] = co_await client.write_all(tern::const_buffer(payload.data() + at, n));
      CO_ASSERT_OK(wec);
      at += wn;
    }
    EXPECT_OK(client.shutdown());
    std::error_code end = co_await std::move(reader);
    EXPECT_EQ(end, tern::net::error::eof);
    EXPECT_EQ(got.size(), payload.size());
    EXPECT_TRUE(got == payload) << "bytes lost, duplicated or reordered";
    // eof stays eof.
    auto [again, lease] = co_await server.receive();
    EXPECT_EQ(again, tern::net::error::eof);
    EXPECT_FALSE(lease);
  }(ctx), 60s);
  auto s = ctx.metrics();
  EXPECT_GT(s.ops[static_cast<std::size_t>(tern::detail::op_code::receive)].started, 0u);
}

// Bytes that arrive while nobody is receiving are kept for the next receive (io_uring: queued by the multishot).
TEST_P(receive_test, bytes_sent_before_the_receive_are_kept_for_it) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    std::vector<char> got;
    // A first receive arms the socket; then three writes land while the server does something else.
    auto w0 = co_await client.write_all(tern::const_buffer("a", 1));
    CO_ASSERT_OK(w0.ec);
    {
      auto [ec, lease] = co_await server.receive();
      CO_ASSERT_OK(ec);
      got.insert(got.end(), lease.data(), lease.data() + lease.size());
    }
    for (const char* part : {"bc", "def", "ghij"}) {
      auto w = co_await client.write_all(tern::const_buffer(part, std::char_traits<char>::length(part)));
      CO_ASSERT_OK(w.ec);
      co_await tern::sleep_for(ctx, 2ms);
    }
    EXPECT_OK(client.shutdown());
    std::error_code end = co_await receive_all(server, got);
    EXPECT_EQ(end, tern::net::error::eof);
    EXPECT_EQ(std::string(got.begin(), got.end()), "abcdefghij");
  }(ctx));
}

// A receive cancelled (by a timeout, or by cancel()) while nothing has arrived reports the cancellation and loses
// nothing: what arrives afterwards goes to the next receive, in order.
TEST_P(receive_test, a_cancelled_receive_loses_nothing) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    std::vector<char> got;
    const auto payload = make_pattern(256u << 10, 3);
    std::size_t sent = 0;
    for (int round = 0; round < 8; ++round) {
      auto [ec, lease] = co_await tern::with_timeout(server.receive(), 5ms);
      if (round == 0) {
        EXPECT_EQ(ec, tern::error::timed_out) << "nothing was sent yet";
      }
      if (!ec) got.insert(got.end(), lease.data(), lease.data() + lease.size());
      const std::size_t n = payload.size() / 8;
      auto w = co_await client.write_all(tern::const_buffer(payload.data() + sent, n));
      CO_ASSERT_OK(w.ec);
      sent += n;
      // cancel() on the socket, too, with a receive pending and the stream mid-way.
      auto pending = tern::spawn(ctx, [](tcp_socket& s) -> tern::task<tern::io_result<tern::leased_buffer>> {
        co_return co_await s.receive();
      }(server));
      server.cancel();
      auto [pec, plea] = co_await std::move(pending);
      if (!pec) {
        got.insert(got.end(), plea.data(), plea.data() + plea.size());
      } else {
        EXPECT_EQ(pec, tern::error::operation_canceled);
      }
    }
    EXPECT_OK(client.shutdown());
    std::error_code end = co_await receive_all(server, got);
    EXPECT_EQ(end, tern::net::error::eof);
    EXPECT_EQ(got.size(), payload.size());
    EXPECT_TRUE(got == payload) << "a cancelled receive lost or reordered bytes";
  }(ctx), 60s);
}

TEST_P(receive_test, a_peer_reset_ends_the_stream_with_connection_reset) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    auto pending = tern::spawn(ctx, [](tcp_socket& s) -> tern::task<std::error_code> {
      std::vector<char> got;
      co_return co_await receive_all(s, got);
    }(server));
    co_await tern::sleep_for(ctx, 5ms);  // the receive is waiting
    linger lg{1, 0};
    CO_ASSERT(::setsockopt(client.native_handle(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
    client.close();  // RST
    std::error_code ec = co_await std::move(pending);
    EXPECT_EQ(ec, std::errc::connection_reset) << ec.message();
    // The loop goes on: a new connection works.
    auto [c2, s2] = co_await connected_pair(ctx);
    auto w = co_await c2.write_all(tern::const_buffer("ok", 2));
    CO_ASSERT_OK(w.ec);
    auto [rec, lease] = co_await s2.receive();
    CO_ASSERT_OK(rec);
    EXPECT_EQ(lease.view(), "ok");
  }(ctx));
}

TEST_P(receive_test, closing_a_socket_cancels_its_receive) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    auto pending = tern::spawn(ctx, [](tcp_socket& s) -> tern::task<std::error_code> {
      auto [ec, lease] = co_await s.receive();
      co_return ec;
    }(server));
    co_await tern::sleep_for(ctx, 2ms);
    server.close();
    EXPECT_EQ(co_await std::move(pending), tern::error::operation_canceled);
  }(ctx));
}

// A socket closed while its multishot receive is armed (io_uring) stays the loop's work until the cancellation's
// last completion, and a loop destroyed before that frees it (the sanitizer build's leak check would see it).
TEST_P(receive_test, a_receiving_socket_closed_before_the_loop_ends_is_freed) {
  for (bool run_after_close : {true, false}) {
    tern::io_context local(options());
    tcp_socket* kept = nullptr;
    local.block_on([](tern::io_context& ctx, tcp_socket*& kept) -> tern::task<void> {
      auto [client, server] = co_await connected_pair(ctx);
      auto w = co_await client.write_all(tern::const_buffer("z", 1));
      CO_ASSERT_OK(w.ec);
      auto [ec, lease] = co_await server.receive();  // the multishot stays armed after this
      CO_ASSERT_OK(ec);
      EXPECT_EQ(lease.view(), "z");
      kept = new tcp_socket(std::move(server));
    }(local, kept));
    kept->close();
    delete kept;
    if (run_after_close) {
      local.run();  // returns once the cancelled receive's last completion is in
      EXPECT_EQ(local.metrics().ops[static_cast<std::size_t>(tern::detail::op_code::recv_multishot)].started,
                local.metrics().ops[static_cast<std::size_t>(tern::detail::op_code::recv_multishot)].completed)
          << "the armed receive's end was not reaped";
    }
  }
}

TEST_P(receive_test, plain_reads_are_refused_after_receive) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    auto w = co_await client.write_all(tern::const_buffer("xyz", 3));
    CO_ASSERT_OK(w.ec);
    auto [ec, lease] = co_await server.receive();
    CO_ASSERT_OK(ec);
    char buf[8];
    auto [rec, rn] = co_await server.read_some(tern::mutable_buffer(buf, sizeof buf));
    EXPECT_EQ(rec, std::errc::operation_in_progress);
    EXPECT_EQ(rn, 0u);
  }(ctx));
}

// A lease may be given back from another thread while the loop runs; the pool takes it back on the loop.
TEST_P(receive_test, a_lease_released_on_another_thread_returns_to_the_pool) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    for (int i = 0; i < 200; ++i) {
      auto w = co_await client.write_all(tern::const_buffer("m", 1));
      CO_ASSERT_OK(w.ec);
      auto [ec, lease] = co_await server.receive();
      CO_ASSERT_OK(ec);
      EXPECT_EQ(lease.view(), "m");
      std::thread t([l = std::move(lease)]() mutable { l.reset(); });
      t.join();
    }
    co_await tern::sleep_for(ctx, 1ms);  // the hand-overs run
  }(ctx));
  // 200 leases taken and given back elsewhere: no overflow, so they all came back.
  EXPECT_EQ(ctx.metrics().receive_overflows, 0u);
}

// Every buffer of a small pool held by the reader: the pool grows to its maximum, then receives fall back to
// overflow buffers, and every byte still arrives in order.
TEST_P(small_pool_test, a_pool_that_runs_dry_loses_nothing) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    const auto payload = make_pattern(256u << 10, 11);
    auto writer = tern::spawn(ctx, write_then_shutdown(client, payload));
    std::vector<tern::leased_buffer> held;  // never given back until the end
    std::vector<char> got;
    for (;;) {
      auto [ec, lease] = co_await server.receive();
      if (ec) {
        EXPECT_EQ(ec, tern::net::error::eof);
        break;
      }
      EXPECT_LE(lease.size(), 1024u);
      got.insert(got.end(), lease.data(), lease.data() + lease.size());
      held.push_back(std::move(lease));
    }
    co_await std::move(writer);
    EXPECT_EQ(got.size(), payload.size());
    EXPECT_TRUE(got == payload) << "a dry pool lost or reordered bytes";
    EXPECT_GT(held.size(), 8u);
  }(ctx), 60s);
  auto s = ctx.metrics();
  EXPECT_GT(s.receive_pool_dry, 0u) << "the pool never ran dry";
  EXPECT_GT(s.receive_overflows, 0u) << "no receive used an overflow buffer";
}

// Every lease of a 1 MiB stream held, through a pool of 1 KiB buffers allowed to grow to 2048: under io_uring the
// kernel's ring starts with 256 entries and must be moved to larger ones (at least twice) as the pool grows past
// it; not a byte is lost or reordered across the moves. Then, with every buffer given back, a second stream read
// and released as it comes needs no overflow buffer: the pool's grown buffers are all in the ring.
TEST_P(receive_test, a_pool_grown_past_its_ring_loses_nothing) {
  tern::io_context_options o = options_for(GetParam());
  o.receive_buffer_size = 1024;
  o.receive_buffers = 4;
  o.receive_buffers_max = 2048;
  tern::io_context ctx{o};
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    const auto first = make_pattern(1u << 20, 21);
    auto writer = tern::spawn(ctx, [](tcp_socket& c, const std::vector<char>& p) -> tern::task<void> {
      auto w = co_await c.write_all(tern::const_buffer(p));
      EXPECT_OK(w.ec);
    }(client, first));
    std::vector<tern::leased_buffer> held;
    std::vector<char> got;
    while (got.size() < first.size()) {
      auto [ec, lease] = co_await server.receive();
      CO_ASSERT_OK(ec);
      got.insert(got.end(), lease.data(), lease.data() + lease.size());
      held.push_back(std::move(lease));
    }
    co_await std::move(writer);
    EXPECT_TRUE(got == first) << "bytes lost, duplicated or reordered while the pool grew";
    EXPECT_GE(held.size(), 1024u);
    held.clear();
    const auto overflows = ctx.metrics().receive_overflows;
    const auto second = make_pattern(1u << 20, 22);
    EXPECT_TRUE(co_await arrives_whole(ctx, client, server, second))
        << "bytes lost, duplicated or reordered after the pool grew";
    EXPECT_EQ(ctx.metrics().receive_overflows, overflows) << "a buffer of the grown pool was not in the ring";
  }(ctx), 60s);
  const auto moves = ctx.metrics().receive_ring_moves;
  if (GetParam() == tern::backend_kind::io_uring && kernel_at_least(6, 8)) {
    EXPECT_GE(moves, 2u) << "the ring was not moved as the pool grew past 256, 512 and 1024 buffers";
  } else {
    EXPECT_EQ(moves, 0u);  // epoll has no ring; older kernels get a ring for every buffer at once
  }
}

// The pool's side of a move, with the test playing the kernel on rings in plain memory: buffers still in the old
// ring keep their order from the kernel's head on, those that waited on the stack follow, and the order links
// that bundled completions follow describe the new ring.
TEST(receive_pool, a_moved_ring_keeps_its_order_and_takes_the_buffers_that_waited) {
  tern::io_context ctx{options_for(tern::backend_kind::epoll)};  // a loop whose backend registers no ring
  tern::detail::receive_pool pool(ctx, 1024, 4, 64);               // chunks of 4 buffers, at most 64
  std::vector<io_uring_buf> small(8), large(16);
  pool.feed_kernel_ring(small.data(), 8, 0);                      // buffers 0..3, in that order
  auto* old_ring = reinterpret_cast<io_uring_buf_ring*>(small.data());
  EXPECT_EQ(old_ring->tail, 4u);
  pool.kernel_took(1);  // the kernel takes buffer 0: its head is 1
  ASSERT_TRUE(pool.grow());  // buffers 4..7 fit: the ring holds 1..7
  EXPECT_EQ(pool.in_ring(), 7u);
  EXPECT_FALSE(pool.ring_too_small());
  ASSERT_TRUE(pool.grow());  // buffers 8..11 do not: they wait on the stack
  EXPECT_TRUE(pool.ring_too_small());
  EXPECT_EQ(pool.in_ring(), 7u);
  EXPECT_FALSE(pool.grow()) << "the pool grew while its buffers could not reach the kernel";
  pool.recycle(0);  // given back while the ring is full of waiting: it waits too
  EXPECT_EQ(pool.in_ring(), 7u);
  EXPECT_FALSE(pool.ring_matches(0));
  ASSERT_TRUE(pool.ring_matches(1));
  // A page of entries would be 256; a pool of at most 64 buffers never needs more than 64.
  EXPECT_EQ(pool.ring_entries_wanted(), 64u);

  pool.move_kernel_ring(large.data(), 16, 1);
  EXPECT_FALSE(pool.ring_too_small());
  EXPECT_EQ(pool.in_ring(), 12u);
  auto* ring = reinterpret_cast<io_uring_buf_ring*>(large.data());
  EXPECT_EQ(ring->tail, 12u);
  const std::vector<std::uint16_t> want{1, 2, 3, 4, 5, 6, 7, 0, 11, 10, 9, 8};
  std::vector<std::uint16_t> ids;
  for (std::size_t i = 0; i < 12; ++i) {
    ids.push_back(large[i].bid);
    EXPECT_EQ(large[i].len, 1024u);
    EXPECT_EQ(reinterpret_cast<char*>(large[i].addr), pool.address(large[i].bid));
  }
  EXPECT_EQ(ids, want) << "the old ring's buffers first, from its head, then those that waited";
  std::uint32_t id = 1;
  for (std::size_t i = 1; i < want.size(); ++i) {
    id = pool.ring_next(id);
    EXPECT_EQ(id, want[i]) << "order link " << i;
  }
  EXPECT_EQ(pool.ring_next(8), tern::detail::receive_pool::none);

  // Room again: the next chunk goes straight into the ring.
  ASSERT_TRUE(pool.grow());
  EXPECT_EQ(pool.in_ring(), 16u);
  EXPECT_EQ(large[12].bid, 12u);

  // Without a ring the buffers are lent from the stack, in the ring's order (the kernel took the first two).
  pool.kernel_took(2);
  pool.leave_kernel_ring(2);
  EXPECT_EQ(pool.kernel_ring(), nullptr);
  for (std::uint32_t want_id : {3u, 4u, 5u, 6u, 7u, 0u, 11u, 10u, 9u, 8u, 12u, 13u, 14u, 15u}) {
    EXPECT_EQ(pool.take(), want_id);
  }
}

// One socket's reader holds a lease across a long await (and most of the pool with it) while another socket
// streams through the rest of the pool; then a socket closed with bytes queued gives its buffers back.
TEST_P(small_pool_test, a_held_lease_does_not_stall_other_sockets) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [c1, s1] = co_await connected_pair(ctx);
    auto [c2, s2] = co_await connected_pair(ctx);
    auto w1 = co_await c1.write_all(tern::const_buffer("held", 4));
    CO_ASSERT_OK(w1.ec);
    auto [ec1, held] = co_await s1.receive();
    CO_ASSERT_OK(ec1);
    EXPECT_EQ(held.view(), "held");
    const auto payload = make_pattern(64u << 10, 5);
    EXPECT_TRUE(co_await arrives_whole(ctx, c2, s2, payload));
    EXPECT_EQ(held.view(), "held") << "the held lease was overwritten";
    held.reset();
  }(ctx), 60s);
  const auto overflows_before = ctx.metrics().receive_overflows;
  // Bytes queued on a socket that is then closed: its buffers go back (no overflow needed afterwards).
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    for (int round = 0; round < 20; ++round) {
      auto [c, s] = co_await connected_pair(ctx);
      std::vector<char> chunk(3000, 'q');
      auto w = co_await c.write_all(tern::const_buffer(chunk));
      CO_ASSERT_OK(w.ec);
      auto [ec, lease] = co_await s.receive();
      CO_ASSERT_OK(ec);
      lease.reset();
      co_await tern::sleep_for(ctx, 1ms);  // the rest is queued (io_uring) or left in the socket (epoll)
      s.close();
    }
  }(ctx), 60s);
  EXPECT_EQ(ctx.metrics().receive_overflows, overflows_before) << "closed sockets kept their queued buffers";
}

// A burst that waits in the socket while the reader sleeps: under io_uring with bundles, one completion fills
// several buffers, and receive() still hands them out one at a time, in order; turned off (or under epoll), no
// completion fills more than one. Either way every byte arrives in order and no lease is larger than a buffer.
class bundle_test : public ::testing::TestWithParam<std::tuple<tern::backend_kind, bool>> {
 protected:
  static tern::io_context_options with(tern::backend_kind kind, bool bundles) {
    tern::io_context_options o = options_for(kind);
    o.receive_buffer_size = 4096;
    o.receive_bundles = bundles;
    return o;
  }
  tern::backend_kind kind() const { return std::get<0>(GetParam()); }
  bool bundles() const { return std::get<1>(GetParam()); }
  tern::io_context ctx{with(kind(), bundles())};
};
INSTANTIATE_TEST_SUITE_P(backends, bundle_test,
                         ::testing::Combine(::testing::Values(tern::backend_kind::io_uring, tern::backend_kind::epoll),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(tern::to_string(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_bundles" : "_single");
                         });

TEST_P(bundle_test, a_burst_fills_several_buffers_per_completion_and_arrives_in_order) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    // The first receive arms the multishot; then bursts land while the reader sleeps.
    auto w0 = co_await client.write_all(tern::const_buffer("x", 1));
    CO_ASSERT_OK(w0.ec);
    auto [ec0, first] = co_await server.receive();
    CO_ASSERT_OK(ec0);
    EXPECT_EQ(first.view(), "x");
    first.reset();
    const auto payload = make_pattern(2u << 20, 3);
    std::vector<char> got;
    for (std::size_t at = 0; at < payload.size();) {
      const std::size_t n = std::min<std::size_t>(256u << 10, payload.size() - at);
      auto w = co_await client.write_all(tern::const_buffer(payload.data() + at, n));
      CO_ASSERT_OK(w.ec);
      at += n;
      co_await tern::sleep_for(ctx, 2ms);  // the burst waits in the socket, or in completions not yet reaped
      // Read about what was written, so the socket never fills and stalls the writer.
      while (got.size() + 64 * 1024 < at) {
        auto [ec, lease] = co_await server.receive();
        CO_ASSERT_OK(ec);
        EXPECT_LE(lease.size(), 4096u);
        got.insert(got.end(), lease.data(), lease.data() + lease.size());
      }
    }
    EXPECT_OK(client.shutdown());
    EXPECT_EQ(co_await receive_all(server, got), tern::net::error::eof);
    EXPECT_EQ(got.size(), payload.size());
    EXPECT_TRUE(got == payload) << "bytes lost, duplicated or reordered";
  }(ctx), 60s);
  const auto bundled = ctx.metrics().receive_bundles;
  if (kind() == tern::backend_kind::io_uring && bundles() && kernel_at_least(6, 10)) {
    EXPECT_GT(bundled, 0u) << "no completion filled more than one buffer";
  } else {
    EXPECT_EQ(bundled, 0u);
  }
}

// Four streams at once through a pool of eight 1 KiB buffers: bundles of different sockets interleave in the
// ring, the pool runs dry again and again, and each stream still arrives whole and in order.
TEST_P(bundle_test, interleaved_streams_through_a_dry_pool_arrive_whole) {
  tern::io_context_options o = with(kind(), bundles());
  o.receive_buffer_size = 1024;
  o.receive_buffers = 4;
  o.receive_buffers_max = 8;
  tern::io_context small(o);
  run_bounded(small, [](tern::io_context& ctx) -> tern::task<void> {
    constexpr int streams = 4;
    std::vector<tcp_socket> clients, servers;
    for (int i = 0; i < streams; ++i) {
      auto [c, s] = co_await connected_pair(ctx);
      clients.push_back(std::move(c));
      servers.push_back(std::move(s));
    }
    std::vector<std::vector<char>> payloads, got(streams);
    std::vector<tern::join_handle<void>> writers;
    std::vector<tern::join_handle<std::error_code>> readers;
    for (int i = 0; i < streams; ++i) payloads.push_back(make_pattern(192u << 10, 100 + i));
    for (int i = 0; i < streams; ++i) {
      writers.push_back(tern::spawn(ctx, write_then_shutdown(clients[i], payloads[i])));
      readers.push_back(tern::spawn(ctx, receive_all(servers[i], got[i])));
    }
    for (auto& w : writers) co_await std::move(w);
    for (auto& r : readers) EXPECT_EQ(co_await std::move(r), tern::net::error::eof);
    for (int i = 0; i < streams; ++i) {
      EXPECT_EQ(got[i].size(), payloads[i].size()) << "stream " << i;
      EXPECT_TRUE(got[i] == payloads[i]) << "stream " << i << " lost, duplicated or reordered bytes";
    }
  }(small), 60s);
  // Under io_uring the kernel fills the ring ahead of the readers, so it runs dry; epoll takes a buffer per read
  // and each reader gives it back at once, which four of eight serve.
  if (kind() == tern::backend_kind::io_uring) {
    EXPECT_GT(small.metrics().receive_pool_dry, 0u);
  }
}


// A socket whose reader has stopped while its peer goes on sending: under io_uring its multishot receive queues
// what arrives only up to receive_queue buffers (and what one entry into the kernel took), then stops, and the
// rest waits in the kernel, the peer's window closing; the pool keeps buffers for the other sockets, one of which
// receives meanwhile without an overflow buffer. Before the bound, that one socket filled the ring as far as its
// peer could send (512 of 576 free buffers here). Then the stalled stream is read: every byte, in order. epoll
// reads only for a receive that waits, and queues nothing.
tern::io_context_options bounded_queue(tern::backend_kind kind) {
  tern::io_context_options o = pool_of(kind, 4096, 64, 4096);
  o.receive_queue = 8;
  return o;
}
class receive_queue_test : public pool_fixture<bounded_queue> {};
TERN_INSTANTIATE_BACKENDS(receive_queue_test);

TEST_P(receive_queue_test, a_reader_that_stops_holds_a_bounded_share_of_the_pool) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [c1, s1] = co_await connected_pair(ctx);
    auto [c2, s2] = co_await connected_pair(ctx);
    auto [c3, s3] = co_await connected_pair(ctx);
    tern::detail::receive_pool& pool = ctx.receive_pool();
    // The pool grown first, by a reader that holds every buffer it receives, then lets them all go: its ring then
    // has hundreds of free buffers, which a socket without a bound would fill as far as its peer can send.
    {
      const auto burst = make_pattern(2u << 20, 5);
      auto burst_writer = tern::spawn(ctx, write_then_shutdown(c2, burst));
      std::vector<tern::leased_buffer> held;
      std::size_t got = 0;
      while (got < burst.size()) {
        auto [ec, lease] = co_await s2.receive();
        CO_ASSERT_OK(ec);
        got += lease.size();
        held.push_back(std::move(lease));
      }
      co_await std::move(burst_writer);
    }
    const std::uint32_t free_before = pool.in_ring();
    // The stalled reader's stream: its first byte read (the multishot armed), then nothing until the peer stalls.
    const auto payload = make_pattern(48u << 20, 3);
    CO_ASSERT_OK((co_await c1.write_all(tern::const_buffer(payload.data(), 1))).ec);
    {
      auto [ec, lease] = co_await s1.receive();
      CO_ASSERT_OK(ec);
      EXPECT_EQ(lease.size(), 1u);
    }
    std::size_t sent = 1;
    bool writing = true;
    auto writer = tern::spawn(ctx, [](tcp_socket& c, const std::vector<char>& p, std::size_t& sent,
                                      bool& writing) -> tern::task<void> {
      while (sent < p.size()) {
        const std::size_t n = std::min<std::size_t>(256u << 10, p.size() - sent);
        auto [ec, w] = co_await c.write_all(tern::const_buffer(p.data() + sent, n));
        sent += w;
        if (ec) break;
      }
      writing = false;
    }(c1, payload, sent, writing));
    // Until the peer has stalled (nothing more sent for 300 ms) or sent it all.
    for (std::size_t last = 0, still = 0; writing && still < 30; co_await tern::sleep_for(ctx, 10ms)) {
      still = sent == last ? still + 1 : 0;
      last = sent;
    }
    EXPECT_LT(sent, payload.size()) << "the peer was never held back";
    if (GetParam() == tern::backend_kind::io_uring) {
      EXPECT_GT(free_before, 256u) << "the pool did not grow";
      // Its bound, and what the kernel took in the turn before the multishot stopped.
      EXPECT_LE(free_before - pool.in_ring(), 64u) << "the stalled socket took " << free_before - pool.in_ring()
                                                      << " of " << free_before << " free buffers";
    }
    // Another socket receives from the pool meanwhile.
    const auto overflows = ctx.metrics().receive_overflows;
    const auto other = make_pattern(256u << 10, 9);
    EXPECT_TRUE(co_await arrives_whole(ctx, c3, s3, other));
    EXPECT_EQ(ctx.metrics().receive_overflows, overflows) << "the other socket received into overflow buffers";
    // The stalled stream, read now: whole and in order.
    std::vector<char> got(payload.begin(), payload.begin() + 1);
    while (got.size() < payload.size()) {
      auto [ec, lease] = co_await s1.receive();
      CO_ASSERT_OK(ec);
      got.insert(got.end(), lease.data(), lease.data() + lease.size());
    }
    co_await std::move(writer);
    EXPECT_EQ(sent, payload.size());
    EXPECT_TRUE(got == payload) << "bytes lost, duplicated or reordered";
  }(ctx), 120s);
}

}  // namespace
