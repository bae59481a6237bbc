// tern::runtime: placement on workers, cross-thread spawn, join and post, switch_to, block_on, shutdown.
#include "net_support.hpp"

#include "tern/detail/frame_pool.hpp"

#include <dirent.h>

#include <atomic>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace tern_test;

class runtime_test : public ::testing::TestWithParam<tern::backend_kind> {
 protected:
  tern::runtime_options options(unsigned threads = 2) const {
    tern::runtime_options o;
    o.threads = threads;
    o.backend = GetParam();
    return o;
  }
};
TERN_INSTANTIATE_BACKENDS(runtime_test);

TEST_P(runtime_test, workers_use_the_requested_backend_and_distinct_threads) {
  tern::runtime rt(options(2));
  ASSERT_EQ(rt.size(), 2u);
  std::thread::id ids[2];
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(rt.worker(i).backend(), GetParam());
    ids[i] = rt.block_on([](tern::runtime& rt, std::size_t i) -> tern::task<std::thread::id> {
      co_await rt.switch_to(i);
      EXPECT_EQ(rt.current_worker(), i);
      co_return std::this_thread::get_id();
    }(rt, i));
  }
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_NE(ids[0], std::this_thread::get_id());
  EXPECT_EQ(rt.current_worker(), rt.size()) << "the test's own thread is not a worker";
}

TEST_P(runtime_test, block_on_returns_value_and_rethrows) {
  tern::runtime rt(options(2));
  EXPECT_EQ(rt.block_on([]() -> tern::task<int> { co_return 42; }()), 42);
  EXPECT_THROW(rt.block_on([]() -> tern::task<void> {
                 throw std::runtime_error("boom");
                 co_return;
               }()),
               std::runtime_error);
}

TEST_P(runtime_test, spawn_on_runs_on_that_worker_and_joins_from_another) {
  tern::runtime rt(options(2));
  int result = rt.block_on([](tern::runtime& rt) -> tern::task<int> {
    // This task runs on worker 0; the child runs on worker 1 and is joined from worker 0.
    auto child = rt.spawn_on(1, [](tern::runtime& rt) -> tern::task<int> {
      EXPECT_EQ(rt.current_worker(), 1u);
      co_await tern::sleep_for(2ms);
      co_return 7;
    }(rt));
    int v = co_await std::move(child);
    EXPECT_EQ(rt.current_worker(), 0u) << "a join resumes on the joiner's own loop";
    co_return v;
  }(rt));
  EXPECT_EQ(result, 7);
}

TEST_P(runtime_test, spawn_forms_keep_callables_and_arguments_alive) {
  tern::runtime rt(options(2));
  auto result = rt.block_on([](tern::runtime& rt) -> tern::task<std::string> {
    std::string prefix = "worker";
    auto pinned = rt.spawn_on(1, [prefix](tern::runtime& rt, std::string suffix) -> tern::task<std::string> {
      co_await tern::sleep_for(2ms);
      co_return prefix + std::to_string(rt.current_worker()) + suffix;
    }, std::ref(rt), std::string("!"));
    auto shared = rt.spawn([prefix]() -> tern::task<std::string> {
      co_await tern::sleep_for(2ms);
      co_return prefix;
    });
    prefix.clear();
    std::string a = co_await std::move(pinned);
    std::string b = co_await std::move(shared);
    co_return a + "/" + b;
  }(rt));
  EXPECT_EQ(result, "worker1!/worker");
}

TEST_P(runtime_test, join_of_an_already_finished_task_on_another_worker) {
  tern::runtime rt(options(2));
  int result = rt.block_on([](tern::runtime& rt) -> tern::task<int> {
    auto child = rt.spawn_on(1, []() -> tern::task<int> { co_return 5; }());
    co_await tern::sleep_for(20ms);  // the child has long finished on worker 1
    co_return co_await std::move(child);
  }(rt));
  EXPECT_EQ(result, 5);
}

TEST_P(runtime_test, exception_crosses_workers_through_join) {
  tern::runtime rt(options(2));
  std::string what = rt.block_on([](tern::runtime& rt) -> tern::task<std::string> {
    auto child = rt.spawn_on(1, []() -> tern::task<void> {
      throw std::logic_error("from worker 1");
      co_return;
    }());
    try {
      co_await std::move(child);
    } catch (const std::logic_error& e) {
      co_return e.what();
    }
    co_return "no exception";
  }(rt));
  EXPECT_EQ(what, "from worker 1");
}

TEST_P(runtime_test, switch_to_moves_a_coroutine_between_threads) {
  tern::runtime rt(options(2));
  auto ids = rt.block_on([](tern::runtime& rt) -> tern::task<std::vector<std::thread::id>> {
    std::vector<std::thread::id> seen;
    for (int i = 0; i < 100; ++i) {
      co_await rt.switch_to(static_cast<std::size_t>(i % 2));
      EXPECT_EQ(rt.current_worker(), static_cast<std::size_t>(i % 2));
      seen.push_back(std::this_thread::get_id());
    }
    co_return seen;
  }(rt));
  std::set<std::thread::id> distinct(ids.begin(), ids.end());
  EXPECT_EQ(distinct.size(), 2u);
}

// The frame pool's lists are the calling thread's even when a coroutine takes them in a loop around a co_await
// that moves it between threads (frame_pool::local(), inlined into the coroutine's body): a block taken and given
// back right after a switch goes to the new thread's list, never to the list of the thread the loop started on.
TEST_P(runtime_test, the_frame_pool_lists_follow_a_coroutine_across_threads) {
  using tern::detail::frame_pool;
  constexpr std::size_t size = 1500;  // a class nothing else here uses
  tern::runtime rt(options(2));
  const int wrong = rt.block_on([](tern::runtime& rt) -> tern::task<int> {
    int wrong = 0;
    for (int i = 0; i < 200; ++i) {
      co_await rt.switch_to(static_cast<std::size_t>(i % 2));
      void* p = frame_pool::allocate(size);
      frame_pool::deallocate(p, size);
      if (frame_pool::cached(size) == 0) ++wrong;  // the block went to another thread's list
    }
    co_return wrong;
  }(rt));
  EXPECT_EQ(wrong, 0);
}

// 1M posts from worker 0 to worker 1: every one runs exactly once, on worker 1.
TEST_P(runtime_test, a_million_cross_thread_posts_are_delivered_once) {
  tern::runtime rt(options(2));
  constexpr int total = 1'000'000;
  std::atomic<int> ran{0};
  std::atomic<int> wrong_thread{0};
  rt.block_on([](tern::runtime& rt, std::atomic<int>& ran, std::atomic<int>& wrong) -> tern::task<void> {
    for (int i = 0; i < total; ++i) {
      rt.post_to(1, [&rt, &ran, &wrong] {
        if (rt.current_worker() != 1) wrong.fetch_add(1, std::memory_order_relaxed);
        ran.fetch_add(1, std::memory_order_relaxed);
      });
      if ((i & 4095) == 0) co_await tern::yield();
    }
  }(rt, ran, wrong_thread));
  const auto deadline = clock_type::now() + 30s;
  while (ran.load() < total && clock_type::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(ran.load(), total);
  EXPECT_EQ(wrong_thread.load(), 0);
}

// Producers on plain threads post to the runtime (round-robin); every post runs exactly once.
TEST_P(runtime_test, posts_from_outside_threads_are_spread_and_delivered) {
  tern::runtime rt(options(2));
  constexpr int producers = 4;
  constexpr int each = 50'000;
  std::atomic<int> ran{0};
  std::atomic<int> on_worker[2] = {0, 0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&] {
      for (int i = 0; i < each; ++i) {
        rt.post([&] {
          on_worker[rt.current_worker()].fetch_add(1, std::memory_order_relaxed);
          ran.fetch_add(1, std::memory_order_relaxed);
        });
      }
    });
  }
  for (auto& t : threads) t.join();
  const auto deadline = clock_type::now() + 30s;
  while (ran.load() < producers * each && clock_type::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(ran.load(), producers * each);
  EXPECT_GT(on_worker[0].load(), 0);
  EXPECT_GT(on_worker[1].load(), 0);
}

TEST_P(runtime_test, shutdown_drains_finishing_tasks_within_grace) {
  tern::runtime rt(options(2));
  std::atomic<int> finished{0};
  for (int i = 0; i < 100; ++i) {
    rt.spawn([](std::atomic<int>& finished) -> tern::task<void> {
      co_await tern::sleep_for(5ms);
      finished.fetch_add(1);
    }(finished)).detach();
  }
  EXPECT_TRUE(rt.shutdown(10s));
  EXPECT_EQ(finished.load(), 100);
}

// A server that watches the runtime's stop token ends its accept loop on shutdown; tasks that would never end
// are destroyed with their loops after the grace period (ASan checks that nothing leaks).
TEST_P(runtime_test, shutdown_stops_accept_loops_and_destroys_what_remains) {
  tern::runtime rt(options(2));
  std::atomic<bool> accept_loop_ended{false};
  std::atomic<int> sleepers{0};
  rt.spawn_on(0, [](tern::runtime& rt, std::atomic<bool>& ended) -> tern::task<void> {
    tern::net::tcp_acceptor acc(*tern::io_context::current());
    EXPECT_OK(acc.listen(tern::net::endpoint::loopback_v4(0)));
    for (;;) {
      auto [ec, s] = co_await tern::with_stop(acc.accept(), rt.stop_token());
      if (ec) {
        EXPECT_EC(ec, std::errc::operation_canceled);
        break;
      }
    }
    ended = true;
  }(rt, accept_loop_ended)).detach();
  for (int i = 0; i < 1000; ++i) {
    rt.spawn([](std::atomic<int>& sleepers) -> tern::task<void> {
      sleepers.fetch_add(1);
      co_await tern::sleep_for(std::chrono::hours(1));
      ADD_FAILURE() << "an hour-long sleep cannot have finished";
    }(sleepers)).detach();
  }
  const auto deadline = clock_type::now() + 10s;
  while (sleepers.load() < 1000 && clock_type::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_FALSE(rt.shutdown(100ms)) << "hour-long sleeps cannot drain within the grace period";
  EXPECT_TRUE(accept_loop_ended.load());
}

// Counts its destruction (on whichever thread destroys the frame that holds it).
struct shutdown_probe {
  explicit shutdown_probe(std::atomic<int>* c) : counter(c) {}
  shutdown_probe(shutdown_probe&& o) noexcept : counter(std::exchange(o.counter, nullptr)) {}
  shutdown_probe(const shutdown_probe&) = delete;
  ~shutdown_probe() {
    if (counter != nullptr) counter->fetch_add(1);
  }
  std::atomic<int>* counter;
};

// 10,000 tasks over both workers, blocked for good in a third each on socket reads (both ends of 1,667 connected
// pairs whose peers never write), hour-long sleeps and receives on a channel that never gets a value. Shutdown
// with a short grace returns promptly and reports the undrained work; destroying the runtime destroys every
// frame (probes), closes every socket (fd count), and no task runs past its await. ASan checks for leaks.
TEST_P(runtime_test, shutdown_destroys_ten_thousand_tasks_blocked_on_io_timers_and_channels) {
  constexpr int pairs = 1667;  // 2 reading tasks per pair
  constexpr int sleepers = 3333;
  constexpr int receivers = 10'000 - 2 * pairs - sleepers;  // 3333
  constexpr int total = 2 * pairs + sleepers + receivers;
  static_assert(total == 10'000);

  struct counters {
    std::atomic<int> started{0};
    std::atomic<int> destroyed{0};
    std::atomic<int> resumed{0};  // a task ran past its blocking await
    std::atomic<int> setup_failed{0};
  } c;
  // Declared before the runtime: waiters unlink themselves when their frames are destroyed with the loops.
  tern::sync::channel<int> never(1);
  const int fds_before = open_fd_count();

  std::optional<tern::runtime> rt(std::in_place, options(2));
  ASSERT_EQ(rt->size(), 2u);

  auto reader = [](shutdown_probe, counters& c, tern::net::tcp_socket s) -> tern::task<void> {
    c.started.fetch_add(1);
    char buf[8];
    (void)co_await s.read_some(tern::mutable_buffer(buf, sizeof(buf)));
    c.resumed.fetch_add(1);
  };
  for (int i = 0; i < pairs; ++i) {
    // Creates the pair on its own worker, hands the server end to a second task on the same loop (an I/O
    // object is used only on the loop that created it), and reads the client end itself.
    rt->spawn_on(static_cast<std::size_t>(i % 2),
                 [](shutdown_probe p, counters& c, decltype(reader) reader) -> tern::task<void> {
                   tern::io_context& ctx = *tern::io_context::current();
                   auto [client, server] = co_await connected_pair(ctx);
                   if (!client.is_open() || !server.is_open()) {
                     c.setup_failed.fetch_add(1);
                     co_return;
                   }
                   // Close with a RST: no TIME_WAIT entries pile up over repeated runs.
                   set_linger_reset(client.native_handle());
                   set_linger_reset(server.native_handle());
                   tern::spawn(ctx, reader(shutdown_probe(&c.destroyed), c, std::move(server))).detach();
                   co_await reader(std::move(p), c, std::move(client));
                 }(shutdown_probe(&c.destroyed), c, reader))
        .detach();
  }
  for (int i = 0; i < sleepers; ++i) {
    rt->spawn_on(static_cast<std::size_t>(i % 2), [](shutdown_probe, counters& c) -> tern::task<void> {
        c.started.fetch_add(1);
        co_await tern::sleep_for(std::chrono::hours(1));
        c.resumed.fetch_add(1);
      }(shutdown_probe(&c.destroyed), c)).detach();
  }
  for (int i = 0; i < receivers; ++i) {
    rt->spawn_on(static_cast<std::size_t>(i % 2),
                 [](shutdown_probe, counters& c, tern::sync::channel<int>& ch) -> tern::task<void> {
                   c.started.fetch_add(1);
                   (void)co_await ch.receive();
                   c.resumed.fetch_add(1);
                 }(shutdown_probe(&c.destroyed), c, never))
        .detach();
  }

  const auto deadline = clock_type::now() + 30s;
  while (c.started.load() < total && c.setup_failed.load() == 0 && clock_type::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(c.setup_failed.load(), 0) << "a connected pair could not be created";
  ASSERT_EQ(c.started.load(), total) << "not every task reached its blocking await within 30 s";

  const auto t0 = clock_type::now();
  const bool drained = rt->shutdown(100ms);
  const auto shutdown_took = clock_type::now() - t0;
  EXPECT_FALSE(drained) << "reads that never complete and hour-long sleeps cannot drain within the grace period";
  EXPECT_LT(shutdown_took, 10s) << "shutdown(100ms) hung";

  rt.reset();  // the suspended frames go with the loops
  const auto teardown_took = clock_type::now() - t0;
  EXPECT_LT(teardown_took, 10s) << "shutdown and destruction of the runtime hung";
  EXPECT_EQ(c.destroyed.load(), total) << "every suspended task's frame is destroyed";
  EXPECT_EQ(c.resumed.load(), 0) << "no task runs past its blocking await";
  EXPECT_EQ(open_fd_count(), fds_before) << "every socket (and every loop's descriptor) is closed";
}

}  // namespace

namespace {

// Shareable work piled on one worker spreads to the idle one: 100 chains start on worker 0 and re-post
// themselves through runtime::post (which keeps them on the worker that runs them); worker 1 only gets work by
// taking it over.
TEST_P(runtime_test, an_idle_worker_takes_over_shareable_work) {
  tern::runtime rt(options(2));
  constexpr int chains = 100;
  constexpr int steps = 2000;
  std::atomic<int> ran_on[2] = {0, 0};
  std::atomic<int> finished{0};
  struct chain {
    tern::runtime* rt;
    std::atomic<int>* ran_on;
    std::atomic<int>* finished;
    int left;
    void operator()() {
      ran_on[rt->current_worker()].fetch_add(1, std::memory_order_relaxed);
      volatile int spin = 0;
      for (int i = 0; i < 200; ++i) spin = spin + i;  // a little work per step
      if (--left > 0) {
        rt->post(*this);
      } else {
        finished->fetch_add(1);
      }
    }
  };
  rt.post_to(0, [&] {
    for (int i = 0; i < chains; ++i) rt.post(chain{&rt, ran_on, &finished, steps});
  });
  const auto deadline = clock_type::now() + 60s;
  while (finished.load() < chains && clock_type::now() < deadline) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(finished.load(), chains);
  EXPECT_EQ(ran_on[0].load() + ran_on[1].load(), chains * steps) << "every step ran exactly once";
  EXPECT_GT(ran_on[1].load(), chains * steps / 10) << "worker 1 took over part of the work";
}

// A worker that is never idle but has far less to do than its peer still gets shareable work: worker 1 keeps one
// chain of its own going (so it never parks), while 100 chains start on worker 0. Without comparing loads, worker 1
// would never run a step of those 100.
TEST_P(runtime_test, a_busy_but_underloaded_worker_takes_over_shareable_work) {
  constexpr int chains = 100;
  constexpr int steps = 2000;
  std::atomic<int> big_ran_on[2] = {0, 0};
  std::atomic<int> finished{0};
  std::atomic<bool> done{false};
  tern::runtime rt(options(2));  // after what its handlers use: its workers are joined before those go
  struct chain {
    tern::runtime* rt;
    std::atomic<int>* ran_on;
    std::atomic<int>* finished;
    int left;
    void operator()() {
      ran_on[rt->current_worker()].fetch_add(1, std::memory_order_relaxed);
      volatile int spin = 0;
      for (int i = 0; i < 200; ++i) spin = spin + i;
      if (--left > 0) {
        rt->post(*this);
      } else {
        finished->fetch_add(1);
      }
    }
  };
  struct keep_busy {
    tern::runtime* rt;
    std::atomic<bool>* done;
    void operator()() const {
      if (!done->load(std::memory_order_relaxed)) rt->post_to(1, *this);  // pinned to worker 1
    }
  };
  rt.post_to(1, keep_busy{&rt, &done});
  rt.post_to(0, [&] {
    for (int i = 0; i < chains; ++i) rt.post(chain{&rt, big_ran_on, &finished, steps});
  });
  const auto deadline = clock_type::now() + 60s;
  while (finished.load() < chains && clock_type::now() < deadline) std::this_thread::sleep_for(1ms);
  done = true;
  ASSERT_EQ(finished.load(), chains);
  EXPECT_EQ(big_ran_on[0].load() + big_ran_on[1].load(), chains * steps) << "every step ran exactly once";
  EXPECT_GT(big_ran_on[1].load(), chains * steps / 10) << "the busy but underloaded worker took over part of the work";
}

// Shutdown while both workers run shareable work: a worker that runs out of work first must not leave while its
// peer can still hand it part of a queue (an idle worker is handed half, an underloaded one enough to even the
// loads), or what it was handed is dropped unrun. Every chain here runs until it sees the stop request, so each
// must end exactly once. Several rounds, since the hand-over at the end is a matter of timing.
TEST_P(runtime_test, shutdown_loses_no_shareable_work_handed_to_a_finishing_worker) {
  constexpr int chains = 20000;
  for (int round = 0; round < 10; ++round) {
    std::atomic<int> ended{0};
    std::atomic<long> steps{0};
    tern::runtime rt(options(2));  // after what its handlers use: its workers are joined before those go
    struct chain {
      tern::runtime* rt;
      std::atomic<int>* ended;
      std::atomic<long>* steps;
      void operator()() const {
        steps->fetch_add(1, std::memory_order_relaxed);
        if (rt->stop_token().stop_requested()) {
          ended->fetch_add(1, std::memory_order_relaxed);
        } else {
          rt->post(*this);
        }
      }
    };
    for (int i = 0; i < chains; ++i) rt.post(chain{&rt, &ended, &steps});
    const auto deadline = clock_type::now() + 10s;
    while (steps.load() < 20L * chains && clock_type::now() < deadline) std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(rt.shutdown(10s)) << "round " << round;
    ASSERT_EQ(ended.load(), chains) << "round " << round << ": every chain ends once, none dropped unrun";
  }
}

// A task spawned with runtime::spawn may start on the idle worker; it then belongs there (joins still work).
TEST_P(runtime_test, shareable_spawns_complete_wherever_they_start) {
  tern::runtime rt(options(2));
  int total = rt.block_on([](tern::runtime& rt) -> tern::task<int> {
    std::vector<tern::join_handle<int>> hs;
    for (int i = 0; i < 1000; ++i) {
      hs.push_back(rt.spawn([](int i) -> tern::task<int> {
        co_await tern::yield();
        co_await tern::sleep_for(std::chrono::microseconds(50));
        co_return i;
      }(i)));
    }
    int sum = 0;
    for (auto& h : hs) sum += co_await std::move(h);
    co_return sum;
  }(rt));
  EXPECT_EQ(total, 999 * 1000 / 2);
}

}  // namespace
