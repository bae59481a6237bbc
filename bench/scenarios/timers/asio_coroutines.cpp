// timers/schedule_cancel and timers/fire_rate for asio/coroutines.
//
// schedule_cancel: a coroutine cannot cancel its own wait while suspended in it, so it posts the cancel() first
// and then awaits: the posted handler runs after the wait is registered (Asio initiates the wait before it
// returns to the loop) and completes it with operation_aborted. Per operation: one post, one insertion into and
// removal from the timer queue, one resumption. Errors come back through redirect_error: use_awaitable alone
// would throw for every cancellation and measure exception handling.
// fire_rate: `timers` coroutines, each re-arming its own timer delay_us ahead and awaiting it, in a loop.
// accuracy: `timers` coroutines, each a periodic timer on a fixed grid (expires_at), recording its lateness.
#include "asio_background.hpp"
#include "../registry.hpp"

namespace tern_bench::asio_impl {

namespace timers_asio_coroutines {  // this file's own (see bench/CMakeLists.txt)
namespace {

asio::awaitable<void> schedule_cancel_loop(asio::steady_timer& timer, ops_meter& meter, background_timers& bg) {
    auto ex = co_await asio::this_coro::executor;
    asio::error_code ec;
    do {
        timer.expires_after(std::chrono::hours(1));
        asio::post(ex, [&timer] { timer.cancel(); });
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        expect(ec, asio::error::operation_aborted, "cancelled timer");
    } while (meter.tick());
    bg.cancel_all();
}

asio::awaitable<void> fire_loop(ops_meter& meter, std::chrono::microseconds delay) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    asio::error_code ec;
    do {
        timer.expires_after(delay);
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        expect_ok(ec, "fired timer");
    } while (meter.tick());
}

asio::awaitable<void> periodic_loop(lateness_meter& meter, bench_clock::time_point deadline,
                                    std::chrono::microseconds period) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    asio::error_code ec;
    for (;; deadline += period) {
        timer.expires_at(deadline);
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        const auto ran = bench_clock::now();
        expect_ok(ec, "periodic timer");
        if (!meter.record(deadline, ran)) co_return;
    }
}

}  // namespace
}  // namespace timers_asio_coroutines

void timers_accuracy_coroutines(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    auto count = static_cast<std::size_t>(s.param_int("timers"));
    std::chrono::microseconds period(s.param_int("period_us"));
    lateness_meter meter(s);
    const auto start = bench_clock::now();
    meter.start();
    for (std::size_t i = 0; i < count; ++i)
        asio::co_spawn(ctx, timers_asio_coroutines::periodic_loop(meter, periodic_first_deadline(start, period, i,
            count), period),
                       asio::detached);
    ctx.run();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
}

void timers_schedule_cancel_coroutines(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    background_timers background(ctx, static_cast<std::size_t>(s.param_int("live_timers")));
    asio::steady_timer timer(ctx);
    ops_meter meter(s, "ops_per_s");
    meter.start();
    asio::co_spawn(ctx, timers_asio_coroutines::schedule_cancel_loop(timer, meter, background), rethrow{});
    ctx.run();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
    background.check_drained();
}

void timers_fire_rate_coroutines(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    auto count = s.param_int("timers");
    std::chrono::microseconds delay(s.param_int("delay_us"));
    ops_meter meter(s, "fires_per_s");
    meter.start();
    for (std::int64_t i = 0; i < count; ++i) asio::co_spawn(ctx, timers_asio_coroutines::fire_loop(meter, delay),
        rethrow{});
    ctx.run();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
}

}  // namespace tern_bench::asio_impl
