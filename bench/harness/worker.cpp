#include "worker.hpp"

#include "instructions.hpp"
#include "json.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string_view>

namespace tern_bench {

std::int64_t session::param_int(const std::string& key) const {
    auto it = req_.params.find(key);
    if (it == req_.params.end()) throw bench_failure("missing parameter " + key);
    char* end = nullptr;
    long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (end == it->second.c_str() || *end != '\0') throw bench_failure("parameter " + key + " is not an integer");
    return v;
}

std::uint64_t session::work_count() const {
    if (def_.timed || !req_.params.count("n")) return 0;
    std::int64_t n = param_int("n");
    return n > 0 ? static_cast<std::uint64_t>(n) : 0;
}

std::vector<phase> session::phases() const {
    std::vector<phase> out;
    if (instructions()) {
        out.push_back({true, -1, 0, static_cast<std::uint64_t>(req_.instr_warmup_ops)});
        out.push_back({false, 0, 0, static_cast<std::uint64_t>(req_.instr_ops)});
        return out;
    }
    out.push_back({true, -1, req_.warmup_s});
    for (int i = 0; i < req_.repeat; ++i) out.push_back({false, i, req_.duration_s});
    return out;
}

void session::open_window(const phase& p) {
    if (!instructions() || p.warmup) return;
    if (window_open_) throw bench_failure("the instruction window was opened twice");
    window_open_ = true;
    instructions::start_counting();
}

void session::close_window(const phase& p, double ops) {
    if (!instructions() || p.warmup) return;
    instructions::stop_counting();
    if (!window_open_) throw bench_failure("the instruction window was closed before it was opened");
    report_window(ops);
}

void session::report_window(double ops) {
    if (!(ops > 0)) throw bench_failure("the instruction window held no operation");
    json::object_writer line;
    line.field("type", "instr").field("ops", ops);
    std::printf("%s\n", line.str().c_str());
    std::fflush(stdout);
}

void session::report(const phase& p, const metric_values& values) {
    if (p.warmup || instructions()) return;
    json::object_writer metrics;
    for (auto& m : def_.metrics) {
        auto it = std::find_if(values.begin(), values.end(), [&](auto& v) { return v.first == m.name; });
        if (it == values.end()) throw bench_failure("implementation did not report metric " + m.name);
        metrics.field(m.name, it->second);
    }
    for (auto& [name, v] : values) {
        if (def_.find_metric(name)) continue;
        if (!find_optional_metric(name)) throw bench_failure("metric " + name + " is not defined for " + def_.name);
        metrics.field(name, v);
    }
    json::object_writer line;
    line.field("type", "rep").field("index", p.index).raw("metrics", metrics.str());
    // One write per line, flushed at once: the orchestrator reads lines as they come to show progress.
    std::printf("%s\n", line.str().c_str());
    std::fflush(stdout);
}

void session::info(const std::string& key, const std::string& value) {
    json::object_writer line;
    line.field("type", "info").field("key", key).field("value", value);
    std::printf("%s\n", line.str().c_str());
    std::fflush(stdout);
}

void pin_to_cpu(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        throw bench_failure("sched_setaffinity(CPU " + std::to_string(cpu) + "): " + std::strerror(errno));
}

namespace {

std::string current_affinity() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return "unknown";
    std::string out;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) out += (out.empty() ? "" : ",") + std::to_string(c);
    return out;
}

double parse_seconds(const char* flag, const char* text) {
    char* end = nullptr;
    double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || v < 0) throw bench_failure(std::string("bad value for ") + flag + ": " + text);
    return v;
}

run_request parse_request(int argc, char** argv) {
    run_request r;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        auto next = [&]() -> const char* {
            if (i + 1 >= argc) throw bench_failure(std::string("missing value for ") + argv[i]);
            return argv[++i];
        };
        if (a == "--scenario") {
            r.scenario = next();
        } else if (a == "--impl") {
            r.impl = next();
        } else if (a == "--param") {
            std::string kv = next();
            auto eq = kv.find('=');
            if (eq == std::string::npos) throw bench_failure("--param wants key=value, got " + kv);
            r.params[kv.substr(0, eq)] = kv.substr(eq + 1);
        } else if (a == "--duration") {
            r.duration_s = parse_seconds("--duration", next());
        } else if (a == "--warmup") {
            r.warmup_s = parse_seconds("--warmup", next());
        } else if (a == "--repeat") {
            r.repeat = std::atoi(next());
            if (r.repeat < 1) throw bench_failure("--repeat must be at least 1");
        } else if (a == "--cpu") {
            r.cpu = std::atoi(next());
        } else if (a == "--instructions") {
            r.instr_ops = std::atoll(next());
            if (r.instr_ops < 0) throw bench_failure("--instructions wants a count of operations (0: the point's n)");
        } else if (a == "--instructions-warmup") {
            r.instr_warmup_ops = std::atoll(next());
        } else {
            throw bench_failure("unknown argument " + std::string(a));
        }
    }
    return r;
}

}  // namespace

int worker_main(int argc, char** argv, std::span<const impl_entry> entries, const char* worker) {
    try {
        run_request req = parse_request(argc, argv);
        const scenario_def* def = find_scenario(req.scenario);
        if (!def) throw bench_failure("unknown scenario " + req.scenario);
        const impl_entry* entry = nullptr;
        for (auto& e : entries)
            if (req.scenario == e.scenario && req.impl == e.impl) entry = &e;
        if (!entry) throw bench_failure(std::string(worker) + " does not implement " + req.scenario + " for " + req.impl);
        if (req.instr_ops >= 0 && !instructions::under_callgrind())
            throw bench_failure("--instructions counts instructions with callgrind: run the worker under "
                                "valgrind --tool=callgrind --instr-atstart=no (tern-bench --instructions does)");
        if (req.cpu >= 0) pin_to_cpu(req.cpu);
        session s(std::move(req), *def);
        s.info("affinity", current_affinity());
        entry->run(s);
        std::printf("{\"type\": \"done\"}\n");
        std::fflush(stdout);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", worker, e.what());
        return 1;
    }
}

}  // namespace tern_bench
