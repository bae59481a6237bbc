// signal_set: signals arrive as awaited values on both backends, and waits are cancellable.
#include "support.hpp"

#include <csignal>
#include <pthread.h>
#include <thread>

namespace {

using namespace tern_test;

class signal_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(signal_test);

// Every thread must block a signal for the signalfd to receive it: block before the watchdog thread starts.
TEST_P(signal_test, raised_signals_are_received_in_order_of_delivery) {
  ASSERT_FALSE(tern::block_signals({SIGUSR1, SIGUSR2}));
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tern::signal_set set(ctx, {SIGUSR1, SIGUSR2});
    // Delivered to this thread, which blocks them: they wait in the signalfd.
    CO_ASSERT(pthread_kill(pthread_self(), SIGUSR1) == 0);
    auto first = co_await set.wait();
    EXPECT_OK(first.ec);
    EXPECT_EQ(first.value, SIGUSR1);
    // A signal sent from another thread while the wait is pending.
    std::thread sender([loop_thread = pthread_self()] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      pthread_kill(loop_thread, SIGUSR2);
    });
    auto second = co_await tern::with_timeout(set.wait(), std::chrono::seconds(10));
    sender.join();
    EXPECT_OK(second.ec);
    EXPECT_EQ(second.value, SIGUSR2);
  }(ctx));
}

TEST_P(signal_test, a_pending_wait_is_cancellable) {
  ASSERT_FALSE(tern::block_signals({SIGUSR1}));
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tern::signal_set set(ctx, {SIGUSR1});
    auto r = co_await tern::with_timeout(set.wait(), std::chrono::milliseconds(10));
    EXPECT_EC(r.ec, std::errc::timed_out);
    set.close();
    auto closed = co_await set.wait();
    EXPECT_EC(closed.ec, std::errc::bad_file_descriptor);
  }(ctx));
}

}  // namespace
