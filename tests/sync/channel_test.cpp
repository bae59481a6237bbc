// tern::sync::channel on one loop: FIFO order of values, of waiting senders and of waiting receivers; bounded and
// unbounded; close() waking every waiter; the try_ variants; cancellation by with_timeout and with_stop, including
// a cancellation that arrives after the value was handed over; awaiters destroyed with their loop.
#include "sync/sync_support.hpp"

#include <memory>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace tern_test;
using tern::sync::channel;

class channel_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(channel_test);

tern::task<void> send_one(channel<int>& ch, int v, std::vector<int>& done, std::error_code& ec) {
  ec = co_await ch.send(v);
  done.push_back(v);
}

tern::task<void> receive_one(channel<int>& ch, tern::sync::receive_result<int>& out) { out = co_await ch.receive(); }

TEST_P(channel_test, bounded_buffers_up_to_capacity_in_fifo_order) {
  run_bounded(ctx, []() -> tern::task<void> {
    channel<int> ch(4);
    EXPECT_EQ(ch.capacity(), 4u);
    for (int i = 0; i < 4; ++i) EXPECT_OK(co_await ch.send(i));
    EXPECT_EQ(ch.size(), 4u);
    EXPECT_EC(ch.try_send(99), tern::sync::error::full);
    for (int i = 0; i < 4; ++i) {
      auto [ec, v] = co_await ch.receive();
      EXPECT_OK(ec);
      CO_ASSERT(v.has_value());
      EXPECT_EQ(*v, i);
    }
    EXPECT_EQ(ch.size(), 0u);
    EXPECT_FALSE(ch.try_receive().has_value());
  }());
}

TEST_P(channel_test, a_capacity_between_powers_of_two_holds_exactly_that_many_and_wraps_in_order) {
  run_bounded(ctx, []() -> tern::task<void> {
    channel<int> ch(5);  // 8 slots underneath: the capacity asked for is still the limit
    EXPECT_EQ(ch.capacity(), 5u);
    int next_in = 0;
    int next_out = 0;
    // Fill, drain part of it and refill, so that the ring's indices wrap past its slots many times.
    for (int round = 0; round < 20; ++round) {
      while (ch.size() < 5u) {
        std::error_code ec = co_await ch.send(next_in);
        EXPECT_OK(ec);
        ++next_in;
      }
      EXPECT_EC(ch.try_send(-1), tern::sync::error::full);
      for (int k = 0; k < 3; ++k) {
        auto [ec, v] = co_await ch.receive();
        EXPECT_OK(ec);
        CO_ASSERT(v.has_value());
        EXPECT_EQ(*v, next_out++);
      }
    }
    while (auto v = ch.try_receive()) EXPECT_EQ(*v, next_out++);
    EXPECT_EQ(next_out, next_in);
  }());
}

TEST_P(channel_test, send_waits_while_full_and_waiting_senders_are_served_in_order) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    channel<int> ch(1);
    EXPECT_OK(co_await ch.send(0));
    std::vector<int> done;
    std::error_code ec[3];
    auto s1 = tern::spawn(ctx, send_one(ch, 1, done, ec[0]));
    auto s2 = tern::spawn(ctx, send_one(ch, 2, done, ec[1]));
    auto s3 = tern::spawn(ctx, send_one(ch, 3, done, ec[2]));
    co_await tern::yield();  // the three senders start and find the channel full
    EXPECT_TRUE(done.empty()) << "a send completed on a full channel";
    EXPECT_EQ(ch.size(), 1u);
    for (int i = 0; i < 4; ++i) {
      auto [rec, v] = co_await ch.receive();
      EXPECT_OK(rec);
      CO_ASSERT(v.has_value());
      EXPECT_EQ(*v, i);
      EXPECT_LE(ch.size(), 1u) << "a waiting sender overfilled the buffer";
    }
    co_await std::move(s1);
    co_await std::move(s2);
    co_await std::move(s3);
    EXPECT_EQ(done, (std::vector<int>{1, 2, 3}));
    for (auto& e : ec) EXPECT_OK(e);
  }(ctx));
}

TEST_P(channel_test, waiting_receivers_are_served_in_order) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    channel<int> ch(8);
    tern::sync::receive_result<int> r[3];
    auto r1 = tern::spawn(ctx, receive_one(ch, r[0]));
    auto r2 = tern::spawn(ctx, receive_one(ch, r[1]));
    auto r3 = tern::spawn(ctx, receive_one(ch, r[2]));
    co_await tern::yield();  // all three wait on the empty channel
    for (int v : {10, 20, 30}) EXPECT_OK(co_await ch.send(v));
    EXPECT_EQ(ch.size(), 0u) << "values were buffered although receivers were waiting";
    co_await std::move(r1);
    co_await std::move(r2);
    co_await std::move(r3);
    for (int i = 0; i < 3; ++i) {
      EXPECT_OK(r[i].ec);
      CO_ASSERT(r[i].value.has_value());
      EXPECT_EQ(*r[i].value, 10 * (i + 1));
    }
  }(ctx));
}

TEST_P(channel_test, unbounded_send_never_waits_and_keeps_order) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto ch = channel<int>::unbounded();
    EXPECT_EQ(ch.capacity(), channel<int>::unbounded_capacity);
    constexpr int n = 10'000;
    for (int i = 0; i < n; ++i) EXPECT_OK(ch.try_send(i));
    EXPECT_EQ(ch.size(), static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      auto [ec, v] = co_await ch.receive();
      CO_ASSERT(!ec && v.has_value());
      EXPECT_EQ(*v, i);
    }
    // A receiver waiting on an empty unbounded channel is woken by the next send.
    tern::sync::receive_result<int> r;
    auto waiter = tern::spawn(ctx, receive_one(ch, r));
    co_await tern::yield();
    EXPECT_OK(co_await ch.send(42));
    co_await std::move(waiter);
    EXPECT_OK(r.ec);
    EXPECT_EQ(r.value, std::optional<int>(42));
  }(ctx));
}

TEST_P(channel_test, zero_capacity_is_rejected) {
  EXPECT_THROW(channel<int>(0), std::invalid_argument);
}

TEST_P(channel_test, close_wakes_every_waiting_receiver_with_closed) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    channel<int> ch(2);
    tern::sync::receive_result<int> r[3];
    auto r1 = tern::spawn(ctx, receive_one(ch, r[0]));
    auto r2 = tern::spawn(ctx, receive_one(ch, r[1]));
    auto r3 = tern::spawn(ctx, receive_one(ch, r[2]));
    co_await tern::yield();
    ch.close();
    EXPECT_TRUE(ch.is_closed());
    co_await std::move(r1);
    co_await std::move(r2);
    co_await std::move(r3);
    for (auto& x : r) {
      EXPECT_EC(x.ec, tern::sync::error::closed);
      EXPECT_FALSE(x.value.has_value());
    }
    EXPECT_EC(co_await ch.send(1), tern::sync::error::closed);
    EXPECT_EC(ch.try_send(1), tern::sync::error::closed);
    EXPECT_EC((co_await ch.receive()).ec, tern::sync::error::closed);
    ch.close();  // idempotent
  }(ctx));
}

TEST_P(channel_test, close_wakes_waiting_senders_and_buffered_values_are_still_received) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    channel<int> ch(2);
    EXPECT_OK(co_await ch.send(1));
    EXPECT_OK(co_await ch.send(2));
    std::vector<int> done;
    std::error_code ec[2];
    auto s1 = tern::spawn(ctx, send_one(ch, 3, done, ec[0]));
    auto s2 = tern::spawn(ctx, send_one(ch, 4, done, ec[1]));
    co_await tern::yield();
    EXPECT_TRUE(done.empty());
    ch.close();
    co_await std::move(s1);
    co_await std::move(s2);
    EXPECT_EC(ec[0], tern::sync::error::closed);
    EXPECT_EC(ec[1], tern::sync::error::closed);
    for (int want : {1, 2}) {
      auto [rec, v] = co_await ch.receive();
      EXPECT_OK(rec);
      EXPECT_EQ(v, std::optional<int>(want));
    }
    auto [rec, v] = co_await ch.receive();
    EXPECT_EC(rec, tern::sync::error::closed);
    EXPECT_FALSE(v.has_value()) << "a value of a send that failed with closed was delivered";
    EXPECT_FALSE(ch.try_receive().has_value());
  }(ctx));
}

TEST_P(channel_test, try_variants_never_wait_and_leave_a_refused_value_alone) {
  run_bounded(ctx, []() -> tern::task<void> {
    channel<std::unique_ptr<int>> ch(1);
    EXPECT_FALSE(ch.try_receive().has_value());
    auto first = std::make_unique<int>(1);
    EXPECT_OK(ch.try_send(std::move(first)));
    EXPECT_EQ(first, nullptr) << "an accepted value was not moved from";
    auto second = std::make_unique<int>(2);
    EXPECT_EC(ch.try_send(std::move(second)), tern::sync::error::full);
    CO_ASSERT(second != nullptr);
    EXPECT_EQ(*second, 2);
    auto got = ch.try_receive();
    CO_ASSERT(got.has_value() && *got != nullptr);
    EXPECT_EQ(**got, 1);
    ch.close();
    EXPECT_EC(ch.try_send(std::move(second)), tern::sync::error::closed);
    EXPECT_NE(second, nullptr);
    co_return;
  }());
}

TEST_P(channel_test, try_receive_refills_from_a_waiting_sender) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    channel<int> ch(1);
    EXPECT_OK(ch.try_send(1));
    std::vector<int> done;
    std::error_code ec;
    auto s = tern::spawn(ctx, send_one(ch, 2, done, ec));
    co_await tern::yield();
    EXPECT_EQ(ch.try_receive(), std::optional<int>(1));
    EXPECT_EQ(ch.size(), 1u) << "the waiting sender's value did not take the freed slot";
    co_await std::move(s);
    EXPECT_OK(ec);
    EXPECT_EQ(ch.try_receive(), std::optional<int>(2));
  }(ctx));
}

TEST_P(channel_test, const_lvalue_try_send_copies) {
  channel<std::vector<int>> ch(1);
  const std::vector<int> v{1, 2, 3};
  EXPECT_OK(ch.try_send(v));
  EXPECT_EQ(v.size(), 3u);
  EXPECT_EQ(ch.try_receive(), std::optional<std::vector<int>>(v));
}

// ---- cancellation ----

TEST_P(channel_test, receive_with_timeout_times_out_and_a_later_value_is_not_lost) {
  run_bounded(ctx, []() -> tern::task<void> {
    channel<int> ch(4);
    auto before = clock_type::now();
    auto [ec, v] = co_await tern::with_timeout(ch.receive(), 20ms);
    EXPECT_EC(ec, std::errc::timed_out);
    EXPECT_FALSE(v.has_value());
    EXPECT_GE(clock_type::now() - before, 20ms);
    EXPECT_OK(ch.try_send(7));
    EXPECT_EQ(ch.size(), 1u) << "a value went to the cancelled receive";
    auto r = co_await tern::with_timeout(ch.receive(), 1h);
    EXPECT_OK(r.ec);
    EXPECT_EQ(r.value, std::optional<int>(7));
  }());
}

TEST_P(channel_test, send_with_timeout_times_out_without_delivering) {
  run_bounded(ctx, []() -> tern::task<void> {
    channel<int> ch(1);
    EXPECT_OK(ch.try_send(1));
    EXPECT_EC(co_await tern::with_timeout(ch.send(2), 20ms), std::errc::timed_out);
    EXPECT_EQ(ch.size(), 1u);
    EXPECT_EQ(ch.try_receive(), std::optional<int>(1));
    EXPECT_FALSE(ch.try_receive().has_value()) << "the timed-out send was delivered";
    // The channel is intact: a send with a generous timeout goes through.
    EXPECT_OK(co_await tern::with_timeout(ch.send(3), 1h));
    EXPECT_EQ(ch.try_receive(), std::optional<int>(3));
  }());
}

TEST_P(channel_test, receive_with_stop_requested_from_another_thread) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    channel<int> ch(1);
    std::stop_source source;
    // The wait alone does not keep the loop running while the stop is on its way from the other thread.
    auto busy = ctx.make_work_guard();
    stop_from_thread other(source, 20ms);
    auto [ec, v] = co_await tern::with_stop(ch.receive(), source.get_token());
    busy.reset();
    EXPECT_EC(ec, std::errc::operation_canceled);
    EXPECT_FALSE(v.has_value());
  }(ctx));
}

TEST_P(channel_test, stop_already_requested_cancels_only_a_wait) {
  run_bounded(ctx, []() -> tern::task<void> {
    channel<int> ch(1);
    std::stop_source source;
    source.request_stop();
    EXPECT_EC((co_await tern::with_stop(ch.receive(), source.get_token())).ec, std::errc::operation_canceled);
    EXPECT_OK(ch.try_send(5));
    // Ready at once: the receive completes without waiting, so the stop does not apply.
    auto r = co_await tern::with_stop(ch.receive(), source.get_token());
    EXPECT_OK(r.ec);
    EXPECT_EQ(r.value, std::optional<int>(5));
    EXPECT_OK(ch.try_send(6));
    EXPECT_EC(co_await tern::with_stop(ch.send(7), source.get_token()), std::errc::operation_canceled);
    EXPECT_EQ(ch.try_receive(), std::optional<int>(6));
    EXPECT_FALSE(ch.try_receive().has_value());
  }());
}

tern::task<void> receive_with_stop(channel<int>& ch, std::stop_token token, tern::sync::receive_result<int>& out) {
  out = co_await tern::with_stop(ch.receive(), std::move(token));
}

tern::task<void> send_with_stop(channel<int>& ch, int v, std::stop_token token, std::error_code& out) {
  out = co_await tern::with_stop(ch.send(v), std::move(token));
}

// The value is handed to the waiting receive first; the stop that follows before it runs must not lose it.
TEST_P(channel_test, cancel_after_the_value_was_handed_over_keeps_the_value) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    channel<int> ch(1);
    std::stop_source source;
    tern::sync::receive_result<int> r;
    auto receiver = tern::spawn(ctx, receive_with_stop(ch, source.get_token(), r));
    co_await tern::yield();
    EXPECT_OK(ch.try_send(11));  // handed over; the receiver is queued but has not run
    source.request_stop();       // on the loop's thread: cancels at once, but finds the wait already granted
    co_await std::move(receiver);
    EXPECT_OK(r.ec);
    EXPECT_EQ(r.value, std::optional<int>(11));
    EXPECT_EQ(ch.size(), 0u);
  }(ctx));
}

TEST_P(channel_test, cancel_after_a_waiting_send_was_taken_counts_as_delivered) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    channel<int> ch(1);
    EXPECT_OK(ch.try_send(1));
    std::stop_source source;
    std::error_code ec = std::make_error_code(std::errc::io_error);
    auto sender = tern::spawn(ctx, send_with_stop(ch, 2, source.get_token(), ec));
    co_await tern::yield();
    EXPECT_EQ(ch.try_receive(), std::optional<int>(1));  // moves the waiting value into the buffer
    source.request_stop();
    co_await std::move(sender);
    EXPECT_OK(ec);
    EXPECT_EQ(ch.try_receive(), std::optional<int>(2));
  }(ctx));
}

TEST_P(channel_test, cancelled_waiters_leave_the_others_in_order) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    channel<int> ch(1);
    std::stop_source source;
    tern::sync::receive_result<int> r[3];
    auto r1 = tern::spawn(ctx, receive_one(ch, r[0]));
    auto r2 = tern::spawn(ctx, receive_with_stop(ch, source.get_token(), r[1]));
    auto r3 = tern::spawn(ctx, receive_one(ch, r[2]));
    co_await tern::yield();
    source.request_stop();  // the middle receiver leaves the queue
    EXPECT_OK(ch.try_send(1));
    EXPECT_OK(ch.try_send(2));
    co_await std::move(r1);
    co_await std::move(r2);
    co_await std::move(r3);
    EXPECT_EQ(r[0].value, std::optional<int>(1));
    EXPECT_EC(r[1].ec, std::errc::operation_canceled);
    EXPECT_EQ(r[2].value, std::optional<int>(2));
  }(ctx));
}

// ---- cancellation through the awaiting task's own stop token ----
// A plain `co_await ch.receive()` in a task binds the task's token itself (registered only while the wait is
// suspended); these go through tern::with_stop on the task, not on the operation.

TEST_P(channel_test, a_stopped_task_cancels_its_waiting_receive_and_a_later_value_is_not_lost) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    channel<int> ch(2);
    std::stop_source source;
    tern::sync::receive_result<int> r;
    auto receiver = tern::spawn(ctx, tern::with_stop(receive_one(ch, r), source.get_token()));
    co_await tern::yield();
    source.request_stop();  // on the loop's thread: cancels the waiting receive at once
    co_await std::move(receiver);
    EXPECT_EC(r.ec, std::errc::operation_canceled);
    EXPECT_FALSE(r.value.has_value());
    EXPECT_OK(ch.try_send(3));
    EXPECT_EQ(ch.size(), 1u) << "a value went to the cancelled receive";
  }(ctx));
}

TEST_P(channel_test, a_stopped_task_cancels_its_waiting_send_without_delivering) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    channel<int> ch(1);
    EXPECT_OK(ch.try_send(1));
    std::stop_source source;
    std::vector<int> done;
    std::error_code ec;
    auto sender = tern::spawn(ctx, tern::with_stop(send_one(ch, 2, done, ec), source.get_token()));
    co_await tern::yield();
    source.request_stop();
    co_await std::move(sender);
    EXPECT_EC(ec, std::errc::operation_canceled);
    EXPECT_EQ(ch.try_receive(), std::optional<int>(1));
    EXPECT_FALSE(ch.try_receive().has_value()) << "the cancelled send was delivered";
  }(ctx));
}

TEST_P(channel_test, a_task_stopped_from_another_thread_cancels_its_waiting_receive) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    channel<int> ch(1);
    std::stop_source source;
    tern::sync::receive_result<int> r;
    auto busy = ctx.make_work_guard();  // the stop is on its way from the other thread
    stop_from_thread other(source, 20ms);
    co_await tern::with_stop(receive_one(ch, r), source.get_token());
    busy.reset();
    EXPECT_EC(r.ec, std::errc::operation_canceled);
    EXPECT_OK(ch.try_send(4));
    EXPECT_EQ(ch.size(), 1u);
  }(ctx));
}

TEST_P(channel_test, a_task_already_stopped_cancels_only_a_wait) {
  run_bounded(ctx, []() -> tern::task<void> {
    channel<int> ch(1);
    std::stop_source source;
    source.request_stop();
    tern::sync::receive_result<int> r;
    co_await tern::with_stop(receive_one(ch, r), source.get_token());
    EXPECT_EC(r.ec, std::errc::operation_canceled);
    EXPECT_OK(ch.try_send(5));
    co_await tern::with_stop(receive_one(ch, r), source.get_token());  // ready at once: the stop does not apply
    EXPECT_OK(r.ec);
    EXPECT_EQ(r.value, std::optional<int>(5));
  }());
}

TEST_P(channel_test, a_task_stopped_after_its_value_was_handed_over_keeps_the_value) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    channel<int> ch(1);
    std::stop_source source;
    tern::sync::receive_result<int> r;
    auto receiver = tern::spawn(ctx, tern::with_stop(receive_one(ch, r), source.get_token()));
    co_await tern::yield();
    EXPECT_OK(ch.try_send(12));  // handed over; the receiver is queued but has not run
    source.request_stop();
    co_await std::move(receiver);
    EXPECT_OK(r.ec);
    EXPECT_EQ(r.value, std::optional<int>(12));
  }(ctx));
}

tern::task<void> receive_forever_stoppable(channel<int>& ch, std::stop_token token) {
  tern::sync::receive_result<int> r;
  co_await tern::with_stop(receive_one(ch, r), std::move(token));
  ADD_FAILURE() << "the receive completed on a loop that was never run again";
}

// The frame goes while the wait is registered with a token that is stopped afterwards: the registration must be
// gone with it (the sanitizer presets see a callback into a freed frame).
TEST_P(channel_test, a_stoppable_receive_destroyed_while_waiting_unregisters_itself) {
  channel<int> ch(1);
  std::stop_source source;
  {
    tern::io_context local(options());
    tern::spawn(local, receive_forever_stoppable(ch, source.get_token())).detach();
    EXPECT_TRUE(run_context_bounded(local));
  }
  source.request_stop();
  EXPECT_OK(ch.try_send(6));
  EXPECT_EQ(ch.size(), 1u) << "the value went to a receive whose coroutine is gone";
}

// ---- awaiters destroyed with their loop ----

struct counted {
  static inline int alive = 0;
  int v;
  explicit counted(int x) noexcept : v(x) { ++alive; }
  counted(counted&& o) noexcept : v(o.v) { ++alive; }
  counted& operator=(counted&&) = delete;
  ~counted() { --alive; }
};

tern::task<void> receive_forever(channel<counted>& ch) {
  (void)co_await ch.receive();
  ADD_FAILURE() << "the receive completed on a loop that was never run again";
}

TEST_P(channel_test, receive_destroyed_while_waiting_unlinks_itself) {
  counted::alive = 0;
  channel<counted> ch(4);
  {
    tern::io_context local(options());
    tern::spawn(local, receive_forever(ch)).detach();
    EXPECT_TRUE(run_context_bounded(local));  // the receive waits; nothing keeps the loop running
  }
  EXPECT_OK(ch.try_send(counted(1)));
  EXPECT_EQ(ch.size(), 1u) << "the value went to a receive whose coroutine is gone";
  EXPECT_EQ(counted::alive, 1);
}

TEST_P(channel_test, value_handed_to_a_receive_that_never_runs_is_destroyed_with_it) {
  counted::alive = 0;
  channel<counted> ch(4);
  {
    tern::io_context local(options());
    tern::spawn(local, receive_forever(ch)).detach();
    EXPECT_TRUE(run_context_bounded(local));
    EXPECT_OK(ch.try_send(counted(1)));  // handed over and queued on local, which never runs it
    EXPECT_EQ(ch.size(), 0u);
    EXPECT_EQ(counted::alive, 1);
  }
  EXPECT_EQ(counted::alive, 0);
}

tern::task<void> send_forever(channel<int>& ch, int v) {
  (void)co_await ch.send(v);
  ADD_FAILURE() << "the send completed on a loop that was never run again";
}

TEST_P(channel_test, send_destroyed_while_waiting_unlinks_itself) {
  channel<int> ch(1);
  EXPECT_OK(ch.try_send(1));
  {
    tern::io_context local(options());
    tern::spawn(local, send_forever(ch, 2)).detach();
    EXPECT_TRUE(run_context_bounded(local));
  }
  EXPECT_EQ(ch.try_receive(), std::optional<int>(1));
  EXPECT_EQ(ch.size(), 0u) << "the value of a destroyed send was delivered";
  EXPECT_OK(ch.try_send(3));
}

// A coroutine that closes a channel on its failure path, inside a loop whose body awaits a task. Built by clang 16
// at -O1 (the sanitizer presets), with the element type of internal linkage as here, close() used to be taken for
// a symmetric-transfer resume call, and the compiler folded the loop's exits for the failure path into every path:
// after the first byte, the inner loop and the code after it were skipped (docs/design.md, "Coroutines").
struct piece {
  std::string bytes;
};

tern::task<bool> forward_byte(char c, std::string& out) {
  co_await tern::yield();
  out.push_back(c);
  co_return c != '!';
}

tern::task<void> forward_all(channel<piece>& in, std::string& out, std::size_t& pieces) {
  for (;;) {
    auto r = co_await in.receive();
    if (r.ec) break;
    const std::string bytes = std::move(r.value->bytes);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      const bool forwarded = co_await forward_byte(bytes[i], out);
      if (!forwarded) {
        in.close();
        co_return;
      }
    }
    ++pieces;
  }
}

TEST_P(channel_test, close_on_a_failure_path_leaves_the_loops_around_it_intact) {
  run_bounded(ctx, []() -> tern::task<void> {
    // Named, not `send(piece{"hello"})`: g++ 12 relocates a braced aggregate temporary in a co_await operand
    // bitwise, which breaks the string's small buffer (docs/design.md, "Coroutines").
    piece hello{"hello"}, world{"world"}, failing_piece{"ab!cd"};
    channel<piece> ch(4);
    EXPECT_OK(co_await ch.send(std::move(hello)));
    EXPECT_OK(co_await ch.send(std::move(world)));
    ch.close();
    std::string out;
    std::size_t pieces = 0;
    co_await forward_all(ch, out, pieces);
    EXPECT_EQ(out, "helloworld");
    EXPECT_EQ(pieces, 2u);

    channel<piece> failing(4);
    EXPECT_OK(co_await failing.send(std::move(failing_piece)));
    out.clear();
    pieces = 0;
    co_await forward_all(failing, out, pieces);
    EXPECT_EQ(out, "ab!");
    EXPECT_EQ(pieces, 0u);
    EXPECT_TRUE(failing.is_closed());
  }());
}

}  // namespace
