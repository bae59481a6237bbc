// tern-bench --instructions: each point's worker under callgrind, its count turned into instr_per_op records.
//
// A point runs as `valgrind --tool=callgrind --instr-atstart=no -q --callgrind-out-file=F <worker> ...
// --instructions N --instructions-warmup W`: the worker does its set-up and a warm-up of W operations with
// callgrind's instrumentation off, counts one measured phase of N operations (its meter opens and closes the
// window, harness/instructions.hpp), and prints how many operations the window held; callgrind writes the
// window's instructions to F at exit. instr_per_op = instructions / operations; where a scenario shows OpenSSL
// apart, openssl_instr_per_op is the part that ran in libssl and libcrypto (callgrind's per-object self cost), and
// libpq_instr_per_op the part that ran in libpq where libpq is.
// --repeat runs the point that many times: the counts are exact, so min and max differ only where the work itself
// depends on timing (a server's loop turns, two threads interleaving).
#pragma once

#include "catalogue.hpp"
#include "report.hpp"

#include <string>
#include <vector>

namespace tern_bench {

struct instruction_point {
    const scenario_def* scenario = nullptr;
    param_list point;
    const impl_def* impl = nullptr;
    impl_variant variant;
};

// Every counted point of the selected scenarios for the selected implementations, in catalogue order; the
// variants a scenario's plan leaves out go to `excluded`, one entry each, with the reason.
std::vector<instruction_point> plan_instructions(const std::vector<const scenario_def*>& scen,
                                                 const std::vector<const impl_def*>& impls,
                                                 std::vector<failure>& excluded);

// valgrind on PATH, or "" when it is not installed.
std::string find_valgrind();
// `valgrind --version`, e.g. "valgrind-3.19.0".
std::string valgrind_version(const std::string& valgrind);

struct instruction_outcome {
    std::vector<record> records;
    std::string error;  // empty on success
};

// Runs one point `repeat` times. `keep_dir`, when not empty, receives each run's callgrind file (for
// callgrind_annotate), named after the point.
instruction_outcome run_instruction_point(const instruction_point& p, const std::string& valgrind,
                                          const std::string& worker_dir, int repeat, const std::string& keep_dir);

// The text of the report's method for an instruction run.
std::string instruction_method_text(const std::string& command, const std::string& valgrind_version, int repeat);

}  // namespace tern_bench
