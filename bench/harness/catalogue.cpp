#include "catalogue.hpp"

#include "json.hpp"

#include <algorithm>

namespace tern_bench {

std::string to_string(const param_value& v) {
    if (auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
    return std::get<std::string>(v);
}

std::string to_json(const param_list& p) {
    json::object_writer w;
    for (auto& [k, v] : p) {
        if (auto* i = std::get_if<std::int64_t>(&v))
            w.field(k, *i);
        else
            w.field(k, std::get<std::string>(v));
    }
    return w.str();
}

std::string to_display(const param_list& p) {
    std::string out;
    for (auto& [k, v] : p) {
        if (!out.empty()) out += ' ';
        out += k + "=" + to_string(v);
    }
    return out.empty() ? "-" : out;
}

const param_value* find_param(const param_list& p, std::string_view key) {
    for (auto& [k, v] : p)
        if (k == key) return &v;
    return nullptr;
}

const metric_def* scenario_def::find_metric(std::string_view metric) const {
    for (auto& m : metrics)
        if (m.name == metric) return &m;
    return nullptr;
}

namespace {

param_list one(std::string key, std::int64_t v) { return {{std::move(key), v}}; }

std::vector<param_list> sweep(const std::string& key, std::initializer_list<std::int64_t> values) {
    std::vector<param_list> out;
    for (auto v : values) out.push_back(one(key, v));
    return out;
}

constexpr std::int64_t K = 1024;
constexpr std::int64_t M = 1024 * 1024;

const std::vector<std::string> all_runtimes = {"tern/io_uring", "tern/epoll", "asio/callbacks", "asio/coroutines"};
const std::vector<std::string> coroutine_runtimes = {"tern/io_uring", "tern/epoll", "asio/coroutines"};

std::vector<metric_def> latency_metrics() {
    std::vector<metric_def> m;
    for (const char* name : {"mean_us", "p50_us", "p90_us", "p99_us", "p99_9_us", "max_us"})
        m.push_back({name, "us", better::lower});
    return m;
}

std::vector<scenario_def> build_scenarios() {
    std::vector<scenario_def> s;

    s.push_back({"dispatch/post", "dispatch",
                 "1000 handler chains on one thread, each handler posting its successor to the loop; handlers run "
                 "per second (asio/coroutines: 1000 coroutines each doing co_await post)",
                 {{"ops_per_s", "ops/s", better::higher}},
                 {one("threads", 1)},
                 {one("threads", 1)},
                 true, true, all_runtimes});

    s.push_back({"coro/spawn", "coro",
                 "spawn n empty tasks from a running task, then await them all; ns per task (asio: co_spawn with "
                 "detached, which runs each child eagerly, and a completion counter)",
                 {{"ns_per_task", "ns", better::lower}},
                 sweep("n", {128 * K, 1 * M}),
                 sweep("n", {128 * K, 256 * K, 512 * K, 1 * M, 2 * M, 4 * M}),
                 false, true, coroutine_runtimes});

    s.push_back({"coro/switch", "coro",
                 "one coroutine yields to its loop n times (asio: co_await post(use_awaitable)); ns per switch",
                 {{"ns_per_switch", "ns", better::lower}},
                 sweep("n", {512 * K, 2 * M}),
                 sweep("n", {512 * K, 1 * M, 2 * M, 4 * M, 8 * M}),
                 false, true, coroutine_runtimes});

    s.push_back({"timers/schedule_cancel", "timers",
                 "arm a timer 1 h ahead with a pending wait, cancel it, and deliver the cancelled completion, while "
                 "live_timers other waits (30..90 min ahead) stay armed; ops/s",
                 {{"ops_per_s", "ops/s", better::higher}},
                 sweep("live_timers", {0, 1000000}),
                 sweep("live_timers", {0, 1000000}),
                 true, true, all_runtimes});

    // Two shapes. delay_us=0 is the published one (wait on 0 ns repeatedly), but a wait on a deadline that is
    // already due need not reach the loop at all: tern completes it without suspending, Asio runs it through its
    // reactor. With 10000 timers each re-armed 100 us ahead, a pass over them takes longer than the delay, so
    // every wait is filed in the timer structure and fired by the loop, back to back: the cost of the fire path.
    std::vector<param_list> fire_points = {{{"timers", std::int64_t{1}}, {"delay_us", std::int64_t{0}}},
                                           {{"timers", std::int64_t{10000}}, {"delay_us", std::int64_t{100}}}};
    s.push_back({"timers/fire_rate", "timers",
                 "`timers` waiters, each re-arming its own timer delay_us ahead and awaiting it, in a loop; "
                 "completed waits per second. delay_us=0 is the published shape, but there the deadline is due "
                 "before the wait starts and tern completes it without suspending (Asio goes through its reactor); "
                 "the 10000 x 100 us point keeps every timer due and fired by the loop",
                 {{"fires_per_s", "fires/s", better::higher}},
                 fire_points,
                 fire_points,
                 true, true, all_runtimes});

    auto pingpong_impls = all_runtimes;
    pingpong_impls.push_back("raw/liburing");
    s.push_back({"sockets/pingpong", "sockets",
                 "loopback TCP (TCP_NODELAY), client and server as separate tasks on one thread; the client writes "
                 "size bytes, the server reads them all and echoes them; every byte verified on both sides; "
                 "round-trip latency",
                 latency_metrics(),
                 sweep("size", {1, 64, 1024}),
                 sweep("size", {1, 64, 1024}),
                 true, true, pingpong_impls});

    for (auto& sc : s) sc.category = sc.name.substr(0, sc.name.find('/'));
    return s;
}

std::vector<impl_def> build_impls() {
    // Asio runs in both of its Linux configurations; each is compiled into its own executable because compiling
    // Asio's headers with different configuration macros into one program would violate the ODR.
    const std::vector<impl_variant> asio_variants = {{"epoll", "tern-bench-asio-epoll"},
                                                     {"io_uring", "tern-bench-asio-uring"}};
    return {
        {"tern/io_uring", "tern, io_uring backend", {{"", "tern-bench-tern"}}},
        {"tern/epoll", "tern, epoll backend", {{"", "tern-bench-tern"}}},
        {"asio/callbacks", "standalone Asio with completion handlers (lambdas), concurrency_hint 1", asio_variants},
        {"asio/coroutines", "standalone Asio with co_spawn + use_awaitable, concurrency_hint 1", asio_variants},
        {"raw/liburing", "hand-written single-thread liburing loop: the floor", {{"", "tern-bench-raw"}}},
    };
}

}  // namespace

const std::vector<scenario_def>& scenarios() {
    static const std::vector<scenario_def> all = build_scenarios();
    return all;
}

const std::vector<impl_def>& implementations() {
    static const std::vector<impl_def> all = build_impls();
    return all;
}

const scenario_def* find_scenario(std::string_view name) {
    for (auto& s : scenarios())
        if (s.name == name) return &s;
    return nullptr;
}

const impl_def* find_impl(std::string_view id) {
    for (auto& i : implementations())
        if (i.id == id) return &i;
    return nullptr;
}

std::vector<std::string> categories() {
    std::vector<std::string> out;
    for (auto& s : scenarios())
        if (std::find(out.begin(), out.end(), s.category) == out.end()) out.push_back(s.category);
    return out;
}

}  // namespace tern_bench
