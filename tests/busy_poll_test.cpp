// A loop that polls without blocking (io_context::poll(), a busy loop's turns, the spin before a park) while an
// operation is in flight. Under io_uring the ring is made with TASKRUN_FLAG, and a poll with nothing to submit
// reads the ring's flags instead of entering the kernel: a thousand idle polls must not be a thousand system calls,
// and a completion that arrives between two polls must still be found by the next one. epoll has no such word to
// read: each of its polls is an epoll_wait, which the tests pin down too, so that a change shows.
#include "net_support.hpp"

#include <poll.h>
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

// The loop's side of a request and its answer, n times: sends one byte, then waits for one byte back. Each send's
// completion comes in a spin under io_uring (the spin's first poll submits it), before the answer.
tern::task<void> ask_and_wait(tern::net::unix_stream_socket& s, int n, int& answered) {
  for (answered = 0; answered < n; ++answered) {
    char c = static_cast<char>('a' + answered % 26);
    auto [wec, w] = co_await s.write_some(tern::const_buffer(&c, 1));
    if (wec || w != 1) {
      ADD_FAILURE() << "request " << answered << ": " << wec.message();
      co_return;
    }
    auto [rec, r] = co_await s.read_some(tern::mutable_buffer(&c, 1));
    if (rec || r != 1) {
      ADD_FAILURE() << "answer " << answered << ": " << rec.message();
      co_return;
    }
  }
}

// The peer: answers each of n requests on fd (non-blocking: it waits in poll) after pause(i).
template <class Pause>
std::thread answering_peer(int fd, int n, Pause pause) {
  return std::thread([fd, n, pause] {
    for (int i = 0; i < n; ++i) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 10'000) != 1) return;
      char c = 0;
      if (::recv(fd, &c, 1, 0) != 1) return;
      std::this_thread::sleep_for(pause(i));
      if (::send(fd, &c, 1, 0) != 1) return;
    }
  });
}

// Answers that take longer than the spin: every spin for an answer runs its whole time for nothing, so after four
// in a row the loop parks at once for 1, 2, 4 ... waits between tries (about 19 spins for these 60 rounds under
// io_uring, 11 under epoll) instead of spinning before every wait (120 and 60). Under io_uring the request's own
// completion ends a spin before each answer: it must not count as a spin that found what the loop waited for, or
// the misses never come four in a row and the loop never backs off (120 spins when it counted).
//
// What is counted is the parks made in place of a spin: every park but those that follow a spin for nothing
// (spins - spin_hits). Without the back-off there are none; with it, most of the waits. Counting spins instead
// would depend on the machine: a loop descheduled in a spin on a loaded machine may find an answer there, which
// starts the back-off again (25-29 spins in one such run where an unloaded one makes 17).
TEST_P(busy_poll_test, spins_that_miss_the_answer_back_off_though_a_send_completes_in_them) {
  tern::io_context_options o = options();
  o.spin_before_park = 300us;
  tern::io_context ctx2(o);
  auto made = tern::net::unix_stream_socket::pair(ctx2);
  ASSERT_TRUE(ec_ok(made.ec));
  auto& [asker, peer] = made.value;
  constexpr int n = 60;
  std::thread t = answering_peer(peer.native_handle(), n, [](int) { return 3ms; });
  int answered = 0;
  run_bounded(ctx2, ask_and_wait(asker, n, answered));
  t.join();
  EXPECT_EQ(answered, n);
  const tern::metrics::loop_snapshot m = ctx2.metrics();
  EXPECT_GE(m.parks, std::uint64_t{n} * 3 / 4) << "the answers came later than the spin";
  const std::uint64_t missed = m.spins - m.spin_hits;
  EXPECT_GE(m.parks - missed, std::uint64_t{n} / 3)
      << "the loop kept spinning before its waits although no spin caught an answer (" << m.spins << " spins, "
      << m.spin_hits << " of them found something, " << m.parks << " parks)";
  EXPECT_GE(missed, 4u) << "the back-off starts after four spins for nothing";
  if (GetParam() == tern::backend_kind::io_uring) {
    EXPECT_GE(m.spin_hits, 3u) << "the sends' completions were meant to come in the spins (what the test is for)";
  }
}

// Slow answers first, so that the loop backs off; then answers after 200 us, each within the spin (an answer at
// once would often be there before the loop waits, under epoll). The first park
// woken by an answer sooner than the spin would have lasted ends the back-off, and from there the loop spins
// through its waits instead of parking for the skips the slow phase left (as it did when such a park did not end
// the back-off).
TEST_P(busy_poll_test, a_loop_whose_answers_come_within_the_spin_spins_again_after_backing_off) {
  tern::io_context_options o = options();
  o.spin_before_park = 5ms;
  tern::io_context ctx2(o);
  auto made = tern::net::unix_stream_socket::pair(ctx2);
  ASSERT_TRUE(ec_ok(made.ec));
  auto& [asker, peer] = made.value;
  // The slow answers come 40 ms after each request, eight times the spin: a loop descheduled in its spin on a
  // loaded machine (an ASan run beside builds) caught 34 of 50 answers that came after 10 ms.
  constexpr int slow = 30, fast = 200;
  std::thread t = answering_peer(peer.native_handle(), slow + fast, [](int i) {
    return i < slow ? std::chrono::microseconds(40ms) : std::chrono::microseconds(200us);
  });
  tern::metrics::loop_snapshot after_slow{};
  int answered = 0;
  run_bounded(ctx2, [](tern::net::unix_stream_socket& s, int& count, tern::io_context& c,
                       tern::metrics::loop_snapshot& snap) -> tern::task<void> {
    co_await ask_and_wait(s, slow, count);
    snap = c.metrics();
    int more = 0;
    co_await ask_and_wait(s, fast, more);
    count += more;
  }(asker, answered, ctx2, after_slow));
  t.join();
  EXPECT_EQ(answered, slow + fast);
  const tern::metrics::loop_snapshot m = ctx2.metrics();
  EXPECT_GE(after_slow.parks, std::uint64_t{slow} * 3 / 4);
  // Parks in place of a spin, as in the test above.
  EXPECT_GE(after_slow.parks - (after_slow.spins - after_slow.spin_hits), std::uint64_t{slow} / 3)
      << "the slow answers were meant to make the loop back off (" << after_slow.spins << " spins, "
      << after_slow.spin_hits << " of them found something, " << after_slow.parks << " parks)";
  const std::uint64_t parks = m.parks - after_slow.parks;
  const std::uint64_t spins = m.spins - after_slow.spins;
  const std::uint64_t hits = m.spin_hits - after_slow.spin_hits;
  // A spin that missed is followed by its park (an answer later than the spin, on a loaded machine): those parks
  // are not the back-off's.
  EXPECT_LE(parks, 4u + (spins - hits)) << "the loop stayed backed off although its answers came within the spin ("
                                        << hits << " of " << spins << " spins found something)";
  EXPECT_GE(hits, std::uint64_t{fast} * 3 / 4) << "the spins were meant to catch the answers (" << spins
                                                << " spins, " << parks << " parks, " << m.turns - after_slow.turns
                                                << " turns)";
}

}  // namespace
