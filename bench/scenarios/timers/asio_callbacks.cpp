// timers/schedule_cancel and timers/fire_rate for asio/callbacks.
//
// schedule_cancel: the natural callback form: arm 1 h ahead, async_wait, cancel() at once; the handler sees
// operation_aborted, counts, and does the next one. Every operation inserts into and removes from the timer queue
// and runs one handler.
// fire_rate: `timers` handler chains; each handler re-arms its timer delay_us ahead and waits again.
// accuracy: `timers` handler chains, each re-arming its timer at the next point of its fixed grid (expires_at) and
// recording how late its handler ran.
#include "asio_background.hpp"
#include "../registry.hpp"

namespace tern_bench::asio_impl {

namespace timers_asio_callbacks {  // this file's own (see bench/CMakeLists.txt)
namespace {

struct schedule_cancel_state {
    asio::steady_timer timer;
    ops_meter meter;
    background_timers* background;
};

struct cancelled_step {
    schedule_cancel_state* st;
    void operator()(const asio::error_code& ec) const {
        expect(ec, asio::error::operation_aborted, "cancelled timer");
        if (!st->meter.tick()) {
            st->background->cancel_all();
            return;
        }
        arm(st);
    }
    static void arm(schedule_cancel_state* st) {
        st->timer.expires_after(std::chrono::hours(1));
        st->timer.async_wait(cancelled_step{st});
        st->timer.cancel();
    }
};

struct fire_step {
    asio::steady_timer* timer;
    ops_meter* meter;
    std::chrono::microseconds delay;
    void operator()(const asio::error_code& ec) const {
        expect_ok(ec, "fired timer");
        if (meter->tick()) arm();
    }
    void arm() const {
        timer->expires_after(delay);
        timer->async_wait(*this);
    }
};

struct periodic_step {
    asio::steady_timer* timer;
    lateness_meter* meter;
    bench_clock::time_point deadline;
    std::chrono::microseconds period;
    void operator()(const asio::error_code& ec) {
        const auto ran = bench_clock::now();
        expect_ok(ec, "periodic timer");
        if (!meter->record(deadline, ran)) return;
        deadline += period;
        arm();
    }
    void arm() {
        timer->expires_at(deadline);
        timer->async_wait(*this);
    }
};

}  // namespace
}  // namespace timers_asio_callbacks

void timers_accuracy_callbacks(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    auto count = static_cast<std::size_t>(s.param_int("timers"));
    std::chrono::microseconds period(s.param_int("period_us"));
    std::deque<asio::steady_timer> timers;  // never moves its elements
    for (std::size_t i = 0; i < count; ++i) timers.emplace_back(ctx);
    lateness_meter meter(s);
    const auto start = bench_clock::now();
    meter.start();
    for (std::size_t i = 0; i < count; ++i)
        timers_asio_callbacks::periodic_step{&timers[i], &meter, periodic_first_deadline(start, period, i, count),
            period}.arm();
    ctx.run();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
}

void timers_schedule_cancel_callbacks(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    background_timers background(ctx, static_cast<std::size_t>(s.param_int("live_timers")));
    timers_asio_callbacks::schedule_cancel_state st{asio::steady_timer(ctx), ops_meter(s, "ops_per_s"), &background};
    st.meter.start();
    timers_asio_callbacks::cancelled_step::arm(&st);
    ctx.run();
    if (!st.meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
    background.check_drained();
}

void timers_fire_rate_callbacks(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    auto count = static_cast<std::size_t>(s.param_int("timers"));
    std::chrono::microseconds delay(s.param_int("delay_us"));
    std::deque<asio::steady_timer> timers;  // never moves its elements
    for (std::size_t i = 0; i < count; ++i) timers.emplace_back(ctx);
    ops_meter meter(s, "fires_per_s");
    meter.start();
    for (auto& t : timers) timers_asio_callbacks::fire_step{&t, &meter, delay}.arm();
    ctx.run();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
}

}  // namespace tern_bench::asio_impl
