// tern::services across the workers of a tern::runtime, on both backends: registry operations awaited from another
// worker (they run on the registry's loop and come back), and events published from other threads, delivered on
// the subscriber's loop. Every wait has a deadline, so a lost wake-up fails the test instead of hanging it.
#include "services/services_support.hpp"

#include <tern/sync/event.hpp>

#include <atomic>
#include <future>
#include <thread>
#include <utility>

// A named namespace, not an anonymous one: the test sources are compiled in unity batches (tests/CMakeLists.txt),
// where this file's helpers would meet event_bus_test.cpp's of the same names.
namespace services_runtime_tests {

using namespace tern_test;
using namespace services_test;

class services_runtime_test : public ::testing::TestWithParam<tern::backend_kind> {
 protected:
  tern::runtime_options options() const { return runtime_options_for(GetParam(), 2); }
};
TERN_INSTANTIATE_BACKENDS(services_runtime_test);

// Runs body() on worker `where` and waits for it, at most 20 s; rethrows what it threw.
template <class F>
void run_on(tern::runtime& rt, std::size_t where, F body) {
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  rt.spawn_on(where, [](F body, std::promise<void> p) -> tern::task<> {
    try {
      co_await body();
      p.set_value();
    } catch (...) {
      p.set_exception(std::current_exception());
    }
  }, std::move(body), std::move(done)).detach();
  ASSERT_EQ(finished.wait_for(20s), std::future_status::ready) << "the test body did not finish within 20 s";
  finished.get();
}

// Records the loop its start() and stop() run on.
struct loop_recorder {
  tern::io_context*& started_on;
  tern::io_context*& stopped_on;
  tern::task<> start() {
    started_on = tern::io_context::current();
    co_return;
  }
  tern::task<> stop() {
    stopped_on = tern::io_context::current();
    co_return;
  }
};

TEST_P(services_runtime_test, registry_operations_awaited_from_another_worker_run_at_home_and_come_back) {
  tern::runtime rt(options());
  run_on(rt, 0, [&rt]() -> tern::task<> {
    svc::registry reg(rt.worker(0));
    journal j;  // written by the services, on worker 0
    tern::io_context* started_on = nullptr;
    tern::io_context* stopped_on = nullptr;
    auto remote = rt.spawn_on(1, [&]() -> tern::task<> {
      tern::io_context* here = tern::io_context::current();
      EXPECT_EQ(here, &rt.worker(1));
      // add() is for the home loop: from here it refuses with wrong_loop, after enter() it works.
      try {
        add_node<a_service>(reg, j, "a");
        ADD_FAILURE() << "add() from another worker was accepted";
      } catch (const std::system_error& e) {
        EXPECT_EQ(e.code(), tern::error::wrong_loop);
        EXPECT_NE(std::string(e.what()).find("enter()"), std::string::npos) << e.what();
      }
      co_await reg.enter();
      EXPECT_EQ(tern::io_context::current(), &rt.worker(0));
      auto a = add_node<a_service>(reg, j, "a");
      auto b = add_node<b_service<a_if>>(reg, j, "b");
      reg.add<loop_recorder>(std::ref(started_on), std::ref(stopped_on));
      co_await rt.switch_to(1);

      svc::registry_report r = co_await reg.start();
      EXPECT_EQ(tern::io_context::current(), here);
      EXPECT_TRUE(r.all_running()) << r.to_string();
      co_await reg.remove(a);
      EXPECT_EQ(tern::io_context::current(), here);
      svc::registry_report after = co_await reg.settled();
      EXPECT_EQ(tern::io_context::current(), here);
      EXPECT_EQ(after.find("b")->state, svc::service_state::waiting);
      (void)b;
      co_await reg.stop();
      EXPECT_EQ(tern::io_context::current(), here);
    });
    co_await std::move(remote);
    EXPECT_TRUE(j.before("stopped b", "stop a"));
    EXPECT_EQ(started_on, &rt.worker(0));
    EXPECT_EQ(stopped_on, &rt.worker(0));
  });
  rt.shutdown(2s);
}

TEST_P(services_runtime_test, operations_from_two_workers_at_once_are_taken_in_turn) {
  tern::runtime rt(options());
  run_on(rt, 0, [&rt]() -> tern::task<> {
    svc::registry reg(rt.worker(0));
    journal j;
    auto a = add_node<a_service>(reg, j, "a");
    auto b = add_node<b_service<a_if>>(reg, j, "b");
    auto c = add_node<c_service<>>(reg, j, "c");
    EXPECT_TRUE((co_await reg.start()).all_running());
    // Worker 1 toggles a (and with it b), worker 0 toggles c, interleaved.
    auto toggle = [&reg](svc::service_id id) -> tern::task<> {
      for (int i = 0; i < 50; ++i) {
        co_await reg.stop(id);
        svc::service_status s = co_await reg.start(id);
        EXPECT_EQ(s.state, svc::service_state::running);
      }
    };
    auto other = rt.spawn_on(1, toggle, a);
    co_await toggle(c);
    co_await std::move(other);
    svc::registry_report r = co_await reg.settled();
    EXPECT_TRUE(r.all_running()) << r.to_string();
    (void)b;
    co_await reg.stop();
  });
  rt.shutdown(2s);
}

// Counts where it was constructed: on the registry's loop or elsewhere (from any thread).
struct placed {
  placed(tern::io_context* home, std::atomic<int>& at_home, std::atomic<int>& elsewhere) {
    (tern::io_context::current() == home ? at_home : elsewhere).fetch_add(1);
  }
};

TEST_P(services_runtime_test, status_report_and_add_from_another_worker_are_refused_with_wrong_loop) {
  tern::runtime rt(options());
  run_on(rt, 0, [&rt]() -> tern::task<> {
    svc::registry reg(rt.worker(0));
    journal j;
    auto a = add_node<a_service>(reg, j, "a");
    EXPECT_TRUE((co_await reg.start()).all_running());
    auto remote = rt.spawn_on(1, [&]() -> tern::task<> {
      auto refused = [](auto&& call) {
        try {
          call();
          return false;
        } catch (const std::system_error& e) {
          return e.code() == tern::error::wrong_loop;
        }
      };
      EXPECT_TRUE(refused([&] { (void)reg.status(a); }));
      EXPECT_TRUE(refused([&] { (void)reg.report(); }));
      EXPECT_TRUE(refused([&] { add_node<b_service<a_if>>(reg, j, "b"); }));
      co_await reg.enter();  // on the home loop, all three work
      EXPECT_EQ(reg.status(a).state, svc::service_state::running);
      add_node<b_service<a_if>>(reg, j, "b");
      EXPECT_EQ(reg.report().services.size(), 2u);
    });
    co_await std::move(remote);
    EXPECT_TRUE((co_await reg.settled()).all_running());
    co_await reg.stop();
  });
  rt.shutdown(2s);
}

TEST_P(services_runtime_test, add_and_report_from_a_thread_without_a_loop_are_made_on_the_running_home_loop) {
  tern::runtime rt(options());
  svc::registry reg(rt.worker(0));  // made here; its home loop runs on worker 0's thread
  journal j;
  const auto a = add_node<a_service>(reg, j, "a");  // worker 0's loop runs, idle: made there as well
  const auto b = add_node<b_service<a_if>>(reg, j, "b");
  run_on(rt, 0, [&reg]() -> tern::task<> { EXPECT_TRUE((co_await reg.start()).all_running()); });
  // While worker 1 keeps the registry busy (each stop and start of a runs on worker 0), this thread, which runs no
  // loop, adds services and reads reports: each call is carried out on worker 0's loop, between its other work.
  std::atomic<bool> done{false};
  auto churn = rt.spawn_on(1, [&reg, &done, a]() -> tern::task<> {
    while (!done.load()) {
      co_await reg.stop(a);
      (void)co_await reg.start(a);
    }
  });
  std::atomic<int> at_home{0}, elsewhere{0};
  constexpr int added = 200;
  for (int i = 0; i < added; ++i) {
    reg.add<placed>(svc::named{"p" + std::to_string(i)}, &rt.worker(0), std::ref(at_home), std::ref(elsewhere));
    if (i % 20 == 0) {
      EXPECT_EQ(reg.report().services.size(), static_cast<std::size_t>(i) + 3);
    }
  }
  done.store(true);
  run_on(rt, 0, [&]() -> tern::task<> {
    co_await std::move(churn);
    svc::registry_report r = co_await reg.settled();
    EXPECT_TRUE(r.all_running()) << r.to_string();
    EXPECT_EQ(reg.status(b).state, svc::service_state::running);
    co_await reg.stop();
  });
  EXPECT_EQ(at_home.load(), added);
  EXPECT_EQ(elsewhere.load(), 0) << "a service was constructed off the registry's loop";
  rt.shutdown(2s);
}

struct tick {
  int publisher = 0;
  int sequence = 0;
};

TEST_P(services_runtime_test, events_published_from_other_threads_are_delivered_on_the_subscribers_loop) {
  constexpr int per_publisher = 2000;
  svc::event_bus bus;  // declared first: it outlives the runtime's activity for it
  tern::runtime rt(options());
  run_on(rt, 0, [&rt, &bus]() -> tern::task<> {
    tern::sync::manual_reset_event all_in;
    int received = 0;
    bool on_own_loop = true;
    int last[2] = {-1, -1};
    bool in_order = true;
    svc::subscription s = bus.subscribe<tick>([&](const tick& t) {
      on_own_loop = on_own_loop && tern::io_context::current() == &rt.worker(0);
      in_order = in_order && t.sequence == last[t.publisher] + 1;  // per publisher, in publish order
      last[t.publisher] = t.sequence;
      if (++received == 2 * per_publisher) all_in.set();
    });
    // One publisher on worker 1, one on a thread that runs no loop at all.
    rt.spawn_on(1, [&bus]() -> tern::task<> {
      for (int i = 0; i < per_publisher; ++i) {
        bus.publish(tick{0, i});
        if (i % 64 == 0) co_await tern::yield();
      }
    }).detach();
    std::thread outsider([&bus] {
      for (int i = 0; i < per_publisher; ++i) bus.publish(tick{1, i});
    });
    std::error_code ec = co_await tern::with_timeout(all_in.wait(), 20s);
    outsider.join();
    EXPECT_OK(ec);
    EXPECT_EQ(received, 2 * per_publisher);
    EXPECT_TRUE(on_own_loop);
    EXPECT_TRUE(in_order);
  });
  rt.shutdown(2s);
}

// Set when the one live instance (not a moved-from one) is destroyed, with the loop that destroyed it.
struct destruction_probe {
  std::atomic<tern::io_context*>* destroyed_on;
  bool armed = true;
  explicit destruction_probe(std::atomic<tern::io_context*>* where) : destroyed_on(where) {}
  destruction_probe(destruction_probe&& o) noexcept : destroyed_on(o.destroyed_on), armed(std::exchange(o.armed, false)) {}
  destruction_probe(const destruction_probe&) = delete;
  ~destruction_probe() {
    if (armed) destroyed_on->store(tern::io_context::current());
  }
};

TEST_P(services_runtime_test, a_subscription_reset_from_another_worker_drops_its_pending_events_and_is_freed_on_its_loop) {
  svc::event_bus bus;
  tern::runtime rt(options());
  std::atomic<tern::io_context*> destroyed_on{nullptr};
  run_on(rt, 0, [&rt, &bus, &destroyed_on]() -> tern::task<> {
    int calls = 0;
    svc::subscription s = bus.subscribe<tick>([&calls, probe = destruction_probe(&destroyed_on)](const tick&) {
      ++calls;
    });
    for (int i = 0; i < 100; ++i) bus.publish(tick{0, i});  // pending: this loop has not run since
    std::promise<void> reset_done;
    std::future<void> reset = reset_done.get_future();
    rt.spawn_on(1, [](svc::subscription s, std::promise<void> p) -> tern::task<> {
      s.reset();
      p.set_value();
      co_return;
    }, std::move(s), std::move(reset_done)).detach();
    // Hold this loop until the reset has returned on worker 1, so that every event is still pending then.
    CO_ASSERT(reset.wait_for(20s) == std::future_status::ready);
    EXPECT_EQ(destroyed_on.load(), nullptr) << "freed by worker 1, though its loop-side state is worker 0's";
    for (int i = 0; i < 200 && destroyed_on.load() == nullptr; ++i) co_await tern::sleep_for(1ms);
    EXPECT_EQ(calls, 0) << "a delivery started after the subscription was reset";
    EXPECT_EQ(destroyed_on.load(), &rt.worker(0)) << "the handler must be destroyed on its subscriber's loop";
    EXPECT_EQ(bus.subscriptions(), 0u);
  });
  rt.shutdown(2s);
}

TEST_P(services_runtime_test, a_coroutine_handler_runs_and_resumes_on_its_subscribers_loop) {
  svc::event_bus bus;
  tern::runtime rt(options());
  run_on(rt, 1, [&rt, &bus]() -> tern::task<> {
    tern::sync::manual_reset_event done;
    bool right_loop = false;
    svc::subscription s = bus.subscribe<tick>([&](const tick& t) -> tern::task<> {
      const bool before = tern::io_context::current() == &rt.worker(1);
      co_await tern::sleep_for(1ms);
      right_loop = before && tern::io_context::current() == &rt.worker(1) && t.sequence == 7;
      done.set();
    });
    auto publisher = rt.spawn_on(0, [&bus]() -> tern::task<> {
      bus.publish(tick{0, 7});
      co_return;
    });
    co_await std::move(publisher);
    std::error_code ec = co_await tern::with_timeout(done.wait(), 20s);
    EXPECT_OK(ec);
    EXPECT_TRUE(right_loop);
  });
  rt.shutdown(2s);
}

}  // namespace
