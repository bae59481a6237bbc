// Summary of repeated measurements: the median is the figure, min and max show the spread (BENCHMARKS.md).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tern_bench {

struct summary {
    double median = 0;
    double min = 0;
    double max = 0;
    std::size_t runs = 0;
};

// The median of an even count is the mean of the two middle values, so two runs give their midpoint.
inline summary summarize(std::vector<double> v) {
    summary s;
    s.runs = v.size();
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    s.min = v.front();
    s.max = v.back();
    std::size_t mid = v.size() / 2;
    s.median = v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
    return s;
}

}  // namespace tern_bench
