// tern/detail/spinlock.hpp
//
// spinlock: the lock inside every synchronisation primitive of tern::sync.
//
// Why a spinlock and not std::mutex: the sections it guards are a few pointer moves (link or unlink a waiter, move
// one value in or out of a ring buffer) and never block, resume a coroutine or make a syscall; waking a waiter is
// done after the lock is released. A futex sleep and wake-up costs microseconds, far more than such a section, and
// std::mutex is 40 bytes against one here. What a spinlock risks is a holder preempted mid-section while others
// spin, so a waiting thread spins only briefly (with the CPU's pause hint) and then yields its time slice.
//
// Unlocking is a single release store and the lock is not touched after it, so the object that holds the lock may
// be destroyed by a thread that acquired it next (a coroutine that a wake-up resumed, for instance).
#pragma once

#include <atomic>
#include <thread>

namespace tern::detail {

class spinlock {
 public:
  spinlock() noexcept = default;
  spinlock(const spinlock&) = delete;
  spinlock& operator=(const spinlock&) = delete;

  // Acquires the lock: spins a little, then yields between attempts.
  void lock() noexcept {
    // acquire: what the previous holder wrote inside its section is visible in ours.
    while (locked_.exchange(true, std::memory_order_acquire)) {
      // Wait on a plain load so that the spinning core keeps the line shared instead of bouncing it.
      for (unsigned spins = 0; locked_.load(std::memory_order_relaxed); ++spins) relax(spins);
    }
  }

  // One round of waiting for a holder in a short section: the CPU's pause hint for the first spin_limit rounds,
  // then a yield of the time slice (the holder may have been preempted). Also used by biased_lock.
  static void relax(unsigned spins) noexcept {
    if (spins < spin_limit) {
      pause();
    } else {
      std::this_thread::yield();
    }
  }

  // Acquires the lock if it is free; never waits.
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }

  // Releases the lock.
  void unlock() noexcept {
    // release: publishes the section's writes to the next holder.
    locked_.store(false, std::memory_order_release);
  }

 private:
  // About a microsecond of pause hints: longer than any section this lock guards, short enough that a preempted
  // holder costs the spinner little before it yields.
  static constexpr unsigned spin_limit = 64;

  static void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
  }

  std::atomic<bool> locked_{false};
};

}  // namespace tern::detail
