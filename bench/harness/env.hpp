// The environment block that opens every report: what ran, where, built how (BENCHMARKS.md, "How every scenario
// is run"). Collected once by the orchestrator.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tern_bench {

struct environment {
    std::vector<std::pair<std::string, std::string>> fields;  // label, value; in print order
};

environment collect_environment(const std::string& pinning);

// The 1, 5 and 15 minute load averages with the runnable/total task counts (/proc/loadavg). Recorded before and
// after a run: other work on the machine shows up here before it shows up as noise in the numbers.
std::string load_average();

// "label : value" lines for the terminal, and a Markdown list for report.md.
std::string format_text(const environment& env);
std::string format_markdown(const environment& env);

}  // namespace tern_bench
