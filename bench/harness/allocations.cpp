#include "allocations.hpp"

namespace tern_bench {

namespace {

// Set during static initialisation of a counting worker, before main; read only after main starts.
constinit allocation_counter registered = nullptr;
constinit loop_counter registered_loops = nullptr;

}  // namespace

void register_allocation_counter(allocation_counter counter) noexcept { registered = counter; }

void register_loop_counter(loop_counter counter) noexcept { registered_loops = counter; }

std::optional<loop_counts> loop_counts_so_far() noexcept {
    if (!registered_loops) return std::nullopt;
    return registered_loops();
}

std::optional<std::uint64_t> allocations_so_far() noexcept {
    if (!registered) return std::nullopt;
    return registered();
}

const std::vector<metric_def>& optional_metrics() {
    static const std::vector<metric_def> all = {{allocs_per_op_name, "allocs/op", better::lower},
                                                {syscalls_per_op_name, "syscalls/op", better::lower},
                                                {wakeups_per_op_name, "wakeups/op", better::lower},
                                                {parks_per_op_name, "parks/op", better::lower},
                                                {spins_per_op_name, "spins/op", better::lower}};
    return all;
}

const metric_def* find_optional_metric(std::string_view name) {
    for (auto& m : optional_metrics())
        if (m.name == name) return &m;
    return nullptr;
}

}  // namespace tern_bench
