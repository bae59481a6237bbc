#include "instruction_runs.hpp"

#include "callgrind.hpp"
#include "json.hpp"
#include "process.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

namespace tern_bench {

namespace {

// The worker pins a single-thread scenario to this CPU, as in a timed run.
constexpr int pinned_cpu = 0;
// A run is a few seconds to a minute; ten times the slowest seen is the limit.
constexpr double run_limit_s = 900;

std::string find_in_path(const char* name) {
    const char* path = std::getenv("PATH");
    std::string_view rest = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
    while (!rest.empty()) {
        auto colon = rest.find(':');
        std::string dir(rest.substr(0, colon));
        rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
        std::string exe = (dir.empty() ? "." : dir) + "/" + name;
        if (access(exe.c_str(), X_OK) == 0) return exe;
    }
    return {};
}

// A file name for a point's callgrind output: dispatch-post.tern-epoll.threads=1.1.out
std::string kept_name(const instruction_point& p, int run) {
    auto clean = [](std::string s) {
        for (char& c : s)
            if (c == '/' || c == ' ') c = '-';
        return s;
    };
    std::string params;
    for (auto& [k, v] : p.point) params += (params.empty() ? "" : ",") + k + "=" + to_string(v);
    if (!p.variant.config.empty()) params += (params.empty() ? "" : ",") + std::string("config=") + p.variant.config;
    return clean(p.scenario->name) + "." + clean(p.impl->id) + "." + (params.empty() ? "-" : params) + "." +
           std::to_string(run + 1) + ".out";
}

std::vector<std::string> worker_args(const instruction_point& p) {
    const instruction_plan& plan = p.scenario->instructions;
    std::vector<std::string> args = {"--scenario", p.scenario->name, "--impl", p.impl->id};
    for (auto& [k, v] : p.point) {
        args.push_back("--param");
        args.push_back(k + "=" + to_string(v));
    }
    args.insert(args.end(), {"--instructions", std::to_string(plan.ops), "--instructions-warmup",
                             std::to_string(plan.warmup_ops), "--repeat", "1", "--warmup", "0"});
    if (p.scenario->single_thread) args.insert(args.end(), {"--cpu", std::to_string(pinned_cpu)});
    return args;
}

struct one_run {
    double ops = 0;
    callgrind_counts counts;
    std::string error;
};

one_run run_once(const instruction_point& p, const std::string& valgrind, const std::string& worker_dir,
                 const std::string& out_file) {
    one_run r;
    std::vector<std::string> args = {"--tool=callgrind", "--instr-atstart=no", "-q",
                                     "--callgrind-out-file=" + out_file, worker_dir + "/" + p.variant.worker};
    for (auto& a : worker_args(p)) args.push_back(a);

    std::map<std::string, std::string> info;
    std::string protocol_error;
    int windows = 0;
    bool done = false;
    auto on_line = [&](std::string_view line) {
        std::string err;
        auto v = json::parse(line, &err);
        const json::value* type = v ? v->find("type") : nullptr;
        if (!type || !type->is_string()) {
            if (protocol_error.empty()) protocol_error = "unreadable worker line '" + std::string(line) + "' " + err;
            return;
        }
        if (type->as_string() == "instr") {
            ++windows;
            if (auto* ops = v->find("ops"); ops && ops->is_number()) r.ops = ops->as_number();
        } else if (type->as_string() == "info") {
            auto* k = v->find("key");
            auto* val = v->find("value");
            if (k && val && k->is_string() && val->is_string()) info[k->as_string()] = val->as_string();
        } else if (type->as_string() == "done") {
            done = true;
        }
    };
    ::unlink(out_file.c_str());
    child_result c = run_child(valgrind, args, on_line, run_limit_s);
    if (!c.ok()) {
        std::string err = c.stderr_text;
        while (!err.empty() && err.back() == '\n') err.pop_back();
        auto nl = err.rfind('\n');
        r.error = c.describe() + (err.empty() ? "" : ": " + (nl == std::string::npos ? err : err.substr(nl + 1)));
        return r;
    }
    if (!protocol_error.empty()) {
        r.error = protocol_error;
        return r;
    }
    if (!done || windows != 1 || !(r.ops > 0)) {
        r.error = "the worker reported " + std::to_string(windows) + " instruction windows (one expected)";
        return r;
    }
    if (!p.impl->backend.empty() && info["backend"] != p.impl->backend) {
        r.error = "asked for backend " + p.impl->backend + " but the worker ran '" + info["backend"] + "'";
        return r;
    }
    if (!p.variant.config.empty() && info["config"] != p.variant.config) {
        r.error = "asked for config " + p.variant.config + " but the worker is built for '" + info["config"] + "'";
        return r;
    }
    auto counts = read_callgrind(out_file, r.error);
    if (!counts) return r;
    if (counts->total == 0) {
        r.error = "callgrind counted no instruction in the window";
        return r;
    }
    r.counts = std::move(*counts);
    return r;
}

// Whether callgrind's object (a path) is one of the library's shared objects.
bool in_library(const std::string& object, instruction_plan::library l) {
    auto slash = object.rfind('/');
    std::string base = slash == std::string::npos ? object : object.substr(slash + 1);
    switch (l) {
        case instruction_plan::library::openssl:
            return base.rfind("libssl.", 0) == 0 || base.rfind("libcrypto.", 0) == 0;
        case instruction_plan::library::libpq: return base.rfind("libpq.", 0) == 0;
        default: return false;
    }
}

}  // namespace

std::vector<instruction_point> plan_instructions(const std::vector<const scenario_def*>& scen,
                                                 const std::vector<const impl_def*>& impls,
                                                 std::vector<failure>& excluded) {
    std::vector<instruction_point> plan;
    for (auto* s : scen) {
        const instruction_plan& ip = s->instructions;
        const std::vector<std::string>& counted = ip.impls.empty() ? s->impls : ip.impls;
        for (auto& point : ip.points)
            for (auto* i : impls) {
                if (std::find(counted.begin(), counted.end(), i->id) == counted.end()) continue;
                for (auto& v : i->variants) {
                    if (!s->runs_point(point, i->id, v.config)) continue;
                    auto ex = std::find_if(ip.excluded.begin(), ip.excluded.end(), [&](auto& e) {
                        return e.impl == i->id && (e.config.empty() || e.config == v.config);
                    });
                    if (ex == ip.excluded.end()) {
                        plan.push_back({s, point, i, v});
                        continue;
                    }
                    excluded.push_back({s->name + " " + to_display(point) + " " + i->id +
                                            (v.config.empty() ? "" : " (" + v.config + ")"),
                                        ex->why, false});
                }
            }
    }
    return plan;
}

std::string find_valgrind() { return find_in_path("valgrind"); }

std::string valgrind_version(const std::string& valgrind) {
    std::string out;
    child_result c = run_child(valgrind, {"--version"}, [&](std::string_view line) { out = std::string(line); }, 30);
    return c.ok() && !out.empty() ? out : "unknown";
}

instruction_outcome run_instruction_point(const instruction_point& p, const std::string& valgrind,
                                          const std::string& worker_dir, int repeat, const std::string& keep_dir) {
    instruction_outcome out;
    char tmpl[] = "/tmp/tern-bench-callgrind-XXXXXX";
    const char* tmp = ::mkdtemp(tmpl);
    if (!tmp) {
        out.error = std::string("mkdtemp: ") + std::strerror(errno);
        return out;
    }
    const instruction_plan::library apart = p.scenario->instructions.apart;
    std::vector<double> total, library;
    for (int i = 0; i < repeat && out.error.empty(); ++i) {
        const std::string file = keep_dir.empty() ? std::string(tmp) + "/callgrind.out" : keep_dir + "/" + kept_name(p, i);
        one_run r = run_once(p, valgrind, worker_dir, file);
        if (keep_dir.empty()) ::unlink(file.c_str());
        if (!r.error.empty()) {
            out.error = r.error;
            break;
        }
        total.push_back(static_cast<double>(r.counts.total) / r.ops);
        std::uint64_t in_lib = 0;
        for (auto& [object, n] : r.counts.by_object)
            if (in_library(object, apart)) in_lib += n;
        library.push_back(static_cast<double>(in_lib) / r.ops);
    }
    ::rmdir(tmp);
    if (!out.error.empty()) return out;
    for (auto& m : p.scenario->instr_metrics) {
        record rec;
        rec.scenario = p.scenario;
        rec.point = p.point;
        rec.config = p.variant.config;
        rec.impl = p.impl;
        rec.metric = &m;
        rec.stats = summarize(library_of_metric(m.name) != instruction_plan::library::none ? library : total);
        out.records.push_back(rec);
    }
    return out;
}

std::string instruction_method_text(const std::string& command, const std::string& version, int repeat) {
    return "Instructions per operation, run as `" + command + "`: every point's worker ran under " + version +
           " (`valgrind --tool=callgrind --instr-atstart=no`), " + std::to_string(repeat) + " time" +
           (repeat == 1 ? "" : "s") +
           ". The worker sets up and warms up with instrumentation off, then its meter opens a window with "
           "callgrind's client requests where the measured phase starts and closes it where the phase ends, after "
           "a fixed number of operations; the figure is the user-space instructions executed by every thread of "
           "the process inside the window, divided by the operations it held. System calls count only for their "
           "user-space side. The server scenarios (http/minimal, http/ping_json, ws/echo, http2/ping_json) count "
           "the server process alone, driven over one connection by tern-bench-client (a blocking client that checks every "
           "answer, not under callgrind): the window spans exactly n request cycles of the server. tls/throughput "
           "counts both ends of the connection per MiB of plaintext carried, and shows OpenSSL's part (libssl and "
           "libcrypto) apart; pg/select counts the client process alone (the server is not under callgrind) and "
           "shows libpq's part apart. Callgrind's virtual CPU has no AVX-512 and no vDSO: code that picks its path by CPU "
           "features (OpenSSL, simdjson, memcpy) takes the AVX2 one, and a clock read is a system call. \"vs best\" "
           "is the comparator's count over tern's (> 1 = fewer instructions than the best comparator).\n";
}

}  // namespace tern_bench
