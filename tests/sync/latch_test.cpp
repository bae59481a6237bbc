// tern::sync::latch and wait_group on one loop: waiting for the count to reach zero, waking every waiter, reuse of
// a wait_group, cancellation by with_timeout and with_stop, and waits destroyed with their loop.
#include "sync/sync_support.hpp"

#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

// A named namespace, not an anonymous one: the test sources are compiled in unity batches (tests/CMakeLists.txt),
// where this file's helpers would meet sync/event_test.cpp's of the same names.
namespace latch_tests {

using namespace tern_test;
using tern::sync::latch;
using tern::sync::wait_group;

class latch_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(latch_test);

template <class Waitable>
tern::task<void> wait_record(Waitable& w, int id, std::vector<int>& order) {
  EXPECT_OK(co_await w.wait());
  order.push_back(id);
}

TEST_P(latch_test, latch_opens_when_counted_down_to_zero) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    latch l(3);
    EXPECT_EQ(l.count(), 3u);
    EXPECT_FALSE(l.try_wait());
    std::vector<int> order;
    auto a = tern::spawn(ctx, wait_record(l, 1, order));
    auto b = tern::spawn(ctx, wait_record(l, 2, order));
    co_await tern::yield();
    l.count_down();
    l.count_down();
    co_await tern::yield();
    EXPECT_TRUE(order.empty()) << "a wait completed before the count reached zero";
    l.count_down();
    EXPECT_TRUE(l.try_wait());
    co_await std::move(a);
    co_await std::move(b);
    EXPECT_EQ(order, (std::vector<int>{1, 2}));
    EXPECT_OK(co_await l.wait());  // stays open
  }(ctx));
}

TEST_P(latch_test, latch_count_down_by_n_and_zero_latch) {
  run_bounded(ctx, []() -> tern::task<void> {
    latch open(0);
    EXPECT_TRUE(open.try_wait());
    EXPECT_OK(co_await open.wait());
    latch l(5);
    l.count_down(5);
    EXPECT_EQ(l.count(), 0u);
    EXPECT_OK(co_await l.wait());
  }());
}

TEST_P(latch_test, wait_group_waits_for_every_done_and_is_reusable) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    wait_group wg;
    EXPECT_EQ(wg.count(), 0u);
    EXPECT_OK(co_await wg.wait());  // zero: at once
    wg.add(2);
    std::vector<int> order;
    auto a = tern::spawn(ctx, wait_record(wg, 1, order));
    co_await tern::yield();
    wg.done();
    co_await tern::yield();
    EXPECT_TRUE(order.empty());
    wg.done();
    co_await std::move(a);
    EXPECT_EQ(order, (std::vector<int>{1}));
    // Again, with a new round of work.
    wg.add();
    auto b = tern::spawn(ctx, wait_record(wg, 2, order));
    co_await tern::yield();
    EXPECT_EQ(order.size(), 1u);
    wg.done();
    co_await std::move(b);
    EXPECT_EQ(order, (std::vector<int>{1, 2}));
  }(ctx));
}

template <class Waitable>
void wait_times_out_and_with_stop(tern::io_context& ctx) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    Waitable w;
    auto before = clock_type::now();
    EXPECT_EC(co_await tern::with_timeout(w.wait(), 20ms), std::errc::timed_out);
    EXPECT_GE(clock_type::now() - before, 20ms);
    std::stop_source source;
    // The wait alone does not keep the loop running while the stop is on its way from the other thread.
    auto busy = ctx.make_work_guard();
    stop_from_thread other(source, 10ms);
    EXPECT_EC(co_await tern::with_stop(w.wait(), source.get_token()), std::errc::operation_canceled);
    busy.reset();
  }(ctx));
}

struct latch_of_one : latch {
  latch_of_one() : latch(1) {}
};
struct busy_wait_group : wait_group {
  busy_wait_group() { add(); }
};

TEST_P(latch_test, latch_wait_is_cancellable) { wait_times_out_and_with_stop<latch_of_one>(ctx); }

TEST_P(latch_test, wait_group_wait_is_cancellable) { wait_times_out_and_with_stop<busy_wait_group>(ctx); }

template <class Waitable>
tern::task<void> wait_with_stop(Waitable& w, std::stop_token token, std::error_code& out) {
  out = co_await tern::with_stop(w.wait(), std::move(token));
}

TEST_P(latch_test, stop_after_the_count_reached_zero_is_too_late) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    latch l(1);
    wait_group wg;
    wg.add();
    std::stop_source source;
    std::error_code ec1 = std::make_error_code(std::errc::io_error);
    std::error_code ec2 = ec1;
    auto a = tern::spawn(ctx, wait_with_stop(l, source.get_token(), ec1));
    auto b = tern::spawn(ctx, wait_with_stop(wg, source.get_token(), ec2));
    co_await tern::yield();
    l.count_down();
    wg.done();
    source.request_stop();
    co_await std::move(a);
    co_await std::move(b);
    EXPECT_OK(ec1);
    EXPECT_OK(ec2);
  }(ctx));
}

template <class Waitable>
tern::task<void> wait_forever(Waitable& w) {
  (void)co_await w.wait();
  ADD_FAILURE() << "the wait completed on a loop that was never run again";
}

TEST_P(latch_test, waits_destroyed_while_waiting_unlink_themselves) {
  latch l(1);
  wait_group wg;
  wg.add();
  {
    tern::io_context local(options());
    tern::spawn(local, wait_forever(l)).detach();
    tern::spawn(local, wait_forever(wg)).detach();
    EXPECT_TRUE(run_context_bounded(local));
  }
  l.count_down();  // would touch the destroyed waiters if they were still linked
  wg.done();
  EXPECT_TRUE(l.try_wait());
  EXPECT_EQ(wg.count(), 0u);
}

}  // namespace
