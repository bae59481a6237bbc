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
};

// Ratio of `r` to the best Asio record of the same scenario, point and metric: > 1 means better than that Asio
// configuration whichever direction the metric goes. Null when no Asio record exists; `best` receives it.
const record* best_asio(const std::vector<record>& all, const record& r);
double ratio_to(const record& r, const record& asio);

std::string format_value(double v);

std::string format_tables(const std::vector<record>& all);        // terminal
std::string format_json_lines(const std::vector<record>& all);    // one record per line
std::string format_report_md(const environment& env, const std::string& method, const std::vector<record>& all,
                             const std::vector<failure>& failures);

}  // namespace tern_bench
