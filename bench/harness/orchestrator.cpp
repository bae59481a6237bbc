// tern-bench: the orchestrator. It plans the selected points, runs each one in a worker process, and reports.
//
// Why processes: Asio's two Linux configurations (epoll reactor; io_uring backend) come from compile-time macros,
// and compiling Asio both ways into one program would violate the ODR, so each configuration is its own worker
// executable. Once Asio needs that, every implementation (tern, raw liburing) runs as a worker too, so all are
// measured the same way: a fresh process per point, pinned the same way, its peak RSS taken from wait4, its
// results read back as JSON lines (see worker.hpp for the protocol).
//
// Flow: parse the command line -> print the environment -> for each scenario, point (the profile's sweep),
// implementation and configuration, run the worker (warm-up + --repeat repetitions) -> summarise each metric as
// median/min/max -> print one table per scenario and metric with the ratio to the best Asio configuration ->
// write --json records and --report DIR/report.md.

#include "catalogue.hpp"
#include "cli.hpp"
#include "env.hpp"
#include "json.hpp"
#include "process.hpp"
#include "report.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>

using namespace tern_bench;

namespace {

// Every scenario so far runs on one thread; the worker pins itself before it creates anything.
constexpr int pinned_cpu = 0;
const char* const pinning_text =
    "single-thread scenarios run in a worker process pinned to CPU 0 (sched_setaffinity before the runtime starts; "
    "every thread it creates inherits it), the same for every implementation; the orchestrator is not pinned";

struct planned_run {
    const scenario_def* scenario;
    param_list point;
    const impl_def* impl;
    impl_variant variant;
};

std::vector<planned_run> make_plan(const std::vector<const scenario_def*>& scen, const std::vector<const impl_def*>& impls,
                                   profile prof) {
    std::vector<planned_run> plan;
    for (auto* s : scen)
        for (auto& point : s->points(prof))
            for (auto* i : impls) {
                if (std::find(s->impls.begin(), s->impls.end(), i->id) == s->impls.end()) continue;
                for (auto& v : i->variants) plan.push_back({s, point, i, v});
            }
    return plan;
}

double expected_seconds(const planned_run& r, double duration, double warmup, int repeat) {
    // Fixed-work scenarios take well under a second per repetition at the quick sizes; 1 s is a fair guess.
    double per_rep = r.scenario->timed ? duration : 1.0;
    return warmup + per_rep * repeat + 0.2;
}

void print_list(const std::vector<const scenario_def*>& scen, const std::vector<const impl_def*>& impls) {
    for (auto* s : scen) {
        std::printf("%s\n  %s\n", s->name.c_str(), s->summary.c_str());
        std::string metrics;
        for (auto& m : s->metrics) metrics += (metrics.empty() ? "" : ", ") + m.name + " [" + m.unit + "]";
        std::printf("  metrics: %s (%s is better)\n", metrics.c_str(), to_string(s->metrics.front().direction));
        for (auto prof : {profile::quick, profile::full}) {
            std::string pts;
            for (auto& p : s->points(prof)) pts += (pts.empty() ? "" : "; ") + to_display(p);
            std::printf("  %s: %s\n", prof == profile::quick ? "quick" : "full ", pts.c_str());
        }
        std::string ids;
        for (auto* i : impls)
            if (std::find(s->impls.begin(), s->impls.end(), i->id) != s->impls.end()) {
                ids += (ids.empty() ? "" : ", ") + i->id;
                if (i->variants.size() > 1) {
                    std::string cfg;
                    for (auto& v : i->variants) cfg += (cfg.empty() ? "" : "|") + v.config;
                    ids += " {config=" + cfg + "}";
                }
            }
        std::printf("  implementations: %s\n  timing: %s\n\n", ids.c_str(),
                    s->timed ? "--duration per repetition" : "fixed work per repetition");
    }
}

std::string progress_summary(const scenario_def& s, const std::map<std::string, std::vector<double>>& values) {
    // Throughput scenarios have one metric; for latency show the centre and the tail.
    std::vector<std::string> shown;
    if (s.metrics.size() == 1)
        shown.push_back(s.metrics[0].name);
    else
        shown = {"p50_us", "p99_us"};
    std::string out;
    for (auto& name : shown) {
        auto it = values.find(name);
        if (it == values.end()) continue;
        const metric_def* m = s.find_metric(name);
        out += (out.empty() ? "" : ", ") + (s.metrics.size() > 1 ? name + " " : "") +
               format_value(summarize(it->second).median) + " " + m->unit;
    }
    return out;
}

struct run_outcome {
    std::vector<record> records;
    std::string error;  // empty on success
};

run_outcome run_point(const planned_run& r, const std::string& dir, double duration, double warmup, int repeat) {
    run_outcome out;
    std::vector<std::string> args = {"--scenario", r.scenario->name, "--impl", r.impl->id};
    for (auto& [k, v] : r.point) {
        args.push_back("--param");
        args.push_back(k + "=" + to_string(v));
    }
    char num[64];
    std::snprintf(num, sizeof num, "%g", duration);
    args.insert(args.end(), {"--duration", num});
    std::snprintf(num, sizeof num, "%g", warmup);
    args.insert(args.end(), {"--warmup", num, "--repeat", std::to_string(repeat)});
    if (r.scenario->single_thread) args.insert(args.end(), {"--cpu", std::to_string(pinned_cpu)});

    std::map<std::string, std::vector<double>> values;
    std::map<std::string, std::string> info;
    std::string protocol_error;
    bool done = false;
    int reps = 0;
    auto on_line = [&](std::string_view line) {
        std::string err;
        auto v = json::parse(line, &err);
        const json::value* type = v ? v->find("type") : nullptr;
        if (!type || !type->is_string()) {
            if (protocol_error.empty()) protocol_error = "unreadable worker line '" + std::string(line) + "' " + err;
            return;
        }
        if (type->as_string() == "rep") {
            ++reps;
            if (auto* m = v->find("metrics"); m && m->is_object())
                for (auto& [name, x] : m->as_object())
                    if (x.is_number()) values[name].push_back(x.as_number());
        } else if (type->as_string() == "info") {
            auto* k = v->find("key");
            auto* val = v->find("value");
            if (k && val && k->is_string() && val->is_string()) info[k->as_string()] = val->as_string();
        } else if (type->as_string() == "done") {
            done = true;
        }
    };
    double limit = 120 + 3 * expected_seconds(r, duration, warmup, repeat);
    child_result c = run_child(dir + "/" + r.variant.worker, args, on_line, limit);

    auto last_stderr_line = [&] {
        std::string s = c.stderr_text;
        while (!s.empty() && s.back() == '\n') s.pop_back();
        auto nl = s.rfind('\n');
        return nl == std::string::npos ? s : s.substr(nl + 1);
    };
    if (!c.ok()) {
        out.error = c.describe() + (c.stderr_text.empty() ? "" : ": " + last_stderr_line());
        return out;
    }
    if (!protocol_error.empty()) {
        out.error = protocol_error;
        return out;
    }
    if (!done || reps != repeat) {
        out.error = "worker reported " + std::to_string(reps) + " of " + std::to_string(repeat) + " repetitions";
        return out;
    }
    // A runtime that silently fell back to another backend, or a worker built for another configuration, would
    // report numbers under the wrong name: check what the worker says it ran.
    if (r.impl->id.rfind("tern/", 0) == 0) {
        std::string want = r.impl->id.substr(5);
        if (info["backend"] != want) {
            out.error = "asked for backend " + want + " but the worker ran '" + info["backend"] + "'";
            return out;
        }
    }
    if (!r.variant.config.empty() && info["config"] != r.variant.config) {
        out.error = "asked for config " + r.variant.config + " but the worker is built for '" + info["config"] + "'";
        return out;
    }
    for (auto& m : r.scenario->metrics) {
        auto it = values.find(m.name);
        if (it == values.end() || static_cast<int>(it->second.size()) != repeat) {
            out.error = "metric " + m.name + " missing from some repetitions";
            out.records.clear();
            return out;
        }
        record rec;
        rec.scenario = r.scenario;
        rec.point = r.point;
        rec.config = r.variant.config;
        rec.impl = r.impl;
        rec.metric = &m;
        rec.stats = summarize(it->second);
        rec.peak_rss_bytes = c.peak_rss_bytes;
        out.records.push_back(rec);
    }
    return out;
}

bool write_file(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
    return static_cast<bool>(f.flush());
}

std::string method_text(const options& o, double duration, double warmup) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "Profile %s. Each point runs in its own worker process: %.3g s of warm-up (excluded), then %d "
                  "repetitions (%.3g s each for timed scenarios, the profile's fixed amount of work otherwise); the "
                  "median is the figure, min and max show the spread. Latency comes from a log-bucketed histogram "
                  "with under 1%% relative error. Peak RSS is the worker's ru_maxrss. \"vs best asio\" is the ratio "
                  "to the best Asio configuration of the same point (> 1 = better than Asio).\n",
                  o.prof == profile::quick ? "quick" : "full", warmup, o.repeat, duration);
    return buf;
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    std::vector<const scenario_def*> scen;
    std::vector<const impl_def*> impls;
    try {
        o = parse_options(argc, argv);
        if (o.help) {
            std::fputs(usage().c_str(), stdout);
            return 0;
        }
        scen = select_scenarios(o);
        impls = select_impls(o);
    } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "tern-bench: %s\n", e.what());
        return 2;
    }
    if (o.list) {
        print_list(scen, impls);
        return 0;
    }
    double duration = o.duration_s.value_or(o.prof == profile::quick ? 1.0 : 3.0);
    double warmup = o.warmup_s.value_or(o.prof == profile::quick ? 0.2 : 0.5);
    auto plan = make_plan(scen, impls, o.prof);
    if (plan.empty()) {
        std::fprintf(stderr, "tern-bench: none of the selected implementations applies to the selected scenarios\n");
        return 2;
    }

    environment env = collect_environment(pinning_text);
    std::printf("tern-bench\n%s\n", format_text(env).c_str());
    double total = 0;
    for (auto& r : plan) total += expected_seconds(r, duration, warmup, o.repeat);
    std::printf("%zu worker runs, about %.0f s (profile %s, %d repetitions, %.3g s warm-up, %.3g s per timed "
                "repetition)\n\n",
                plan.size(), total, o.prof == profile::quick ? "quick" : "full", o.repeat, warmup, duration);

    const std::string dir = self_directory();
    std::vector<record> records;
    std::vector<failure> failures;
    int width = static_cast<int>(std::to_string(plan.size()).size());
    for (std::size_t i = 0; i < plan.size(); ++i) {
        const planned_run& r = plan[i];
        std::string what = r.scenario->name + " " + to_display(r.point) + " " + r.impl->id +
                           (r.variant.config.empty() ? "" : " (" + r.variant.config + ")");
        std::printf("[%*zu/%zu] %s ... ", width, i + 1, plan.size(), what.c_str());
        std::fflush(stdout);
        run_outcome res = run_point(r, dir, duration, warmup, o.repeat);
        if (!res.error.empty()) {
            std::printf("FAILED: %s\n", res.error.c_str());
            failures.push_back({what, res.error});
            continue;
        }
        std::map<std::string, std::vector<double>> medians;
        for (auto& rec : res.records) medians[rec.metric->name].push_back(rec.stats.median);
        std::printf("%s (median of %d), RSS %.1f MiB\n", progress_summary(*r.scenario, medians).c_str(), o.repeat,
                    static_cast<double>(res.records.front().peak_rss_bytes) / (1024.0 * 1024.0));
        std::fflush(stdout);
        records.insert(records.end(), res.records.begin(), res.records.end());
    }

    env.fields.emplace_back("load average at end", load_average());
    std::printf("\nload average at end : %s\n", env.fields.back().second.c_str());
    std::printf("%s", format_tables(records).c_str());
    if (!failures.empty()) {
        std::printf("\nFailed points:\n");
        for (auto& f : failures) std::printf("  %s: %s\n", f.what.c_str(), f.why.c_str());
    }

    int rc = failures.empty() ? 0 : 1;
    if (!o.json_file.empty() && !write_file(o.json_file, format_json_lines(records))) {
        std::fprintf(stderr, "tern-bench: cannot write %s: %s\n", o.json_file.c_str(), std::strerror(errno));
        rc = 1;
    }
    if (!o.report_dir.empty()) {
        if (mkdir(o.report_dir.c_str(), 0755) != 0 && errno != EEXIST) {
            std::fprintf(stderr, "tern-bench: cannot create %s: %s\n", o.report_dir.c_str(), std::strerror(errno));
            rc = 1;
        } else if (!write_file(o.report_dir + "/report.md",
                               format_report_md(env, method_text(o, duration, warmup), records, failures))) {
            std::fprintf(stderr, "tern-bench: cannot write %s/report.md\n", o.report_dir.c_str());
            rc = 1;
        }
    }
    return rc;
}
