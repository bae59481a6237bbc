// The tern-bench command line (BENCHMARKS.md, "Command line"):
//   tern-bench [--category C]... [--scenario GLOB]... [--impl GLOB]... [--profile quick|full] [--duration S]
//              [--warmup S] [--repeat N] [--instructions] [--json FILE] [--report DIR] [--list]
// A name or glob that matches nothing is an error that lists the valid names.
#pragma once

#include "catalogue.hpp"

#include <optional>
#include <string>
#include <vector>

namespace tern_bench {

struct options {
    std::vector<std::string> categories;
    std::vector<std::string> scenario_globs;
    std::vector<std::string> impl_globs;
    profile prof = profile::quick;
    std::optional<double> duration_s;  // default from the profile
    std::optional<double> warmup_s;    // default from the profile
    int repeat = 3;
    bool repeat_given = false;
    bool instructions = false;  // count instructions per operation under callgrind instead of timing
    std::string json_file;
    std::string report_dir;
    bool list = false;
    bool help = false;
};

// Throws std::invalid_argument with a message meant for the user.
options parse_options(int argc, char** argv);

// The usage text for --help.
std::string usage();

// The selected scenarios and implementations, in catalogue order; throws std::invalid_argument when a category,
// scenario glob or implementation glob matches nothing (the message lists the valid names).
std::vector<const scenario_def*> select_scenarios(const options& o);
std::vector<const impl_def*> select_impls(const options& o);

}  // namespace tern_bench
