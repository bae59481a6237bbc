// coro/spawn and coro/switch for tern.
//
// spawn: the parent spawns n empty tasks (tern::spawn queues each one; it never runs inline), keeping the join
// handles, then awaits every handle; the time covers spawning, running and joining all of them. The handle
// vector is allocated once and reused by every phase, so the warm-up pays its page faults, not a repetition.
// switch: co_await tern::yield() n times.
#include "../tern_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::tern_impl {

namespace coro_tern {  // this file's own (see bench/CMakeLists.txt)
namespace {

tern::task<void> empty_task() { co_return; }

tern::task<double> spawn_all(std::uint64_t n, std::vector<tern::join_handle<void>>& handles) {
    auto t0 = bench_clock::now();
    for (std::uint64_t i = 0; i < n; ++i) handles.push_back(tern::spawn(empty_task()));
    for (auto& h : handles) co_await std::move(h);
    handles.clear();
    auto t1 = bench_clock::now();
    co_return static_cast<double>(elapsed_ns(t0, t1)) / static_cast<double>(n);
}

tern::task<double> switch_n(std::uint64_t n) {
    auto t0 = bench_clock::now();
    for (std::uint64_t i = 0; i < n; ++i) co_await tern::yield();
    auto t1 = bench_clock::now();
    co_return static_cast<double>(elapsed_ns(t0, t1)) / static_cast<double>(n);
}

}  // namespace
}  // namespace coro_tern

void coro_spawn(session& s) {
    auto n = static_cast<std::uint64_t>(s.param_int("n"));
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    std::vector<tern::join_handle<void>> handles;
    handles.reserve(n);
    s.for_each_phase([&](const phase&) { return metric_values{{"ns_per_task", ctx.block_on(coro_tern::spawn_all(n,
        handles))}}; });
}

void coro_switch(session& s) {
    auto n = static_cast<std::uint64_t>(s.param_int("n"));
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    s.for_each_phase([&](const phase&) { return metric_values{{"ns_per_switch",
        ctx.block_on(coro_tern::switch_n(n))}}; });
}

}  // namespace tern_bench::tern_impl
