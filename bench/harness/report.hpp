// Results of a tern-bench run and their three renderings: terminal tables, JSON lines (--json), report.md
// (--report). Every comparison is given as a ratio to the best Asio configuration of the same point.
#pragma once

#include "catalogue.hpp"
#include "env.hpp"
#include "stats.hpp"

#include <string>
#include <vector>

namespace tern_bench {

// One measured point and metric: the unit of the JSON output.
struct record {
    const scenario_def* scenario = nullptr;
    param_list point;   // the scenario's parameters, without the configuration
    std::string config;  // "epoll" / "io_uring" for Asio, else empty
    const impl_def* impl = nullptr;
    const metric_def* metric = nullptr;
    summary stats;
    long peak_rss_bytes = 0;

    param_list params() const;  // point plus {"config": ...} when there is one
};

struct failure {
    std::string what;  // scenario, params, impl
    std::string why;
    bool tern = false;  // the point of a tern implementation (not a whole point refused for every implementation)
};

// Ratio of `r` to the best Asio record of the same scenario, point and metric: > 1 means better than that Asio
// configuration whichever direction the metric goes. Null when no Asio record exists; `best` receives it. A
// scenario that names its own comparators (scenario_def::comparators) is compared with the best of those.
const record* best_asio(const std::vector<record>& all, const record& r);
double ratio_to(const record& r, const record& asio);

// One tern figure next to the best Asio configuration of its point.
struct comparison {
    const record* tern = nullptr;
    const record* asio = nullptr;
    double ratio = 0;      // ratio_to(*tern, *asio): < 1 means tern trails
    bool spread_known = false;  // both figures come from 2 or more runs, so their min..max ranges mean something
    bool overlap = false;       // the two min..max ranges overlap: the gap is within the run-to-run spread
};

// Every record of a tern implementation that has an Asio record of the same scenario, point and metric; in
// catalogue order, then point, metric and implementation.
std::vector<comparison> tern_comparisons(const std::vector<record>& all);

std::string format_value(double v);

// A chart that tern-bench-plot.py drew for a scenario; `file` is relative to the report directory.
struct plot_ref {
    std::string scenario;
    std::string file;
    std::string title;
};

struct report_inputs {
    std::string method;          // how this run was made (profile, phases, command line)
    std::vector<plot_ref> plots;
    std::string plots_note;      // said in the report when there are no charts (matplotlib missing, failure)
};

std::string format_tables(const std::vector<record>& all);        // terminal
std::string format_trailing_text(const std::vector<record>& all); // terminal: the figures where tern trails
std::string format_json_lines(const std::vector<record>& all);    // one record per line
std::string format_instruction_table(const std::vector<record>& all);  // terminal: instructions per operation
std::string format_report_md(const environment& env, const report_inputs& in, const std::vector<record>& all,
                             const std::vector<failure>& failures);

}  // namespace tern_bench
