// detail::biased_lock, the lock inside every tern::sync primitive:
// - a thread that takes it bias_after times in a row becomes its owner; threads that take turns never bias it;
// - a second thread revokes the bias for good, and from then on the lock excludes as a spinlock does;
// - mutual exclusion holds across a revocation that lands while the owner is taking the lock over and over (a
//   plain counter stays exact, round after round, each round a fresh lock);
// - a channel that one loop used long enough to bias its lock, then shared with a second loop while the first
//   goes on, delivers every message exactly once (both backends).
// The lock itself does no I/O, so its own tests need no loop.
#include "sync/sync_support.hpp"

#include <tern/detail/biased_lock.hpp>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

// A named namespace, not an anonymous one: the test sources are compiled in unity batches (tests/CMakeLists.txt),
// where this file's helpers would meet sync/channel_test.cpp's of the same names.
namespace biased_lock_tests {

using namespace tern_test;
using tern::detail::biased_lock;

void take(biased_lock& l, int times) {
  for (int i = 0; i < times; ++i) {
    std::lock_guard<biased_lock> g(l);
  }
}

TEST(biased_lock_test, one_thread_in_a_row_biases_it_and_another_thread_revokes_it) {
  if (!tern::detail::membarrier_biasing_available()) GTEST_SKIP() << "membarrier(PRIVATE_EXPEDITED) unavailable";
  biased_lock l;
  take(l, static_cast<int>(biased_lock::bias_after) - 1);
  EXPECT_EQ(l.current_mode(), biased_lock::mode::learning);
  take(l, 2);
  EXPECT_EQ(l.current_mode(), biased_lock::mode::biased);
  std::thread other([&] { take(l, 1); });
  other.join();
  EXPECT_EQ(l.current_mode(), biased_lock::mode::revoked);
  // The first owner still gets in (through the spinlock now), and the lock never biases again.
  take(l, 10 * static_cast<int>(biased_lock::bias_after));
  EXPECT_EQ(l.current_mode(), biased_lock::mode::revoked);
}

TEST(biased_lock_test, threads_taking_turns_never_bias_it) {
  biased_lock l;
  for (int round = 0; round < 20; ++round) {
    take(l, static_cast<int>(biased_lock::bias_after) / 2);
    std::thread other([&] { take(l, static_cast<int>(biased_lock::bias_after) / 2); });
    other.join();
  }
  EXPECT_EQ(l.current_mode(), biased_lock::mode::learning);
}

// A non-atomic counter under the lock: a lost increment means two threads were inside at once.
struct counted {
  biased_lock lock;
  std::uint64_t value = 0;
};

// The read and the write are apart by a busy wait of `spin` steps. A revoking thread's membarrier call takes
// about 10 us on this kind of VM, and an owner that sees the revocation meanwhile queues behind it on the
// spinlock, so only a section longer than the barrier is still running when the barrier returns: that is the
// case where the revoking thread must wait for the owner to leave.
void increment(counted& c, int times, int spin) {
  for (int i = 0; i < times; ++i) {
    std::lock_guard<biased_lock> g(c.lock);
    std::uint64_t v = c.value;
    for (int k = 0; k < spin; ++k) asm volatile("" ::: "memory");  // a step the compiler cannot drop
    c.value = v + 1;
  }
}

// Pins the calling thread to cpu if the machine has it (and the thread may run there); true if pinned.
bool pin_to_cpu(int cpu) {
  if (static_cast<int>(std::thread::hardware_concurrency()) <= cpu) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// Pins this thread for a scope, then gives it back the CPUs it had.
class cpu_pin {
 public:
  explicit cpu_pin(int cpu) {
    pthread_getaffinity_np(pthread_self(), sizeof(saved_), &saved_);
    pin_to_cpu(cpu);
  }
  cpu_pin(const cpu_pin&) = delete;
  cpu_pin& operator=(const cpu_pin&) = delete;
  ~cpu_pin() { pthread_setaffinity_np(pthread_self(), sizeof(saved_), &saved_); }

 private:
  cpu_set_t saved_;
};

TEST(biased_lock_test, excludes_across_a_revocation_that_races_the_owner) {
  if (!tern::detail::membarrier_biasing_available()) GTEST_SKIP() << "membarrier(PRIVATE_EXPEDITED) unavailable";
  cpu_pin here(0);
  constexpr int rounds = 30;
  constexpr int per_thread = 20;
  constexpr int long_section = 300'000;  // tens of microseconds
  int biased_before_the_race = 0;
  for (int round = 0; round < rounds; ++round) {
    auto c = std::make_unique<counted>();
    increment(*c, static_cast<int>(biased_lock::bias_after) + 1, 0);  // biased towards this thread
    biased_before_the_race += c->lock.current_mode() == biased_lock::mode::biased;
    // Both threads run at once: on separate CPUs where there are two, and the race starts only once the other
    // thread is known to be running (a new thread may otherwise wait for this one's time slice to end).
    std::atomic<bool> ready{false};
    std::atomic<bool> go{false};
    std::thread other([&] {
      pin_to_cpu(1);
      ready.store(true, std::memory_order_release);
      while (!go.load(std::memory_order_acquire)) {
      }
      increment(*c, per_thread, long_section);
    });
    while (!ready.load(std::memory_order_acquire)) {
    }
    go.store(true, std::memory_order_release);
    increment(*c, per_thread, long_section);  // fast path until the other thread's revocation lands
    other.join();
    ASSERT_EQ(c->value, static_cast<std::uint64_t>(2 * per_thread + biased_lock::bias_after + 1)) << "round " << round;
    EXPECT_EQ(c->lock.current_mode(), biased_lock::mode::revoked);
  }
  EXPECT_EQ(biased_before_the_race, rounds);
}

// ---- a channel biased on one loop, then shared ----

class biased_channel_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(biased_channel_test);

constexpr int solo_messages = 10'000;    // far more than bias_after: loop a's thread owns the lock after these
constexpr int shared_messages = 100'000;  // per sender, sent while both loops use the channel

struct shared_channel_state {
  tern::sync::channel<int> ch{16};
  std::vector<std::atomic<std::uint8_t>> seen =
      std::vector<std::atomic<std::uint8_t>>(solo_messages + 2 * shared_messages);
  std::atomic<int> received{0};
  std::atomic<int> errors{0};
};

// On loop a: sends and receives its first values alone (biasing the lock), then sends its share while loop b
// sends the other share and a receiver on each loop takes whatever comes (the others start once the solo part
// is over).
tern::task<void> solo_then_send(shared_channel_state& s) {
  for (int v = 0; v < solo_messages; ++v) {
    if (co_await s.ch.send(v)) s.errors.fetch_add(1);
    auto [ec, got] = co_await s.ch.receive();
    if (ec || *got != v) s.errors.fetch_add(1);
    s.seen[static_cast<std::size_t>(v)].fetch_add(1);
  }
  s.received.fetch_add(solo_messages);
  for (int k = 0; k < shared_messages; ++k) {
    if (co_await s.ch.send(solo_messages + k)) s.errors.fetch_add(1);
  }
}

tern::task<void> send_share(shared_channel_state& s, tern::sync::manual_reset_event& start) {
  EXPECT_OK(co_await start.wait());
  for (int k = 0; k < shared_messages; ++k) {
    if (co_await s.ch.send(solo_messages + shared_messages + k)) s.errors.fetch_add(1);
  }
}

tern::task<void> receive_some(shared_channel_state& s, tern::sync::manual_reset_event& start, int n) {
  EXPECT_OK(co_await start.wait());
  for (int i = 0; i < n; ++i) {
    auto [ec, got] = co_await s.ch.receive();
    if (ec) {
      s.errors.fetch_add(1);
      co_return;
    }
    s.seen[static_cast<std::size_t>(*got)].fetch_add(1, std::memory_order_relaxed);
    s.received.fetch_add(1, std::memory_order_relaxed);
  }
}

tern::task<void> open_after_solo(shared_channel_state& s, tern::sync::manual_reset_event& start) {
  // Loop a's own wait: b's sender starts only once a has used the channel alone for a while.
  while (s.received.load() < solo_messages) co_await tern::yield();
  start.set();
}

TEST_P(biased_channel_test, a_channel_biased_on_one_loop_and_then_shared_delivers_every_message_once) {
  auto s = std::make_unique<shared_channel_state>();
  tern::sync::manual_reset_event start;
  loop_pair loops(options());
  loops.spawn(loops.a, solo_then_send(*s));
  loops.spawn(loops.a, open_after_solo(*s, start));
  loops.spawn(loops.b, send_share(*s, start));
  loops.spawn(loops.a, receive_some(*s, start, shared_messages));
  loops.spawn(loops.b, receive_some(*s, start, shared_messages));
  loops.run();
  EXPECT_EQ(s->errors.load(), 0);
  EXPECT_EQ(s->received.load(), solo_messages + 2 * shared_messages);
  expect_each_seen_once(s->seen);
}

}  // namespace
