// tern/detail/deadline_clock.hpp
//
// A cheap upper bound of steady_clock::now(), for turning "d from now" into a deadline.
//
// Why: every expires_after, sleep_for and with_timeout needs "now", and on a VM steady_clock::now() costs about
// 25 ns, more than the rest of arming and cancelling a timer. Where the kernel itself keeps time with the TSC
// (its clocksource is "tsc", which it only picks when the counter is constant-rate and synchronised across CPUs),
// a loop extrapolates from its last real clock reading instead: one rdtsc (about 10 ns here) and a multiply.
//
// The estimate must never be early, or a timer could fire before now + d. So:
// - the base pair is read TSC first, clock second: the base time is at or after the base count's real time;
// - the cycles-to-ns factor is calibrated at start-up and then raised by a margin far above calibration and NTP
//   slew error;
// - extrapolation spans at most max_span_ns; past that (or if the counter went backwards) the loop reads the
//   real clock and takes a new base. The margin then makes a deadline at most a few microseconds late, less than
//   the kernel's wake-up of an idle CPU;
// - a base pair whose thread was preempted between its two reads (its time then later than its count's by the
//   preemption, up to milliseconds on a busy machine) is read again: the TSC is read once more after the clock, and
//   a pair more than 10 us apart is retaken (twice at most; a late base only makes deadlines late, never early).
// Elsewhere (no TSC clocksource, not x86-64) the real clock is read every time.
#pragma once

#include <cstdint>

namespace tern::detail {

struct tsc_scale {
  bool usable = false;
  std::uint64_t mult = 0;              // ns per cycle, fixed point with `shift` fraction bits, margin included
  std::uint64_t max_span_cycles = 0;   // longest extrapolation; 0 exactly when not usable
  std::uint64_t pair_cycles = 0;       // a base pair whose two TSC reads are further apart (10 us) was preempted
};
static constexpr unsigned tsc_shift = 24;
static constexpr std::uint64_t tsc_max_span_ns = 2'000'000;

// Calibrates once per process (a few hundred microseconds, on the first call); thread-safe.
const tsc_scale& tsc_calibration() noexcept;

inline std::uint64_t read_tsc() noexcept {
#if defined(__x86_64__)
  std::uint32_t lo, hi;
  asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (std::uint64_t{hi} << 32) | lo;
#else
  return 0;
#endif
}

}  // namespace tern::detail
