// tern::services::event_bus on one loop, on both backends: delivery by type, priority order, coroutine handlers,
// unsubscription, and handlers that throw. (Delivery across workers is in runtime_test.cpp.)
#include "services/services_support.hpp"

#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace tern_test;
using namespace services_test;

class event_bus_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(event_bus_test);

struct tick {
  int sequence = 0;
};
struct note {
  std::string text;
};

// Lets the loop run every queued delivery (each pass is queued behind what is already there).
tern::task<> drain_a_while() {
  for (int i = 0; i < 16; ++i) co_await tern::yield();
}

TEST_P(event_bus_test, events_reach_the_handlers_of_their_own_type_only) {
  run_bounded(ctx, []() -> tern::task<> {
    svc::event_bus bus;
    std::vector<int> ticks;
    std::vector<std::string> notes;
    auto t = bus.subscribe<tick>([&](const tick& e) { ticks.push_back(e.sequence); });
    auto n = bus.subscribe<note>([&](const note& e) { notes.push_back(e.text); });
    bus.publish(tick{1});
    bus.publish(note{"a note long enough to live on the heap, not in the string itself"});
    bus.publish(tick{2});
    EXPECT_TRUE(ticks.empty()) << "publish never runs a handler inline";
    co_await drain_a_while();
    EXPECT_EQ(ticks, (std::vector<int>{1, 2}));
    EXPECT_EQ(notes, (std::vector<std::string>{"a note long enough to live on the heap, not in the string itself"}));
  }());
}

TEST_P(event_bus_test, pending_deliveries_go_by_priority_then_in_publish_order) {
  run_bounded(ctx, []() -> tern::task<> {
    svc::event_bus bus;
    std::vector<std::string> order;
    auto low = bus.subscribe<tick>([&](const tick& e) { order.push_back("p5:" + std::to_string(e.sequence)); }, 5);
    auto high = bus.subscribe<tick>([&](const tick& e) { order.push_back("p1:" + std::to_string(e.sequence)); }, 1);
    auto high2 = bus.subscribe<tick>([&](const tick& e) { order.push_back("p1b:" + std::to_string(e.sequence)); }, 1);
    auto other = bus.subscribe<note>([&](const note& e) { order.push_back("p3:" + e.text); }, 3);
    bus.publish(tick{1});
    bus.publish(note{"x"});
    bus.publish(tick{2});
    co_await drain_a_while();
    // Priority 1 first (both subscriptions in the order they subscribed, each with its events in publish order),
    // then the note at 3, then priority 5.
    EXPECT_EQ(order, (std::vector<std::string>{"p1:1", "p1:2", "p1b:1", "p1b:2", "p3:x", "p5:1", "p5:2"}));
  }());
}

TEST_P(event_bus_test, equal_priorities_take_turns_each_with_the_batch_it_had_pending) {
  run_bounded(ctx, []() -> tern::task<> {
    svc::event_bus bus;
    std::vector<std::string> order;
    svc::subscription a;
    a = bus.subscribe<tick>([&](const tick& e) {
      order.push_back("a:" + std::to_string(e.sequence));
      // Published during a's batch: a takes it in a later turn, behind b, which was waiting already.
      if (e.sequence == 1) bus.publish(tick{9});
    });
    auto b = bus.subscribe<tick>([&](const tick& e) { order.push_back("b:" + std::to_string(e.sequence)); });
    auto n = bus.subscribe<note>([&](const note& e) { order.push_back("n:" + e.text); });
    bus.publish(note{"x"});
    bus.publish(tick{1});
    bus.publish(tick{2});
    co_await drain_a_while();
    EXPECT_EQ(order, (std::vector<std::string>{"n:x", "a:1", "a:2", "b:1", "b:2", "b:9", "a:9"}));
  }());
}

TEST_P(event_bus_test, unsubscribing_another_subscription_in_its_batch_stops_the_rest_of_the_batch) {
  run_bounded(ctx, []() -> tern::task<> {
    svc::event_bus bus;
    std::vector<int> seen;
    svc::subscription s;
    auto stopper = bus.subscribe<note>([&](const note&) { s.reset(); }, 1);
    s = bus.subscribe<tick>([&](const tick& e) {
      seen.push_back(e.sequence);
      if (e.sequence == 2) bus.publish(note{});  // delivered before tick 3 (priority 1), which must then not come
    }, 2);
    for (int i = 1; i <= 4; ++i) bus.publish(tick{i});
    co_await drain_a_while();
    EXPECT_EQ(seen, (std::vector<int>{1, 2}));
    EXPECT_EQ(bus.subscriptions(), 1u);
  }());
}

TEST_P(event_bus_test, a_handler_runs_on_the_loop_that_subscribed) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<> {
    svc::event_bus bus;
    tern::io_context* seen = nullptr;
    auto s = bus.subscribe<tick>(ctx, [&](const tick&) { seen = tern::io_context::current(); });
    bus.publish(tick{});
    co_await drain_a_while();
    EXPECT_EQ(seen, &ctx);
  }(ctx));
}

TEST_P(event_bus_test, coroutine_handlers_keep_their_event_across_suspensions) {
  run_bounded(ctx, []() -> tern::task<> {
    svc::event_bus bus;
    std::vector<int> done;
    int running = 0;
    int most_at_once = 0;
    auto s = bus.subscribe<tick>([&](const tick& e) -> tern::task<> {
      most_at_once = std::max(most_at_once, ++running);
      co_await tern::sleep_for(5ms);
      done.push_back(e.sequence);  // e is the coroutine's own copy: still valid after the sleep
      --running;
    });
    for (int i = 1; i <= 3; ++i) bus.publish(tick{i});
    for (int i = 0; i < 200 && done.size() < 3; ++i) co_await tern::sleep_for(1ms);
    std::sort(done.begin(), done.end());
    EXPECT_EQ(done, (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(most_at_once, 3) << "a suspended coroutine handler must not hold up the next delivery";
  }());
}

TEST_P(event_bus_test, coroutine_and_plain_handlers_start_in_priority_order) {
  run_bounded(ctx, []() -> tern::task<> {
    svc::event_bus bus;
    std::vector<std::string> order;
    auto plain = bus.subscribe<tick>([&](const tick&) { order.push_back("plain p2"); }, 2);
    auto coro = bus.subscribe<tick>([&](const tick&) -> tern::task<> {
      order.push_back("coroutine p1");
      co_await tern::yield();
      order.push_back("coroutine p1 resumed");
    }, 1);
    auto last = bus.subscribe<tick>([&](const tick&) { order.push_back("plain p3"); }, 3);
    bus.publish(tick{});
    co_await drain_a_while();
    CO_ASSERT(order.size() >= 3);
    EXPECT_EQ(order[0], "coroutine p1");
    EXPECT_LT(std::find(order.begin(), order.end(), "plain p2"), std::find(order.begin(), order.end(), "plain p3"));
    EXPECT_EQ(order.size(), 4u);
  }());
}

TEST_P(event_bus_test, no_delivery_after_unsubscribing_even_of_events_already_pending) {
  run_bounded(ctx, []() -> tern::task<> {
    svc::event_bus bus;
    int calls = 0;
    svc::subscription s = bus.subscribe<tick>([&](const tick&) { ++calls; });
    bus.publish(tick{1});
    co_await drain_a_while();
    EXPECT_EQ(calls, 1);
    bus.publish(tick{2});
    bus.publish(tick{3});
    s.reset();  // two deliveries pending
    EXPECT_FALSE(s.active());
    bus.publish(tick{4});
    co_await drain_a_while();
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(bus.subscriptions(), 0u);
  }());
}

TEST_P(event_bus_test, a_handler_may_unsubscribe_itself_and_publish) {
  run_bounded(ctx, []() -> tern::task<> {
    svc::event_bus bus;
    int calls = 0;
    std::vector<std::string> notes;
    svc::subscription self;
    self = bus.subscribe<tick>([&](const tick& e) {
      ++calls;
      bus.publish(note{"from " + std::to_string(e.sequence)});
      self.reset();
    });
    auto n = bus.subscribe<note>([&](const note& e) { notes.push_back(e.text); });
    bus.publish(tick{1});
    bus.publish(tick{2});
    co_await drain_a_while();
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(notes, (std::vector<std::string>{"from 1"}));
  }());
}

// A handler that publishes to its own subscription while its batch is delivered: the new events go behind the
// ones still pending (the ring's count is kept exact through the batch), and the ring grows and wraps mid-batch.
TEST_P(event_bus_test, a_handler_publishing_to_itself_mid_batch_keeps_publish_order) {
  run_bounded(ctx, []() -> tern::task<> {
    svc::event_bus bus;
    constexpr int last = 300;
    std::vector<int> ticks;
    std::vector<std::string> notes;
    int next_tick = 5;
    int next_note = 5;
    auto t = bus.subscribe<tick>([&](const tick& e) {
      ticks.push_back(e.sequence);
      for (int k = 0; k < (e.sequence % 3 == 0 ? 2 : 1) && next_tick <= last; ++k) bus.publish(tick{next_tick++});
    });
    auto n = bus.subscribe<note>([&](const note& e) {
      notes.push_back(e.text);
      const int seq = std::stoi(e.text.substr(e.text.find(' ') + 1));
      for (int k = 0; k < (seq % 3 == 0 ? 2 : 1) && next_note <= last; ++k) {
        bus.publish(note{"note " + std::to_string(next_note++) + " with text long enough to be on the heap"});
      }
    });
    for (int i = 0; i < 5; ++i) {
      bus.publish(tick{i});
      bus.publish(note{"note " + std::to_string(i) + " with text long enough to be on the heap"});
    }
    for (int turns = 0; turns < 10000 && (ticks.size() <= last || notes.size() <= last); ++turns) {
      co_await tern::yield();
    }
    std::vector<int> expected_ticks;
    std::vector<std::string> expected_notes;
    for (int i = 0; i <= last; ++i) {
      expected_ticks.push_back(i);
      expected_notes.push_back("note " + std::to_string(i) + " with text long enough to be on the heap");
    }
    EXPECT_EQ(ticks, expected_ticks);
    EXPECT_EQ(notes, expected_notes);
  }());
}

TEST_P(event_bus_test, a_throwing_handler_reaches_the_loops_exception_handler_and_delivery_goes_on) {
  int reported = 0;
  ctx.set_exception_handler([&](std::exception_ptr) { ++reported; });
  run_bounded(ctx, []() -> tern::task<> {
    svc::event_bus bus;
    std::vector<int> seen;
    auto s = bus.subscribe<tick>([&](const tick& e) {
      seen.push_back(e.sequence);
      if (e.sequence == 1) throw std::runtime_error("bad tick");
    });
    auto c = bus.subscribe<note>([](const note&) -> tern::task<> {
      co_await tern::yield();
      throw std::runtime_error("bad note");
    });
    bus.publish(tick{1});
    bus.publish(note{});
    bus.publish(tick{2});
    co_await drain_a_while();
    EXPECT_EQ(seen, (std::vector<int>{1, 2}));
  }());
  EXPECT_EQ(reported, 2);
}

TEST_P(event_bus_test, publishing_with_no_subscriber_does_nothing) {
  run_bounded(ctx, []() -> tern::task<> {
    svc::event_bus bus;
    bus.publish(tick{1});
    {
      auto s = bus.subscribe<note>([](const note&) {});
    }
    bus.publish(note{"nobody"});
    co_await drain_a_while();
    EXPECT_EQ(bus.subscriptions(), 0u);
  }());
}

}  // namespace
