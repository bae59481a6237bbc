// The worker side of tern-bench: one executable per implementation family runs one measurement point.
//
// The orchestrator starts a worker as a child process for each (scenario, parameters, implementation,
// configuration) point, so that every implementation is measured the same way (own process, own peak RSS, Asio
// configurations never share a binary). A worker:
//   1. parses `--scenario S --impl I --param k=v... --duration D --warmup W --repeat R [--cpu C]`,
//   2. pins itself to CPU C when asked (before any runtime object exists, so every thread it makes inherits it),
//   3. runs one warm-up phase whose result is discarded, then R measured phases,
//   4. prints one JSON line per measured phase on stdout: {"type": "rep", "index": 0, "metrics": {...}}, plus
//      {"type": "info", ...} lines (resolved backend, affinity) and a final {"type": "done"}.
// With `--instructions N` the worker runs under callgrind (tern-bench --instructions): a warm-up of a fixed count
// of operations, then one measured phase of N operations whose instructions alone are counted, and one
// {"type": "instr", "ops": ...} line in place of the rep lines (see instructions.hpp).
// Any failure (a payload mismatch, an unexpected error code, a backend that is not the one asked for) is an
// exception: the worker prints it on stderr and exits 1, and the orchestrator marks the point failed.
#pragma once

#include "allocations.hpp"
#include "catalogue.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tern_bench {

using bench_clock = std::chrono::steady_clock;

// Thrown by an implementation when the run is invalid (wrong payload, unexpected error); fails the point.
struct bench_failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// One phase of a measurement: the warm-up (never reported) or one repetition.
struct phase {
    bool warmup = false;
    int index = 0;         // repetition number; -1 for the warm-up
    double seconds = 0;    // length of a timed phase; unused by fixed-work scenarios
    // Instruction mode only: the operations (in the meter's own units) after which a meter ends the phase, in
    // place of `seconds`, so that every run does the same work; 0 otherwise.
    std::uint64_t ops = 0;
};

using metric_values = std::vector<std::pair<std::string, double>>;

struct run_request {
    std::string scenario;
    std::string impl;
    std::map<std::string, std::string> params;
    double duration_s = 1.0;
    double warmup_s = 0.2;
    int repeat = 3;
    int cpu = -1;  // -1: not pinned
    // Instruction mode (--instructions N [--instructions-warmup W]): -1 off; else the operations of the measured
    // phase of a meter that cuts phases by count (0 for a fixed-work scenario, whose work is its parameter n).
    std::int64_t instr_ops = -1;
    std::int64_t instr_warmup_ops = 0;
};

class session {
public:
    session(run_request req, const scenario_def& def) : req_(std::move(req)), def_(def) {}

    const run_request& request() const { return req_; }
    const scenario_def& scenario() const { return def_; }

    std::int64_t param_int(const std::string& key) const;

    // The warm-up first, then `repeat` repetitions; in instruction mode the warm-up and one measured phase, each
    // with its count of operations.
    std::vector<phase> phases() const;

    // Reports a measured phase (a warm-up is ignored). Every metric of the scenario must be present. In
    // instruction mode nothing is reported: timings under callgrind mean nothing, and close_window reports.
    void report(const phase& p, const metric_values& values);

    // Instruction mode: whether the worker counts instructions instead of timing.
    bool instructions() const { return req_.instr_ops >= 0; }

    // Instruction mode, measured phase: starts counting instructions (every thread of the process). The meters
    // call it where a measured phase starts; a no-op otherwise.
    void open_window(const phase& p);
    // Stops counting and reports the operations the window held (a no-op outside the measured phase of
    // instruction mode). The orchestrator divides callgrind's count by `ops`.
    void close_window(const phase& p, double ops);
    // The {"type": "instr"} line of a window that a server's request count closed (instructions.hpp).
    void report_window(double ops);

    // A fact about the run for the orchestrator (e.g. "backend": "io_uring").
    void info(const std::string& key, const std::string& value);

    // Runs `measure(phase)` for every phase and reports what it returns: the shape of scenarios that set up
    // their loop afresh for each phase. A fixed-work scenario states its work as the parameter `n`; when the
    // worker counts allocations, allocs_per_op is what measure() allocated divided by n.
    template <class F>
    void for_each_phase(F&& measure) {
        for (const phase& p : phases()) {
            allocation_window allocs(def_);
            open_window(p);
            metric_values values = measure(p);
            close_window(p, static_cast<double>(work_count()));
            if (auto per_op = allocs.per_op(work_count())) values.emplace_back(allocs_per_op_name, *per_op);
            allocs.append_loop_figures(work_count(), values);
            report(p, values);
        }
    }

private:
    // The parameter n of a fixed-work scenario, else 0 (no per-operation figure).
    std::uint64_t work_count() const;

    bool window_open_ = false;

    run_request req_;
    const scenario_def& def_;
};

using impl_fn = void (*)(session&);

struct impl_entry {
    const char* scenario;
    const char* impl;
    impl_fn run;
};

// The whole main() of a worker executable: `entries` is what it implements, `worker` its name (for messages).
int worker_main(int argc, char** argv, std::span<const impl_entry> entries, const char* worker);

// Pins the calling thread to one CPU; throws bench_failure when the kernel refuses.
void pin_to_cpu(int cpu);

}  // namespace tern_bench
