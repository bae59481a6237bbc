// tern::sync::manual_reset_event and auto_reset_event on one loop: set/reset/is_set, waking every waiter or exactly
// one, cancellation by with_timeout and with_stop (also after the signal was given), and waits destroyed with their
// loop.
#include "sync/sync_support.hpp"

#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace tern_test;
using tern::sync::auto_reset_event;
using tern::sync::manual_reset_event;

class event_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(event_test);

template <class Event>
tern::task<void> wait_record(Event& e, int id, std::vector<int>& order) {
  EXPECT_OK(co_await e.wait());
  order.push_back(id);
}

TEST_P(event_test, manual_reset_set_wakes_every_waiter_and_stays_set) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    manual_reset_event e;
    EXPECT_FALSE(e.is_set());
    std::vector<int> order;
    auto a = tern::spawn(ctx, wait_record(e, 1, order));
    auto b = tern::spawn(ctx, wait_record(e, 2, order));
    auto c = tern::spawn(ctx, wait_record(e, 3, order));
    co_await tern::yield();
    EXPECT_TRUE(order.empty());
    e.set();
    EXPECT_TRUE(e.is_set());
    co_await std::move(a);
    co_await std::move(b);
    co_await std::move(c);
    EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
    EXPECT_OK(co_await e.wait());  // passes while set
    EXPECT_OK(co_await e.wait());
    e.reset();
    EXPECT_FALSE(e.is_set());
    EXPECT_EC(co_await tern::with_timeout(e.wait(), 5ms), std::errc::timed_out);
  }(ctx));
}

TEST_P(event_test, manual_reset_initially_set) {
  run_bounded(ctx, []() -> tern::task<void> {
    manual_reset_event e(true);
    EXPECT_TRUE(e.is_set());
    EXPECT_OK(co_await e.wait());
  }());
}

TEST_P(event_test, auto_reset_set_wakes_one_waiter_at_a_time_in_order) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto_reset_event e;
    std::vector<int> order;
    auto a = tern::spawn(ctx, wait_record(e, 1, order));
    auto b = tern::spawn(ctx, wait_record(e, 2, order));
    co_await tern::yield();
    e.set();
    EXPECT_FALSE(e.is_set()) << "the signal went to a waiter: the event stays unset";
    co_await tern::yield();
    EXPECT_EQ(order, (std::vector<int>{1}));
    e.set();
    co_await std::move(a);
    co_await std::move(b);
    EXPECT_EQ(order, (std::vector<int>{1, 2}));
    EXPECT_FALSE(e.is_set());
  }(ctx));
}

TEST_P(event_test, auto_reset_set_without_waiter_is_consumed_by_one_wait) {
  run_bounded(ctx, []() -> tern::task<void> {
    auto_reset_event e;
    e.set();
    e.set();  // does not accumulate
    EXPECT_TRUE(e.is_set());
    EXPECT_OK(co_await e.wait());
    EXPECT_FALSE(e.is_set());
    EXPECT_EC(co_await tern::with_timeout(e.wait(), 5ms), std::errc::timed_out);
    e.set();
    e.reset();
    EXPECT_FALSE(e.is_set());
    auto_reset_event initially(true);
    EXPECT_OK(co_await initially.wait());
    EXPECT_FALSE(initially.is_set());
  }());
}

template <class Event>
tern::task<void> wait_with_stop(Event& e, std::stop_token token, std::error_code& out) {
  out = co_await tern::with_stop(e.wait(), std::move(token));
}

template <class Event>
void wait_with_stop_from_another_thread(tern::io_context& ctx) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    Event e;
    std::stop_source source;
    // The wait alone does not keep the loop running while the stop is on its way from the other thread.
    auto busy = ctx.make_work_guard();
    auto before = clock_type::now();  // before the other thread starts its 20 ms
    stop_from_thread other(source, 20ms);
    EXPECT_EC(co_await tern::with_stop(e.wait(), source.get_token()), std::errc::operation_canceled);
    EXPECT_GE(clock_type::now() - before, 20ms);
    busy.reset();
    e.set();
    EXPECT_TRUE(e.is_set());
  }(ctx));
}

TEST_P(event_test, manual_reset_wait_with_stop_from_another_thread) {
  wait_with_stop_from_another_thread<manual_reset_event>(ctx);
}

TEST_P(event_test, auto_reset_wait_with_stop_from_another_thread) {
  wait_with_stop_from_another_thread<auto_reset_event>(ctx);
}

TEST_P(event_test, auto_reset_timed_out_wait_does_not_consume_a_later_signal) {
  run_bounded(ctx, []() -> tern::task<void> {
    auto_reset_event e;
    EXPECT_EC(co_await tern::with_timeout(e.wait(), 10ms), std::errc::timed_out);
    e.set();
    EXPECT_TRUE(e.is_set());
  }());
}

TEST_P(event_test, auto_reset_stop_after_the_signal_keeps_it) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto_reset_event e;
    std::stop_source source;
    std::error_code ec = std::make_error_code(std::errc::io_error);
    auto waiter = tern::spawn(ctx, wait_with_stop(e, source.get_token(), ec));
    co_await tern::yield();
    e.set();
    source.request_stop();
    co_await std::move(waiter);
    EXPECT_OK(ec);
    EXPECT_FALSE(e.is_set()) << "the signal was both consumed and left set";
  }(ctx));
}

TEST_P(event_test, manual_reset_stop_after_set_succeeds) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    manual_reset_event e;
    std::stop_source source;
    std::error_code ec = std::make_error_code(std::errc::io_error);
    auto waiter = tern::spawn(ctx, wait_with_stop(e, source.get_token(), ec));
    co_await tern::yield();
    e.set();
    source.request_stop();
    co_await std::move(waiter);
    EXPECT_OK(ec);
  }(ctx));
}

template <class Event>
tern::task<void> wait_forever(Event& e) {
  (void)co_await e.wait();
  ADD_FAILURE() << "the wait completed on a loop that was never run again";
}

TEST_P(event_test, waits_destroyed_while_waiting_unlink_themselves) {
  manual_reset_event manual;
  auto_reset_event automatic;
  {
    tern::io_context local(options());
    tern::spawn(local, wait_forever(manual)).detach();
    tern::spawn(local, wait_forever(automatic)).detach();
    EXPECT_TRUE(run_context_bounded(local));
  }
  manual.set();
  automatic.set();
  EXPECT_TRUE(automatic.is_set()) << "the signal went to a destroyed waiter";
}

TEST_P(event_test, auto_reset_signal_given_to_a_wait_that_never_runs_is_set_again) {
  auto_reset_event e;
  {
    tern::io_context local(options());
    tern::spawn(local, wait_forever(e)).detach();
    EXPECT_TRUE(run_context_bounded(local));
    e.set();
    EXPECT_FALSE(e.is_set());
  }
  EXPECT_TRUE(e.is_set()) << "a signal was lost with a destroyed waiter";
}

}  // namespace
