// Start-up calibration of the TSC against steady_clock (see tern/detail/deadline_clock.hpp).
#include "tern/detail/deadline_clock.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>

namespace tern::detail {

namespace {

std::uint64_t steady_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// The kernel keeps CLOCK_MONOTONIC with the TSC only when it has found the counter constant-rate and in step on
// every CPU; that is the condition for extrapolating with it.
bool kernel_clock_is_tsc() {
  std::ifstream in("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  return in && (in >> name) && name == "tsc";
}

tsc_scale calibrate() noexcept {
  tsc_scale s;
#if defined(__x86_64__)
  try {
    if (!kernel_clock_is_tsc()) return s;
  } catch (...) {
    return s;
  }
  // Three samples of ~150 us each; the median discards one disturbed by preemption between a pair of reads.
  std::array<double, 3> ns_per_cycle{};
  for (double& r : ns_per_cycle) {
    const std::uint64_t c0 = read_tsc();
    const std::uint64_t t0 = steady_ns();
    std::uint64_t t1 = t0;
    while (t1 - t0 < 150'000) t1 = steady_ns();
    const std::uint64_t c1 = read_tsc();
    if (c1 <= c0) return s;
    r = static_cast<double>(t1 - t0) / static_cast<double>(c1 - c0);
  }
  std::sort(ns_per_cycle.begin(), ns_per_cycle.end());
  const double median = ns_per_cycle[1];
  if (!(median > 0.0) || median > 100.0) return s;  // below 10 MHz: not a usable counter
  // A margin of 1/256 (0.4%): far above the samples' read jitter (~0.05%) and NTP's slew limit (0.05%), so the
  // extrapolation stays ahead of the clock; over the longest span it is at most 8 us ahead.
  const double with_margin = median * (1.0 + 1.0 / 256.0);
  s.mult = static_cast<std::uint64_t>(with_margin * static_cast<double>(std::uint64_t{1} << tsc_shift)) + 1;
  s.max_span_cycles = static_cast<std::uint64_t>(static_cast<double>(tsc_max_span_ns) / median);
  s.pair_cycles = static_cast<std::uint64_t>(10'000.0 / median);
  s.usable = s.max_span_cycles > 0;
#endif
  return s;
}

}  // namespace

const tsc_scale& tsc_calibration() noexcept {
  static const tsc_scale scale = calibrate();
  return scale;
}

}  // namespace tern::detail
