// realtime/jitter for tern: the periodic task on a one-worker tern::runtime pinned to CPU 0, its wake-ups from a
// tern::timer on a fixed grid (expires_at). tern/io_uring and tern/epoll run the runtime's defaults (a worker
// spins 20 us, then parks in the kernel); the -latency implementations run latency mode:
// runtime_options::low_latency (pinned, busy polling: the worker never parks, so a wake-up is not a vCPU
// wake-up), with memory locked and the frame pool pre-faulted. SCHED_FIFO is left out on purpose: a busy-polling
// FIFO thread is stopped by the kernel's real-time throttling (sched_rt_runtime_us, 950 ms of every second by
// default) for 50 ms a second, which would be the worst lateness of all.
#include "../tern_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"
#include "jitter_common.hpp"

#include <tern/runtime.hpp>

#include <optional>

namespace tern_bench::tern_impl {

namespace rj = realtime_jitter;

namespace realtime_tern {  // this file's own (see bench/CMakeLists.txt)
namespace {

struct jitter_state {
    std::uint64_t wakeups = 0;
    std::uint64_t sum = 0;
};

tern::task<void> periodic(lateness_meter& meter, std::chrono::microseconds period, std::int64_t iterations,
                          jitter_state& st) {
    tern::timer timer(*tern::io_context::current());
    auto deadline = bench_clock::now() + period;
    meter.start();
    for (;; deadline += period) {
        timer.expires_at(deadline);
        auto ec = co_await timer.wait();
        const auto ran = bench_clock::now();
        expect_ok(ec, "periodic timer");
        if (!meter.record(deadline, ran)) co_return;
        st.sum += rj::fixed_work(st.wakeups++, iterations);
    }
}

}  // namespace
}  // namespace realtime_tern

void realtime_jitter(session& s) {
    const std::string& id = s.request().impl;
    const bool latency = latency_mode(s);
    tern::runtime_options o = latency ? tern::runtime_options::low_latency(1) : tern::runtime_options{};
    o.threads = 1;
    o.pin_threads = true;  // worker 0 on CPU 0, in both modes
    o.backend = requested_backend(s);
    if (latency) {
        o.prefault_bytes_per_class = 64 * 1024;
        o.lock_memory = true;
    }
    std::optional<tern::runtime> rt;
    try {
        rt.emplace(o);
    } catch (const std::system_error& e) {
        if (!o.lock_memory) throw;
        o.lock_memory = false;  // not permitted here: measure the rest of latency mode, and say so
        rt.emplace(o);
    }
    s.info("mode", latency ? (o.lock_memory ? "latency (busy poll, locked, pre-faulted)"
                                            : "latency (busy poll, pre-faulted; mlockall refused)")
                           : "normal (spin 20 us, then park)");
    s.info("backend", tern::to_string(rt->worker(0).backend()));
    if (rt->worker(0).backend() != o.backend)
        throw bench_failure(std::string("asked for ") + id + ", the worker runs " +
                            tern::to_string(rt->worker(0).backend()));
    const std::int64_t iterations = s.param_int("work_iterations");
    lateness_meter meter(s, latency_meter::figures::jitter);
    realtime_tern::jitter_state st;
    {
        rj::background_load load(s.param_int("load") != 0);
        rt->block_on(periodic(meter, std::chrono::microseconds(s.param_int("period_us")), iterations, st));
    }
    rt->shutdown(std::chrono::seconds(1));
    if (!meter.done()) throw bench_failure("the periodic task ended before the last phase");
    rj::verify_work(st.wakeups, st.sum, iterations);
}

}  // namespace tern_bench::tern_impl
