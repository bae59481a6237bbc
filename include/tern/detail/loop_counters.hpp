// tern/detail/loop_counters.hpp
//
// The counters a loop keeps about itself (tern/metrics.hpp turns them into snapshots).
//
// Why this shape: a counter is bumped on the hot paths (every queued item, every operation started), so a bump
// must cost what a plain increment costs; and a snapshot may be taken from any thread (a /metrics handler on
// another worker, a monitoring thread), so a read from elsewhere must not be a data race. Each counter has one
// writer, the thread running its loop, so a relaxed load and a relaxed store make the bump (no lock prefix, no
// fence: on x86 the same instructions as a plain `+= n`), and a reader elsewhere gets some recent value of each
// counter. A snapshot is therefore not atomic across counters: each figure is exact for itself at some moment of
// the read, which is what counters that only grow need. Where something is counted by a thread that is not the
// loop's (a wake-up sent from a non-loop thread), it is not counted at all rather than made a shared write.
//
// TERN_METRICS=0 (the CMake option TERN_METRICS=OFF, a public compile definition of tern::tern, so a consumer
// sees the same layout as the library) makes every bump an empty inline function and every read 0.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#ifndef TERN_METRICS
#define TERN_METRICS 1
#endif

namespace tern::detail {

#if TERN_METRICS
class counter {
 public:
  // Loop thread only (the counter's one writer).
  void add(std::uint64_t n = 1) noexcept {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  // Loop thread only: publishes a count the loop keeps in a plain integer of its own (io_context::posts_local_).
  void set(std::uint64_t v) noexcept { value_.store(v, std::memory_order_relaxed); }
  // Any thread.
  std::uint64_t get() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

// A value the loop sets (a gauge), read from any thread.
class gauge {
 public:
  void set(std::int64_t v) noexcept { value_.store(v, std::memory_order_relaxed); }
  std::int64_t get() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> value_{0};
};
#else
class counter {
 public:
  void add(std::uint64_t = 1) noexcept {}
  void set(std::uint64_t) noexcept {}
  std::uint64_t get() const noexcept { return 0; }
};
class gauge {
 public:
  void set(std::int64_t) noexcept {}
  std::int64_t get() const noexcept { return 0; }
};
#endif

// Operation kinds, as detail::op_code numbers them (io_op.hpp); the names are in metrics.cpp.
inline constexpr std::size_t op_kind_count = 29;

// The loop-lag histogram's buckets: bucket i counts lags below 2^i microseconds (bucket 0: below 1 us), the last
// one everything from 2^(lag_buckets - 2) us (about 1 s) up.
inline constexpr std::size_t lag_buckets = 22;

struct loop_counters {
  // The loop (io_context.cpp).
  counter turns;              // passes of the loop: drain the inbox, run a batch, poll I/O, fire timers
  counter items_run;          // queued items run: resumptions, completions, posted handlers
  counter posts_local;        // handlers posted from the loop's thread: io_context::posts_local_, published per turn
  counter posts_remote;       // items that arrived through the inbox from other threads (posts, wake-ups, work shared)
  counter wakeups_sent;       // parked loops this loop's thread woke (by posting to them)
  counter wakeups_received;   // times this loop was woken from a park by another thread (backend-counted)
  counter parks;              // blocking waits in the kernel
  counter park_ns;            // time spent in them
  counter spins;              // spins before a park (io_context_options::spin_before_park)
  counter spin_ns;            // time spent spinning
  counter spin_hits;          // spins that found work and so saved a park
  counter inline_completions; // operations finished inside start() (epoll's speculative syscalls, batches)
  // The receive pool (receive()): times it ran dry (io_uring: a multishot receive ended with ENOBUFS; epoll: no
  // free buffer) and the pool grew or a receive fell back to an overflow buffer; and those fallbacks.
  counter receive_pool_dry;
  counter receive_overflows;
  // io_uring's bundled receives (io_context_options::receive_bundles): completions that filled more than one buffer.
  counter receive_bundles;
  // io_uring: times the pool's provided-buffer ring was moved to a larger one as the pool grew past it.
  counter receive_ring_moves;
  // Zero-copy sends (io_uring, io_context_options::zero_copy_send_threshold) whose bytes the kernel copied after
  // all, as their notifications report: every one on loopback, where looped-back data is copied on delivery.
  counter zero_copy_copied;
  std::array<counter, op_kind_count> ops_started;
  std::array<counter, op_kind_count> ops_completed;  // inline or from the kernel, cancelled ones included
  // The backends.
  counter kernel_waits;       // io_uring_enter calls of poll(), epoll_wait/epoll_pwait2 calls
  counter syscalls;           // every system call the backend and the loop make for I/O (waits included)
  // (Timers armed and fired are the wheel's own counters: timer_wheel.hpp.)
  // Loop lag (io_context.cpp, sampled): the time from an item becoming runnable to its run.
  std::array<counter, lag_buckets> lag_buckets_us;
  counter lag_sum_ns;
  // Gauges the loop publishes from its thread: the thread's frame-pool blocks taken and not given back (net of
  // blocks other threads allocated and this one freed, so it can be negative), and the cached free blocks of the
  // frame pool and the line pool.
  gauge frame_blocks_in_use;
  gauge frame_blocks_cached;
  gauge line_blocks_cached;
};

}  // namespace tern::detail
