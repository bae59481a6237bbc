// Acceptors under load, on both backends: connections that pile up before anyone accepts (taken in the order
// they were made, past the bound of io_uring's multishot queue), several accepts waiting at once, cancelled
// accepts that lose nothing, a listener closed with connections queued (closed, none leaked), a full fd table
// while no accept waits, and one ACCEPT per call when the multishot accept is turned off (accept_queue = 0).
#include "net_support.hpp"

#include <algorithm>
#include <array>
#include <stop_token>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using namespace tern_test;
using namespace std::chrono_literals;
using tern::net::endpoint;
using tern::net::tcp_acceptor;
using tern::net::tcp_socket;

class accept_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(accept_test);

std::uint64_t started(tern::io_context& ctx, tern::detail::op_code code) {
  return ctx.metrics().ops[static_cast<std::size_t>(code)].started;
}
std::uint64_t completed(tern::io_context& ctx, tern::detail::op_code code) {
  return ctx.metrics().ops[static_cast<std::size_t>(code)].completed;
}

// Connects n clients to ep, in turn; each sends its number (first + i) as 4 bytes once connected.
tern::task<std::vector<tcp_socket>> connect_numbered(tern::io_context& ctx, endpoint ep, int n, std::uint32_t first) {
  std::vector<tcp_socket> clients;
  for (int i = 0; i < n; ++i) {
    tcp_socket c(ctx);
    std::error_code ec = co_await c.connect(ep);
    EXPECT_OK(ec);
    const std::uint32_t number = first + static_cast<std::uint32_t>(i);
    auto [wec, wn] = co_await c.write_all(tern::const_buffer(&number, sizeof number));
    EXPECT_OK(wec);
    clients.push_back(std::move(c));
  }
  co_return clients;
}

// Accepts one connection and reads the number its client sent; ~0u on any failure.
tern::task<std::uint32_t> accept_number(tcp_acceptor& acceptor) {
  auto [ec, s] = co_await tern::with_timeout(acceptor.accept(), 10s);
  EXPECT_OK(ec);
  if (ec) co_return ~0u;
  std::uint32_t number = 0;
  auto [rec, rn] = co_await s.read_exact(tern::mutable_buffer(&number, sizeof number));
  EXPECT_OK(rec);
  co_return rec ? ~0u : number;
}

tern::io_context_options with_accept_queue(tern::backend_kind kind, unsigned n) {
  tern::io_context_options o = options_for(kind);
  o.accept_queue = n;
  return o;
}

// 40 connections made before the first accept, with a queue bound of 4: under io_uring the multishot accept takes
// them all at once, stops at the bound, and the accepts take them from its queue; they come out in the order they
// were made. A second wave then needs the multishot re-armed.
TEST_P(accept_test, connections_made_before_any_accept_are_taken_in_order_past_the_queue_bound) {
  tern::io_context small(with_accept_queue(GetParam(), 4));
  run_bounded(small, [](tern::io_context& ctx) -> tern::task<void> {
    tcp_acceptor acceptor(ctx);
    const endpoint ep = listen_loopback(acceptor);
    constexpr int n = 40;
    for (std::uint32_t wave = 0; wave < 2; ++wave) {
      std::vector<tcp_socket> clients = co_await connect_numbered(ctx, ep, n, wave * n);
      for (int i = 0; i < n; ++i) {
        const std::uint32_t got = co_await accept_number(acceptor);
        EXPECT_EQ(got, wave * n + static_cast<std::uint32_t>(i)) << "accepted in the order of the connects";
      }
    }
    if (ctx.backend() == tern::backend_kind::io_uring) {
      EXPECT_GE(started(ctx, tern::detail::op_code::accept_multishot), 2u)
          << "the bound stopped the multishot, and the second wave armed it again";
    } else {
      EXPECT_EQ(started(ctx, tern::detail::op_code::accept_multishot), 0u);
    }
  }(small));
  EXPECT_EQ(started(small, tern::detail::op_code::accept_multishot),
            completed(small, tern::detail::op_code::accept_multishot))
      << "the listener's close ended its multishot";
}

// Three accepts wait at once; three clients connect: each accept gets one connection, none is lost or given twice.
TEST_P(accept_test, several_waiting_accepts_each_get_one_connection) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tcp_acceptor acceptor(ctx);
    const endpoint ep = listen_loopback(acceptor);
    auto a = tern::spawn(ctx, accept_number(acceptor));
    auto b = tern::spawn(ctx, accept_number(acceptor));
    auto c = tern::spawn(ctx, accept_number(acceptor));
    co_await tern::yield();  // all three wait before the first connection arrives
    std::vector<tcp_socket> clients = co_await connect_numbered(ctx, ep, 3, 100);
    std::array<std::uint32_t, 3> got{co_await std::move(a), co_await std::move(b), co_await std::move(c)};
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, (std::array<std::uint32_t, 3>{100, 101, 102}));
  }(ctx));
}

// An accept that times out takes nothing with it: a connection made after it (while no accept waits) goes to the
// next accept, and so does one made while a second accept is being cancelled by a stop.
TEST_P(accept_test, a_cancelled_accept_loses_no_connection) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tcp_acceptor acceptor(ctx);
    const endpoint ep = listen_loopback(acceptor);
    auto [tec, none] = co_await tern::with_timeout(acceptor.accept(), 20ms);
    EXPECT_EC(tec, tern::error::timed_out);
    EXPECT_FALSE(none.is_open());
    std::vector<tcp_socket> first = co_await connect_numbered(ctx, ep, 1, 7);
    co_await tern::sleep_for(20ms);  // under io_uring the multishot accept has queued it by now
    EXPECT_EQ(co_await accept_number(acceptor), 7u);

    std::stop_source stop;
    auto waiting = tern::spawn(ctx, [](tcp_acceptor& a, std::stop_token token) -> tern::task<bool> {
      auto [ec, s] = co_await tern::with_stop(a.accept(), token);
      EXPECT_EC(ec, tern::error::operation_canceled);
      co_return s.is_open();
    }(acceptor, stop.get_token()));
    co_await tern::yield();
    stop.request_stop();
    std::vector<tcp_socket> second = co_await connect_numbered(ctx, ep, 1, 8);
    EXPECT_FALSE(co_await std::move(waiting)) << "the stopped accept took no connection";
    EXPECT_EQ(co_await accept_number(acceptor), 8u);
  }(ctx));
}

// Connections queued (by io_uring's multishot accept, or in the kernel's backlog under epoll) when the listener is
// closed are closed with it: each client sees its connection end, and no descriptor is left open.
TEST_P(accept_test, closing_a_listener_closes_the_connections_it_queued) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    const int before = open_fd_count();
    {
      tcp_acceptor acceptor(ctx);
      const endpoint ep = listen_loopback(acceptor);
      std::vector<tcp_socket> clients = co_await connect_numbered(ctx, ep, 5, 0);
      EXPECT_EQ(co_await accept_number(acceptor), 0u);
      co_await tern::sleep_for(20ms);  // the other four are queued
      acceptor.close();
      for (std::size_t i = 1; i < clients.size(); ++i) {
        char byte;
        auto [rec, rn] = co_await tern::with_timeout(clients[i].read_some(tern::mutable_buffer(&byte, 1)), 10s);
        EXPECT_TRUE(rec == tern::net::error::eof || rec == std::errc::connection_reset)
            << "client " << i << ": " << rec.message();
        EXPECT_EQ(rn, 0u);
      }
    }
    co_await tern::sleep_for(10ms);  // a multishot's last completion after the close
    EXPECT_EQ(open_fd_count(), before) << "every queued connection was closed";
  }(ctx));
}

// A connection arrives while the fd table is full and no accept waits (under io_uring the armed multishot accept
// fails with EMFILE and ends); once fds are free again, the next accept takes that connection. (An accept that
// waits with the table full fails at once on both backends: the kernel takes the new fd before it looks for a
// connection. That case is tcp_test's accept_at_fd_limit_gives_emfile_then_recovers.)
TEST_P(accept_test, an_idle_listener_survives_a_full_fd_table) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tcp_acceptor acceptor(ctx);
    const endpoint ep = listen_loopback(acceptor);
    std::vector<tcp_socket> first = co_await connect_numbered(ctx, ep, 1, 1);
    EXPECT_EQ(co_await accept_number(acceptor), 1u);  // under io_uring the multishot stays armed from here on

    tcp_socket client(ctx);
    CO_ASSERT_OK(client.open(AF_INET));  // its fd exists before the table is filled
    const std::uint64_t ended = completed(ctx, tern::detail::op_code::accept_multishot);
    fd_table_filler filler(false);  // the armed multishot has the process's limit: fill up to it
    CO_ASSERT(filler.full());
    std::error_code cec = co_await client.connect(ep);
    if (ctx.backend() == tern::backend_kind::io_uring) {
      for (int i = 0; i < 500 && completed(ctx, tern::detail::op_code::accept_multishot) == ended; ++i) {
        co_await tern::sleep_for(10ms);
      }
    } else {
      co_await tern::sleep_for(20ms);
    }
    const std::uint64_t ended_after = completed(ctx, tern::detail::op_code::accept_multishot);
    filler.release();  // before comparing error codes (see fd_table_filler)
    CO_ASSERT_OK(cec);
    if (ctx.backend() == tern::backend_kind::io_uring) {
      EXPECT_EQ(ended_after, ended + 1) << "EMFILE ended the multishot accept";
    }
    const std::uint32_t number = 2;
    auto [wec, wn] = co_await client.write_all(tern::const_buffer(&number, sizeof number));
    CO_ASSERT_OK(wec);
    EXPECT_EQ(co_await accept_number(acceptor), 2u);
  }(ctx));
}

// accept_queue = 0: every accept is one ACCEPT of its own; nothing is accepted ahead.
TEST_P(accept_test, a_zero_accept_queue_takes_one_accept_per_call) {
  tern::io_context plain(with_accept_queue(GetParam(), 0));
  run_bounded(plain, [](tern::io_context& ctx) -> tern::task<void> {
    tcp_acceptor acceptor(ctx);
    const endpoint ep = listen_loopback(acceptor);
    std::vector<tcp_socket> clients = co_await connect_numbered(ctx, ep, 3, 0);
    for (std::uint32_t i = 0; i < 3; ++i) EXPECT_EQ(co_await accept_number(acceptor), i);
    EXPECT_EQ(started(ctx, tern::detail::op_code::accept_multishot), 0u);
    EXPECT_EQ(started(ctx, tern::detail::op_code::accept), 3u);
  }(plain));
}

}  // namespace
