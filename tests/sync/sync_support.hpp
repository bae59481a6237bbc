// Helpers for the tern::sync tests.
//
// - loop_pair: two loops of the backend under test, each run by its own std::thread, for the cross-thread tests.
//   Tasks are spawned before the threads start; each loop holds a work_guard until the last task has finished
//   (a coroutine waiting for the other thread does not keep its loop alive by itself), and a watchdog per loop
//   turns a hang into a failure. Declare the primitives a test shares before its loop_pair, so that they outlive
//   the frames the loops destroy if a watchdog had to stop them.
// - step_flag: a round counter that two threads use to walk a race through its steps in lock-step.
// - spin_for: a busy wait, to vary which side of a race comes first.
// - stop_from_thread: requests a stop from another thread after a delay.
// - expect_each_seen_once: checks a per-message delivery count (no message lost, none delivered twice).
#pragma once

#include "support.hpp"

#include <tern/sync.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace tern_test {

class loop_pair {
 public:
  explicit loop_pair(const tern::io_context_options& o)
      : a(o), b(o), guard_a_(std::in_place, a), guard_b_(std::in_place, b) {}
  loop_pair(const loop_pair&) = delete;
  loop_pair& operator=(const loop_pair&) = delete;

  tern::io_context a;
  tern::io_context b;

  // Spawns body on ctx (one of a, b) before run(); run() waits for it to finish.
  void spawn(tern::io_context& ctx, tern::task<void> body) {
    remaining_.fetch_add(1, std::memory_order_relaxed);
    tern::spawn(ctx, tracked(std::move(body))).detach();
  }

  // Runs both loops on their own threads until every spawned task has finished; fails the test on a hang.
  void run(std::chrono::milliseconds limit = default_limit) {
    if (remaining_.load() == 0) release_guards();
    bool fired = false;
    {
      watchdog dog_a(a, limit);
      watchdog dog_b(b, limit);
      std::thread ta([this] { a.run(); });
      std::thread tb([this] { b.run(); });
      ta.join();
      tb.join();
      fired = dog_a.fired() || dog_b.fired();
    }
    if (fired) ADD_FAILURE() << "the loops did not finish within " << limit.count() << " ms";
    EXPECT_EQ(remaining_.load(), 0) << "tasks left unfinished";
  }

 private:
  tern::task<void> tracked(tern::task<void> body) {
    try {
      co_await std::move(body);
    } catch (...) {
      report_exception(std::current_exception(), "cross-thread task");
    }
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) release_guards();
  }

  // Only the last task (or run() with none) gets here, so the guards are released once.
  void release_guards() {
    guard_a_.reset();
    guard_b_.reset();
  }

  std::atomic<int> remaining_{0};
  std::optional<tern::io_context::work_guard> guard_a_;
  std::optional<tern::io_context::work_guard> guard_b_;
};

// A round counter that one thread advances and another waits on. Waiting blocks the thread (and so the loop it
// runs): use it only between the steps of a race, where the loop has nothing else to do.
// The wait spins, then yields, and gives up after step_limit by throwing (loop_pair reports it as a failure that
// names the step and the round), so that a round that never comes fails the test instead of blocking a loop's
// thread where its watchdog cannot reach it. It does not sleep in std::atomic::wait: a notify that misses a
// sleeper would turn a correct run into a hang.
class step_flag {
 public:
  static constexpr std::chrono::seconds step_limit{20};

  explicit step_flag(const char* name) noexcept : name_(name) {}

  // seq_cst: the store is visible before this thread's next load of anything (an x86 exchange, not a plain move).
  void reach(int v) noexcept { value_.store(v, std::memory_order_seq_cst); }
  bool reached(int v) const noexcept { return value_.load(std::memory_order_acquire) >= v; }
  void wait_for(int v) const {
    for (int spins = 0; spins < 1000; ++spins) {
      if (reached(v)) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    const auto until = std::chrono::steady_clock::now() + step_limit;
    while (!reached(v)) {
      std::this_thread::yield();  // the other side may need this core
      if (std::chrono::steady_clock::now() >= until) {
        throw std::runtime_error(std::string("step '") + name_ + "' did not reach round " + std::to_string(v) +
                                 " (it is at " + std::to_string(value_.load()) + ")");
      }
    }
  }

 private:
  const char* name_;
  std::atomic<int> value_{-1};
};

// Requests a stop on source from a thread of its own after delay; joins that thread when destroyed.
class stop_from_thread {
 public:
  stop_from_thread(std::stop_source& source, std::chrono::milliseconds delay)
      : thread_([&source, delay] {
          std::this_thread::sleep_for(delay);
          source.request_stop();
        }) {}
  stop_from_thread(const stop_from_thread&) = delete;
  stop_from_thread& operator=(const stop_from_thread&) = delete;
  ~stop_from_thread() { thread_.join(); }

 private:
  std::thread thread_;
};

// Busy-waits for d, to place one side of a race at a chosen distance from the other.
inline void spin_for(std::chrono::nanoseconds d) noexcept {
  const auto until = clock_type::now() + d;
  while (clock_type::now() < until) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

// Expects every counter of seen to be exactly 1: a 0 is a lost message, more than 1 a duplicated one.
inline void expect_each_seen_once(const std::vector<std::atomic<std::uint8_t>>& seen) {
  int missing = 0;
  int duplicated = 0;
  for (auto& n : seen) {
    missing += n.load() == 0;
    duplicated += n.load() > 1;
  }
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(duplicated, 0);
}

}  // namespace tern_test
