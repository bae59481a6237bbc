// raw/redis-benchmark for redis/pipeline: the server's own reference client (redis-tools), on one connection
// (-c 1) with `tasks` commands pipelined (-P tasks), 32-byte values (-d 32), SET then GET (-t set,get), pinned to
// CPU 0 like every client: what the server allows a client that does nothing but write pipelined commands and
// count the replies (it checks none). It runs a fixed number of requests, so each phase runs it with the number its
// rate in the previous phase takes to fill the phase's time; commands_per_s combines its SET and GET rates
// (the same number of each: 2 / (1/set + 1/get)), client_cpu_us_per_command is its own CPU time (wait4) per
// command; the server's figures count the run's few set-up commands too. raw/redis-benchmark-keys adds -r tasks:
// without it every SET and GET goes to one key, which the server finds in its cache each time; with it the keys
// are drawn from as many as the other clients' tasks use, the same work for the server.
#include "../registry.hpp"
#include "redis_bench.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>

namespace tern_bench::raw_impl {

namespace redis_redis_benchmark {  // this file's own (see bench/CMakeLists.txt)
namespace {

// The rps of each test in redis-benchmark's CSV output ("SET","123.45",...).
std::map<std::string, double> parse_csv(const std::string& out) {
    std::map<std::string, double> rps;
    std::size_t pos = 0;
    while (pos < out.size()) {
        const std::size_t eol = std::min(out.find('\n', pos), out.size());
        const std::string line = out.substr(pos, eol - pos);
        pos = eol + 1;
        if (line.size() < 2 || line[0] != '"') continue;
        const std::size_t name_end = line.find('"', 1);
        if (name_end == std::string::npos || line.compare(name_end, 3, "\",\"") != 0) continue;
        rps[line.substr(1, name_end - 1)] = std::strtod(line.c_str() + name_end + 3, nullptr);
    }
    return rps;
}

}  // namespace
}  // namespace redis_redis_benchmark

namespace redis_redis_benchmark {  // this file's own (see bench/CMakeLists.txt)
namespace {

// per_task_keys: -r tasks, keys drawn at random from as many as there are tasks (else its one key).
void run_benchmark(session& s, bool per_task_keys) {
    redis_bench::server srv;
    redis_bench::announce(s, srv);
    const std::int64_t tasks = s.param_int("tasks");
    double rate = 20000.0 * static_cast<double>(std::min<std::int64_t>(tasks, 50));  // a first guess
    for (const phase& p : s.phases()) {
        const auto requests = static_cast<std::int64_t>(std::max(1000.0, rate * p.seconds / 2));
        std::vector<std::string> args = {"redis-benchmark", "-h", "127.0.0.1", "-p", std::to_string(srv.port()),
                                         "-c", "1", "-P", std::to_string(tasks), "-n",
                                         std::to_string(requests), "-d", "32", "-t", "set,get", "--csv"};
        if (per_task_keys) args.insert(args.end(), {"-r", std::to_string(tasks)});
        if (p.index == 0) {
            std::string command;
            for (auto& a : args) command += (command.empty() ? "" : " ") + a;
            s.info("command", command);
        }
        const redis_bench::server::usage before = srv.sample();
        const redis_bench::program_run run =
            redis_bench::run_pinned("/usr/bin/env", args, redis_bench::client_cpu, p.seconds * 20 + 30);
        if (!WIFEXITED(run.status) || WEXITSTATUS(run.status) != 0)
            throw bench_failure("redis-benchmark ended with status " + std::to_string(run.status) + ": " + run.output);
        const auto rps = parse_csv(run.output);
        const auto set = rps.find("SET");
        const auto get = rps.find("GET");
        if (set == rps.end() || get == rps.end() || set->second <= 0 || get->second <= 0)
            throw bench_failure("no SET and GET rates in redis-benchmark's output: " + run.output);
        rate = 2 / (1 / set->second + 1 / get->second);
        const double cpu = static_cast<double>(run.usage.ru_utime.tv_sec + run.usage.ru_stime.tv_sec) +
                           static_cast<double>(run.usage.ru_utime.tv_usec + run.usage.ru_stime.tv_usec) / 1e6;
        metric_values values{{"commands_per_s", rate}, {"client_cpu_us_per_command", cpu * 1e6 / (2.0 * requests)}};
        redis_bench::append_server_metrics(values, before, srv.sample(), 2.0 * static_cast<double>(requests));
        s.report(p, values);
    }
}

}  // namespace
}  // namespace redis_redis_benchmark

void redis_pipeline_benchmark(session& s) { redis_redis_benchmark::run_benchmark(s, false); }
void redis_pipeline_benchmark_keys(session& s) { redis_redis_benchmark::run_benchmark(s, true); }

}  // namespace tern_bench::raw_impl
