// The catalogue of tern-bench: every scenario, its parameter sweep per profile, its metrics, and every
// implementation with the worker executables that run it.
//
// The orchestrator and every worker link this one table, so a scenario's name, parameters and metric names
// cannot drift apart between the process that plans a run and the process that measures it: a worker refuses to
// report a metric that the catalogue does not define for its scenario.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tern_bench {

enum class better { higher, lower };
inline const char* to_string(better b) { return b == better::higher ? "higher" : "lower"; }

struct metric_def {
    std::string name;  // as in the JSON record: "ops_per_s", "p99_us"
    std::string unit;  // "ops/s", "us", "ns"
    better direction;
};

// A parameter value is an integer or a string; JSON records keep the distinction ({"size": 64, "config": "epoll"}).
using param_value = std::variant<std::int64_t, std::string>;
using param_list = std::vector<std::pair<std::string, param_value>>;

std::string to_string(const param_value& v);
std::string to_json(const param_list& p);                  // {"size": 64, "config": "epoll"}
std::string to_display(const param_list& p);               // size=64 config=epoll
const param_value* find_param(const param_list& p, std::string_view key);

enum class profile { quick, full };

// What tern-bench --instructions counts of a scenario (harness/instructions.hpp): a few points, each run once per
// implementation under callgrind with a fixed amount of work, reported as instructions per operation.
struct instruction_plan {
    std::string op;                // one operation, for the unit: "handler" gives "instr/handler"
    std::vector<param_list> points;  // empty: the scenario is not counted
    // Operations in the measured window for the scenarios whose meter cuts phases (ops_meter: handlers, timer
    // operations; throughput_meter: bytes, reported per MiB; a server scenario: requests), and in the warm-up
    // before it; 0 for a fixed-work scenario, whose point's n is the window's work and the warm-up's alike.
    std::int64_t ops = 0;
    std::int64_t warmup_ops = 0;
    std::vector<std::string> impls{};  // the implementations counted; empty: all of the scenario's
    // Also report one library's share (its objects in callgrind's per-object totals), so that what a stack adds
    // shows apart from the library's own work: OpenSSL (libssl, libcrypto) as openssl_instr_per_op for TLS, libpq
    // as libpq_instr_per_op for PostgreSQL.
    enum class library { none, openssl, libpq };
    library apart = library::none;
    // Implementation variants not counted, and why: impl id, config ("" for every one), the reason.
    struct exclusion {
        std::string impl;
        std::string config;
        std::string why;
    };
    std::vector<exclusion> excluded{};
};

inline constexpr const char* instr_per_op_name = "instr_per_op";
inline constexpr const char* openssl_instr_per_op_name = "openssl_instr_per_op";
inline constexpr const char* libpq_instr_per_op_name = "libpq_instr_per_op";
// The metric of a library's share, and the library a metric is the share of (none: not such a metric).
const char* library_metric_name(instruction_plan::library l);
instruction_plan::library library_of_metric(const std::string& metric);
// The library's name as a report shows it: "OpenSSL", "libpq".
const char* library_label(instruction_plan::library l);

struct scenario_def {
    std::string name;      // "category/name"
    std::string category;  // the part before '/'
    std::string summary;   // one line: what is measured and how every implementation does it
    std::vector<metric_def> metrics;
    std::vector<param_list> quick_points;
    std::vector<param_list> full_points;
    bool timed = true;          // runs for --duration per repetition; otherwise a fixed amount of work
    bool single_thread = true;  // its one thread is pinned to CPU 0 for every implementation
    std::vector<std::string> impls;
    // Seconds per timed repetition in the quick profile when --duration is not given; 0: the profile's default.
    // Lets the socket scenarios, which reach a steady state in a few ms, keep the quick profile short.
    double quick_duration_s = 0;
    // File descriptors one run of a point needs (its sockets plus a margin for the runtimes' own), or null when a
    // handful do. The orchestrator refuses, before running anything, a point that needs more than RLIMIT_NOFILE.
    std::int64_t (*fds_needed)(const param_list&) = nullptr;
    // Whether an implementation (impl id, variant config) runs a point, or null when every listed one runs every
    // point: for comparators that exist only in some configurations or modes (Asio's files need its io_uring
    // backend; libaio reads only O_DIRECT files).
    bool (*runs)(const param_list& point, std::string_view impl, std::string_view config) = nullptr;
    // Seconds per timed repetition in the full profile when --duration is not given; 0: the profile's default.
    // For the scenarios driven by an external load generator, whose runs follow the published ones' length.
    double full_duration_s = 0;
    // What tern is compared with: prefixes of implementation ids, the best of them at each point being the
    // reference of the ratio. Empty: Asio ("asio/"), the suite's comparator. A scenario without an Asio
    // implementation names its own (http/parse: Beast's and http-parser's parsers). The {} lets the catalogue's
    // aggregate initialisers leave it out without -Wmissing-field-initializers. An entry that is one of `impls`
    // names that one alone (raw/nghttp2 in http2/*, where raw/nghttp2_uring is not a comparator).
    std::vector<std::string> comparators{};
    // What --instructions counts (no points: nothing), and the metrics it reports, made from it by the catalogue:
    // instr_per_op, and a library's share where one is shown apart.
    instruction_plan instructions{};
    std::vector<metric_def> instr_metrics{};
    // A fixed-work scenario's longest expected repetition in seconds, which sets its worker's time limit and the
    // plan's estimate; 0: about a second. For the ones whose slowest implementation takes many seconds per round.
    double fixed_rep_s = 0;
    // Of impls, those the full profile alone runs: a second floor that the quick profile has no time for.
    std::vector<std::string> full_only{};

    const std::vector<param_list>& points(profile p) const { return p == profile::quick ? quick_points : full_points; }
    // Whether impl runs in the profile at all (runs_point then says at which points).
    bool runs_impl(std::string_view impl, profile p) const {
        const auto listed = [impl](const std::vector<std::string>& v) {
            return std::find(v.begin(), v.end(), impl) != v.end();
        };
        return listed(impls) && !(p == profile::quick && listed(full_only));
    }
    const metric_def* find_metric(std::string_view metric) const;
    const metric_def* find_instr_metric(std::string_view metric) const;
    bool runs_point(const param_list& point, std::string_view impl, std::string_view config) const {
        return runs == nullptr || runs(point, impl, config);
    }
    bool is_comparator(std::string_view impl) const;
    // "asio" for the default set, else the prefixes without their slash: "beast, http_parser".
    std::string comparator_name() const;
    // The scenario's own seconds per timed repetition in a profile, or 0 for the profile's default.
    double own_duration_s(profile p) const { return p == profile::quick ? quick_duration_s : full_duration_s; }
};

// One way to run an implementation: a worker executable and the configuration it was compiled with.
struct impl_variant {
    std::string config;  // "" when the implementation has a single configuration; else added to params as "config"
    std::string worker;  // executable name, a sibling of tern-bench
};

struct impl_def {
    std::string id;  // "tern/io_uring", "asio/callbacks", "raw/liburing"
    std::string summary;
    std::vector<impl_variant> variants;
    // The "backend" the worker must report for this implementation (tern's io_uring or epoll), checked by the
    // orchestrator so that a silent fallback cannot report under the wrong name; empty when there is none ({}: see
    // scenario_def::comparators).
    std::string backend{};
};

const std::vector<scenario_def>& scenarios();
const std::vector<impl_def>& implementations();
const scenario_def* find_scenario(std::string_view name);
const impl_def* find_impl(std::string_view id);
std::vector<std::string> categories();

}  // namespace tern_bench
