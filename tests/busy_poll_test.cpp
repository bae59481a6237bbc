// A loop that polls without blocking (io_context::poll(), a busy loop's turns, the spin before a park) while an
// operation is in flight. Under io_uring the ring is made with TASKRUN_FLAG, and a poll with nothing to submit
// reads the ring's flags instead of entering the kernel: a thousand idle polls must not be a thousand system calls,
// and a completion that arrives between two polls must still be found by the next one. epoll has no such word to
// read: each of its polls is an epoll_wait, which the tests pin down too, so that a change shows.
#include "net_support.hpp"

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace {

using namespace tern_test;
using namespace std::chrono_literals;

class busy_poll_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(busy_poll_test);

tern::task<void> read_one(tern::net::unix_stream_socket& s, char& out) {
  auto [ec, n] = co_await s.read_some(tern::mutable_buffer(&out, 1));
  EXPECT_OK(ec);
  EXPECT_EQ(n, 1u);
}

TEST_P(busy_poll_test, idle_polls_leave_the_kernel_alone_and_the_next_poll_finds_a_completion) {
  auto made = tern::net::unix_stream_socket::pair(ctx);
  ASSERT_TRUE(ec_ok(made.ec));
  auto& [reader, writer] = made.value;
  char got = 0;
  tern::join_handle<void> h = tern::spawn(ctx, read_one(reader, got));
  for (int i = 0; i < 3; ++i) ctx.poll();  // the read starts and reaches the kernel
  ASSERT_FALSE(h.done());

  constexpr std::uint64_t polls = 1000;
  const std::uint64_t before = ctx.metrics().kernel_waits;
  for (std::uint64_t i = 0; i < polls; ++i) ctx.poll();
  const std::uint64_t entered = ctx.metrics().kernel_waits - before;
  ASSERT_FALSE(h.done()) << "nothing was written yet";
  if (GetParam() == tern::backend_kind::io_uring) {
    EXPECT_EQ(entered, 0u) << "idle polls entered the kernel with nothing to submit and nothing completed";
  } else {
    EXPECT_EQ(entered, polls) << "every epoll poll is an epoll_wait";
  }

  ASSERT_EQ(::send(writer.native_handle(), "z", 1, 0), 1);
  ASSERT_TRUE(poll_until_done(ctx, h)) << "the completion was never found by a non-blocking poll";
  EXPECT_EQ(got, 'z');
}

TEST_P(busy_poll_test, a_spinning_loop_finds_a_completion_without_entering_the_kernel_every_round) {
  tern::io_context_options o = options();
  o.spin_before_park = 10s;  // longer than the test: the loop never parks
  tern::io_context spinning(o);
  auto made = tern::net::unix_stream_socket::pair(spinning);
  ASSERT_TRUE(ec_ok(made.ec));
  auto& [reader, writer] = made.value;
  const int peer = writer.native_handle();
  // The writer's 50 ms count from the moment the read is about to start, not from the thread's creation: on a
  // loaded machine the loop may come to run only later, and the spin would then be shorter than the assertions say.
  std::atomic<bool> reading{false};
  std::thread late_writer([peer, &reading] {
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (!reading.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(1ms);
    }
    std::this_thread::sleep_for(50ms);
    (void)::send(peer, "s", 1, 0);
  });
  char got = 0;
  run_bounded(spinning, [](tern::net::unix_stream_socket& r, char& out, std::atomic<bool>& flag) -> tern::task<void> {
    flag.store(true, std::memory_order_release);
    co_await read_one(r, out);
  }(reader, got, reading));
  late_writer.join();
  EXPECT_EQ(got, 's');
  const tern::metrics::loop_snapshot m = spinning.metrics();
  EXPECT_EQ(m.parks, 0u) << "the loop was meant to spin, not park";
  EXPECT_GE(m.spin_ns, 40'000'000u) << "the loop spun while the writer slept";
  if (GetParam() == tern::backend_kind::io_uring) {
    // Before the ring had TASKRUN_FLAG each spin round was an io_uring_enter: tens of thousands in 50 ms.
    EXPECT_LE(m.kernel_waits, 20u) << "the spin entered the kernel with nothing to submit and nothing completed";
  } else {
    EXPECT_GT(m.kernel_waits, 100u) << "epoll's spin asks the kernel every round";
  }
}

}  // namespace
