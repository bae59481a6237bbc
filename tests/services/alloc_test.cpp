// Steady state of the event bus: once warm, publishing and delivering events costs no heap allocation, with plain
// handlers, coroutine handlers that suspend (their frames and the delivery's come from tern's frame pool), events
// whose std::string member reuses its slot's capacity, and publishes from another worker of a runtime (the
// delivery pass is posted through tern's line pool). Checked on both backends.
#include "counting_new.hpp"
#include "services/services_support.hpp"

#include <tern/sync/event.hpp>

#include <array>
#include <atomic>
#include <future>
#include <thread>

namespace {

using namespace tern_test;
using namespace services_test;

class services_alloc_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(services_alloc_test);

constexpr int warmup = 2000;
constexpr int measured = 20'000;

struct sample {
  std::uint64_t sequence = 0;
  std::array<char, 24> payload{};
};
struct labelled {
  std::string label;  // longer than the small-string buffer: lives on the heap
};

TEST_P(services_alloc_test, publishing_and_delivering_on_one_loop_allocates_nothing_once_warm) {
  std::size_t allocations = ~std::size_t{0};
  run_bounded(ctx, [](std::size_t& allocations) -> tern::task<> {
    svc::event_bus bus;
    std::uint64_t plain_seen = 0;
    std::uint64_t coroutine_seen = 0;
    std::size_t label_bytes = 0;
    auto plain = bus.subscribe<sample>([&](const sample& s) { plain_seen += s.sequence != 0; }, 1);
    auto coroutine = bus.subscribe<sample>([&](const sample& s) -> tern::task<> {
      co_await tern::yield();  // a real suspension: the frame stays alive across it
      coroutine_seen += s.sequence != 0;
    }, 2);
    auto labels = bus.subscribe<labelled>([&](const labelled& l) { label_bytes += l.label.size(); }, 0);
    const labelled label{"a label well past the small string buffer"};
    auto round = [&](int count, std::uint64_t& published) -> tern::task<> {
      for (int i = 0; i < count; ++i) {
        ++published;
        bus.publish(sample{published, {}});
        bus.publish(label);
        if (i % 16 == 15) {
          while (plain_seen != published || coroutine_seen != published) co_await tern::yield();
        }
      }
      while (plain_seen != published || coroutine_seen != published) co_await tern::yield();
    };
    std::uint64_t published = 0;
    co_await round(warmup, published);
    start_counting();
    co_await round(measured, published);
    allocations = stop_counting();
    EXPECT_EQ(label_bytes, published * label.label.size());
  }(allocations));
  EXPECT_EQ(allocations, 0u) << "heap allocations over " << measured << " events of each type";
}

TEST_P(services_alloc_test, publishing_from_another_worker_allocates_nothing_once_warm) {
  svc::event_bus bus;
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  std::atomic<std::uint64_t> seen{0};
  std::promise<svc::subscription> subscribed;
  auto sub_future = subscribed.get_future();
  rt.post_to(0, [&] {
    subscribed.set_value(bus.subscribe<sample>([&](const sample&) { seen.fetch_add(1, std::memory_order_relaxed); }));
  });
  ASSERT_EQ(sub_future.wait_for(20s), std::future_status::ready);
  svc::subscription sub = sub_future.get();
  std::promise<std::size_t> result;
  auto counted = result.get_future();
  rt.spawn_on(1, [&]() -> tern::task<> {
    std::uint64_t published = 0;
    auto round = [&](int count) -> tern::task<> {
      for (int i = 0; i < count; ++i) {
        bus.publish(sample{++published, {}});
        if (i % 16 == 15) {
          while (seen.load(std::memory_order_relaxed) != published) co_await tern::yield();
        }
      }
      while (seen.load(std::memory_order_relaxed) != published) co_await tern::yield();
    };
    // The subscriber's loop may keep up with every burst of the warm-up and fall behind in the measured run, so
    // first a burst of 64 is queued while that loop is held busy: its ring and heap grow past anything the
    // measured bursts of 16 can need.
    std::atomic<bool> holding{false};
    std::atomic<bool> burst_queued{false};
    rt.post_to(0, [&] {
      holding.store(true);
      while (!burst_queued.load()) std::this_thread::yield();
    });
    while (!holding.load()) co_await tern::yield();
    for (int i = 0; i < 64; ++i) bus.publish(sample{++published, {}});
    burst_queued.store(true);
    co_await round(warmup);
    start_counting();
    co_await round(measured);
    result.set_value(stop_counting());
  }).detach();
  ASSERT_EQ(counted.wait_for(20s), std::future_status::ready) << "the deliveries did not complete in time";
  EXPECT_EQ(counted.get(), 0u) << "heap allocations over " << measured << " events published from another worker";
  // Unsubscribe on the subscriber's loop, then let the runtime finish.
  std::promise<void> reset;
  auto reset_done = reset.get_future();
  rt.post_to(0, [&] {
    sub.reset();
    reset.set_value();
  });
  ASSERT_EQ(reset_done.wait_for(20s), std::future_status::ready);
  rt.shutdown(2s);
}

}  // namespace
