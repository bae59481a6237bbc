// Zero-copy sends (io_context_options::zero_copy_send_threshold), on both backends (epoll ignores the option, and
// every test must pass there as a plain-send run): large write_all transfers arrive intact, sends below the
// threshold stay plain, a Unix socket's refusal falls back to plain sends once, datagram sends stay plain, and a
// zero-copy send that is cancelled, closed under, or meets a reset peer ends like any other send. A send completes
// only once the kernel has let go of the buffer: every test that overwrites the buffer right after the completion
// checks that the reader never sees the new bytes in what was reported as sent.
#include "net_support.hpp"

#include <tern/metrics.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stop_token>
#include <vector>

// A named namespace, not an anonymous one: the test sources are compiled in unity batches (tests/CMakeLists.txt),
// where this file's helpers would meet accept_test.cpp's of the same names.
namespace zero_copy_tests {

using namespace tern_test;
using namespace std::chrono_literals;
using tern::detail::op_code;
using tern::net::tcp_socket;

class zero_copy_test : public backend_test {
 protected:
  // The loop under test, with zero-copy sends from `threshold` bytes on.
  tern::io_context_options with_threshold(std::size_t threshold) const {
    tern::io_context_options o = options();
    o.zero_copy_send_threshold = threshold;
    return o;
  }
  bool uring() const { return GetParam() == tern::backend_kind::io_uring; }
};
TERN_INSTANTIATE_BACKENDS(zero_copy_test);

std::uint64_t started(tern::io_context& ctx, op_code code) {
  return ctx.metrics().ops[static_cast<std::size_t>(code)].started;
}
std::uint64_t completed(tern::io_context& ctx, op_code code) {
  return ctx.metrics().ops[static_cast<std::size_t>(code)].completed;
}

// Reads s to end of stream (10 s at most per read); returns what arrived.
tern::task<std::vector<char>> read_to_eof(tcp_socket& s) {
  std::vector<char> got;
  std::vector<char> buf(256 * 1024);
  for (;;) {
    auto [ec, n] = co_await tern::with_timeout(s.read_some(tern::mutable_buffer(buf.data(), buf.size())), 10s);
    if (ec == tern::net::error::eof) break;
    if (ec) {
      ADD_FAILURE() << "reader: " << describe(ec);
      break;
    }
    got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
  }
  co_return got;
}

// The offset of the first byte where got differs from the start of want, or got.size() if none does.
std::size_t first_difference(const std::vector<char>& got, const std::vector<char>& want) {
  const std::size_t n = std::min(got.size(), want.size());
  return static_cast<std::size_t>(std::mismatch(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(n),
                                                want.begin()).first - got.begin());
}

// 8 MiB with write_all, checked byte by byte; the writer overwrites its buffer as soon as write_all returns and
// the reader, still draining, must see the pattern only. Two thresholds: below write_all's 64 KiB pieces (every
// piece qualifies) and above them (the pieces grow to the threshold, so they still do).
TEST_P(zero_copy_test, large_write_all_arrives_intact) {
  for (const std::size_t threshold : {std::size_t{16} << 10, std::size_t{1} << 20}) {
    SCOPED_TRACE(threshold);
    tern::io_context zc(with_threshold(threshold));
    const std::vector<char> pattern = make_pattern(8u << 20);
    run_bounded(zc, [](tern::io_context& ctx, const std::vector<char>& pattern) -> tern::task<void> {
      auto [client, server] = co_await connected_pair(ctx);
      CO_ASSERT(client.is_open() && server.is_open());
      auto reader = tern::spawn(ctx, read_to_eof(server));
      std::vector<char> buf = pattern;
      auto [ec, n] = co_await client.write_all(tern::const_buffer(buf.data(), buf.size()));
      EXPECT_OK(ec);
      EXPECT_EQ(n, buf.size());
      std::fill(buf.begin(), buf.end(), 'X');
      client.close();
      const std::vector<char> got = co_await std::move(reader);
      EXPECT_EQ(got.size(), pattern.size());
      EXPECT_EQ(first_difference(got, pattern), got.size()) << "the reader saw bytes that are not the pattern";
    }(zc, pattern));
    const std::uint64_t zero_copy = started(zc, op_code::send_zc);
    EXPECT_EQ(zero_copy, completed(zc, op_code::send_zc)) << "a zero-copy send never ended";
    EXPECT_EQ(started(zc, op_code::send), completed(zc, op_code::send));
    if (uring()) {
      EXPECT_GE(zero_copy, (8u << 20) / std::max<std::size_t>(threshold, 64u << 10)) << "too few zero-copy sends";
      EXPECT_LE(zero_copy, started(zc, op_code::send));
      // Loopback delivers a copy: the kernel says so in the notifications (kernel 6.2 on).
      EXPECT_LE(zc.metrics().zero_copy_copied, zero_copy);
    } else {
      EXPECT_EQ(zero_copy, 0u) << "epoll makes no zero-copy sends";
      EXPECT_EQ(zc.metrics().zero_copy_copied, 0u);
    }
  }
}

// Below the threshold a send stays plain; from the threshold on (exactly it included) it is zero-copy under
// io_uring. And the default makes none.
TEST_P(zero_copy_test, sends_below_the_threshold_stay_plain) {
  constexpr std::size_t threshold = 64u << 10;
  tern::io_context zc(with_threshold(threshold));
  run_bounded(zc, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    const std::vector<char> small(threshold - 1, 's');
    const std::uint64_t sends_before = started(ctx, op_code::send);
    for (int i = 0; i < 4; ++i) {
      auto [ec, n] = co_await client.write_all(tern::const_buffer(small.data(), small.size()));
      CO_ASSERT_OK(ec);
      std::vector<char> back(small.size());
      auto [rec, rn] = co_await tern::with_timeout(server.read_exact(tern::mutable_buffer(back.data(), back.size())), 10s);
      CO_ASSERT_OK(rec);
      EXPECT_EQ(back, small);
    }
    EXPECT_GE(started(ctx, op_code::send) - sends_before, 4u);
    EXPECT_EQ(started(ctx, op_code::send_zc), 0u) << "a send below the threshold was made zero-copy";
    // One write_some of exactly the threshold, into an empty socket with room for it.
    const std::vector<char> at(threshold, 't');
    auto [wec, wn] = co_await client.write_some(tern::const_buffer(at.data(), at.size()));
    CO_ASSERT_OK(wec);
    std::vector<char> back(wn);
    auto [rec, rn] = co_await tern::with_timeout(server.read_exact(tern::mutable_buffer(back.data(), back.size())), 10s);
    CO_ASSERT_OK(rec);
    EXPECT_TRUE(std::all_of(back.begin(), back.end(), [](char c) { return c == 't'; }));
  }(zc));
  EXPECT_EQ(started(zc, op_code::send_zc), uring() ? 1u : 0u);
  EXPECT_EQ(completed(zc, op_code::send_zc), started(zc, op_code::send_zc));

  // The default: off.
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    auto reader = tern::spawn(ctx, read_to_eof(server));
    const std::vector<char> big(4u << 20, 'd');
    auto [ec, n] = co_await client.write_all(tern::const_buffer(big.data(), big.size()));
    EXPECT_OK(ec);
    client.close();
    EXPECT_EQ((co_await std::move(reader)).size(), big.size());
  }(ctx));
  EXPECT_EQ(started(ctx, op_code::send_zc), 0u) << "zero-copy sends are off by default";
}

// A Unix stream socket has no zero-copy sends: the kernel refuses the first one, which is made again as a plain
// send, and the socket sends plainly from then on. Datagram sends are never made zero-copy.
TEST_P(zero_copy_test, a_socket_that_refuses_falls_back_once_and_datagrams_stay_plain) {
  tern::io_context zc(with_threshold(4096));
  run_bounded(zc, [](tern::io_context& ctx) -> tern::task<void> {
    auto [sec, streams] = tern::net::unix_stream_socket::pair(ctx);
    CO_ASSERT_OK(sec);
    auto& [a, b] = streams;
    const std::vector<char> pattern = make_pattern(2u << 20, 7);
    auto reader = tern::spawn(ctx, [](tern::net::unix_stream_socket& s, std::size_t n) -> tern::task<std::vector<char>> {
      std::vector<char> got(n);
      auto [ec, m] = co_await tern::with_timeout(s.read_exact(tern::mutable_buffer(got.data(), got.size())), 10s);
      EXPECT_OK(ec);
      got.resize(m);
      co_return got;
    }(b, pattern.size()));
    auto [ec, n] = co_await a.write_all(tern::const_buffer(pattern.data(), pattern.size()));
    EXPECT_OK(ec);
    EXPECT_EQ(n, pattern.size());
    EXPECT_EQ(co_await std::move(reader), pattern);

    auto [dec, datagrams] = tern::net::unix_datagram_socket::pair(ctx);
    CO_ASSERT_OK(dec);
    auto& [x, y] = datagrams;
    const std::vector<char> dgram(8192, 'g');
    auto [xec, xn] = co_await x.send(tern::const_buffer(dgram.data(), dgram.size()));
    CO_ASSERT_OK(xec);
    std::vector<char> back(dgram.size());
    auto [yec, yn] = co_await tern::with_timeout(y.receive(tern::mutable_buffer(back.data(), back.size())), 10s);
    CO_ASSERT_OK(yec);
    EXPECT_EQ(yn, dgram.size());
  }(zc));
  // Under io_uring: one attempt, refused, then plain sends only.
  EXPECT_EQ(started(zc, op_code::send_zc), uring() ? 1u : 0u);
  EXPECT_EQ(completed(zc, op_code::send_zc), started(zc, op_code::send_zc));
  EXPECT_EQ(started(zc, op_code::send), completed(zc, op_code::send));
}

// What a cancelled or closed-under write_all reported as sent is exactly what the peer reads, and it is the
// original bytes even though the writer overwrote its buffer as soon as the write returned.
struct interrupted_write {
  std::error_code ec;
  std::size_t written = 0;
  bool done = false;
};

// Writes pattern (copied into a buffer of its own) with write_all through `wrap` (which adds the cancellation),
// then overwrites the buffer at once.
template <class Wrap>
tern::task<void> write_then_scribble(tcp_socket& s, const std::vector<char>& pattern, interrupted_write& out,
                                     Wrap wrap) {
  std::vector<char> buf = pattern;
  auto r = co_await wrap(s.write_all(tern::const_buffer(buf.data(), buf.size())));
  std::fill(buf.begin(), buf.end(), 'X');
  out.ec = r.ec;
  out.written = r.value;
  out.done = true;
  // Keep the scribbled buffer alive a little, in case the kernel were still reading it.
  (void)co_await tern::sleep_for(20ms);
}

// The peer's receive buffer is small and nobody reads at first, so the write stalls in the kernel.
tern::task<socket_pair> stalled_pair(tern::io_context& ctx) {
  auto pair = co_await connected_pair(ctx);
  EXPECT_OK(pair.client.set_send_buffer_size(64 * 1024));
  EXPECT_OK(pair.server.set_receive_buffer_size(64 * 1024));
  co_return pair;
}

TEST_P(zero_copy_test, a_cancelled_zero_copy_send_reports_only_what_the_peer_gets) {
  tern::io_context zc(with_threshold(16 * 1024));
  const std::vector<char> pattern = make_pattern(16u << 20, 3);
  for (const bool by_timeout : {true, false}) {
    SCOPED_TRACE(by_timeout ? "with_timeout" : "stop token");
    run_bounded(zc, [](tern::io_context& ctx, const std::vector<char>& pattern, bool by_timeout) -> tern::task<void> {
      auto [client, server] = co_await stalled_pair(ctx);
      CO_ASSERT(client.is_open() && server.is_open());
      interrupted_write w;
      std::stop_source stop;
      auto writer = tern::spawn(ctx, by_timeout ? write_then_scribble(client, pattern, w, [](auto op) {
        return tern::with_timeout(std::move(op), 100ms);
      }) : write_then_scribble(client, pattern, w, [token = stop.get_token()](auto op) {
        return tern::with_stop(std::move(op), token);
      }));
      (void)co_await tern::sleep_for(100ms);
      stop.request_stop();
      (void)co_await tern::sleep_for(50ms);
      // The reader starts only after the cancellation: a zero-copy send the kernel has taken in holds its buffer,
      // and the writer, until its bytes are acknowledged, which the stalled reader must make possible (epoll's
      // plain send has ended by now).
      auto reader = tern::spawn(ctx, read_to_eof(server));
      while (!w.done) (void)co_await tern::sleep_for(1ms);
      EXPECT_EC(w.ec, by_timeout ? std::errc::timed_out : std::errc::operation_canceled);
      EXPECT_LT(w.written, pattern.size());
      EXPECT_OK(client.shutdown());
      auto got = co_await std::move(reader);
      co_await std::move(writer);
      EXPECT_EQ(got.size(), w.written) << "the peer got other than what the write reported";
      EXPECT_EQ(first_difference(got, pattern), got.size()) << "the peer saw the overwritten buffer";
    }(zc, pattern, by_timeout), 30s);
  }
  if (uring()) {
    EXPECT_GT(started(zc, op_code::send_zc), 0u);
  }
  EXPECT_EQ(completed(zc, op_code::send_zc), started(zc, op_code::send_zc));
}

TEST_P(zero_copy_test, close_under_a_pending_zero_copy_send) {
  tern::io_context zc(with_threshold(16 * 1024));
  const std::vector<char> pattern = make_pattern(16u << 20, 5);
  run_bounded(zc, [](tern::io_context& ctx, const std::vector<char>& pattern, bool uring) -> tern::task<void> {
    auto [client, server] = co_await stalled_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    interrupted_write w;
    auto writer = tern::spawn(ctx, write_then_scribble(client, pattern, w, [](auto op) { return op; }));
    (void)co_await tern::sleep_for(100ms);
    EXPECT_FALSE(w.done) << "the write should be stalled on the full buffers";
    if (uring) {
      EXPECT_GT(started(ctx, op_code::send_zc), 0u);
    }
    client.close();
    // The reader runs at once: bytes the kernel took before the close are still delivered (an orderly close),
    // and a zero-copy send holding its buffer ends when they are acknowledged.
    auto got = co_await read_to_eof(server);
    while (!w.done) (void)co_await tern::sleep_for(1ms);
    co_await std::move(writer);
    EXPECT_EC(w.ec, std::errc::operation_canceled);
    EXPECT_LT(w.written, pattern.size());
    EXPECT_EQ(got.size(), w.written) << "the peer got other than what the write reported";
    EXPECT_EQ(first_difference(got, pattern), got.size()) << "the peer saw bytes that are not the pattern";
  }(zc, pattern, uring()));
  EXPECT_EQ(completed(zc, op_code::send_zc), started(zc, op_code::send_zc));
  EXPECT_EQ(completed(zc, op_code::send), started(zc, op_code::send));
}

// The peer resets the connection while a zero-copy send waits: the write ends with the reset (or a broken pipe,
// if it was between two sends), without hanging on a notification.
TEST_P(zero_copy_test, a_reset_peer_under_a_pending_zero_copy_send) {
  tern::io_context zc(with_threshold(16 * 1024));
  const std::vector<char> pattern = make_pattern(16u << 20, 9);
  run_bounded(zc, [](tern::io_context& ctx, const std::vector<char>& pattern) -> tern::task<void> {
    auto [client, server] = co_await stalled_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    interrupted_write w;
    auto writer = tern::spawn(ctx, write_then_scribble(client, pattern, w, [](auto op) { return op; }));
    (void)co_await tern::sleep_for(100ms);
    EXPECT_FALSE(w.done) << "the write should be stalled on the full buffers";
    set_linger_reset(server.native_handle());
    server.close();
    co_await std::move(writer);
    EXPECT_TRUE(w.ec == std::errc::connection_reset || w.ec == std::errc::broken_pipe) << describe(w.ec);
    EXPECT_LT(w.written, pattern.size());
  }(zc, pattern), 30s);
  if (uring()) {
    EXPECT_GT(started(zc, op_code::send_zc), 0u);
  }
  EXPECT_EQ(completed(zc, op_code::send_zc), started(zc, op_code::send_zc));
}

}  // namespace
