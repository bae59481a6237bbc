// watched_descriptor on both backends: readiness waits that read nothing (the owner's own read finds the bytes),
// level-triggered waits, either-way waits that say which way, hang-ups reported as ready, cancellation and
// timeouts, a blocking mode left as the owner set it (also across move_to), a duplicate closed without touching the
// original (and made again under the same number), and the refusals (wrong loop, nothing asked for).
#include "net_support.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <vector>

namespace {

using namespace tern_test;
using tern::readiness;
using tern::watched_descriptor;

class watched_descriptor_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(watched_descriptor_test);

// A socket pair made outside tern (the "library's" descriptors), non-blocking or not.
struct raw_pair {
  tern::unique_fd a, b;
};
raw_pair make_raw_pair(bool nonblocking) {
  int fds[2];
  const int type = SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0);
  EXPECT_EQ(::socketpair(AF_UNIX, type, 0, fds), 0);
  return {tern::unique_fd(fds[0]), tern::unique_fd(fds[1])};
}

watched_descriptor watch_dup(tern::io_context& ctx, int fd) {
  auto [ec, w] = watched_descriptor::adopt(ctx, tern::unique_fd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)));
  EXPECT_OK(ec);
  return std::move(w);
}

bool is_nonblocking(int fd) { return (::fcntl(fd, F_GETFL) & O_NONBLOCK) != 0; }

TEST_P(watched_descriptor_test, a_readable_wait_reads_nothing_and_the_owner_reads_the_bytes) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    raw_pair p = make_raw_pair(true);
    watched_descriptor w = watch_dup(ctx, p.a.get());
    auto writer = tern::spawn(ctx, [](int fd) -> tern::task<void> {
      co_await tern::sleep_for(5ms);
      EXPECT_EQ(::write(fd, "hello", 5), 5);
    }, p.b.get());
    auto [ec, ready] = co_await tern::with_timeout(w.wait_readable(), 10s);
    CO_ASSERT_OK(ec);
    EXPECT_EQ(ready, readiness::readable);
    char buf[16];
    EXPECT_EQ(::read(p.a.get(), buf, sizeof buf), 5) << "the wait consumed nothing";
    co_await std::move(writer);
  }(ctx));
}

TEST_P(watched_descriptor_test, a_wait_on_a_ready_descriptor_completes_at_once_every_time) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    raw_pair p = make_raw_pair(true);
    EXPECT_EQ(::write(p.b.get(), "x", 1), 1);
    watched_descriptor w = watch_dup(ctx, p.a.get());
    for (int i = 0; i < 3; ++i) {  // level-triggered: the unread byte keeps it readable
      auto [ec, ready] = co_await tern::with_timeout(w.wait_readable(), 10s);
      CO_ASSERT_OK(ec);
      EXPECT_EQ(ready, readiness::readable);
    }
    auto [wec, wready] = co_await tern::with_timeout(w.wait_writable(), 10s);
    CO_ASSERT_OK(wec);
    EXPECT_EQ(wready, readiness::writable);
  }(ctx));
}

TEST_P(watched_descriptor_test, an_either_way_wait_says_which_way_is_ready) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    raw_pair p = make_raw_pair(true);
    // Fill the send buffer, so that the descriptor is neither readable nor writable.
    std::vector<char> block(64 * 1024, 'z');
    while (::write(p.a.get(), block.data(), block.size()) > 0) {
    }
    watched_descriptor w = watch_dup(ctx, p.a.get());
    auto [tec, tready] = co_await tern::with_timeout(w.wait(readiness::either), 20ms);
    EXPECT_EC(tec, tern::error::timed_out);
    // The peer writes: readable, not writable.
    auto writer = tern::spawn(ctx, [](int fd) -> tern::task<void> {
      co_await tern::sleep_for(5ms);
      EXPECT_EQ(::write(fd, "r", 1), 1);
    }, p.b.get());
    auto [ec, ready] = co_await tern::with_timeout(w.wait(readiness::either), 10s);
    CO_ASSERT_OK(ec);
    EXPECT_EQ(ready, readiness::readable);
    co_await std::move(writer);
    char c;
    EXPECT_EQ(::read(p.a.get(), &c, 1), 1);
    // The peer drains: writable, not readable.
    auto drainer = tern::spawn(ctx, [](int fd) -> tern::task<void> {
      co_await tern::sleep_for(5ms);
      std::vector<char> sink(1 << 20);
      while (::read(fd, sink.data(), sink.size()) > 0) {
      }
    }, p.b.get());
    auto [wec, wready] = co_await tern::with_timeout(w.wait(readiness::either), 10s);
    CO_ASSERT_OK(wec);
    EXPECT_EQ(wready, readiness::writable);
    co_await std::move(drainer);
  }(ctx));
}

TEST_P(watched_descriptor_test, a_hang_up_is_ready_both_ways) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    raw_pair p = make_raw_pair(true);
    watched_descriptor w = watch_dup(ctx, p.a.get());
    auto closer = tern::spawn(ctx, [](tern::unique_fd& fd) -> tern::task<void> {
      co_await tern::sleep_for(5ms);
      fd.reset();
    }, std::ref(p.b));
    auto [ec, ready] = co_await tern::with_timeout(w.wait_readable(), 10s);
    CO_ASSERT_OK(ec);
    EXPECT_TRUE(tern::any(ready & readiness::readable));
    char c;
    EXPECT_EQ(::read(p.a.get(), &c, 1), 0) << "the owner's read finds the end";
    co_await std::move(closer);
  }(ctx));
}

TEST_P(watched_descriptor_test, a_pending_wait_is_cancelled_by_cancel_and_by_a_stop) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    raw_pair p = make_raw_pair(true);
    watched_descriptor w = watch_dup(ctx, p.a.get());
    auto pending = tern::spawn(ctx, w.wait_readable());
    co_await tern::sleep_for(2ms);
    w.cancel();
    auto [ec, ready] = co_await std::move(pending);
    EXPECT_EC(ec, tern::error::operation_canceled);
    EXPECT_EQ(ready, readiness::none);
    std::stop_source stop;
    auto stopped = tern::spawn(ctx, tern::with_stop(w.wait(readiness::readable), stop.get_token()));
    co_await tern::sleep_for(2ms);
    stop.request_stop();
    auto [sec, sready] = co_await std::move(stopped);
    EXPECT_EC(sec, tern::error::operation_canceled);
    EXPECT_TRUE(w.is_open()) << "cancelling leaves the object open";
  }(ctx));
}

TEST_P(watched_descriptor_test, the_blocking_mode_is_left_as_the_owner_set_it) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    for (bool nonblocking : {false, true}) {
      raw_pair p = make_raw_pair(nonblocking);
      watched_descriptor w = watch_dup(ctx, p.a.get());
      EXPECT_EQ(is_nonblocking(p.a.get()), nonblocking);
      tern::io_context other(tern::io_context_options{.backend = ctx.backend() == tern::backend_kind::epoll
                                                                    ? tern::backend_kind::io_uring
                                                                    : tern::backend_kind::epoll});
      CO_ASSERT_OK(w.move_to(other));
      EXPECT_EQ(is_nonblocking(p.a.get()), nonblocking) << "moved to a loop of the other backend";
      CO_ASSERT_OK(w.move_to(ctx));
      EXPECT_EQ(is_nonblocking(p.a.get()), nonblocking);
      EXPECT_EQ(::write(p.b.get(), "m", 1), 1);
      auto [ec, ready] = co_await tern::with_timeout(w.wait_readable(), 10s);
      CO_ASSERT_OK(ec);
      EXPECT_EQ(ready, readiness::readable);
    }
  }(ctx));
}

TEST_P(watched_descriptor_test, closing_the_duplicate_leaves_the_original_open) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    raw_pair p = make_raw_pair(true);
    {
      watched_descriptor w = watch_dup(ctx, p.a.get());
      auto pending = tern::spawn(ctx, w.wait_readable());
      co_await tern::sleep_for(1ms);
      w.close();
      auto [ec, ready] = co_await std::move(pending);
      EXPECT_EC(ec, tern::error::operation_canceled);
    }
    EXPECT_EQ(::write(p.a.get(), "y", 1), 1);
    char c;
    EXPECT_EQ(::read(p.b.get(), &c, 1), 1);
  }(ctx));
}

TEST_P(watched_descriptor_test, a_duplicate_made_again_under_the_same_number_is_watched_afresh) {
  // The original stays open, so closing a duplicate does not end its epoll registration by itself: the
  // registration must be removed with it, or the next duplicate under the same number is refused (EEXIST) and
  // the file's events would reach a descriptor that is gone.
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    raw_pair p = make_raw_pair(true);
    for (int round = 0; round < 3; ++round) {
      auto [ec, w] = watched_descriptor::adopt(ctx, tern::unique_fd(::fcntl(p.a.get(), F_DUPFD_CLOEXEC, 900)));
      CO_ASSERT_OK(ec);
      EXPECT_EQ(w.native_handle(), 900);
      EXPECT_EQ(::write(p.b.get(), "d", 1), 1);
      auto [wec, ready] = co_await tern::with_timeout(w.wait_readable(), 10s);
      CO_ASSERT_OK(wec);
      char c;
      EXPECT_EQ(::read(p.a.get(), &c, 1), 1);
      w.close();
    }
  }(ctx));
}

TEST_P(watched_descriptor_test, refusals_asking_for_nothing_a_closed_object_and_the_wrong_loop) {
  raw_pair p = make_raw_pair(true);
  watched_descriptor w = watch_dup(ctx, p.a.get());
  run_bounded(ctx, [](watched_descriptor& w) -> tern::task<void> {
    auto [ec, ready] = co_await w.wait(readiness::none);
    EXPECT_EC(ec, std::errc::invalid_argument);
    watched_descriptor closed(w.context());
    auto [cec, cready] = co_await closed.wait_readable();
    EXPECT_EC(cec, std::errc::bad_file_descriptor);
  }(w));
  std::error_code from_elsewhere;
  std::thread other([&] {
    tern::io_context elsewhere(options());
    elsewhere.block_on([](watched_descriptor& w, std::error_code& out) -> tern::task<void> {
      auto [ec, ready] = co_await w.wait_readable();
      out = ec;
    }(w, from_elsewhere));
  });
  other.join();
  EXPECT_EC(from_elsewhere, tern::error::wrong_loop);
}

}  // namespace
