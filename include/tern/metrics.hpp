// tern/metrics.hpp
//
// What a loop did, as counters it keeps itself: snapshots of one loop, of a runtime's workers, or of every loop in
// the process, and their Prometheus text form.
//
// The counters stay on in production builds: a bump is a plain increment by the loop's own thread (see
// detail/loop_counters.hpp), items run are counted once per batch, and the loop-lag histogram is sampled (one
// turn in 64). What that costs against a build with TERN_METRICS=OFF is measured in docs/benchmarks.md ("The
// cost of the loop metrics"). With TERN_METRICS=OFF every figure reads 0 and `enabled` is false.
//
// A snapshot may be taken from any thread. Each counter in it is exact at some moment of the read; the snapshot is
// not one instant across counters (a loop that runs meanwhile may have moved on between two reads). posts_local,
// bumped by every post, is kept in a plain integer of the loop and published once per turn: a snapshot taken on
// another thread while the loop runs may lag it by up to one turn's posts; the loop's own snapshot is exact.
//
//   auto s = ctx.metrics();                      // this loop
//   auto r = rt.metrics();                       // every worker of a runtime, and r.total()
//   std::string text;
//   tern::metrics::write_prometheus(r, text);    // the Prometheus text exposition format, one series per worker
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tern/detail/loop_counters.hpp"

namespace tern {
class io_context;
}

namespace tern::metrics {

// False when tern was built with TERN_METRICS=OFF: every snapshot is then all zeros.
inline constexpr bool enabled = TERN_METRICS != 0;

// The kinds of I/O operation the counters distinguish (recv, send, accept, ... read_at, write_at, ...).
inline constexpr std::size_t op_kind_count = detail::op_kind_count;
// The name of operation kind i ("recv", "read_at", ...), as the Prometheus series label it.
std::string_view op_kind_name(std::size_t i) noexcept;

// Loop lag, sampled: the time an item waits in the run queue from becoming runnable to running. Bucket i counts
// samples below 2^i microseconds (bucket 0: below 1 us); the last bucket has no upper bound.
struct lag_histogram {
  static constexpr std::size_t bucket_count = detail::lag_buckets;
  std::array<std::uint64_t, bucket_count> buckets{};
  std::uint64_t sum_ns = 0;  // of every sample

  // The upper bound of bucket i in microseconds (the last: none, returned as 0).
  static std::uint64_t upper_bound_us(std::size_t i) noexcept {
    return i + 1 < bucket_count ? std::uint64_t{1} << i : 0;
  }
  std::uint64_t count() const noexcept;
  // The upper bound (us) of the bucket that holds the q-quantile (0 < q <= 1) of the samples, 0 if none.
  std::uint64_t quantile_bound_us(double q) const noexcept;
};

struct op_counts {
  std::uint64_t started = 0;
  std::uint64_t completed = 0;  // inline or from the kernel; cancelled and failed ones included
};

// One loop's counters, or a sum of several (runtime_snapshot::total, process_snapshot).
struct loop_snapshot {
  std::uint64_t turns = 0;               // passes of the loop
  std::uint64_t items_run = 0;           // queued items run (resumptions, completions, handlers)
  std::uint64_t posts_local = 0;         // handlers posted from the loop's own thread
  std::uint64_t posts_remote = 0;        // items received from other threads through the loop's inbox
  std::uint64_t wakeups_sent = 0;        // parked loops this loop's thread woke up by posting to them
  std::uint64_t wakeups_received = 0;    // wake-ups of this loop from a park by another thread
  std::uint64_t parks = 0;               // blocking waits in the kernel
  std::uint64_t park_ns = 0;             // time spent in them
  std::uint64_t spins = 0;               // polling spins before a park
  std::uint64_t spin_ns = 0;             // time spent spinning
  std::uint64_t spin_hits = 0;           // spins that found work (a park saved)
  std::uint64_t inline_completions = 0;  // operations finished without waiting (epoll's speculative syscalls)
  std::uint64_t receive_pool_dry = 0;    // times the receive buffer pool ran dry (it grew, or a receive overflowed)
  std::uint64_t receive_overflows = 0;   // receives into a heap overflow buffer (the pool at its maximum, empty;
                                         // or io_uring's ring waiting to be moved to a larger one)
  std::uint64_t receive_bundles = 0;     // io_uring receive completions that filled more than one pool buffer
  std::uint64_t receive_ring_moves = 0;  // io_uring: the pool's buffer ring moved to a larger one as the pool grew
  std::uint64_t zero_copy_copied = 0;    // zero-copy sends (ops "send_zc") whose bytes the kernel copied anyway
  std::uint64_t kernel_waits = 0;        // io_uring_enter calls to submit and reap, or epoll_wait calls
  std::uint64_t syscalls = 0;            // system calls for I/O made by the loop and its backend, waits included
  std::uint64_t timers_armed = 0;        // timers put on the wheel
  std::uint64_t timers_fired = 0;        // timers that expired (cancelled ones are not)
  std::int64_t frame_blocks_in_use = 0;  // frame-pool blocks the loop's thread holds (net: see loop_counters.hpp)
  std::uint64_t frame_blocks_cached = 0; // free frame-pool blocks cached by the loop's thread
  std::uint64_t line_blocks_cached = 0;  // free line-pool blocks cached by the loop's thread
  std::array<op_counts, op_kind_count> ops{};  // per operation kind, indexed as op_kind_name
  lag_histogram loop_lag;
  std::uint64_t loops = 1;               // how many loops the figures cover

  // Every operation started, of every kind.
  std::uint64_t ops_started() const noexcept;
  // Sums the counters (gauges too) of another snapshot into this one.
  loop_snapshot& operator+=(const loop_snapshot& o) noexcept;
};

// Every worker of a runtime, in worker order.
struct runtime_snapshot {
  std::vector<loop_snapshot> workers;
  loop_snapshot total() const noexcept;
};

// The counters of one loop, read from any thread. The loop's gauges are as of its last park or its last 256th
// turn, or as of now if the caller runs the loop.
loop_snapshot snapshot(const io_context& ctx) noexcept;

// Every loop of the process: the sum over the live ones, plus what the loops destroyed so far had counted (so
// the figures never go down). For a program's own totals, or figures per operation in a benchmark.
loop_snapshot process_snapshot();

// Appends the Prometheus text exposition (version 0.0.4) of s to out: counters as tern_*_total, the lag as the
// histogram tern_loop_lag_seconds, the pool gauges; every series labelled loop="<loop>".
void write_prometheus(const loop_snapshot& s, std::string& out, std::string_view loop = "0");
// The same for each worker of a runtime (loop="0", "1", ...), each metric's HELP and TYPE written once.
void write_prometheus(const runtime_snapshot& s, std::string& out);

}  // namespace tern::metrics
