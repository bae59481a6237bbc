// Allocations, system calls and wake-ups per operation: optional metrics that a worker adds to a scenario's own
// metrics.
//
// A worker executable that replaces the global operator new with a counting one (workers/count_allocations.cpp,
// linked into tern-bench-tern only) registers its counter here during static initialisation. The meters read it
// when a measured phase starts and when it ends, and report `allocs_per_op` = operator new calls in the phase /
// operations in the phase. The counter is per thread, so the figure is exact for the scenarios that run on one
// thread and is only reported for those (catalogue: single_thread). A worker without a counter (Asio, raw) reports
// no allocs_per_op, and the orchestrator keeps an optional metric only when every repetition has it.
//
// A worker whose runtime counts its own system calls and wake-ups (tern's loop metrics, tern/metrics.hpp)
// registers a reader of them: `syscalls_per_op` and `wakeups_per_op` are the process's totals over a measured
// phase, every loop of the worker together (a scenario's client and server loops when both run in the worker),
// divided by its operations. They cover any scenario, one thread or several.
#pragma once

#include "catalogue.hpp"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace tern_bench {

// Returns the number of operator new calls made so far by the calling thread.
using allocation_counter = std::uint64_t (*)() noexcept;

void register_allocation_counter(allocation_counter counter) noexcept;

// The worker's system calls and wake-ups so far, all threads together.
struct loop_counts {
    std::uint64_t syscalls = 0;
    std::uint64_t wakeups = 0;
    std::uint64_t parks = 0;   // blocking waits in the kernel
    std::uint64_t spins = 0;   // spins before a park (io_context_options::spin_before_park)
};
using loop_counter = loop_counts (*)() noexcept;

void register_loop_counter(loop_counter counter) noexcept;
std::optional<loop_counts> loop_counts_so_far() noexcept;

// The calling thread's operator new calls so far, or nullopt when this executable does not count them.
std::optional<std::uint64_t> allocations_so_far() noexcept;

// Metrics that a worker may report for any scenario without the catalogue listing them; never required.
const std::vector<metric_def>& optional_metrics();
const metric_def* find_optional_metric(std::string_view name);

inline constexpr const char* allocs_per_op_name = "allocs_per_op";
inline constexpr const char* syscalls_per_op_name = "syscalls_per_op";
inline constexpr const char* wakeups_per_op_name = "wakeups_per_op";
inline constexpr const char* parks_per_op_name = "parks_per_op";
inline constexpr const char* spins_per_op_name = "spins_per_op";

// Measures one phase: construct when the measured work starts, call per_op(ops) when it ends (before anything
// else allocates). Yields nothing when allocations are not counted or the scenario uses more than one thread.
class allocation_window {
public:
    explicit allocation_window(const scenario_def& s)
        : start_(s.single_thread ? allocations_so_far() : std::nullopt), loops_(loop_counts_so_far()) {}

    std::optional<double> per_op(std::uint64_t ops) const {
        if (!start_ || ops == 0) return std::nullopt;
        auto now = allocations_so_far();
        return static_cast<double>(*now - *start_) / static_cast<double>(ops);
    }

    // Appends syscalls_per_op, wakeups_per_op, parks_per_op and spins_per_op over the window, where the worker
    // counts them.
    template <class Values>
    void append_loop_figures(std::uint64_t ops, Values& values) const {
        if (!loops_ || ops == 0) return;
        loop_counts now = *loop_counts_so_far();
        values.emplace_back(syscalls_per_op_name,
                            static_cast<double>(now.syscalls - loops_->syscalls) / static_cast<double>(ops));
        values.emplace_back(wakeups_per_op_name,
                            static_cast<double>(now.wakeups - loops_->wakeups) / static_cast<double>(ops));
        values.emplace_back(parks_per_op_name,
                            static_cast<double>(now.parks - loops_->parks) / static_cast<double>(ops));
        values.emplace_back(spins_per_op_name,
                            static_cast<double>(now.spins - loops_->spins) / static_cast<double>(ops));
    }

private:
    std::optional<std::uint64_t> start_;
    std::optional<loop_counts> loops_;
};

}  // namespace tern_bench
