// A read that follows a read which left the socket empty. Under epoll such a read waits for the socket's next input
// edge without trying a recv that could only fail (descriptor::recv_drained): a TCP read that got fewer bytes
// than it asked for has emptied the queue. Everything else must still be read without waiting for more input:
// bytes left behind by a read that filled its buffer, and bytes behind a Unix stream read that stopped early
// (the kernel ends a Unix read where passed descriptors begin).
#include "net_support.hpp"

#include <sys/socket.h>

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace {

using namespace tern_test;
using namespace std::chrono_literals;

class drained_read_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(drained_read_test);

socket_pair connected(tern::io_context& ctx) {
  std::optional<socket_pair> p;
  run_bounded(ctx, [](tern::io_context& ctx, std::optional<socket_pair>& out) -> tern::task<void> {
    out.emplace(co_await connected_pair(ctx));
  }(ctx, p));
  if (!p) throw std::runtime_error("no connected pair");
  return std::move(*p);
}

template <class Socket>
tern::task<void> read_some_into(Socket& s, std::string& out, std::size_t room) {
  std::array<char, 256> buf{};
  auto [ec, n] = co_await s.read_some(tern::mutable_buffer(buf.data(), room));
  EXPECT_OK(ec);
  out.append(buf.data(), n);
}

TEST_P(drained_read_test, a_read_after_a_short_read_waits_for_the_next_bytes_without_trying_first) {
  socket_pair p = connected(ctx);
  ASSERT_EQ(::send(p.client.native_handle(), "0123456789", 10, 0), 10);
  std::string got;
  run_bounded(ctx, read_some_into(p.server, got, 100));
  ASSERT_EQ(got, "0123456789") << "a read with room for 100 bytes took the 10 there were";

  got.clear();
  tern::join_handle<void> h = tern::spawn(ctx, read_some_into(p.server, got, 100));
  const std::uint64_t before = ctx.metrics().syscalls;
  ctx.poll();  // runs the task, which starts the read
  const std::uint64_t calls = ctx.metrics().syscalls - before;
  ASSERT_FALSE(h.done()) << "nothing was sent since";
  if (GetParam() == tern::backend_kind::epoll) {
    EXPECT_EQ(calls, 0u) << "the read tried a recv on a socket that its last read had emptied";
  }

  ASSERT_EQ(::send(p.client.native_handle(), "abcde", 5, 0), 5);
  ASSERT_TRUE(poll_until_done(ctx, h)) << "the bytes sent after the read started were never read";
  EXPECT_EQ(got, "abcde");
}

// In both tests below the first read is waiting when the bytes arrive, so that the loop has taken the input edge
// they raised by the time the read returns: what is left in the queue after it will raise no other.

// The server's first read (with room for `room` bytes) is waiting while the client writes `data`, and closes if
// asked: the read's result.
std::string read_while_written(tern::io_context& ctx, socket_pair& p, std::size_t room, std::string_view data,
                               bool then_close) {
  std::string got;
  tern::join_handle<void> first = tern::spawn(ctx, read_some_into(p.server, got, room));
  run_bounded(ctx, [](tern::net::tcp_socket& c, std::string_view data, bool then_close) -> tern::task<void> {
    auto [ec, n] = co_await c.write_all(tern::const_buffer(data.data(), data.size()));
    EXPECT_OK(ec);
    EXPECT_EQ(n, data.size());
    if (then_close) c.close();
  }(p.client, data, then_close));
  EXPECT_TRUE(first.done());
  return got;
}

TEST_P(drained_read_test, bytes_left_by_a_read_that_filled_its_buffer_are_read_without_more_input) {
  socket_pair p = connected(ctx);
  std::string got = read_while_written(ctx, p, 4, "0123456789", false);
  ASSERT_EQ(got, "0123");
  // Nothing else is sent: the next read must find the six bytes still queued (a watchdog fails a hang).
  run_bounded(ctx, read_some_into(p.server, got, 100), 5000ms);
  EXPECT_EQ(got, "0123456789");
}

TEST_P(drained_read_test, a_short_read_that_took_the_last_bytes_before_the_end_is_followed_by_eof) {
  // The bytes and the peer's close reach the waiting read together: its retry takes the bytes (a short read),
  // and the edge that announced the end has been taken with them, so no other will come. The next read must try.
  socket_pair p = connected(ctx);
  ASSERT_EQ(read_while_written(ctx, p, 100, "0123456789", true), "0123456789");
  run_bounded(ctx, [](tern::net::tcp_socket& s) -> tern::task<void> {
    char c;
    auto [ec, n] = co_await s.read_some(tern::mutable_buffer(&c, 1));
    EXPECT_EC(ec, tern::net::error::eof);
    EXPECT_EQ(n, 0u);
  }(p.server), 5000ms);
}

TEST_P(drained_read_test, a_unix_read_cut_short_by_passed_descriptors_does_not_hide_the_rest) {
  auto [pec, pair] = tern::net::unix_stream_socket::pair(ctx);
  ASSERT_TRUE(ec_ok(pec));
  auto& [reader, writer] = pair;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::string got;
  tern::join_handle<void> first = tern::spawn(ctx, read_some_into(reader, got, 100));
  run_bounded(ctx, [](tern::net::unix_stream_socket& w, int fd) -> tern::task<void> {
    const int one[] = {fd};
    auto [ec, n] = co_await w.send_fds(tern::const_buffer("a", 1), one);
    EXPECT_OK(ec);
    EXPECT_EQ(n, 1u);
    auto [wec, m] = co_await w.write_all(tern::const_buffer("bcde", 4));
    EXPECT_OK(wec);
    EXPECT_EQ(m, 4u);
  }(writer, fds[0]));
  ::close(fds[0]);
  ::close(fds[1]);
  ASSERT_TRUE(first.done());
  // A plain read stops after the byte that carried the descriptor (and drops it): fewer bytes than it asked for,
  // with four more queued. The next read must still find them.
  EXPECT_EQ(got, "a");
  run_bounded(ctx, read_some_into(reader, got, 100), 5000ms);
  EXPECT_EQ(got, "abcde");
}

}  // namespace
