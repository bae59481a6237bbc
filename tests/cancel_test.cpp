// Cancellation: with_timeout (the deadline wins / the operation wins), with_stop (stop requested before, during,
// after, and from another thread), and the objects' own cancel(). A cancelled operation leaves its object usable.
#include "net_support.hpp"

#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using namespace tern_test;

class cancel_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(cancel_test);

// Writes text to s after delay.
tern::task<void> write_later(tern::net::tcp_socket& s, std::string text, std::chrono::milliseconds delay) {
  (void)co_await tern::sleep_for(delay);
  auto [ec, n] = co_await s.write_all(tern::const_buffer(std::string_view(text)));
  EXPECT_OK(ec);
  EXPECT_EQ(n, text.size());
}

// Cancels s's pending operations after delay.
tern::task<void> cancel_later(tern::net::tcp_socket& s, std::chrono::milliseconds delay) {
  (void)co_await tern::sleep_for(delay);
  s.cancel();
}

TEST_P(cancel_test, with_timeout_on_silent_read_times_out_and_socket_still_works) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    char buf[64];
    auto before = clock_type::now();
    auto [ec, n] = co_await tern::with_timeout(client.read_some(tern::mutable_buffer(buf, sizeof(buf))), 50ms);
    EXPECT_EC(ec, std::errc::timed_out);
    EXPECT_EQ(n, 0u);
    EXPECT_GE(clock_type::now() - before, 50ms) << "the timeout fired early";

    // The socket is intact: data written afterwards is read normally, nothing was lost or consumed.
    auto writer = tern::spawn(ctx, write_later(server, "after timeout", 5ms));
    auto [ec2, n2] = co_await tern::with_timeout(client.read_some(tern::mutable_buffer(buf, sizeof(buf))), 10s);
    EXPECT_OK(ec2);
    EXPECT_EQ(std::string_view(buf, n2), "after timeout");
    co_await std::move(writer);
  }(ctx));
}

TEST_P(cancel_test, with_timeout_operation_wins) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    auto writer = tern::spawn(ctx, write_later(server, "in time", 10ms));
    char buf[64];
    // An hour-long deadline: if its timer outlived the operation, run() would not return and the test would fail.
    auto [ec, n] = co_await tern::with_timeout(client.read_some(tern::mutable_buffer(buf, sizeof(buf))), 1h);
    EXPECT_OK(ec);
    EXPECT_EQ(std::string_view(buf, n), "in time");
    co_await std::move(writer);
  }(ctx));
}

TEST_P(cancel_test, with_timeout_on_immediately_ready_read) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    auto [wec, wn] = co_await server.write_all(tern::const_buffer(std::string_view("ready")));
    CO_ASSERT_OK(wec);
    (void)co_await tern::sleep_for(5ms);
    char buf[16];
    auto [ec, n] = co_await tern::with_timeout(client.read_some(tern::mutable_buffer(buf, sizeof(buf))), 1h);
    EXPECT_OK(ec);
    EXPECT_EQ(std::string_view(buf, n), "ready");
  }(ctx));
}

TEST_P(cancel_test, with_timeout_on_timer_wait) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tern::timer t(ctx);
    t.expires_after(1h);
    auto before = clock_type::now();
    std::error_code ec = co_await tern::with_timeout(t.wait(), 20ms);
    EXPECT_EC(ec, std::errc::timed_out);
    EXPECT_GE(clock_type::now() - before, 20ms);
    EXPECT_EQ(t.cancel(), 0u) << "the timed-out wait must no longer be pending";

    t.expires_after(5ms);
    ec = co_await tern::with_timeout(t.wait(), 1h);
    EXPECT_OK(ec) << "the operation finished first";
  }(ctx));
}

TEST_P(cancel_test, with_timeout_on_sleep) {
  run_bounded(ctx, []() -> tern::task<void> {
    std::error_code ec = co_await tern::with_timeout(tern::sleep_for(1h), 10ms);
    EXPECT_EC(ec, std::errc::timed_out);
    ec = co_await tern::with_timeout(tern::sleep_for(2ms), 1h);
    EXPECT_OK(ec);
  }());
}

TEST_P(cancel_test, with_deadline_on_silent_read) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    char buf[8];
    const auto deadline = clock_type::now() + 30ms;
    auto [ec, n] = co_await tern::with_deadline(client.read_some(tern::mutable_buffer(buf, sizeof(buf))), deadline);
    EXPECT_EC(ec, std::errc::timed_out);
    EXPECT_EQ(n, 0u);
    EXPECT_GE(clock_type::now(), deadline) << "the deadline fired early";
  }(ctx));
}

TEST_P(cancel_test, with_timeout_on_accept_then_accept_works) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tern::net::tcp_acceptor acceptor(ctx);
    auto ep = listen_loopback(acceptor);
    auto [ec, s] = co_await tern::with_timeout(acceptor.accept(), 30ms);
    EXPECT_EC(ec, std::errc::timed_out);
    EXPECT_FALSE(s.is_open());

    tern::net::tcp_socket client(ctx);
    auto cec = co_await client.connect(ep);
    CO_ASSERT_OK(cec);
    auto [ec2, s2] = co_await tern::with_timeout(acceptor.accept(), 10s);
    EXPECT_OK(ec2);
    EXPECT_TRUE(s2.is_open());
  }(ctx));
}

TEST_P(cancel_test, with_stop_on_timer_wait) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    std::stop_source source;
    tern::timer t(ctx);
    t.expires_after(1h);
    auto stopper = tern::spawn(ctx, [](std::stop_source& s) -> tern::task<void> {
      (void)co_await tern::sleep_for(10ms);
      EXPECT_TRUE(s.request_stop());
    }(source));
    std::error_code ec = co_await tern::with_stop(t.wait(), source.get_token());
    EXPECT_EC(ec, std::errc::operation_canceled);
    co_await std::move(stopper);
  }(ctx));
}

TEST_P(cancel_test, with_stop_on_read) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    std::stop_source source;
    auto stopper = tern::spawn(ctx, [](std::stop_source& s) -> tern::task<void> {
      (void)co_await tern::sleep_for(10ms);
      s.request_stop();
    }(source));
    char buf[32];
    auto [ec, n] = co_await tern::with_stop(client.read_some(tern::mutable_buffer(buf, sizeof(buf))), source.get_token());
    EXPECT_EC(ec, std::errc::operation_canceled);
    EXPECT_EQ(n, 0u);
    co_await std::move(stopper);

    // Still usable.
    auto writer = tern::spawn(ctx, write_later(server, "still alive", 1ms));
    auto [ec2, n2] = co_await tern::with_timeout(client.read_some(tern::mutable_buffer(buf, sizeof(buf))), 10s);
    EXPECT_OK(ec2);
    EXPECT_EQ(std::string_view(buf, n2), "still alive");
    co_await std::move(writer);
  }(ctx));
}

TEST_P(cancel_test, with_stop_already_requested_cancels_at_once) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    std::stop_source source;
    source.request_stop();
    tern::timer t(ctx);
    t.expires_after(1h);
    std::error_code ec = co_await tern::with_stop(t.wait(), source.get_token());
    EXPECT_EC(ec, std::errc::operation_canceled);
    EXPECT_EQ(t.cancel(), 0u);
  }(ctx));
}

TEST_P(cancel_test, with_stop_operation_wins_and_later_stop_is_harmless) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    std::stop_source source;
    std::error_code ec = co_await tern::with_stop(tern::sleep_for(2ms), source.get_token());
    EXPECT_OK(ec);
    // The stop callback must have been deregistered with the finished operation.
    source.request_stop();
    co_await tern::yield();
    tern::timer t(ctx);
    t.expires_after(1ms);
    ec = co_await t.wait();
    EXPECT_OK(ec);
  }(ctx));
}

TEST_P(cancel_test, with_stop_requested_from_another_thread) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    std::stop_source source;
    std::thread other([&source] {
      std::this_thread::sleep_for(30ms);
      source.request_stop();
    });
    char buf[16];
    auto [ec, n] = co_await tern::with_stop(client.read_some(tern::mutable_buffer(buf, sizeof(buf))), source.get_token());
    other.join();
    EXPECT_EC(ec, std::errc::operation_canceled);
    EXPECT_EQ(n, 0u);
  }(ctx));
}

TEST_P(cancel_test, socket_cancel_under_pending_read) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    auto canceller = tern::spawn(ctx, cancel_later(client, 10ms));
    char buf[16];
    auto [ec, n] = co_await client.read_some(tern::mutable_buffer(buf, sizeof(buf)));
    EXPECT_EC(ec, std::errc::operation_canceled);
    EXPECT_EQ(n, 0u);
    co_await std::move(canceller);
    EXPECT_TRUE(client.is_open()) << "cancel() must not close the socket";

    auto writer = tern::spawn(ctx, write_later(server, "next", 1ms));
    auto [ec2, n2] = co_await tern::with_timeout(client.read_some(tern::mutable_buffer(buf, sizeof(buf))), 10s);
    EXPECT_OK(ec2);
    EXPECT_EQ(std::string_view(buf, n2), "next");
    co_await std::move(writer);
  }(ctx));
}

TEST_P(cancel_test, socket_cancel_without_pending_operation_is_not_sticky) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    client.cancel();
    auto writer = tern::spawn(ctx, write_later(server, "fine", 5ms));
    char buf[16];
    auto [ec, n] = co_await tern::with_timeout(client.read_some(tern::mutable_buffer(buf, sizeof(buf))), 10s);
    EXPECT_OK(ec);
    EXPECT_EQ(std::string_view(buf, n), "fine");
    co_await std::move(writer);
  }(ctx));
}

TEST_P(cancel_test, socket_cancel_cancels_read_but_not_completed_write) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    std::error_code read_ec;
    auto reader = tern::spawn(ctx, [](tern::net::tcp_socket& s, std::error_code& out) -> tern::task<void> {
      char buf[8];
      auto [ec, n] = co_await s.read_some(tern::mutable_buffer(buf, sizeof(buf)));
      out = ec;
    }(client, read_ec));
    co_await tern::yield();
    // A write that completes (small, into an empty send buffer) alongside the pending read.
    auto [wec, wn] = co_await client.write_some(tern::const_buffer(std::string_view("x")));
    EXPECT_OK(wec);
    EXPECT_EQ(wn, 1u);
    (void)co_await tern::sleep_for(5ms);
    client.cancel();
    co_await std::move(reader);
    EXPECT_EC(read_ec, std::errc::operation_canceled);
    char c = 0;
    auto [rec, rn] = co_await tern::with_timeout(server.read_some(tern::mutable_buffer(&c, 1)), 10s);
    EXPECT_OK(rec);
    EXPECT_EQ(rn, 1u);
    EXPECT_EQ(c, 'x');
  }(ctx));
}

// read_exact and write_all chain their pieces without resuming the caller; a cancellation must still end them,
// and the result must count exactly the bytes that moved, so the caller knows where the stream stands.
TEST_P(cancel_test, with_timeout_on_read_exact_reports_the_bytes_already_read) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    auto [wec, wn] = co_await server.write_all(std::string_view("abc"));
    CO_ASSERT_OK(wec);
    char buf[8] = {};
    auto [ec, n] = co_await tern::with_timeout(client.read_exact(tern::mutable_buffer(buf, sizeof(buf))), 50ms);
    EXPECT_EC(ec, std::errc::timed_out);
    EXPECT_EQ(n, 3u);
    EXPECT_EQ(std::string_view(buf, 3), "abc");

    // The rest of the stream is intact.
    auto writer = tern::spawn(ctx, write_later(server, "defgh", 1ms));
    auto [ec2, n2] = co_await tern::with_timeout(client.read_exact(tern::mutable_buffer(buf + 3, 5)), 10s);
    EXPECT_OK(ec2);
    EXPECT_EQ(n2, 5u);
    EXPECT_EQ(std::string_view(buf, 8), "abcdefgh");
    co_await std::move(writer);
  }(ctx));
}

TEST_P(cancel_test, with_stop_on_read_exact_after_partial_data) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    std::stop_source source;
    auto stopper = tern::spawn(ctx, [](tern::net::tcp_socket& s, std::stop_source& stop) -> tern::task<void> {
      auto [ec, n] = co_await s.write_all(std::string_view("xy"));
      EXPECT_OK(ec);
      (void)co_await tern::sleep_for(20ms);
      stop.request_stop();
    }(server, source));
    char buf[16] = {};
    auto [ec, n] = co_await tern::with_stop(client.read_exact(tern::mutable_buffer(buf, sizeof(buf))),
                                            source.get_token());
    EXPECT_EC(ec, std::errc::operation_canceled);
    EXPECT_EQ(n, 2u);
    EXPECT_EQ(std::string_view(buf, 2), "xy");
    co_await std::move(stopper);
  }(ctx));
}

// A write_all blocked on a peer that does not read: cancelling it reports how much went out, and the peer then
// receives exactly that many bytes, in order, and nothing else.
TEST_P(cancel_test, socket_cancel_under_blocked_write_all_counts_what_was_sent) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    const std::vector<char> big = make_pattern(std::size_t{32} << 20);
    auto canceller = tern::spawn(ctx, cancel_later(client, 30ms));
    auto [ec, sent] = co_await client.write_all(tern::const_buffer(big));
    co_await std::move(canceller);
    EXPECT_EC(ec, std::errc::operation_canceled);
    EXPECT_GT(sent, 0u);
    EXPECT_LT(sent, big.size());
    CO_ASSERT_OK(client.shutdown(tern::net::shutdown_how::send));

    std::vector<char> got(big.size());
    std::size_t received = 0;
    for (;;) {
      auto [rec, rn] = co_await tern::with_timeout(
          server.read_some(tern::mutable_buffer(got.data() + received, got.size() - received)), 10s);
      if (rec == tern::net::error::eof) break;
      CO_ASSERT_OK(rec);
      received += rn;
      CO_ASSERT(received <= sent);
    }
    EXPECT_EQ(received, sent);
    EXPECT_TRUE(std::equal(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(received), big.begin()))
        << "the bytes received differ from the start of what was written";
  }(ctx));
}

TEST_P(cancel_test, acceptor_cancel_under_pending_accept) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tern::net::tcp_acceptor acceptor(ctx);
    auto ep = listen_loopback(acceptor);
    auto canceller = tern::spawn(ctx, [](tern::net::tcp_acceptor& a) -> tern::task<void> {
      (void)co_await tern::sleep_for(10ms);
      a.cancel();
    }(acceptor));
    auto [ec, s] = co_await acceptor.accept();
    EXPECT_EC(ec, std::errc::operation_canceled);
    EXPECT_FALSE(s.is_open());
    co_await std::move(canceller);
    EXPECT_TRUE(acceptor.is_open());

    tern::net::tcp_socket client(ctx);
    auto cec = co_await client.connect(ep);
    CO_ASSERT_OK(cec);
    auto [ec2, s2] = co_await tern::with_timeout(acceptor.accept(), 10s);
    EXPECT_OK(ec2);
    EXPECT_TRUE(s2.is_open());
  }(ctx));
}

TEST_P(cancel_test, timer_cancel_under_sleep_with_timeout_wrapper) {
  // Cancelling the timer object under a with_timeout wrapper reports the cancellation, not a timeout.
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tern::timer t(ctx);
    t.expires_after(1h);
    auto canceller = tern::spawn(ctx, [](tern::timer& t) -> tern::task<void> {
      (void)co_await tern::sleep_for(5ms);
      EXPECT_EQ(t.cancel(), 1u);
    }(t));
    std::error_code ec = co_await tern::with_timeout(t.wait(), 1h);
    EXPECT_EC(ec, std::errc::operation_canceled);
    co_await std::move(canceller);
  }(ctx));
}

// ---- with_stop on tasks (as with_timeout takes them) ----

// What a WebSocket read or any composed operation is: a task, not an awaiter.
tern::task<tern::io_result<std::size_t>> read_some_task(tern::net::tcp_socket& s, tern::mutable_buffer b) {
  co_return co_await s.read_some(b);
}

tern::task<void> request_stop_later(std::stop_source& s, std::chrono::milliseconds delay) {
  (void)co_await tern::sleep_for(delay);
  s.request_stop();
}

TEST_P(cancel_test, with_stop_on_a_task_cancels_what_it_waits_on) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    std::stop_source source;
    auto stopper = tern::spawn(ctx, request_stop_later(source, 10ms));
    char buf[16];
    auto [ec, n] = co_await tern::with_stop(read_some_task(client, tern::mutable_buffer(buf, sizeof buf)),
                                            source.get_token());
    EXPECT_EC(ec, std::errc::operation_canceled);
    EXPECT_EQ(n, 0u);
    co_await std::move(stopper);
    // The socket still works, and a task of void goes through with_stop too.
    bool read = false;
    auto writer = tern::spawn(ctx, write_later(server, "ok", 1ms));
    co_await tern::with_stop([](tern::net::tcp_socket& c, bool& read) -> tern::task<void> {
      char b[4];
      auto [rec, rn] = co_await c.read_some(tern::mutable_buffer(b, sizeof b));
      read = !rec && rn == 2;
    }(client, read), std::stop_source().get_token());
    EXPECT_TRUE(read);
    co_await std::move(writer);
  }(ctx));
}

TEST_P(cancel_test, with_stop_on_a_task_from_another_thread_and_already_requested) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    char buf[16];
    std::stop_source early;
    early.request_stop();
    auto [ec1, n1] = co_await tern::with_stop(read_some_task(client, tern::mutable_buffer(buf, sizeof buf)),
                                              early.get_token());
    EXPECT_EC(ec1, std::errc::operation_canceled);
    EXPECT_EQ(n1, 0u);
    std::stop_source source;
    std::thread other([&source] {
      std::this_thread::sleep_for(20ms);
      source.request_stop();
    });
    auto [ec2, n2] = co_await tern::with_stop(read_some_task(client, tern::mutable_buffer(buf, sizeof buf)),
                                              source.get_token());
    other.join();
    EXPECT_EC(ec2, std::errc::operation_canceled);
    EXPECT_EQ(n2, 0u);
  }(ctx));
}

TEST_P(cancel_test, with_stop_on_a_task_that_finishes_first_returns_its_result) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    std::stop_source source;
    auto writer = tern::spawn(ctx, write_later(server, "hello", 1ms));
    char buf[16];
    auto [ec, n] = co_await tern::with_stop(read_some_task(client, tern::mutable_buffer(buf, sizeof buf)),
                                            source.get_token());
    EXPECT_OK(ec);
    EXPECT_EQ(std::string_view(buf, n), "hello");
    co_await std::move(writer);
    source.request_stop();  // after the task: reaches nothing
    co_await tern::yield();
    const int value = co_await tern::with_stop([]() -> tern::task<int> { co_return 7; }(), source.get_token());
    EXPECT_EQ(value, 7) << "a task that never suspends returns its value even under a stopped token";
  }(ctx));
}

// The calling task's own token still reaches a task under with_stop: either stop cancels it.
TEST_P(cancel_test, with_stop_on_a_task_keeps_the_callers_stop) {
  std::stop_source outer;
  std::stop_source inner;
  std::error_code result;
  tern::spawn(ctx, [](tern::io_context& ctx, std::stop_source& outer, std::stop_source& inner,
                      std::error_code& result) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    auto stopper = tern::spawn(ctx, request_stop_later(outer, 10ms));
    char buf[8];
    auto [ec, n] = co_await tern::with_stop(read_some_task(client, tern::mutable_buffer(buf, sizeof buf)),
                                            inner.get_token());
    result = ec;
    (void)n;
    co_await std::move(stopper);
  }(ctx, outer, inner, result), outer.get_token()).detach();
  EXPECT_TRUE(run_context_bounded(ctx, 20s));
  EXPECT_EC(result, std::errc::operation_canceled);
  EXPECT_FALSE(inner.stop_requested());
}

// Both wrappers take the same things: operations and tasks, by value or by reference.
TEST_P(cancel_test, with_stop_and_with_timeout_take_the_same_things) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    char buf[8];
    std::stop_source source;
    auto op = client.read_some(tern::mutable_buffer(buf, sizeof buf));
    auto t = read_some_task(client, tern::mutable_buffer(buf, sizeof buf));
    auto stopper = tern::spawn(ctx, request_stop_later(source, 5ms));
    auto [ec1, n1] = co_await tern::with_stop(op, source.get_token());
    EXPECT_EC(ec1, std::errc::operation_canceled);
    co_await std::move(stopper);
    auto [ec2, n2] = co_await tern::with_timeout(std::move(t), 5ms);
    EXPECT_EC(ec2, std::errc::timed_out);
    (void)n1;
    (void)n2;
  }(ctx));
}

// ---- Stops from other threads under multi-piece transfers (ThreadSanitizer) ----

// Many write_alls of several pieces each are in flight while a reader drains their peers; a stop from another
// thread reaches each of them while the loop issues its next piece. The stop callback runs on the stopping thread
// and must read nothing the loop thread rewrites for each piece (under the tsan preset this raced).
TEST_P(cancel_test, stops_from_another_thread_reach_multi_piece_write_alls_cleanly) {
  constexpr int writers = 16;
  constexpr int rounds = 4;
  for (int round = 0; round < rounds; ++round) {
    std::stop_source source;
    std::vector<int> peer_fds;
    std::atomic<int> finished{0};
    std::atomic<int> canceled{0};
    std::atomic<bool> reading{true};
    std::vector<tern::net::unix_stream_socket> kept;
    for (int i = 0; i < writers; ++i) {
      auto [ec, pair] = tern::net::unix_stream_socket::pair(ctx);
      ASSERT_TRUE(ec_ok(ec));
      auto [rec, fd] = pair.second.release();
      ASSERT_TRUE(ec_ok(rec));
      const int raw = fd.release();
      ::fcntl(raw, F_SETFL, ::fcntl(raw, F_GETFL) | O_NONBLOCK);
      peer_fds.push_back(raw);
      kept.push_back(std::move(pair.first));
    }
    std::thread reader([&] {
      std::vector<char> sink(1 << 16);
      while (reading.load()) {
        for (int fd : peer_fds) (void)::recv(fd, sink.data(), sink.size(), MSG_DONTWAIT);
      }
    });
    const std::vector<char> big(std::size_t{4} << 20, 'x');
    for (int i = 0; i < writers; ++i) {
      tern::spawn(ctx, [](tern::net::unix_stream_socket& s, const std::vector<char>& big, std::atomic<int>& finished,
                          std::atomic<int>& canceled) -> tern::task<void> {
        for (;;) {
          auto [ec, n] = co_await s.write_all(tern::const_buffer(big));
          (void)n;
          if (ec) {
            if (ec == std::errc::operation_canceled) canceled.fetch_add(1);
            break;
          }
        }
        finished.fetch_add(1);
      }(kept[static_cast<std::size_t>(i)], big, finished, canceled), source.get_token()).detach();
    }
    std::thread stopper([&source] {
      std::this_thread::sleep_for(20ms);
      source.request_stop();
    });
    EXPECT_TRUE(run_context_bounded(ctx, 30s));
    stopper.join();
    reading.store(false);
    reader.join();
    EXPECT_EQ(finished.load(), writers);
    EXPECT_EQ(canceled.load(), writers);
    for (int fd : peer_fds) ::close(fd);
  }
}

// The same through a runtime's shutdown(): its stop token cancels the write_alls of every worker.
TEST_P(cancel_test, runtime_shutdown_reaches_multi_piece_write_alls_cleanly) {
  constexpr int writers = 8;
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  std::vector<int> peer_fds;
  std::atomic<int> canceled{0};
  std::atomic<bool> reading{true};
  std::atomic<int> running{0};
  const std::vector<char> big(std::size_t{4} << 20, 'y');
  for (int i = 0; i < writers; ++i) {
    tern::io_context& loop = rt.worker(static_cast<std::size_t>(i) % rt.size());
    auto [ec, pair] = tern::net::unix_stream_socket::pair(loop);
    ASSERT_TRUE(ec_ok(ec));
    auto [rec, fd] = pair.second.release();
    ASSERT_TRUE(ec_ok(rec));
    const int raw = fd.release();
    ::fcntl(raw, F_SETFL, ::fcntl(raw, F_GETFL) | O_NONBLOCK);
    peer_fds.push_back(raw);
    tern::spawn(loop, [](tern::runtime& rt, tern::net::unix_stream_socket s, const std::vector<char>& big,
                         std::atomic<int>& canceled, std::atomic<int>& running) -> tern::task<void> {
      running.fetch_add(1);
      for (;;) {
        auto [ec, n] = co_await tern::with_stop(s.write_all(tern::const_buffer(big)), rt.stop_token());
        (void)n;
        if (ec) {
          if (ec == std::errc::operation_canceled) canceled.fetch_add(1);
          co_return;
        }
      }
    }, std::ref(rt), std::move(pair.first), std::cref(big), std::ref(canceled), std::ref(running)).detach();
  }
  std::thread reader([&] {
    std::vector<char> sink(1 << 16);
    while (reading.load()) {
      for (int fd : peer_fds) (void)::recv(fd, sink.data(), sink.size(), MSG_DONTWAIT);
    }
  });
  while (running.load() != writers) std::this_thread::yield();
  std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(rt.shutdown(20s));
  reading.store(false);
  reader.join();
  EXPECT_EQ(canceled.load(), writers);
  for (int fd : peer_fds) ::close(fd);
}

}  // namespace
