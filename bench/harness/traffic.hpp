// Meters and payload checks of the socket and http scenarios, shared by every implementation so that all of them
// are timed and verified by the same code:
//   throughput_meter  bytes per second through the phases (MB/s, MiB/s)
//   request_meter     completed operations per second and their latency histogram, in one phase
//   iteration_meter   microseconds per iteration of a fixed piece of work repeated through the phases
//   stream_pattern    the content of an unframed byte stream: byte i is a function of i alone, so any received
//                     chunk can be checked against the offset at which it arrives
// Like the meters of meters.hpp they cut the work into the warm-up and the repetitions without leaving the loop,
// and they return false once the last phase is over; the caller then winds its connections down.
//
// They are used from one thread: in the two-thread scenarios only the client side's loop touches them.
#pragma once

#include "allocations.hpp"
#include "histogram.hpp"
#include "meters.hpp"
#include "worker.hpp"

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tern_bench {

// Keeps the metrics that the scenario defines (an implementation computes the full set; a scenario may list only
// some of them), and the optional allocs_per_op.
inline metric_values keep_defined(const scenario_def& def, const metric_values& all) {
    metric_values out;
    for (auto& v : all)
        if (def.find_metric(v.first) || find_optional_metric(v.first)) out.push_back(v);
    return out;
}

// The phase bookkeeping the meters below share: which phase runs, when it ends, allocations in it. In instruction
// mode a phase ends after its count of operations (phase::ops, in the meter's units) instead of its seconds, and
// the measured phase is the instruction window (worker.hpp).
class phase_clock {
public:
    explicit phase_clock(session& s) : s_(s), phases_(s.phases()), counted_(s.instructions()) {}

    void start() { begin(bench_clock::now()); }
    bool done() const { return done_; }
    bool warmup() const { return phases_[current_].warmup; }
    bool counted() const { return counted_; }
    std::uint64_t target() const { return phases_[current_].ops; }
    bool over(bench_clock::time_point now) const { return now >= end_; }
    double seconds(bench_clock::time_point now) const { return std::chrono::duration<double>(now - start_).count(); }

    // Instruction mode: closes the window of a measured phase that held `window_ops` operations. Call first when
    // a phase ends, before anything else runs.
    void close_window(double window_ops) { s_.close_window(phases_[current_], window_ops); }

    // Ends the current phase at `now` with `values` (ignored for the warm-up), starts the next one; false when
    // that was the last.
    bool next(bench_clock::time_point now, metric_values values, std::uint64_t ops) {
        if (auto a = allocs_->per_op(ops)) values.emplace_back(allocs_per_op_name, *a);  // before report allocates
        allocs_->append_loop_figures(ops, values);
        s_.report(phases_[current_], keep_defined(s_.scenario(), values));
        if (++current_ == phases_.size()) {
            done_ = true;
            return false;
        }
        begin(now);
        return true;
    }

private:
    void begin(bench_clock::time_point now) {
        start_ = now;
        end_ = now + to_duration(phases_[current_].seconds);
        allocs_.emplace(s_.scenario());
        s_.open_window(phases_[current_]);
    }

    session& s_;
    std::vector<phase> phases_;
    bool counted_;
    std::size_t current_ = 0;
    bench_clock::time_point start_{};
    bench_clock::time_point end_{};
    std::optional<allocation_window> allocs_;
    bool done_ = false;
};

// Bytes through the phases; reports `metric` = bytes per second / unit (1e6 for MB/s, 2^20 for MiB/s). In
// instruction mode a phase ends after phase::ops bytes, and the window's operations are MiB (2^20 bytes).
class throughput_meter {
public:
    throughput_meter(session& s, std::string metric, double unit)
        : clock_(s), metric_(std::move(metric)), unit_(unit) {}

    void start() { clock_.start(); }
    bool done() const { return clock_.done(); }

    // Counts n bytes received. The clock is read every 8 calls: a phase overruns by at most 7 reads, which are
    // counted and timed with it, so the rate stays exact.
    bool add(std::size_t n) {
        if (clock_.done()) return false;
        bytes_ += n;
        ++calls_;
        if (clock_.counted()) {
            if (bytes_ < clock_.target()) return true;
            clock_.close_window(static_cast<double>(bytes_) / (1024.0 * 1024.0));
        } else if ((calls_ & 7) != 0) {
            return true;
        }
        auto now = bench_clock::now();
        if (!clock_.counted() && !clock_.over(now)) return true;
        double secs = clock_.seconds(now);
        bool more = clock_.next(now, {{metric_, static_cast<double>(bytes_) / secs / unit_}}, calls_);
        bytes_ = 0;
        calls_ = 0;
        return more;
    }

private:
    phase_clock clock_;
    std::string metric_;
    double unit_;
    std::uint64_t bytes_ = 0;
    std::uint64_t calls_ = 0;
};

// Completed operations (requests, laps, messages) through the phases: `rate_metric` = operations per second,
// and the latency statistics (mean_us, p50_us, p90_us, p99_us, p99_9_us, max_us) of the ones the scenario lists.
class request_meter {
public:
    request_meter(session& s, std::string rate_metric) : clock_(s), rate_metric_(std::move(rate_metric)) {}

    void start() { clock_.start(); }
    bool done() const { return clock_.done(); }

    // One operation that started at t0 and completed at t1 (t1 is a fresh clock read). False once every phase
    // is over; the caller then starts no new operation.
    bool record(bench_clock::time_point t0, bench_clock::time_point t1) {
        if (clock_.done()) return false;
        hist_.record(elapsed_ns(t0, t1));
        if (clock_.counted()) {
            if (hist_.count() < clock_.target()) return true;
            clock_.close_window(static_cast<double>(hist_.count()));
        } else if (!clock_.over(t1)) {
            return true;
        }
        if (hist_.count() == 0) throw bench_failure("no operation completed in a phase");
        double secs = clock_.seconds(t1);
        metric_values v{{rate_metric_, static_cast<double>(hist_.count()) / secs},
                        {"mean_us", hist_.mean_ns() / 1e3},
                        {"p50_us", hist_.percentile_ns(0.50) / 1e3},
                        {"p90_us", hist_.percentile_ns(0.90) / 1e3},
                        {"p99_us", hist_.percentile_ns(0.99) / 1e3},
                        {"p99_9_us", hist_.percentile_ns(0.999) / 1e3},
                        {"max_us", static_cast<double>(hist_.max_ns()) / 1e3}};
        bool more = clock_.next(t1, std::move(v), hist_.count());
        hist_.reset();
        return more;
    }

private:
    phase_clock clock_;
    std::string rate_metric_;
    latency_histogram hist_;
};

// Iterations of a fixed piece of work through the phases; reports `metric` = microseconds per iteration.
class iteration_meter {
public:
    iteration_meter(session& s, std::string metric) : clock_(s), metric_(std::move(metric)) {}

    void start() { clock_.start(); }
    bool done() const { return clock_.done(); }

    // One iteration finished (reads the clock: iterations are long). False once every phase is over.
    bool finished_one() {
        if (clock_.done()) return false;
        ++iterations_;
        if (clock_.counted()) {
            if (iterations_ < clock_.target()) return true;
            clock_.close_window(static_cast<double>(iterations_));
        }
        auto now = bench_clock::now();
        if (!clock_.counted() && !clock_.over(now)) return true;
        double us = clock_.seconds(now) * 1e6 / static_cast<double>(iterations_);
        bool more = clock_.next(now, {{metric_, us}}, iterations_);
        iterations_ = 0;
        return more;
    }

private:
    phase_clock clock_;
    std::string metric_;
    std::uint64_t iterations_ = 0;
};

// An unframed byte stream whose byte at offset i is block[i % period]: a sender writes straight from at(offset),
// a receiver checks each chunk against the offset where it lands, so a lost, duplicated, reordered or corrupted
// byte fails the run. The period is prime for the throughput scenarios (chunk boundaries never line up with it);
// the echo scenario uses its block size, because what circulates there is one block echoed over and over.
class stream_pattern {
public:
    // Any chunk of up to max_chunk bytes can be read from at(offset).
    stream_pattern(std::size_t max_chunk, std::size_t period) : period_(period), bytes_(max_chunk + period) {
        std::vector<unsigned char> block(period);
        std::uint32_t x = 0x2545f491u;
        for (auto& b : block) {
            x = x * 1664525u + 1013904223u;
            b = static_cast<unsigned char>(x >> 24);
        }
        for (std::size_t i = 0; i < bytes_.size(); ++i) bytes_[i] = block[i % period];
    }

    std::size_t period() const { return period_; }
    const unsigned char* at(std::uint64_t offset) const { return bytes_.data() + offset % period_; }

    // Throws bench_failure unless data[0..n) is the stream at offset..offset+n (n <= max_chunk).
    void verify(const void* data, std::size_t n, std::uint64_t offset, const char* side) const {
        if (std::memcmp(data, at(offset), n) != 0) {
            auto* p = static_cast<const unsigned char*>(data);
            std::size_t i = 0;
            while (i < n && p[i] == at(offset)[i]) ++i;
            throw bench_failure(std::string(side) + ": stream corrupted at byte offset " + std::to_string(offset + i));
        }
    }

private:
    std::size_t period_;
    std::vector<unsigned char> bytes_;
};

}  // namespace tern_bench
