// tern::sync across threads: two loops, each run by its own std::thread, share the primitives.
// - a bounded channel with 8 producers and 8 consumers spread over both loops delivers every message exactly once,
//   in each producer's order, and is then closed;
// - close() races with senders and receivers blocked on both threads: every one of them gets a result;
// - a mutex keeps a plain counter exact under increments from both threads; a semaphore never lets more holders in
//   than it has permits;
// - cancellation (with_stop from the other thread, with_timeout on the waiter's loop) races a wake-up from the
//   other thread, round after round: exactly one side wins, and nothing is lost (a value, the lock, a permit, a
//   signal).
#include "sync/sync_support.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

namespace {

using namespace tern_test;

class sync_cross_thread_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(sync_cross_thread_test);

// ---- channel: many producers, many consumers ----

constexpr int producers = 8;
constexpr int consumers = 8;
constexpr int messages = 200'000;
constexpr int per_producer = messages / producers;

struct mpmc_state {
  tern::sync::channel<int> ch{64};
  tern::sync::wait_group producing;
  std::vector<std::atomic<std::uint8_t>> seen = std::vector<std::atomic<std::uint8_t>>(messages);
  std::atomic<int> received{0};
  std::atomic<int> out_of_order{0};
  std::atomic<int> send_errors{0};
};

tern::task<void> produce(mpmc_state& s, int p) {
  for (int k = 0; k < per_producer; ++k) {
    if (co_await s.ch.send(p * per_producer + k)) s.send_errors.fetch_add(1);
  }
  s.producing.done();
}

tern::task<void> consume(mpmc_state& s) {
  std::vector<int> last(producers, -1);  // a consumer sees each producer's values in increasing order
  int count = 0;
  for (;;) {
    auto [ec, v] = co_await s.ch.receive();
    if (ec) {
      EXPECT_EC(ec, tern::sync::error::closed);
      break;
    }
    const int p = *v / per_producer;
    if (*v <= last[p]) s.out_of_order.fetch_add(1);
    last[p] = *v;
    s.seen[*v].fetch_add(1, std::memory_order_relaxed);
    ++count;
  }
  s.received.fetch_add(count);
}

tern::task<void> close_when_done(mpmc_state& s) {
  EXPECT_OK(co_await s.producing.wait());
  s.ch.close();
}

TEST_P(sync_cross_thread_test, channel_mpmc_delivers_every_message_exactly_once) {
  auto s = std::make_unique<mpmc_state>();
  s->producing.add(producers);
  loop_pair loops(options());
  for (int i = 0; i < producers; ++i) loops.spawn(i % 2 == 0 ? loops.a : loops.b, produce(*s, i));
  for (int i = 0; i < consumers; ++i) loops.spawn(i % 2 == 0 ? loops.b : loops.a, consume(*s));
  loops.spawn(loops.b, close_when_done(*s));
  loops.run();
  EXPECT_EQ(s->send_errors.load(), 0);
  EXPECT_EQ(s->received.load(), messages);
  EXPECT_EQ(s->out_of_order.load(), 0);
  expect_each_seen_once(s->seen);
  EXPECT_EQ(s->ch.size(), 0u);
}

// ---- channel: close() racing blocked senders and receivers ----

constexpr int close_rounds = 30;

struct close_race_state {
  std::vector<std::unique_ptr<tern::sync::channel<int>>> channels;
  std::atomic<long> sent{0};
  std::atomic<long> received{0};
  std::atomic<int> bad_errors{0};
  close_race_state() {
    for (int r = 0; r < close_rounds; ++r) channels.push_back(std::make_unique<tern::sync::channel<int>>(2));
  }
};

tern::task<void> send_until_closed(close_race_state& s) {
  for (auto& ch : s.channels) {
    for (int v = 0;; ++v) {
      std::error_code ec = co_await ch->send(v);
      if (ec) {
        if (ec != tern::sync::error::closed) s.bad_errors.fetch_add(1);
        break;
      }
      s.sent.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

tern::task<void> receive_until_closed(close_race_state& s, bool slow) {
  for (auto& ch : s.channels) {
    for (;;) {
      auto [ec, v] = co_await ch->receive();
      if (ec) {
        if (ec != tern::sync::error::closed) s.bad_errors.fetch_add(1);
        break;
      }
      s.received.fetch_add(1, std::memory_order_relaxed);
      if (slow) co_await tern::yield();
    }
  }
}

tern::task<void> close_each_after_a_while(close_race_state& s) {
  std::uint32_t seed = 12345;
  for (auto& ch : s.channels) {
    seed = seed * 1664525u + 1013904223u;
    (void)co_await tern::sleep_for(std::chrono::microseconds(100 + (seed >> 23)));
    ch->close();
  }
}

TEST_P(sync_cross_thread_test, close_races_blocked_senders_and_receivers_on_both_threads) {
  close_race_state s;
  loop_pair loops(options());
  for (int i = 0; i < 4; ++i) {
    loops.spawn(loops.a, send_until_closed(s));
    loops.spawn(loops.b, send_until_closed(s));
    loops.spawn(loops.a, receive_until_closed(s, i % 2 == 0));
    loops.spawn(loops.b, receive_until_closed(s, i % 2 == 1));
  }
  loops.spawn(loops.b, close_each_after_a_while(s));
  loops.run();
  EXPECT_EQ(s.bad_errors.load(), 0);
  EXPECT_GT(s.sent.load(), 0);
  EXPECT_EQ(s.sent.load(), s.received.load()) << "a value whose send succeeded was not received";
  for (auto& ch : s.channels) {
    EXPECT_TRUE(ch->is_closed());
    EXPECT_EQ(ch->size(), 0u);
  }
}

// ---- mutex and semaphore under contention from both threads ----

constexpr int increments = 100'000;
constexpr int lockers_per_loop = 4;

tern::task<void> increment(tern::sync::mutex& m, long& counter, int times) {
  for (int i = 0; i < times; ++i) {
    auto guard = co_await m.scoped_lock();
    CO_ASSERT(guard.owns_lock());
    ++counter;
    if (i % 16 == 0) co_await tern::yield();  // hold it across a suspension now and then
  }
}

TEST_P(sync_cross_thread_test, mutex_keeps_a_plain_counter_exact) {
  tern::sync::mutex m;
  long counter = 0;
  loop_pair loops(options());
  constexpr int each = increments / (2 * lockers_per_loop);
  for (int i = 0; i < lockers_per_loop; ++i) {
    loops.spawn(loops.a, increment(m, counter, each));
    loops.spawn(loops.b, increment(m, counter, each));
  }
  loops.run();
  EXPECT_EQ(counter, increments);
  EXPECT_FALSE(m.is_locked());
}

constexpr std::size_t permits = 3;

struct holders {
  std::atomic<int> now{0};
  std::atomic<int> max{0};
};

tern::task<void> hold_permits(tern::sync::semaphore& s, holders& h, int times) {
  for (int i = 0; i < times; ++i) {
    CO_ASSERT_OK(co_await s.acquire());
    int n = h.now.fetch_add(1) + 1;
    int seen = h.max.load();
    while (n > seen && !h.max.compare_exchange_weak(seen, n)) {
    }
    if (i % 4 == 0) co_await tern::yield();
    h.now.fetch_sub(1);
    s.release();
  }
}

TEST_P(sync_cross_thread_test, semaphore_never_admits_more_holders_than_permits) {
  tern::sync::semaphore s(permits);
  holders h;
  loop_pair loops(options());
  for (int i = 0; i < 6; ++i) {
    loops.spawn(loops.a, hold_permits(s, h, 3000));
    loops.spawn(loops.b, hold_permits(s, h, 3000));
  }
  loops.run();
  EXPECT_LE(h.max.load(), static_cast<int>(permits));
  EXPECT_GE(h.max.load(), 1);
  EXPECT_EQ(h.now.load(), 0);
  EXPECT_EQ(s.available(), permits) << "permits were lost or created";
}

// ---- cancellation racing a wake-up from the other thread ----
//
// Round i, in lock-step through step flags (blocking waits: between steps neither loop has anything else to do):
//   waker (loop b): prepare the primitive (lock the mutex, fill the channel...), then `prepared`;
//   waiter (loop a): `armed`, then start the wait under with_stop or under with_timeout (0-100 us);
//   waker: after a random delay, wake the primitive and request the stop, in a random order and a random time
//   apart, then `fired` (with_timeout: only the wake-up, after 0-150 us, so that it lands on either side of the
//   deadline);
//   waiter: once its wait has completed and `fired` is reached, check that exactly one side won and nothing was
//   lost, restore the primitive, then `checked`.
// A third coroutine keeps loop a turning while the wait is suspended, so that the loop takes a cancellation from
// its inbox (or fires the timer) at once instead of parking, and the cancellation really races the wake-up.
// How often each side won is recorded as the test properties "woken" and "cancelled".

constexpr int race_rounds = 1000;
// A round takes microseconds on an idle machine, but milliseconds when other processes hold both cores (each
// hand-off between the threads then waits for a time slice), and hundreds of milliseconds when several copies of
// these races and a build share two cores. Past race_budget a race ends early once it has run min_race_rounds;
// past race_hard_budget it ends whatever it reached (each round it ran was checked in full), so that it always
// ends well inside race_watchdog. A race cut short by the loops' watchdog would stop the waiter's loop in the
// middle of a round and fail as a hang of the waker. The rounds run are recorded.
constexpr int min_race_rounds = 100;
constexpr int min_race_rounds_under_load = 10;
constexpr std::chrono::seconds race_budget{8};
constexpr std::chrono::seconds race_hard_budget{20};
constexpr std::chrono::seconds race_watchdog{60};

enum class canceller { stop_from_other_thread, timeout };

struct race_flags {
  step_flag prepared{"prepared"};
  step_flag armed{"armed"};
  step_flag fired{"fired"};
  step_flag checked{"checked"};
  std::vector<std::stop_source> sources = std::vector<std::stop_source>(race_rounds);
  std::atomic<int> woken{0};
  std::atomic<int> cancelled{0};
  std::atomic<int> rounds{race_rounds};  // lowered by the waker when the budget ends the race early
};

bool is_cancellation(const std::error_code& ec) {
  return ec == std::errc::operation_canceled || ec == std::errc::timed_out;
}

std::chrono::nanoseconds random_delay(std::minstd_rand& rng, std::chrono::nanoseconds max) {
  return std::chrono::nanoseconds(rng() % static_cast<std::uint64_t>(max.count() + 1));
}

template <class Race>
tern::task<void> race_waiter(Race& race, race_flags& f, canceller how) {
  std::minstd_rand rng(777);
  for (int i = 0; i < race_rounds; ++i) {
    f.prepared.wait_for(i);
    if (i == f.rounds.load()) break;  // stored before `prepared` was reached
    f.armed.reach(i);
    auto result = how == canceller::timeout
                      ? co_await tern::with_timeout(race.wait(i), random_delay(rng, 100us))
                      : co_await tern::with_stop(race.wait(i), f.sources[i].get_token());
    f.fired.wait_for(i);
    if (race.check(result, i)) {
      f.woken.fetch_add(1);
    } else {
      f.cancelled.fetch_add(1);
    }
    f.checked.reach(i);
  }
}

template <class Race>
tern::task<void> race_waker(Race& race, race_flags& f, canceller how) {
  std::minstd_rand rng(4242);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < race_rounds; ++i) {
    f.checked.wait_for(i - 1);
    const auto spent = std::chrono::steady_clock::now() - start;
    if ((i >= min_race_rounds && spent > race_budget) ||
        (i >= min_race_rounds_under_load && spent > race_hard_budget)) {
      f.rounds.store(i);
      f.prepared.reach(i);
      co_return;
    }
    race.prepare(i);
    f.prepared.reach(i);
    f.armed.wait_for(i);
    if (how == canceller::timeout) {
      spin_for(random_delay(rng, 150us));
      race.wake(i);
    } else {
      const bool wake_first = rng() % 2 == 0;
      spin_for(random_delay(rng, 10us));
      if (wake_first) race.wake(i); else f.sources[i].request_stop();
      spin_for(random_delay(rng, 10us));
      if (wake_first) f.sources[i].request_stop(); else race.wake(i);
    }
    f.fired.reach(i);
  }
  co_return;
}

tern::task<void> keep_turning(const race_flags& f) {
  while (!f.checked.reached(f.rounds.load() - 1)) {
    std::this_thread::yield();  // lets the waker's thread in if it shares this core
    co_await tern::yield();
  }
}

template <class Race>
void run_race(const tern::io_context_options& o, canceller how) {
  Race race;
  race_flags f;
  {
    loop_pair loops(o);
    loops.spawn(loops.a, race_waiter(race, f, how));
    loops.spawn(loops.a, keep_turning(f));
    loops.spawn(loops.b, race_waker(race, f, how));
    loops.run(race_watchdog);
  }
  EXPECT_GE(f.rounds.load(), min_race_rounds_under_load);
  EXPECT_EQ(f.woken.load() + f.cancelled.load(), f.rounds.load());
  ::testing::Test::RecordProperty("rounds", f.rounds.load());
  ::testing::Test::RecordProperty("woken", f.woken.load());
  ::testing::Test::RecordProperty("cancelled", f.cancelled.load());
}

// A receive against a send: the value ends up received or still buffered, never both, never neither.
struct receive_race {
  tern::sync::channel<int> ch{1};
  void prepare(int) {}
  auto wait(int) { return ch.receive(); }
  void wake(int i) { EXPECT_OK(ch.try_send(i)); }
  bool check(tern::sync::receive_result<int>& r, int i) {
    if (!r.ec) {
      EXPECT_EQ(r.value, std::optional<int>(i));
      EXPECT_EQ(ch.size(), 0u);
      return true;
    }
    EXPECT_TRUE(is_cancellation(r.ec)) << describe(r.ec);
    EXPECT_EQ(ch.try_receive(), std::optional<int>(i)) << "the value of a cancelled receive was lost";
    return false;
  }
};

// A send into a full channel against a receive that frees the slot: the value is delivered iff the send succeeded.
struct send_race {
  tern::sync::channel<int> ch{1};
  void prepare(int) { EXPECT_OK(ch.try_send(-1)); }
  auto wait(int i) { return ch.send(i); }
  void wake(int) { EXPECT_EQ(ch.try_receive(), std::optional<int>(-1)); }
  bool check(std::error_code ec, int i) {
    if (!ec) {
      EXPECT_EQ(ch.try_receive(), std::optional<int>(i));
      return true;
    }
    EXPECT_TRUE(is_cancellation(ec)) << describe(ec);
    EXPECT_EQ(ch.size(), 0u) << "the value of a cancelled send was delivered";
    return false;
  }
};

// A lock against the holder's unlock: the waiter owns the mutex iff its lock succeeded; it is never left locked.
struct mutex_race {
  tern::sync::mutex m;
  void prepare(int) { EXPECT_TRUE(m.try_lock()); }
  auto wait(int) { return m.lock(); }
  void wake(int) { m.unlock(); }
  bool check(std::error_code ec, int) {
    const bool ok = !ec;
    if (!ok) {
      EXPECT_TRUE(is_cancellation(ec)) << describe(ec);
    }
    EXPECT_EQ(m.is_locked(), ok) << (ok ? "the lock succeeded without ownership" : "a cancelled lock left it locked");
    if (ok) m.unlock();
    return ok;
  }
};

// An acquire against a release: the permit is held iff the acquire succeeded.
struct semaphore_race {
  tern::sync::semaphore s{0};
  void prepare(int) {}
  auto wait(int) { return s.acquire(); }
  void wake(int) { s.release(); }
  bool check(std::error_code ec, int) {
    const bool ok = !ec;
    if (!ok) {
      EXPECT_TRUE(is_cancellation(ec)) << describe(ec);
    }
    EXPECT_EQ(s.available(), ok ? 0u : 1u) << "a permit was lost or duplicated";
    if (!ok) {
      EXPECT_TRUE(s.try_acquire());
    }
    return ok;
  }
};

// A wait against set() on an auto-reset event: the signal is consumed iff the wait succeeded.
struct event_race {
  tern::sync::auto_reset_event e;
  void prepare(int) {}
  auto wait(int) { return e.wait(); }
  void wake(int) { e.set(); }
  bool check(std::error_code ec, int) {
    const bool ok = !ec;
    if (!ok) {
      EXPECT_TRUE(is_cancellation(ec)) << describe(ec);
    }
    EXPECT_NE(e.is_set(), ok) << "the signal was lost or duplicated";
    e.reset();
    return ok;
  }
};

constexpr canceller by_stop = canceller::stop_from_other_thread;
constexpr canceller by_timeout = canceller::timeout;

TEST_P(sync_cross_thread_test, receive_stop_races_send) { run_race<receive_race>(options(), by_stop); }
TEST_P(sync_cross_thread_test, receive_timeout_races_send) { run_race<receive_race>(options(), by_timeout); }
TEST_P(sync_cross_thread_test, send_stop_races_receive) { run_race<send_race>(options(), by_stop); }
TEST_P(sync_cross_thread_test, send_timeout_races_receive) { run_race<send_race>(options(), by_timeout); }
TEST_P(sync_cross_thread_test, lock_stop_races_unlock) { run_race<mutex_race>(options(), by_stop); }
TEST_P(sync_cross_thread_test, lock_timeout_races_unlock) { run_race<mutex_race>(options(), by_timeout); }
TEST_P(sync_cross_thread_test, acquire_stop_races_release) { run_race<semaphore_race>(options(), by_stop); }
TEST_P(sync_cross_thread_test, acquire_timeout_races_release) { run_race<semaphore_race>(options(), by_timeout); }
TEST_P(sync_cross_thread_test, event_wait_stop_races_set) { run_race<event_race>(options(), by_stop); }
TEST_P(sync_cross_thread_test, event_wait_timeout_races_set) { run_race<event_race>(options(), by_timeout); }

}  // namespace
