#include "cli.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

namespace tern_bench {

namespace {

double parse_positive(const std::string& flag, const std::string& text) {
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !(v > 0))
        throw std::invalid_argument(flag + " wants a positive number of seconds, got '" + text + "'");
    return v;
}

bool glob_match(const std::string& glob, const std::string& name) { return fnmatch(glob.c_str(), name.c_str(), 0) == 0; }

template <class Range, class Name>
std::string list_names(const Range& r, Name name) {
    std::string out;
    for (auto& x : r) out += "\n  " + name(x);
    return out;
}

}  // namespace

std::string usage() {
    return "usage: tern-bench [--category C]... [--scenario GLOB]... [--impl GLOB]... [--profile quick|full]\n"
           "                  [--duration S] [--warmup S] [--repeat N] [--instructions] [--json FILE] [--report DIR]\n"
           "                  [--list]\n"
           "\n"
           "  --category C      run the scenarios of category C (repeatable)\n"
           "  --scenario GLOB   run the scenarios matching GLOB, e.g. 'timers/*' (repeatable)\n"
           "  --impl GLOB       run the implementations matching GLOB, e.g. 'tern/*' (repeatable)\n"
           "  --profile P       quick (default: short runs, smaller sweeps) or full (BENCHMARKS.md's sweeps)\n"
           "  --duration S      seconds per repetition of a timed scenario (quick 1, full 3)\n"
           "  --warmup S        seconds of excluded warm-up before the repetitions (quick 0.2, full 0.5)\n"
           "  --repeat N        repetitions per point (default 3; 1 with --instructions); the median is the figure\n"
           "  --instructions    count user-space instructions per operation under callgrind (valgrind) instead of\n"
           "                    timing: each selected scenario's counted points (--list shows them), a fixed\n"
           "                    amount of work, exact on any machine\n"
           "  --json FILE       write one JSON record per measured point and metric\n"
           "  --report DIR      write DIR/report.md (environment, where tern trails and leads, the tables with\n"
           "                    ratios to the best Asio configuration) and the charts of the sweeps in DIR/plots/;\n"
           "                    the charts read the --json file, or DIR/results.jsonl written without --json\n"
           "  --list            print the selected scenarios with their parameters for the chosen profile, and\n"
           "                    their implementations\n"
           "\n"
           "The charts need python3 with matplotlib (Debian: python3-matplotlib); TERN_BENCH_PYTHON names the\n"
           "interpreter, otherwise python3 on PATH and then /usr/bin/python3 are tried.\n";
}

options parse_options(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        std::string value;
        bool has_inline = false;
        if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_inline = true;
        }
        auto next = [&]() -> std::string {
            if (has_inline) return value;
            if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
            return argv[++i];
        };
        if (arg == "--category") {
            o.categories.push_back(next());
        } else if (arg == "--scenario") {
            o.scenario_globs.push_back(next());
        } else if (arg == "--impl") {
            o.impl_globs.push_back(next());
        } else if (arg == "--profile") {
            std::string p = next();
            if (p == "quick")
                o.prof = profile::quick;
            else if (p == "full")
                o.prof = profile::full;
            else
                throw std::invalid_argument("--profile is quick or full, got '" + p + "'");
        } else if (arg == "--duration") {
            o.duration_s = parse_positive(arg, next());
        } else if (arg == "--warmup") {
            std::string w = next();
            o.warmup_s = w == "0" ? 0.0 : parse_positive(arg, w);
        } else if (arg == "--repeat") {
            std::string r = next();
            char* end = nullptr;
            long n = std::strtol(r.c_str(), &end, 10);
            if (end == r.c_str() || *end != '\0' || n < 1 || n > 1000)
                throw std::invalid_argument("--repeat wants a count from 1 to 1000, got '" + r + "'");
            o.repeat = static_cast<int>(n);
            o.repeat_given = true;
        } else if (arg == "--instructions" && !has_inline) {
            o.instructions = true;
        } else if (arg == "--json") {
            o.json_file = next();
        } else if (arg == "--report") {
            o.report_dir = next();
        } else if (arg == "--list" && !has_inline) {
            o.list = true;
        } else if ((arg == "--help" || arg == "-h") && !has_inline) {
            o.help = true;
        } else {
            throw std::invalid_argument("unknown argument '" + std::string(argv[i]) + "'\n" + usage());
        }
    }
    return o;
}

std::vector<const scenario_def*> select_scenarios(const options& o) {
    auto cats = categories();
    for (auto& c : o.categories)
        if (std::find(cats.begin(), cats.end(), c) == cats.end())
            throw std::invalid_argument("unknown category '" + c + "'; valid categories:" +
                                        list_names(cats, [](auto& s) { return s; }));
    for (auto& g : o.scenario_globs) {
        bool any = std::any_of(scenarios().begin(), scenarios().end(),
                               [&](auto& s) { return glob_match(g, s.name); });
        if (!any)
            throw std::invalid_argument("no scenario matches '" + g + "'; valid scenarios:" +
                                        list_names(scenarios(), [](auto& s) { return s.name; }));
    }
    std::vector<const scenario_def*> out;
    for (auto& s : scenarios()) {
        bool cat_ok = o.categories.empty() ||
                      std::find(o.categories.begin(), o.categories.end(), s.category) != o.categories.end();
        bool name_ok = o.scenario_globs.empty() || std::any_of(o.scenario_globs.begin(), o.scenario_globs.end(),
                                                               [&](auto& g) { return glob_match(g, s.name); });
        if (cat_ok && name_ok) out.push_back(&s);
    }
    if (out.empty()) throw std::invalid_argument("the --category and --scenario selections have no scenario in common");
    return out;
}

std::vector<const impl_def*> select_impls(const options& o) {
    for (auto& g : o.impl_globs) {
        bool any = std::any_of(implementations().begin(), implementations().end(),
                               [&](auto& i) { return glob_match(g, i.id); });
        if (!any)
            throw std::invalid_argument("no implementation matches '" + g + "'; valid implementations:" +
                                        list_names(implementations(), [](auto& i) { return i.id; }));
    }
    std::vector<const impl_def*> out;
    for (auto& i : implementations())
        if (o.impl_globs.empty() || std::any_of(o.impl_globs.begin(), o.impl_globs.end(),
                                                [&](auto& g) { return glob_match(g, i.id); }))
            out.push_back(&i);
    return out;
}

}  // namespace tern_bench
