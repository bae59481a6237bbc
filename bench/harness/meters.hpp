// Meters that run inside an event loop: they count work and cut it into the warm-up and repetition phases
// without leaving the loop, so a loop, its connections and its timers are set up once per worker and every phase
// measures the same warmed-up state.
//
// Each implementation calls the meter from its own handlers or coroutines; the meter owns the clock reads and
// the reporting, so every implementation is timed by the same code.
#pragma once

#include "allocations.hpp"
#include "histogram.hpp"
#include "worker.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace tern_bench {

inline std::uint64_t elapsed_ns(bench_clock::time_point a, bench_clock::time_point b) {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

inline bench_clock::duration to_duration(double seconds) {
    return std::chrono::duration_cast<bench_clock::duration>(std::chrono::duration<double>(seconds));
}

// Counts operations through the phases; reports `metric` = operations per second of each measured phase. In
// instruction mode a phase ends after its count of operations instead of its seconds, and the measured one is
// the instruction window (worker.hpp).
class ops_meter {
public:
    ops_meter(session& s, std::string metric)
        : s_(s), metric_(std::move(metric)), phases_(s.phases()), counted_(s.instructions()) {}

    // Starts the first phase; call right before the measured work starts.
    void start() { begin_phase(bench_clock::now()); }

    // Counts one operation. Returns false once every phase is over, and keeps returning false after that.
    // The clock is read every 256 operations: cheap next to the work, and a phase overruns by at most 255 ops,
    // which are counted and timed, so the rate is exact. In instruction mode the phase ends at the first multiple
    // of 256 at or past its count, and the clock is not read inside it.
    bool tick() {
        if (done_) return false;
        ++ops_;
        if ((ops_ & 255) != 0) return true;
        if (counted_ ? ops_ < phases_[current_].ops : bench_clock::now() < end_) return true;
        return end_phase();
    }

    bool done() const { return done_; }

private:
    bool end_phase() {
        s_.close_window(phases_[current_], static_cast<double>(ops_));
        auto now = bench_clock::now();
        auto allocs = allocs_->per_op(ops_);  // before the report allocates
        double secs = std::chrono::duration<double>(now - start_).count();
        metric_values values{{metric_, static_cast<double>(ops_) / secs}};
        if (allocs) values.emplace_back(allocs_per_op_name, *allocs);
        allocs_->append_loop_figures(ops_, values);
        s_.report(phases_[current_], values);
        if (++current_ == phases_.size()) {
            done_ = true;
            return false;
        }
        begin_phase(now);
        return true;
    }

    void begin_phase(bench_clock::time_point now) {
        ops_ = 0;
        start_ = now;
        end_ = now + to_duration(phases_[current_].seconds);
        allocs_.emplace(s_.scenario());
        s_.open_window(phases_[current_]);
    }

    session& s_;
    std::string metric_;
    std::vector<phase> phases_;
    bool counted_;
    std::size_t current_ = 0;
    std::uint64_t ops_ = 0;
    bench_clock::time_point start_{};
    bench_clock::time_point end_{};
    std::optional<allocation_window> allocs_;
    bool done_ = false;
};

// Records round-trip latencies through the phases; reports mean, p50, p90, p99, p99.9 and max in us.
class latency_meter {
public:
    // What a phase reports: a round trip's mean, p50, p90, p99, p99.9 and max, a timer's lateness (mean and p99),
    // or a periodic task's jitter (lateness min, mean, p99 and max).
    enum class figures { round_trip, lateness, jitter };

    explicit latency_meter(session& s, figures f = figures::round_trip) : s_(s), phases_(s.phases()), figures_(f) {}

    void start() { begin_phase(bench_clock::now()); }

    // Records one round trip from t0 to t1. Returns false once every phase is over.
    bool record(bench_clock::time_point t0, bench_clock::time_point t1) {
        if (done_) return false;
        if (!phases_[current_].warmup) hist_.record(elapsed_ns(t0, t1));
        if (t1 < end_) return true;
        if (!phases_[current_].warmup) {
            if (hist_.count() == 0) throw bench_failure("nothing was recorded in a phase");
            auto allocs = allocs_->per_op(hist_.count());  // before the report allocates
            metric_values values;
            if (figures_ == figures::lateness) {
                values = {{"lateness_mean_us", hist_.mean_ns() / 1e3}, {"lateness_p99_us", hist_.percentile_ns(0.99) / 1e3}};
            } else if (figures_ == figures::jitter) {
                values = {{"lateness_min_us", static_cast<double>(hist_.min_ns()) / 1e3},
                          {"lateness_mean_us", hist_.mean_ns() / 1e3},
                          {"lateness_p99_us", hist_.percentile_ns(0.99) / 1e3},
                          {"lateness_max_us", static_cast<double>(hist_.max_ns()) / 1e3}};
            } else {
                values = {{"mean_us", hist_.mean_ns() / 1e3},
                          {"p50_us", hist_.percentile_ns(0.50) / 1e3},
                          {"p90_us", hist_.percentile_ns(0.90) / 1e3},
                          {"p99_us", hist_.percentile_ns(0.99) / 1e3},
                          {"p99_9_us", hist_.percentile_ns(0.999) / 1e3},
                          {"max_us", static_cast<double>(hist_.max_ns()) / 1e3}};
            }
            if (allocs) values.emplace_back(allocs_per_op_name, *allocs);
            allocs_->append_loop_figures(hist_.count(), values);
            s_.report(phases_[current_], values);
        }
        if (++current_ == phases_.size()) {
            done_ = true;
            return false;
        }
        begin_phase(t1);
        return true;
    }

    bool done() const { return done_; }

private:
    void begin_phase(bench_clock::time_point now) {
        hist_.reset();
        end_ = now + to_duration(phases_[current_].seconds);
        allocs_.emplace(s_.scenario());
    }

    session& s_;
    std::vector<phase> phases_;
    figures figures_;
    std::size_t current_ = 0;
    latency_histogram hist_;
    bench_clock::time_point end_{};
    std::optional<allocation_window> allocs_;
    bool done_ = false;
};

// Records how late timers fire through the phases: each call gives a timer's scheduled deadline and the time its
// waiter ran; reports lateness_mean_us and lateness_p99_us. Several timers record into one meter; the phase ends
// at the first record past its end. A timer that ran before its deadline (which no runtime here allows) fails the
// run.
class lateness_meter {
public:
    explicit lateness_meter(session& s, latency_meter::figures f = latency_meter::figures::lateness) : meter_(s, f) {}

    void start() { meter_.start(); }

    // Returns false once every phase is over.
    bool record(bench_clock::time_point deadline, bench_clock::time_point ran) {
        if (ran < deadline)
            throw bench_failure("a timer fired " + std::to_string(elapsed_ns(ran, deadline)) + " ns before its deadline");
        return meter_.record(deadline, ran);
    }

    bool done() const { return meter_.done(); }

private:
    latency_meter meter_;
};

// The first deadline of timer i of n periodic timers: one period after start, shifted by i/n of a period, so the
// timers' deadlines are spread evenly over each period (as independent periodic timers would be), the same for
// every implementation.
inline bench_clock::time_point periodic_first_deadline(bench_clock::time_point start, std::chrono::microseconds period,
                                                       std::size_t i, std::size_t n) {
    return start + period + std::chrono::duration_cast<bench_clock::duration>(period * static_cast<double>(i) /
                                                                               static_cast<double>(n));
}

// The bytes of round `r` of a ping-pong: a window into a fixed pseudo-random block that starts at a different
// offset each round, so a stale or misplaced buffer cannot pass verification, and building and checking a
// message costs one memcmp, the same for every implementation.
class payload_pattern {
public:
    explicit payload_pattern(std::size_t size) : size_(size), bytes_(size + period) {
        std::uint32_t x = 0x9e3779b9u;
        for (auto& b : bytes_) {
            x = x * 1664525u + 1013904223u;  // LCG: only needs to be irregular, not random
            b = static_cast<unsigned char>(x >> 24);
        }
    }

    std::size_t size() const { return size_; }
    const unsigned char* round(std::uint64_t r) const { return bytes_.data() + r % period; }

    // Throws bench_failure unless `data` holds exactly round r's bytes.
    void verify(const void* data, std::uint64_t r, const char* side) const {
        if (std::memcmp(data, round(r), size_) != 0)
            throw bench_failure(std::string(side) + ": payload mismatch in round " + std::to_string(r));
    }

private:
    static constexpr std::size_t period = 251;  // prime, so offsets do not line up with power-of-two sizes
    std::size_t size_;
    std::vector<unsigned char> bytes_;
};

// Delays for the "other live timers" of timers/schedule_cancel: uniform over 30..90 minutes from a fixed seed, so
// every implementation gets the same set and the measured 1 h timer lands in the middle of them (neither the
// earliest nor the latest, which some timer structures would favour).
inline std::vector<std::chrono::nanoseconds> background_timer_delays(std::size_t n) {
    std::mt19937_64 rng(20240601);
    std::uniform_int_distribution<std::int64_t> minutes_ns(std::chrono::nanoseconds(std::chrono::minutes(30)).count(),
                                                           std::chrono::nanoseconds(std::chrono::minutes(90)).count());
    std::vector<std::chrono::nanoseconds> out(n);
    for (auto& d : out) d = std::chrono::nanoseconds(minutes_ns(rng));
    return out;
}

}  // namespace tern_bench
