// Log-linear latency histogram (HdrHistogram style) with at most 1% relative error.
//
// Every power of two above 256 ns is split into 128 equal sub-buckets, so a bucket is at most 1/128 (0.78%) of its
// lower bound wide; values below 256 ns get exact buckets. A percentile reports the middle of its bucket, which
// bounds the error by half a bucket (0.39%), and is clamped to the exact minimum and maximum. Recording is an index
// computation and an increment: cheap enough to run on every round trip without disturbing what it measures.
// Count, sum, min and max are kept exactly, so the mean and the maximum carry no bucketing error at all.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

namespace tern_bench {

class latency_histogram {
public:
    latency_histogram() : counts_(bucket_count, 0) {}

    void record(std::uint64_t ns) {
        ++counts_[index_of(ns)];
        ++count_;
        sum_ += ns;
        min_ = std::min(min_, ns);
        max_ = std::max(max_, ns);
    }

    void reset() {
        std::fill(counts_.begin(), counts_.end(), 0);
        count_ = 0;
        sum_ = 0;
        min_ = std::numeric_limits<std::uint64_t>::max();
        max_ = 0;
    }

    std::uint64_t count() const { return count_; }
    std::uint64_t min_ns() const { return count_ ? min_ : 0; }
    std::uint64_t max_ns() const { return max_; }
    double mean_ns() const { return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0.0; }

    // The value below which a fraction q (0..1) of the samples lie: the smallest bucket whose cumulative count
    // reaches ceil(q * count), reported at its midpoint.
    double percentile_ns(double q) const {
        if (count_ == 0) return 0;
        auto rank = static_cast<std::uint64_t>(q * static_cast<double>(count_));
        if (static_cast<double>(rank) < q * static_cast<double>(count_)) ++rank;
        rank = std::clamp<std::uint64_t>(rank, 1, count_);
        std::uint64_t seen = 0;
        for (std::size_t i = 0; i < counts_.size(); ++i) {
            seen += counts_[i];
            if (seen >= rank) {
                double mid = midpoint_of(i);
                return std::clamp(mid, static_cast<double>(min_), static_cast<double>(max_));
            }
        }
        return static_cast<double>(max_);
    }

    // Bucket geometry, public so that the error bound can be tested.
    static constexpr unsigned sub_bits = 7;
    static constexpr std::uint64_t sub_count = 1u << sub_bits;   // sub-buckets per power of two
    static constexpr std::uint64_t exact_limit = 2 * sub_count;  // below this every value has its own bucket
    static constexpr std::size_t bucket_count = exact_limit + (64 - sub_bits - 1) * sub_count;

    static std::size_t index_of(std::uint64_t v) {
        if (v < exact_limit) return static_cast<std::size_t>(v);
        unsigned msb = 63u - static_cast<unsigned>(std::countl_zero(v));
        unsigned shift = msb - sub_bits;  // >= 1 here
        std::uint64_t top = v >> shift;   // in [sub_count, 2 * sub_count)
        return static_cast<std::size_t>(exact_limit + (shift - 1) * sub_count + (top - sub_count));
    }

    static double midpoint_of(std::size_t i) {
        if (i < exact_limit) return static_cast<double>(i);
        std::uint64_t rel = i - exact_limit;
        unsigned shift = static_cast<unsigned>(rel / sub_count) + 1;
        std::uint64_t top = sub_count + rel % sub_count;
        double low = static_cast<double>(top << shift);
        double width = static_cast<double>(std::uint64_t{1} << shift);
        return low + (width - 1) / 2;
    }

private:
    std::vector<std::uint64_t> counts_;
    std::uint64_t count_ = 0;
    std::uint64_t sum_ = 0;
    std::uint64_t min_ = std::numeric_limits<std::uint64_t>::max();
    std::uint64_t max_ = 0;
};

}  // namespace tern_bench
