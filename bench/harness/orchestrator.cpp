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
// median/min/max -> print one table per scenario and metric with the ratio to the best Asio configuration, and
// the figures where tern trails -> write the --json records -> with --report DIR: the records (DIR/results.jsonl
// when --json is not given), the charts (tern-bench-plot.py into DIR/plots/) and DIR/report.md.

#include "allocations.hpp"
#include "build_info.hpp"
#include "catalogue.hpp"
#include "cli.hpp"
#include "env.hpp"
#include "instruction_runs.hpp"
#include "json.hpp"
#include "process.hpp"
#include "report.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string_view>

using namespace tern_bench;

namespace {

// A single-thread scenario's worker pins itself to this CPU before it creates anything; the multi-thread ones pin
// each of their threads themselves.
constexpr int pinned_cpu = 0;
const char* const pinning_text =
    "single-thread scenarios run in a worker process pinned to CPU 0 (sched_setaffinity before the runtime starts; "
    "every thread it creates inherits it), the same for every implementation; the socket scenarios with a client "
    "and a server loop (pingpong_cross_thread, echo, messages) and tls/* pin the client's thread to CPU 0 and the "
    "server's to CPU 1 themselves (messages threads=1: one thread on CPU 0; tls/handshake's raw/crypto floor: one "
    "thread on CPU 0); the multi-thread dispatch and coro scenarios "
    "(dispatch/scaling, concurrent, cross_thread; coro/channel) pin thread i of every implementation to CPU i % 2 "
    "(cross_thread: the loop's thread to CPU 0, producer p to CPU (p + 1) % 2); the file scenarios pin nothing (the "
    "kernel's io_uring workers, tern's blocking pool and the pread threads use both CPUs); http/ping_json pins the "
    "server's threads to CPU 0 and the wrk it starts to CPU 1; the orchestrator is not pinned";

struct planned_run {
    const scenario_def* scenario;
    param_list point;
    const impl_def* impl;
    impl_variant variant;
    double own_duration_s = 0;  // the scenario's own seconds per repetition in this profile; 0: the default
};

std::vector<planned_run> make_plan(const std::vector<const scenario_def*>& scen, const std::vector<const impl_def*>& impls,
                                   profile prof) {
    std::vector<planned_run> plan;
    for (auto* s : scen)
        for (auto& point : s->points(prof))
            for (auto* i : impls) {
                if (!s->runs_impl(i->id, prof)) continue;
                for (auto& v : i->variants)
                    if (s->runs_point(point, i->id, v.config))
                        plan.push_back({s, point, i, v, s->own_duration_s(prof)});
            }
    return plan;
}

// ---- Per-scenario durations and the file-descriptor check ----

// An explicit --duration applies to every scenario; set from the command line before any plan is made.
bool duration_explicit = false;

// Seconds per timed repetition of r: --duration when given, else the scenario's own length for the profile, else
// the profile's default (`duration`).
double run_duration(const planned_run& r, double duration) {
    return !duration_explicit && r.own_duration_s > 0 ? r.own_duration_s : duration;
}

// Removes from the plan, before anything runs, the points that need more file descriptors than a worker may open
// (RLIMIT_NOFILE, which workers inherit; the soft limit is first raised to the hard one), and says why: the limit
// and the number needed.
std::vector<failure> refuse_fd_hungry(std::vector<planned_run>& plan) {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return {};
    if (lim.rlim_cur < lim.rlim_max) {
        rlimit raised = lim;
        raised.rlim_cur = lim.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
    }
    std::vector<failure> refused;
    std::vector<planned_run> kept;
    for (auto& r : plan) {
        std::int64_t need = r.scenario->fds_needed ? r.scenario->fds_needed(r.point) : 0;
        if (need <= 0 || lim.rlim_cur == RLIM_INFINITY || static_cast<rlim_t>(need) <= lim.rlim_cur) {
            kept.push_back(r);
            continue;
        }
        std::string what = r.scenario->name + " " + to_display(r.point);
        if (std::none_of(refused.begin(), refused.end(), [&](const failure& f) { return f.what == what; }))
            refused.push_back({what, "not run: needs " + std::to_string(need) + " file descriptors, RLIMIT_NOFILE " +
                                         "allows " + std::to_string(lim.rlim_cur) + " (hard limit " +
                                         (lim.rlim_max == RLIM_INFINITY ? std::string("unlimited")
                                                                        : std::to_string(lim.rlim_max)) +
                                         ")"});
    }
    plan = std::move(kept);
    return refused;
}

double expected_seconds(const planned_run& r, double duration, double warmup, int repeat) {
    // Fixed-work scenarios take well under a second per repetition at the quick sizes; 1 s is a fair guess unless
    // the scenario says otherwise.
    const double fixed = r.scenario->fixed_rep_s > 0 ? r.scenario->fixed_rep_s : 1.0;
    double per_rep = r.scenario->timed ? run_duration(r, duration) : fixed;
    return warmup + per_rep * repeat + 0.2;
}

void print_list(const std::vector<const scenario_def*>& scen, const std::vector<const impl_def*>& impls, profile prof,
                double duration, double warmup, int repeat) {
    const char* prof_name = prof == profile::quick ? "quick" : "full";
    for (auto* s : scen) {
        std::printf("%s\n  %s\n", s->name.c_str(), s->summary.c_str());
        std::string metrics;
        for (auto& m : s->metrics) metrics += (metrics.empty() ? "" : ", ") + m.name + " [" + m.unit + "]";
        std::printf("  metrics: %s (%s is better)\n", metrics.c_str(), to_string(s->metrics.front().direction));
        std::printf("  %s profile, %zu point%s:\n", prof_name, s->points(prof).size(),
                    s->points(prof).size() == 1 ? "" : "s");
        for (auto& p : s->points(prof)) std::printf("    %s\n", to_display(p).c_str());
        std::string ids;
        for (auto* i : impls)
            if (s->runs_impl(i->id, prof)) {
                ids += (ids.empty() ? "" : ", ") + i->id;
                if (i->variants.size() > 1) {
                    std::string cfg;
                    for (auto& v : i->variants)
                        if (std::any_of(s->points(prof).begin(), s->points(prof).end(),
                                        [&](const param_list& p) { return s->runs_point(p, i->id, v.config); }))
                            cfg += (cfg.empty() ? "" : "|") + v.config;
                    ids += " {config=" + cfg + "}";
                }
            }
        std::string timing = s->timed ? "--duration per repetition" : "fixed work per repetition";
        if (s->timed && s->own_duration_s(prof) > 0) {
            char own[96];
            std::snprintf(own, sizeof own, " (%s profile: %.3g s unless --duration is given)", prof_name,
                          s->own_duration_s(prof));
            timing += own;
        }
        std::printf("  implementations: %s\n  timing: %s; %s\n", ids.empty() ? "(none selected)" : ids.c_str(),
                    timing.c_str(), s->single_thread ? "one thread, pinned to CPU 0" : "several threads");
        if (const instruction_plan& ip = s->instructions; !ip.points.empty()) {
            std::string pts;
            for (auto& p : ip.points) pts += (pts.empty() ? "" : "; ") + to_display(p);
            std::string work = ip.ops > 0 ? std::to_string(ip.ops) + (ip.op == "MiB" ? " bytes" : " operations") +
                                                 " after a warm-up of " + std::to_string(ip.warmup_ops)
                                          : "the point's n, after a warm-up of the same";
            std::printf("  --instructions: instr/%s at %s; %s\n", ip.op.c_str(), pts.c_str(), work.c_str());
        }
        std::printf("\n");
    }
    std::printf("implementations:\n");
    for (auto* i : impls) {
        bool used = std::any_of(scen.begin(), scen.end(), [&](auto* s) { return s->runs_impl(i->id, prof); });
        if (!used) continue;
        std::string workers;
        for (auto& v : i->variants)
            workers += (workers.empty() ? "" : ", ") + v.worker + (v.config.empty() ? "" : " (" + v.config + ")");
        std::printf("  %-16s %s [%s]\n", i->id.c_str(), i->summary.c_str(), workers.c_str());
    }
    std::printf("\noptional metrics: %s, operator new calls per operation, reported by the workers that count them "
                "(tern-bench-tern) for one-thread scenarios; %s, %s, %s and %s, system calls, wake-ups, parks "
                "and spins per operation from the loops' own counters (tern-bench-tern)\n",
                allocs_per_op_name, syscalls_per_op_name, wakeups_per_op_name, parks_per_op_name,
                spins_per_op_name);
    auto plan = make_plan(scen, impls, prof);
    double total = 0;
    for (auto& r : plan) total += expected_seconds(r, duration, warmup, repeat);
    std::printf("%s profile: %zu worker runs, about %.0f s with %d repetitions\n", prof_name, plan.size(), total,
                repeat);
}

std::string progress_summary(const scenario_def& s, const std::map<std::string, std::vector<double>>& values) {
    // Throughput scenarios have one metric; for latency show the centre and the tail; otherwise (ops/s and
    // speedup, seconds and ops/s) every metric.
    std::vector<std::string> shown;
    if (s.metrics.size() == 1 || !s.find_metric("p50_us"))
        for (auto& m : s.metrics) shown.push_back(m.name);
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
    std::snprintf(num, sizeof num, "%g", run_duration(r, duration));
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
    if (!r.impl->backend.empty() && info["backend"] != r.impl->backend) {
        out.error = "asked for backend " + r.impl->backend + " but the worker ran '" + info["backend"] + "'";
        return out;
    }
    if (!r.variant.config.empty() && info["config"] != r.variant.config) {
        out.error = "asked for config " + r.variant.config + " but the worker is built for '" + info["config"] + "'";
        return out;
    }
    // wait4's figure covers the worker and the children it waited for: a worker that runs its own load generator
    // (http/ping_json's wrk) reports its own peak instead, so that the load generator's memory is not counted.
    long peak_rss = c.peak_rss_bytes;
    if (auto it = info.find("peak_rss_bytes"); it != info.end()) peak_rss = std::atol(it->second.c_str());
    auto add_record = [&](const metric_def& m, const std::vector<double>& v) {
        record rec;
        rec.scenario = r.scenario;
        rec.point = r.point;
        rec.config = r.variant.config;
        rec.impl = r.impl;
        rec.metric = &m;
        rec.stats = summarize(v);
        rec.peak_rss_bytes = peak_rss;
        out.records.push_back(rec);
    };
    for (auto& m : r.scenario->metrics) {
        auto it = values.find(m.name);
        if (it == values.end() || static_cast<int>(it->second.size()) != repeat) {
            out.error = "metric " + m.name + " missing from some repetitions";
            out.records.clear();
            return out;
        }
        add_record(m, it->second);
    }
    // An optional metric counts only when every repetition has it.
    for (auto& m : optional_metrics())
        if (auto it = values.find(m.name); it != values.end() && static_cast<int>(it->second.size()) == repeat)
            add_record(m, it->second);
    return out;
}

bool write_file(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
    return static_cast<bool>(f.flush());
}

// The command line as it could be typed again.
std::string command_line(int argc, char** argv) {
    std::string out = "tern-bench";
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                       "-_=./:,+@") == std::string::npos;
        if (plain) {
            out += " " + a;
            continue;
        }
        std::string q = "'";
        for (char ch : a) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
        out += " " + q + "'";
    }
    return out;
}

std::string method_text(const options& o, double duration, double warmup, const std::string& command) {
    auto num = [](double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3g", v);
        return std::string(buf);
    };
    return std::string("Profile ") + (o.prof == profile::quick ? "quick" : "full") + ", run as `" + command +
           "`. Each point runs in its own worker process: " + num(warmup) + " s of warm-up (excluded), then " +
           std::to_string(o.repeat) + " repetition" + (o.repeat == 1 ? "" : "s") + " (" + num(duration) +
           " s each for timed scenarios" +
           (duration_explicit ? "" : " unless the scenario sets its own length for the profile") +
           ", the profile's fixed amount of work otherwise); the median is the figure, min and max show the "
           "spread. Latency comes from a log-bucketed histogram with under 1% relative error. Peak RSS is the "
           "worker's ru_maxrss (http/ping_json: the server's own, without the wrk it runs). \"vs best asio\" is "
           "the ratio to the best Asio configuration of the same point (> 1 = better than Asio): tern's throughput "
           "over Asio's, or Asio's time over tern's; the scenarios that have no Asio implementation name their own "
           "comparators (http/parse: Beast's and http-parser's parsers; http/minimal and http/ping_json: Beast on "
           "Boost.Asio), and "
           "the ratio is then to the best of those. " +
           allocs_per_op_name +
           " is counted by the tern worker only (a counting global operator new, read at the start and end of "
           "each measured phase), and so are " +
           syscalls_per_op_name + ", " + wakeups_per_op_name + ", " + parks_per_op_name + " and " +
           spins_per_op_name +
           " (the counters every tern loop keeps, tern/metrics.hpp, summed over the worker's loops).\n";
}

// --- charts ---------------------------------------------------------------------------------------------------

// The plotting script: installed next to tern-bench by the build, else in the source tree.
std::string plot_script() {
    for (std::string p : {self_directory() + "/tern-bench-plot.py", std::string(TERN_BENCH_SOURCE_DIR) +
                                                                          "/bench/report/plot.py"})
        if (access(p.c_str(), R_OK) == 0) return p;
    return {};
}

// Interpreters to try, in order: $TERN_BENCH_PYTHON, python3 on PATH, then Debian's /usr/bin/python3 (where
// python3-matplotlib installs; a python3 earlier on PATH, e.g. a pyenv one, may not have it).
std::vector<std::string> python_candidates() {
    std::vector<std::string> out;
    if (const char* env = std::getenv("TERN_BENCH_PYTHON"); env && *env) return {env};
    if (const char* path = std::getenv("PATH")) {
        std::string_view rest = path;
        while (!rest.empty()) {
            auto colon = rest.find(':');
            std::string dir(rest.substr(0, colon));
            rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
            std::string exe = (dir.empty() ? "." : dir) + "/python3";
            if (access(exe.c_str(), X_OK) == 0) {
                out.push_back(exe);
                break;
            }
        }
    }
    if (std::find(out.begin(), out.end(), "/usr/bin/python3") == out.end() && access("/usr/bin/python3", X_OK) == 0)
        out.push_back("/usr/bin/python3");
    return out;
}

struct chart_outcome {
    std::vector<plot_ref> plots;
    std::string note;  // non-empty when there are no charts, or not all of them
};

// Runs the plotting script over the records; its stdout is one JSON line per chart.
chart_outcome draw_charts(const std::string& records, const std::string& report_dir) {
    chart_outcome out;
    std::string script = plot_script();
    if (script.empty()) {
        out.note = "none: tern-bench-plot.py is neither next to tern-bench nor in the source tree";
        return out;
    }
    auto interpreters = python_candidates();
    if (interpreters.empty()) {
        out.note = "none: no python3 found (set TERN_BENCH_PYTHON, or install python3 and python3-matplotlib)";
        return out;
    }
    std::string tried;
    for (auto& py : interpreters) {
        out.plots.clear();
        std::string bad_line;
        auto on_line = [&](std::string_view line) {
            auto v = json::parse(line);
            auto* file = v ? v->find("file") : nullptr;
            auto* scen = v ? v->find("scenario") : nullptr;
            auto* title = v ? v->find("title") : nullptr;
            if (file && scen && title && file->is_string() && scen->is_string() && title->is_string())
                out.plots.push_back({scen->as_string(), "plots/" + file->as_string(), title->as_string()});
            else if (bad_line.empty())
                bad_line = std::string(line);
        };
        child_result c = run_child(py, {script, records, report_dir + "/plots", "--manifest"}, on_line, 600);
        if (c.ok()) {
            if (!bad_line.empty()) out.note = "the plotting script printed an unexpected line: " + bad_line;
            return out;
        }
        std::string err = c.stderr_text;
        while (!err.empty() && err.back() == '\n') err.pop_back();
        if (c.started && c.exit_code == 3) {  // this interpreter has no matplotlib: try the next one
            tried += (tried.empty() ? "" : ", ") + py;
            continue;
        }
        out.plots.clear();
        out.note = "none: " + py + " " + script + " failed (" + c.describe() + ")" + (err.empty() ? "" : ": " + err);
        return out;
    }
    out.note = "none: matplotlib is not installed for " + tried +
               " (Debian: apt-get install python3-matplotlib, which scripts/setup-deps.sh does; or set "
               "TERN_BENCH_PYTHON to an interpreter that has it)";
    return out;
}

// tern-bench --instructions: every counted point of the selection under callgrind (instruction_runs.hpp), then
// the table of instructions per operation on the terminal, in --json and in --report DIR's report.md (with each
// run's callgrind file in DIR/callgrind/ for callgrind_annotate).
int run_instruction_mode(const options& o, const std::vector<const scenario_def*>& scen,
                         const std::vector<const impl_def*>& impls, const std::string& command) {
    std::vector<failure> excluded;
    std::vector<instruction_point> plan = plan_instructions(scen, impls, excluded);
    if (plan.empty()) {
        std::string counted;
        for (auto& s : scenarios())
            if (!s.instructions.points.empty()) counted += "\n  " + s.name;
        std::fprintf(stderr, "tern-bench: --instructions counts none of the selected scenarios and implementations; "
                             "the scenarios it counts:%s\n", counted.c_str());
        return 2;
    }
    const std::string valgrind = find_valgrind();
    if (valgrind.empty()) {
        std::fprintf(stderr, "tern-bench: --instructions needs valgrind on PATH (Debian: apt-get install valgrind, "
                             "which scripts/setup-deps.sh does)\n");
        return 2;
    }
    const int repeat = o.repeat_given ? o.repeat : 1;
    std::string keep_dir;
    if (!o.report_dir.empty()) {
        keep_dir = o.report_dir + "/callgrind";
        for (const std::string& d : {o.report_dir, keep_dir})
            if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
                std::fprintf(stderr, "tern-bench: cannot create %s: %s\n", d.c_str(), std::strerror(errno));
                return 1;
            }
    }
    environment env = collect_environment(pinning_text);
    const std::string version = valgrind_version(valgrind);
    env.fields.emplace_back("instruction counts", version + " --tool=callgrind");
    std::printf("tern-bench --instructions\n%s\n%zu worker runs under callgrind, %d per point\n",
                format_text(env).c_str(), plan.size() * static_cast<std::size_t>(repeat), repeat);
    for (auto& e : excluded) std::printf("  %s: %s\n", e.what.c_str(), e.why.c_str());
    std::printf("\n");

    const std::string dir = self_directory();
    std::vector<record> records;
    std::vector<failure> failures;
    int width = static_cast<int>(std::to_string(plan.size()).size());
    for (std::size_t i = 0; i < plan.size(); ++i) {
        const instruction_point& p = plan[i];
        std::string what = p.scenario->name + " " + to_display(p.point) + " " + p.impl->id +
                           (p.variant.config.empty() ? "" : " (" + p.variant.config + ")");
        std::printf("[%*zu/%zu] %s ... ", width, i + 1, plan.size(), what.c_str());
        std::fflush(stdout);
        auto t0 = std::chrono::steady_clock::now();
        instruction_outcome res = run_instruction_point(p, valgrind, dir, repeat, keep_dir);
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!res.error.empty()) {
            std::printf("FAILED: %s\n", res.error.c_str());
            failures.push_back({what, res.error, p.impl->id.rfind("tern/", 0) == 0});
            continue;
        }
        std::string shown;
        for (auto& rec : res.records)
            shown += (shown.empty() ? "" : ", ") + (rec.metric->name == instr_per_op_name ? "" : rec.metric->name + " ") +
                     format_value(rec.stats.median) + " " + rec.metric->unit +
                     (rec.stats.min != rec.stats.max ? " (" + format_value(rec.stats.min) + ".." +
                                                           format_value(rec.stats.max) + ")"
                                                     : "");
        std::printf("%s (%.0f s)\n", shown.c_str(), secs);
        std::fflush(stdout);
        records.insert(records.end(), res.records.begin(), res.records.end());
    }

    env.fields.emplace_back("load average at end", load_average());
    std::printf("%s", format_instruction_table(records).c_str());
    std::printf("%s", format_trailing_text(records).c_str());
    int rc = 0;
    if (!failures.empty()) {
        std::printf("\nFailed points:\n");
        for (auto& f : failures) std::printf("  %s: %s\n", f.what.c_str(), f.why.c_str());
        rc = 1;
    }
    if (!excluded.empty()) {
        std::printf("\nNot counted:\n");
        for (auto& e : excluded) std::printf("  %s: %s\n", e.what.c_str(), e.why.c_str());
    }
    if (!o.json_file.empty() && !write_file(o.json_file, format_json_lines(records))) {
        std::fprintf(stderr, "tern-bench: cannot write %s: %s\n", o.json_file.c_str(), std::strerror(errno));
        rc = 1;
    }
    if (!o.report_dir.empty()) {
        report_inputs in;
        in.method = instruction_method_text(command, version, repeat);
        for (auto& e : excluded) in.method += "\n- " + e.what + ": " + e.why;
        if (!excluded.empty()) in.method += "\n";
        if (o.json_file.empty() && !write_file(o.report_dir + "/results.jsonl", format_json_lines(records))) rc = 1;
        if (!write_file(o.report_dir + "/report.md", format_report_md(env, in, records, failures))) {
            std::fprintf(stderr, "tern-bench: cannot write %s/report.md\n", o.report_dir.c_str());
            rc = 1;
        } else {
            std::printf("report: %s/report.md, callgrind files in %s\n", o.report_dir.c_str(), keep_dir.c_str());
        }
    }
    return rc;
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
    double duration = o.duration_s.value_or(o.prof == profile::quick ? 1.0 : 3.0);
    duration_explicit = o.duration_s.has_value();
    double warmup = o.warmup_s.value_or(o.prof == profile::quick ? 0.2 : 0.5);
    if (o.list) {
        print_list(scen, impls, o.prof, duration, warmup, o.repeat);
        return 0;
    }
    if (o.instructions) return run_instruction_mode(o, scen, impls, command_line(argc, argv));
    auto plan = make_plan(scen, impls, o.prof);
    if (plan.empty()) {
        std::string valid;
        for (auto& i : implementations())
            if (std::any_of(scen.begin(), scen.end(), [&](auto* s) { return s->runs_impl(i.id, o.prof); }))
                valid += "\n  " + i.id;
        std::fprintf(stderr,
                     "tern-bench: none of the selected implementations applies to the selected scenarios in this "
                     "profile; they run on:%s\n",
                     valid.c_str());
        return 2;
    }
    std::vector<failure> refused = refuse_fd_hungry(plan);
    if (!refused.empty()) {
        std::fprintf(stderr, "tern-bench: %zu point%s refused before running (not enough file descriptors):\n",
                     refused.size(), refused.size() == 1 ? "" : "s");
        for (auto& f : refused) std::fprintf(stderr, "  %s: %s\n", f.what.c_str(), f.why.c_str());
        if (plan.empty()) return 2;
    }

    environment env = collect_environment(pinning_text);
    std::printf("tern-bench\n%s\n", format_text(env).c_str());
    double total = 0;
    for (auto& r : plan) total += expected_seconds(r, duration, warmup, o.repeat);
    bool own_lengths =
        std::any_of(plan.begin(), plan.end(), [&](auto& r) { return run_duration(r, duration) != duration; });
    std::printf("%zu worker runs, about %.0f s (profile %s, %d repetitions, %.3g s warm-up, %.3g s per timed "
                "repetition%s)\n\n",
                plan.size(), total, o.prof == profile::quick ? "quick" : "full", o.repeat, warmup, duration,
                own_lengths ? ", less where a scenario sets its own quick length" : "");

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
            failures.push_back({what, res.error, r.impl->id.rfind("tern/", 0) == 0});
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
    std::printf("%s", format_trailing_text(records).c_str());
    if (!failures.empty()) {
        std::printf("\nFailed points:\n");
        for (auto& f : failures) std::printf("  %s: %s\n", f.what.c_str(), f.why.c_str());
    }

    int rc = failures.empty() ? 0 : 1;
    if (!refused.empty()) {
        std::printf("\nRefused points (not run):\n");
        for (auto& f : refused) std::printf("  %s: %s\n", f.what.c_str(), f.why.c_str());
        failures.insert(failures.end(), refused.begin(), refused.end());  // listed in report.md, not counted in rc
    }
    if (!o.json_file.empty() && !write_file(o.json_file, format_json_lines(records))) {
        std::fprintf(stderr, "tern-bench: cannot write %s: %s\n", o.json_file.c_str(), std::strerror(errno));
        rc = 1;
    }
    if (!o.report_dir.empty()) {
        const std::string& dir = o.report_dir;
        if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
            std::fprintf(stderr, "tern-bench: cannot create %s: %s\n", dir.c_str(), std::strerror(errno));
            return 1;
        }
        report_inputs in;
        in.method = method_text(o, duration, warmup, command_line(argc, argv));
        // The charts read the records from a file: the --json one, else one written into the report directory.
        std::string records_file = o.json_file;
        if (records_file.empty()) {
            records_file = dir + "/results.jsonl";
            if (!write_file(records_file, format_json_lines(records))) {
                std::fprintf(stderr, "tern-bench: cannot write %s: %s\n", records_file.c_str(), std::strerror(errno));
                records_file.clear();
                rc = 1;
            }
        }
        if (!records_file.empty()) {
            std::printf("\ndrawing charts into %s/plots ...\n", dir.c_str());
            std::fflush(stdout);
            chart_outcome charts = draw_charts(records_file, dir);
            in.plots = std::move(charts.plots);
            in.plots_note = charts.note;
            if (!in.plots_note.empty()) std::printf("charts: %s\n", in.plots_note.c_str());
            std::printf("%zu charts\n", in.plots.size());
        } else {
            in.plots_note = "none: the records could not be written for the plotting script";
        }
        if (!write_file(dir + "/report.md", format_report_md(env, in, records, failures))) {
            std::fprintf(stderr, "tern-bench: cannot write %s/report.md\n", dir.c_str());
            rc = 1;
        } else {
            std::printf("report: %s/report.md\n", dir.c_str());
        }
    }
    return rc;
}
