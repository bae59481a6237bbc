// timers/schedule_cancel and timers/fire_rate for tern.
//
// schedule_cancel: as in asio/coroutines, a coroutine cannot cancel its own pending wait, so it posts the
// cancel() and then awaits; the posted handler runs after the wait is armed and completes it with
// operation_canceled. Per operation: one post, one arm and one cancel in the timer structure, one resumption.
// The live_timers other waits are tern::timer objects each awaited by its own detached task, armed 30..90 min
// ahead (the same delays as Asio's), all armed before the measurement starts and cancelled after it.
// fire_rate: `timers` tasks, each re-arming its own timer delay_us ahead and awaiting it, in a loop. With
// delay_us=0 the deadline is due before the wait starts, and tern's wait completes without suspending.
// accuracy: `timers` tasks, each a periodic timer on a fixed grid (expires_at the next multiple of the period, so
// lateness does not accumulate), recording how late each wait resumed.
#include "../tern_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <deque>
#include <vector>

namespace tern_bench::tern_impl {

namespace timers_tern {  // this file's own (see bench/CMakeLists.txt)
namespace {

class background_timers {
public:
    background_timers(tern::io_context& ctx, std::size_t n) : n_(n) {
        for (auto d : background_timer_delays(n)) {
            timers_.emplace_back(ctx);
            timers_.back().expires_after(d);
            tern::spawn(ctx, wait_one(timers_.back())).detach();
        }
    }

    // True once every background task has started its wait.
    bool all_armed() const { return armed_ == n_; }

    void cancel_all() {
        for (auto& t : timers_) t.cancel();
    }

    void check_drained() const {
        if (cancelled_ != n_)
            throw bench_failure("only " + std::to_string(cancelled_) + " of " + std::to_string(n_) +
                                " background timers completed");
    }

private:
    tern::task<void> wait_one(tern::timer& t) {
        ++armed_;
        auto ec = co_await t.wait();
        expect(ec, std::errc::operation_canceled, "background timer");
        ++cancelled_;
    }

    std::deque<tern::timer> timers_;  // a deque never moves its elements, which pending waits rely on
    std::size_t n_;
    std::size_t armed_ = 0;
    std::size_t cancelled_ = 0;
};

tern::task<void> schedule_cancel_loop(tern::io_context& ctx, ops_meter& meter, background_timers& bg) {
    // The background tasks were spawned first and the run queue is FIFO, so they are normally armed already;
    // the loop makes it certain.
    while (!bg.all_armed()) co_await tern::yield();
    tern::timer timer(ctx);
    meter.start();
    do {
        timer.expires_after(std::chrono::hours(1));
        ctx.post([&timer] { timer.cancel(); });
        auto ec = co_await timer.wait();
        expect(ec, std::errc::operation_canceled, "cancelled timer");
    } while (meter.tick());
    bg.cancel_all();
}

tern::task<void> fire_loop(tern::io_context& ctx, ops_meter& meter, std::chrono::microseconds delay) {
    tern::timer timer(ctx);
    do {
        timer.expires_after(delay);
        auto ec = co_await timer.wait();
        expect_ok(ec, "fired timer");
    } while (meter.tick());
}

tern::task<void> fire_all(tern::io_context& ctx, ops_meter& meter, std::int64_t count, std::chrono::microseconds delay) {
    std::vector<tern::join_handle<void>> loops;
    loops.reserve(static_cast<std::size_t>(count));
    meter.start();
    for (std::int64_t i = 0; i < count; ++i) loops.push_back(tern::spawn(ctx, fire_loop(ctx, meter, delay)));
    for (auto& h : loops) co_await std::move(h);
}

tern::task<void> periodic_loop(tern::io_context& ctx, lateness_meter& meter, bench_clock::time_point deadline,
                               std::chrono::microseconds period) {
    tern::timer timer(ctx);
    for (;; deadline += period) {
        timer.expires_at(deadline);
        auto ec = co_await timer.wait();
        const auto ran = bench_clock::now();
        expect_ok(ec, "periodic timer");
        if (!meter.record(deadline, ran)) co_return;
    }
}

tern::task<void> accuracy(tern::io_context& ctx, lateness_meter& meter, std::size_t count,
                          std::chrono::microseconds period) {
    std::vector<tern::join_handle<void>> loops;
    loops.reserve(count);
    const auto start = bench_clock::now();
    meter.start();
    for (std::size_t i = 0; i < count; ++i)
        loops.push_back(tern::spawn(ctx, periodic_loop(ctx, meter, periodic_first_deadline(start, period, i, count), period)));
    for (auto& h : loops) co_await std::move(h);
}

}  // namespace
}  // namespace timers_tern

void timers_accuracy(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    lateness_meter meter(s);
    ctx.block_on(timers_tern::accuracy(ctx, meter, static_cast<std::size_t>(s.param_int("timers")),
                          std::chrono::microseconds(s.param_int("period_us"))));
    if (!meter.done()) throw bench_failure("the loop ended before the last phase");
}

void timers_schedule_cancel(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    exception_trap trap(ctx);
    ops_meter meter(s, "ops_per_s");
    timers_tern::background_timers background(ctx, static_cast<std::size_t>(s.param_int("live_timers")));
    tern::spawn(ctx, schedule_cancel_loop(ctx, meter, background)).detach();
    ctx.run();  // returns once the measurement ended and every background wait completed
    trap.rethrow_if_any();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
    background.check_drained();
}

void timers_fire_rate(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ops_meter meter(s, "fires_per_s");
    ctx.block_on(timers_tern::fire_all(ctx, meter, s.param_int("timers"),
        std::chrono::microseconds(s.param_int("delay_us"))));
    if (!meter.done()) throw bench_failure("the loop ended before the last phase");
}

}  // namespace tern_bench::tern_impl
