// What the multi-thread dispatch scenarios share: per-thread operation counters read by a sampling thread, the
// phases cut by wall clock, and the pinning rule.
//
// An in-loop meter (meters.hpp) belongs to one thread. With several threads running handlers, each thread counts
// into its own cache line (no shared counter to fight over, for any implementation), and the thread that started
// the run samples the sum at the start and the end of every phase while the work keeps running: the rate of a phase
// is what all threads did between the two samples, divided by the time between them.
//
// Pinning: thread i of every implementation (a tern runtime worker, a std::thread running an Asio io_context) is
// pinned to CPU i % 2, from inside that thread, so that every implementation is spread over the two cores alike.
#pragma once

#include "../harness/meters.hpp"
#include "../harness/worker.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <thread>

namespace tern_bench {

inline constexpr int pinned_cores = 2;

// Pins the calling thread, the i-th of its run, to CPU i % 2.
inline void pin_thread_index(std::size_t i) { pin_to_cpu(static_cast<int>(i % pinned_cores)); }

// Per-thread counters of one run. A thread takes a slot the first time it counts.
class thread_counters {
public:
    void tick() noexcept {
        slot& s = mine();
        s.n.store(s.n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    std::uint64_t total() const noexcept {
        std::uint64_t sum = 0;
        for (auto& s : slots_) sum += s.n.load(std::memory_order_relaxed);
        return sum;
    }
    // Set once the sampler is done; the work stops re-posting itself when it sees it.
    bool stopping() const noexcept { return stop_.load(std::memory_order_relaxed); }
    void request_stop() noexcept { stop_.store(true, std::memory_order_relaxed); }

private:
    struct alignas(64) slot {
        std::atomic<std::uint64_t> n{0};
    };
    slot& mine() noexcept {
        thread_local const thread_counters* owner = nullptr;
        thread_local slot* s = nullptr;
        if (owner != this) {
            owner = this;
            s = &slots_[next_.fetch_add(1, std::memory_order_relaxed) % slots_.size()];
        }
        return *s;
    }
    std::array<slot, 64> slots_{};
    std::atomic<std::size_t> next_{0};
    std::atomic<bool> stop_{false};
};

// Starts the work of a run on `threads` threads counting into `c`; returns the function that stops and joins it.
using launch_fn = std::function<std::function<void()>(int threads, thread_counters& c)>;

// Operations per second of `seconds` of `launch(threads)`, after `warmup` seconds.
inline double sample_rate(int threads, double warmup, double seconds, const launch_fn& launch) {
    thread_counters c;
    auto finish = launch(threads, c);
    std::this_thread::sleep_for(to_duration(warmup));
    auto c0 = c.total();
    auto t0 = bench_clock::now();
    std::this_thread::sleep_for(to_duration(seconds));
    auto c1 = c.total();
    auto t1 = bench_clock::now();
    c.request_stop();
    finish();
    return static_cast<double>(c1 - c0) / std::chrono::duration<double>(t1 - t0).count();
}

// Runs `launch(threads)` once through the warm-up and every repetition, reporting `metric` per phase; when
// `speedup` is set, also reports the phase's rate over `baseline` (the rate of one thread) as that metric.
inline void report_rates(session& s, int threads, const launch_fn& launch, const char* metric,
                         const char* speedup = nullptr, double baseline = 0) {
    thread_counters c;
    auto finish = launch(threads, c);
    for (const phase& p : s.phases()) {
        auto c0 = c.total();
        auto t0 = bench_clock::now();
        std::this_thread::sleep_for(to_duration(p.seconds));
        auto c1 = c.total();
        auto t1 = bench_clock::now();
        double rate = static_cast<double>(c1 - c0) / std::chrono::duration<double>(t1 - t0).count();
        metric_values v{{metric, rate}};
        if (speedup) v.emplace_back(speedup, threads == 1 || baseline <= 0 ? 1.0 : rate / baseline);
        s.report(p, v);
    }
    c.request_stop();
    finish();
}

// dispatch/scaling: the 1-thread rate (measured in the same process, over one repetition's length, when threads
// > 1), then every phase of `threads` threads, with the speedup over the 1-thread rate.
inline void report_scaling(session& s, const launch_fn& launch) {
    int threads = static_cast<int>(s.param_int("threads"));
    double seconds = s.request().duration_s;
    double baseline = threads == 1 ? 0 : sample_rate(1, s.request().warmup_s, seconds, launch);
    report_rates(s, threads, launch, "ops_per_s", "speedup", baseline);
}

}  // namespace tern_bench
