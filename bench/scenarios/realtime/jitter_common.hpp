// realtime/jitter: what every implementation shares, so that only the loop and its timer differ.
//
// A periodic task on CPU 0 wakes every period_us on a fixed grid (deadline k of the run is start + k periods, so
// lateness never accumulates), records how late it woke, and then does a fixed amount of work (work_iterations
// rounds of an integer mix, a few tens of microseconds), whose result is checked at the end. A background thread
// pinned to CPU 1 loads that CPU for the whole run: it sweeps a buffer larger than the caches and mixes what it
// reads, so the periodic task shares the memory system and the hypervisor's attention with it (load=1; load=0
// runs without it, the idle baseline).
#pragma once

#include "../../harness/worker.hpp"

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace tern_bench::realtime_jitter {

// The periodic task's work for one wake-up: deterministic, not removable by the optimiser (its result is summed
// and compared with the same sum computed again after the run).
inline std::uint64_t fixed_work(std::uint64_t seed, std::int64_t iterations) {
    std::uint64_t x = seed | 1;
    for (std::int64_t i = 0; i < iterations; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

// The sum of fixed_work over wake-ups 0..count-1, as the checks recompute it.
inline std::uint64_t expected_sum(std::uint64_t count, std::int64_t iterations) {
    std::uint64_t sum = 0;
    for (std::uint64_t k = 0; k < count; ++k) sum += fixed_work(k, iterations);
    return sum;
}

// Throws bench_failure unless the periodic task did its work for every wake-up it recorded.
inline void verify_work(std::uint64_t wakeups, std::uint64_t sum, std::int64_t iterations) {
    if (wakeups == 0) throw bench_failure("the periodic task never woke");
    if (sum != expected_sum(wakeups, iterations))
        throw bench_failure("the periodic task's work does not add up over " + std::to_string(wakeups) + " wake-ups");
}

// A thread on CPU 1 that keeps that CPU busy until destroyed.
class background_load {
public:
    // With enabled false, no thread: the idle baseline (load=0).
    explicit background_load(bool enabled) : buffer_(enabled ? 8 << 20 : 0) {
        if (!enabled) return;
        thread_ = std::thread([this] {
            pin_to_cpu(1);
            std::uint64_t x = 1;
            std::size_t i = 0;
            while (!stop_.load(std::memory_order_relaxed)) {
                for (int k = 0; k < 4096; ++k) {
                    x = x * 6364136223846793005ull + buffer_[i];
                    buffer_[i] = static_cast<unsigned char>(x >> 56);
                    i = (i + 4099) & (buffer_.size() - 1);  // an odd stride: every line, no prefetchable run
                }
            }
            sink_.store(x, std::memory_order_relaxed);
        });
    }
    ~background_load() {
        stop_.store(true, std::memory_order_relaxed);
        if (thread_.joinable()) thread_.join();
    }
    background_load(const background_load&) = delete;
    background_load& operator=(const background_load&) = delete;

private:
    std::vector<unsigned char> buffer_;
    std::atomic<bool> stop_{false};
    std::atomic<std::uint64_t> sink_{0};
    std::thread thread_;
};

}  // namespace tern_bench::realtime_jitter
