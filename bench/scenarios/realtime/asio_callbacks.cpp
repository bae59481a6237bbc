// realtime/jitter for Asio: the periodic task as an asio::steady_timer re-armed at the next grid deadline
// (expires_at) from its completion handler, on an io_context (concurrency_hint 1) run by a thread pinned to CPU
// 0, with the same background load on CPU 1 and the same work per wake-up. Asio has no latency mode: its loop
// blocks in the kernel between wake-ups.
#include "../asio_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"
#include "jitter_common.hpp"

namespace tern_bench::asio_impl {

namespace rj = realtime_jitter;

namespace realtime_asio_callbacks {  // this file's own (see bench/CMakeLists.txt)
namespace {

struct jitter_step {
    asio::steady_timer* timer;
    lateness_meter* meter;
    bench_clock::time_point deadline;
    std::chrono::microseconds period;
    std::int64_t iterations;
    std::uint64_t* wakeups;
    std::uint64_t* sum;
    void operator()(const asio::error_code& ec) {
        const auto ran = bench_clock::now();
        expect_ok(ec, "periodic timer");
        if (!meter->record(deadline, ran)) return;
        *sum += rj::fixed_work((*wakeups)++, iterations);
        deadline += period;
        arm();
    }
    void arm() {
        timer->expires_at(deadline);
        timer->async_wait(*this);
    }
};

}  // namespace
}  // namespace realtime_asio_callbacks

void realtime_jitter_callbacks(session& s) {
    announce(s);
    pin_to_cpu(0);
    asio::io_context ctx(concurrency_hint);
    asio::steady_timer timer(ctx);
    lateness_meter meter(s, latency_meter::figures::jitter);
    const std::chrono::microseconds period(s.param_int("period_us"));
    const std::int64_t iterations = s.param_int("work_iterations");
    std::uint64_t wakeups = 0;
    std::uint64_t sum = 0;
    {
        rj::background_load load(s.param_int("load") != 0);
        meter.start();
        realtime_asio_callbacks::jitter_step{&timer, &meter, bench_clock::now() + period, period, iterations, &wakeups,
            &sum}.arm();
        ctx.run();
    }
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
    rj::verify_work(wakeups, sum, iterations);
}

}  // namespace tern_bench::asio_impl
