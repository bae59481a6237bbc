// tern::io_context: post and dispatch, cross-thread wake-up, run/run_one/poll counts, stop and restart, yield,
// and run() returning once there is no work left.
#include "net_support.hpp"

#include <cstdlib>
#include <optional>

#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace tern_test;

class io_context_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(io_context_test);

TEST_P(io_context_test, resolves_requested_backend) {
  EXPECT_EQ(ctx.backend(), GetParam());
  EXPECT_STREQ(tern::to_string(ctx.backend()), backend_label(GetParam()).c_str());
}

TEST(io_context_names, backend_names) {
  EXPECT_STREQ(tern::to_string(tern::backend_kind::io_uring), "io_uring");
  EXPECT_STREQ(tern::to_string(tern::backend_kind::epoll), "epoll");
}

TEST(io_context_default, automatic_backend_resolves_to_a_real_one) {
  tern::io_context ctx;
  EXPECT_NE(ctx.backend(), tern::backend_kind::automatic);
}

TEST_P(io_context_test, current_is_set_only_while_running) {
  EXPECT_EQ(tern::io_context::current(), nullptr);
  tern::io_context* inside = nullptr;
  run_bounded(ctx, [](tern::io_context*& inside) -> tern::task<void> {
    inside = tern::io_context::current();
    co_return;
  }(inside));
  EXPECT_EQ(inside, &ctx);
  EXPECT_EQ(tern::io_context::current(), nullptr);
}

TEST_P(io_context_test, empty_context_run_returns_immediately) {
  auto start = clock_type::now();
  EXPECT_TRUE(run_context_bounded(ctx, 10s));
  EXPECT_LT(clock_type::now() - start, 5s);  // hang guard only
}

TEST_P(io_context_test, post_from_loop_runs_later_not_inline) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    bool ran = false;
    ctx.post([&ran] { ran = true; });
    EXPECT_FALSE(ran) << "post must not run the function inline";
    for (int i = 0; i < 100 && !ran; ++i) co_await tern::yield();
    EXPECT_TRUE(ran);
  }(ctx));
}

TEST_P(io_context_test, post_before_run_runs_during_run) {
  int ran = 0;
  ctx.post([&ran] { ++ran; });
  EXPECT_EQ(ran, 0);
  EXPECT_TRUE(run_context_bounded(ctx));
  EXPECT_EQ(ran, 1);
}

TEST_P(io_context_test, posts_run_in_fifo_order) {
  std::vector<int> order;
  for (int i = 0; i < 20; ++i) ctx.post([&order, i] { order.push_back(i); });
  EXPECT_TRUE(run_context_bounded(ctx));
  std::vector<int> expected;
  for (int i = 0; i < 20; ++i) expected.push_back(i);
  EXPECT_EQ(order, expected);
}

TEST_P(io_context_test, handlers_posted_by_handlers_run_in_the_same_run) {
  int remaining = 1000;
  int ran = 0;
  struct chain {
    tern::io_context* ctx;
    int* remaining;
    int* ran;
    void operator()() const {
      ++*ran;
      if (--*remaining > 0) ctx->post(chain{ctx, remaining, ran});
    }
  };
  ctx.post(chain{&ctx, &remaining, &ran});
  EXPECT_TRUE(run_context_bounded(ctx));
  EXPECT_EQ(ran, 1000);
  EXPECT_EQ(remaining, 0);
}

// Posts made on the loop's thread come from the loop's handler slabs until those stop growing, then from the
// frame pool; a burst far past that limit still runs every handler once, in the order posted.
TEST_P(io_context_test, burst_of_loop_thread_posts_runs_in_order) {
  constexpr int n = 20000;  // above the slabs' 64 x 63 blocks
  std::vector<int> order;
  order.reserve(n);
  ctx.post([&] {
    for (int i = 0; i < n; ++i) ctx.post([&order, i] { order.push_back(i); });
  });
  EXPECT_TRUE(run_context_bounded(ctx));
  ASSERT_EQ(order.size(), static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    if (order[i] != i) {
      ADD_FAILURE() << "handler " << order[i] << " ran at position " << i;
      break;
    }
  }
  // And again, now that the slabs are warm and hold their blocks.
  order.clear();
  ctx.post([&] {
    for (int i = 0; i < n; ++i) ctx.post([&order, i] { order.push_back(i); });
  });
  EXPECT_TRUE(run_context_bounded(ctx));
  EXPECT_EQ(order.size(), static_cast<std::size_t>(n));
}

// The loop is parked in the kernel waiting on a timer an hour away; only the post can wake it.
TEST_P(io_context_test, post_from_another_thread_wakes_blocked_run) {
  tern::timer keepalive(ctx);
  keepalive.expires_after(1h);
  std::error_code wait_result;
  bool waited = false;
  tern::spawn(ctx, [](tern::timer& t, std::error_code& r, bool& waited) -> tern::task<void> {
    r = co_await t.wait();
    waited = true;
  }(keepalive, wait_result, waited)).detach();

  const auto loop_thread = std::this_thread::get_id();
  std::atomic<bool> posted_ran{false};
  std::thread::id ran_on;
  std::thread poster([&] {
    std::this_thread::sleep_for(100ms);  // let run() block
    ctx.post([&] {
      ran_on = std::this_thread::get_id();
      posted_ran = true;
      EXPECT_EQ(keepalive.cancel(), 1u);
    });
  });
  auto start = clock_type::now();
  bool returned = run_context_bounded(ctx, 20s);
  poster.join();
  EXPECT_TRUE(returned);
  EXPECT_TRUE(posted_ran.load());
  EXPECT_EQ(ran_on, loop_thread) << "posted functions run on the loop's thread";
  EXPECT_TRUE(waited);
  EXPECT_EC(wait_result, std::errc::operation_canceled);
  EXPECT_LT(clock_type::now() - start, 15s);  // hang guard only
}

// A handler on one loop wakes another loop that is parking for the first time in its life, a few hundred times.
// A loop announces its sleep before its first poll, and on io_uring that poll is what enables a new ring (a wake-up
// message sent to a ring not yet enabled is rejected); the waker must still reach it every time. Each round is
// bounded: the target's run() has to return once its guard is released from the other loop.
TEST_P(io_context_test, wake_from_another_loop_reaches_a_loop_parking_for_the_first_time) {
  constexpr int rounds = 300;
  int returned = 0;
  for (int i = 0; i < rounds; ++i) {
    tern::io_context target(options_for(GetParam()));
    std::optional<tern::io_context::work_guard> guard(target.make_work_guard());
    std::atomic<bool> target_done{false};
    std::atomic<bool> about_to_park{false};
    // The target's only handler runs right before its first park.
    target.post([&about_to_park] { about_to_park = true; });
    std::thread t([&] {
      target.run();
      target_done = true;
    });
    // The waker loop releases the guard from its handler, 0 to 5 us after the target's last handler: around the
    // moment the target announces its sleep and makes its first poll.
    tern::io_context waker(options_for(GetParam()));
    waker.post([&guard, &about_to_park, i] {
      while (!about_to_park.load()) {
      }
      const auto until = clock_type::now() + std::chrono::nanoseconds((i % 50) * 100);
      while (clock_type::now() < until) {
      }
      guard.reset();
    });
    waker.run();
    const auto deadline = clock_type::now() + 10s;
    while (!target_done.load() && clock_type::now() < deadline) std::this_thread::sleep_for(100us);
    if (!target_done.load()) {
      ADD_FAILURE() << "round " << i << ": the target loop was never woken";
      target.stop();  // stop() wakes through the eventfd
      t.join();
      break;
    }
    t.join();
    ++returned;
  }
  EXPECT_EQ(returned, rounds);
}

// Nothing but a work guard keeps the loop alive: it blocks with no deadline at all, and only the post wakes it.
TEST_P(io_context_test, post_from_another_thread_wakes_run_blocked_without_deadline) {
  std::optional<tern::io_context::work_guard> guard(ctx.make_work_guard());
  std::atomic<bool> posted_ran{false};
  std::thread poster([&] {
    std::this_thread::sleep_for(100ms);
    ctx.post([&] {
      posted_ran = true;
      guard.reset();
    });
  });
  bool returned = run_context_bounded(ctx, 20s);
  poster.join();
  EXPECT_TRUE(returned);
  EXPECT_TRUE(posted_ran.load());
}

TEST_P(io_context_test, work_guard_released_from_another_thread_lets_run_return) {
  auto guard = ctx.make_work_guard();
  std::thread releaser([&] {
    std::this_thread::sleep_for(50ms);
    guard.reset();
  });
  bool returned = run_context_bounded(ctx, 20s);
  releaser.join();
  EXPECT_TRUE(returned);
}

TEST_P(io_context_test, many_posts_from_many_threads_all_run) {
  constexpr int threads = 4;
  constexpr int per_thread = 20'000;
  tern::timer keepalive(ctx);
  keepalive.expires_after(1h);
  tern::spawn(ctx, [](tern::timer& t) -> tern::task<void> { (void)co_await t.wait(); }(keepalive)).detach();

  int executed = 0;  // touched only on the loop thread
  const auto loop_thread = std::this_thread::get_id();
  int wrong_thread = 0;
  std::vector<std::thread> posters;
  for (int t = 0; t < threads; ++t) {
    posters.emplace_back([&] {
      for (int i = 0; i < per_thread; ++i) {
        ctx.post([&] {
          if (std::this_thread::get_id() != loop_thread) ++wrong_thread;
          if (++executed == threads * per_thread) keepalive.cancel();
        });
      }
    });
  }
  bool returned = run_context_bounded(ctx, 60s);
  for (auto& p : posters) p.join();
  EXPECT_TRUE(returned);
  EXPECT_EQ(executed, threads * per_thread);
  EXPECT_EQ(wrong_thread, 0);
}

TEST_P(io_context_test, dispatch_on_loop_thread_runs_inline) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    bool ran = false;
    ctx.dispatch([&ran] { ran = true; });
    EXPECT_TRUE(ran) << "dispatch on the running loop's thread must run inline";
    co_return;
  }(ctx));
}

TEST_P(io_context_test, dispatch_outside_run_is_deferred) {
  bool ran = false;
  ctx.dispatch([&ran] { ran = true; });
  EXPECT_FALSE(ran) << "the loop is not running on this thread: dispatch must post";
  EXPECT_TRUE(run_context_bounded(ctx));
  EXPECT_TRUE(ran);
}

TEST_P(io_context_test, dispatch_from_another_thread_runs_on_loop_thread) {
  tern::timer keepalive(ctx);
  keepalive.expires_after(1h);
  tern::spawn(ctx, [](tern::timer& t) -> tern::task<void> { (void)co_await t.wait(); }(keepalive)).detach();
  const auto loop_thread = std::this_thread::get_id();
  std::thread::id ran_on;
  std::atomic<bool> ran_inline_on_caller{false};
  std::thread other([&] {
    std::this_thread::sleep_for(20ms);
    const auto caller = std::this_thread::get_id();
    ctx.dispatch([&ran_on, &keepalive, &ran_inline_on_caller, caller] {
      ran_on = std::this_thread::get_id();
      ran_inline_on_caller = ran_on == caller;
      keepalive.cancel();
    });
  });
  bool returned = run_context_bounded(ctx, 20s);
  other.join();
  EXPECT_TRUE(returned);
  EXPECT_FALSE(ran_inline_on_caller);
  EXPECT_EQ(ran_on, loop_thread);
}

TEST_P(io_context_test, run_returns_number_of_handlers) {
  int ran = 0;
  for (int i = 0; i < 5; ++i) ctx.post([&ran] { ++ran; });
  std::size_t n = 0;
  {
    watchdog dog(ctx, 10s);
    n = ctx.run();
    EXPECT_FALSE(dog.fired());
  }
  EXPECT_EQ(ran, 5);
  EXPECT_EQ(n, 5u);
}

TEST_P(io_context_test, run_one_and_poll_counts) {
  int ran = 0;
  for (int i = 0; i < 3; ++i) ctx.post([&ran] { ++ran; });
  watchdog dog(ctx, 10s);
  EXPECT_EQ(ctx.run_one(), 1u);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(ctx.poll(), 2u);
  EXPECT_EQ(ran, 3);
  EXPECT_EQ(ctx.poll(), 0u);
  EXPECT_EQ(ran, 3);
  EXPECT_FALSE(dog.fired());
}

TEST_P(io_context_test, poll_does_not_block_on_pending_timer) {
  tern::timer t(ctx);
  t.expires_after(1h);
  std::error_code result;
  bool done = false;
  tern::spawn(ctx, [](tern::timer& t, std::error_code& r, bool& done) -> tern::task<void> {
    r = co_await t.wait();
    done = true;
  }(t, result, done)).detach();
  watchdog dog(ctx, 20s);
  auto start = clock_type::now();
  EXPECT_GE(ctx.poll(), 1u);  // runs the spawned task up to its wait
  EXPECT_FALSE(done);
  EXPECT_EQ(ctx.poll(), 0u);
  EXPECT_LT(clock_type::now() - start, 10s);  // hang guard only: poll must not wait for the timer
  EXPECT_EQ(t.cancel(), 1u);
  ctx.run();
  EXPECT_FALSE(dog.fired());
  EXPECT_TRUE(done);
  EXPECT_EC(result, std::errc::operation_canceled);
}

TEST_P(io_context_test, stop_makes_run_return_and_restart_resumes) {
  tern::timer keepalive(ctx);
  keepalive.expires_after(1h);
  std::error_code result;
  bool waited = false;
  tern::spawn(ctx, [](tern::timer& t, std::error_code& r, bool& waited) -> tern::task<void> {
    r = co_await t.wait();
    waited = true;
  }(keepalive, result, waited)).detach();
  tern::spawn(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    (void)co_await tern::sleep_for(10ms);
    ctx.stop();
  }(ctx)).detach();

  EXPECT_FALSE(ctx.stopped());
  EXPECT_TRUE(run_context_bounded(ctx, 20s)) << "stop() must make run() return despite the pending timer";
  EXPECT_TRUE(ctx.stopped());
  EXPECT_FALSE(waited);

  // A stopped context does not run anything until restarted.
  bool posted_ran = false;
  ctx.post([&] {
    posted_ran = true;
    keepalive.cancel();
  });
  EXPECT_EQ(ctx.run_one(), 0u);
  EXPECT_FALSE(posted_ran);

  ctx.restart();
  EXPECT_FALSE(ctx.stopped());
  EXPECT_TRUE(run_context_bounded(ctx, 20s));
  EXPECT_TRUE(posted_ran);
  EXPECT_TRUE(waited);
  EXPECT_EC(result, std::errc::operation_canceled);
}

TEST_P(io_context_test, poll_on_stopped_context_runs_nothing) {
  bool ran = false;
  ctx.post([&ran] { ran = true; });
  ctx.stop();
  EXPECT_EQ(ctx.poll(), 0u) << "run() and run_one() do nothing while stopped; poll() must not either";
  EXPECT_FALSE(ran);
  ctx.restart();
  EXPECT_EQ(ctx.poll(), 1u);
  EXPECT_TRUE(ran);
}

TEST_P(io_context_test, stop_before_run_returns_immediately) {
  bool ran = false;
  ctx.post([&ran] { ran = true; });
  ctx.stop();
  EXPECT_TRUE(run_context_bounded(ctx, 10s));
  EXPECT_FALSE(ran);
  ctx.restart();
  EXPECT_TRUE(run_context_bounded(ctx, 10s));
  EXPECT_TRUE(ran);
}

TEST_P(io_context_test, yield_interleaves_coroutines) {
  std::vector<std::string> trace;
  auto worker = [](std::string name, std::vector<std::string>& trace) -> tern::task<void> {
    for (int i = 0; i < 3; ++i) {
      trace.push_back(name + std::to_string(i));
      co_await tern::yield();
    }
  };
  tern::spawn(ctx, worker("a", trace)).detach();
  tern::spawn(ctx, worker("b", trace)).detach();
  EXPECT_TRUE(run_context_bounded(ctx));
  EXPECT_EQ(trace, (std::vector<std::string>{"a0", "b0", "a1", "b1", "a2", "b2"}));
}

TEST_P(io_context_test, yield_lets_posted_handlers_run) {
  std::vector<std::string> trace;
  run_bounded(ctx, [](tern::io_context& ctx, std::vector<std::string>& trace) -> tern::task<void> {
    ctx.post([&trace] { trace.push_back("posted"); });
    trace.push_back("before");
    co_await tern::yield();
    trace.push_back("after");
  }(ctx, trace));
  EXPECT_EQ(trace, (std::vector<std::string>{"before", "posted", "after"}));
}

// The run queue keeps three kinds of entry in one ring: a small handler's bytes, a handler's block (this one owns
// memory, so it is not trivially copyable) and a coroutine's handle. Several coroutines each post one of
// both kinds and yield, for long enough that the ring wraps and grows; everything runs in the one order it was
// queued in, which the test works out with a plain queue of the same events.
TEST_P(io_context_test, handlers_in_slots_in_blocks_and_resumptions_keep_one_order) {
  constexpr int workers = 60;  // 180 entries queued at once at the peak: the ring wraps, and grows past 128
  constexpr int rounds = 50;
  std::vector<std::string> trace;
  auto worker = [](tern::io_context& ctx, int w, std::vector<std::string>& trace) -> tern::task<void> {
    for (int i = 0; i < rounds; ++i) {
      ctx.post([&trace, w] { trace.push_back("s" + std::to_string(w)); });  // two words: in the slot
      ctx.post([&trace, owned = std::make_unique<int>(w)] { trace.push_back("b" + std::to_string(*owned)); });
      co_await tern::yield();
      trace.push_back("r" + std::to_string(w));
    }
  };
  for (int w = 0; w < workers; ++w) tern::spawn(ctx, worker(ctx, w, trace)).detach();
  EXPECT_TRUE(run_context_bounded(ctx));

  // The model: a FIFO of events; a worker's step (its start or a resumption) queues its next three.
  struct event {
    char kind;  // 'g': a worker's step, 's'/'b': its handlers
    int w;
    int round;
  };
  std::vector<std::string> expected;
  std::deque<event> q;
  for (int w = 0; w < workers; ++w) q.push_back({'g', w, 0});
  while (!q.empty()) {
    const event e = q.front();
    q.pop_front();
    if (e.kind != 'g') {
      expected.push_back(e.kind + std::to_string(e.w));
      continue;
    }
    if (e.round > 0) expected.push_back("r" + std::to_string(e.w));
    if (e.round < rounds) {
      q.push_back({'s', e.w, e.round});
      q.push_back({'b', e.w, e.round});
      q.push_back({'g', e.w, e.round + 1});
    }
  }
  ASSERT_EQ(trace.size(), expected.size());
  for (std::size_t i = 0; i < trace.size(); ++i) {
    if (trace[i] != expected[i]) {
      ADD_FAILURE() << "entry " << i << " is " << trace[i] << ", queued as " << expected[i];
      break;
    }
  }
}

// run() counts the items it ran, one per handler, and a chain of handlers long enough to take the run queue's
// ring round its end many times (the loop then runs the ring's sentinel, which wraps and runs the first slot) keeps
// that count exact, in run()'s result and in items_run.
TEST_P(io_context_test, run_counts_each_item_once_across_the_ring_wrap) {
  struct chain {
    tern::io_context* ctx;
    int* left;
    void operator()() const {
      if (--*left != 0) ctx->post(*this);
    }
  };
  const auto before = ctx.metrics().items_run;
  int left = 1000;
  ctx.post(chain{&ctx, &left});
  std::size_t n = 0;
  {
    watchdog dog(ctx, 10s);
    n = ctx.run();
    EXPECT_FALSE(dog.fired());
  }
  EXPECT_EQ(left, 0);
  EXPECT_EQ(n, 1000u);
  EXPECT_EQ(ctx.metrics().items_run - before, 1000u);
}

// Shareable work is not starved by a stream of pinned work: a handler that re-posts itself on the loop forever
// leaves a shareable handler queued meanwhile at most four pinned items before it runs.
TEST_P(io_context_test, a_stream_of_pinned_posts_does_not_starve_shareable_work) {
  struct chain {
    tern::io_context* ctx;
    int* steps;
    const bool* shared_ran;
    void operator()() const {
      ++*steps;
      if (!*shared_ran && *steps < 100000) ctx->post(*this);
    }
  };
  int steps = 0;
  bool shared_ran = false;
  int steps_when_shared_ran = -1;
  ctx.post([&] {
    ctx.post(chain{&ctx, &steps, &shared_ran});
    ctx.post_shared([&] {
      shared_ran = true;
      steps_when_shared_ran = steps;
    });
  });
  watchdog dog(ctx, 10s);
  ctx.run();
  EXPECT_FALSE(dog.fired());
  EXPECT_TRUE(shared_ran);
  EXPECT_GE(steps_when_shared_ran, 1);
  EXPECT_LE(steps_when_shared_ran, 5) << "at least one item in five is shareable while both wait";
}

// A batch is bounded: a handler that re-posts itself until a timer fires lets the loop poll for the timer (after
// at most batch_limit items), so the chain ends.
TEST_P(io_context_test, a_chain_of_posts_lets_a_timer_fire) {
  struct chain {
    tern::io_context* ctx;
    const bool* fired;
    long* steps;
    void operator()() const {
      ++*steps;
      if (!*fired && *steps < 200000000) ctx->post(*this);
    }
  };
  bool fired = false;
  long steps = 0;
  tern::timer t(ctx);
  t.expires_after(1ms);
  tern::spawn(ctx, [](tern::timer& t, bool& fired) -> tern::task<void> {
    co_await t.wait();
    fired = true;
  }(t, fired)).detach();
  ctx.post(chain{&ctx, &fired, &steps});
  watchdog dog(ctx, 20s);
  ctx.run();
  EXPECT_FALSE(dog.fired());
  EXPECT_TRUE(fired);
  EXPECT_LT(steps, 200000000) << "the timer fired while the chain still ran";
}

TEST_P(io_context_test, run_returns_when_out_of_work) {
  int finished = 0;
  auto sleeper = [](int& finished) -> tern::task<void> {
    auto ec = co_await tern::sleep_for(20ms);
    EXPECT_OK(ec);
    ++finished;
  };
  for (int i = 0; i < 3; ++i) tern::spawn(ctx, sleeper(finished)).detach();
  auto start = clock_type::now();
  EXPECT_TRUE(run_context_bounded(ctx, 20s));
  EXPECT_EQ(finished, 3) << "run() must not return while timers are pending";
  EXPECT_GE(clock_type::now() - start, 20ms);
}

TEST_P(io_context_test, idle_sockets_are_not_work) {
  std::vector<tern::net::tcp_socket> kept;
  run_bounded(ctx, [](tern::io_context& ctx, std::vector<tern::net::tcp_socket>& kept) -> tern::task<void> {
    tern::net::tcp_acceptor acceptor(ctx);
    auto ec = acceptor.listen(tern::net::endpoint::loopback_v4(0));
    CO_ASSERT_OK(ec);
    auto [lec, ep] = acceptor.local_endpoint();
    CO_ASSERT_OK(lec);
    tern::net::tcp_socket client(ctx);
    auto cec = co_await client.connect(ep);
    CO_ASSERT_OK(cec);
    auto [aec, server] = co_await acceptor.accept();
    CO_ASSERT_OK(aec);
    kept.push_back(std::move(client));
    kept.push_back(std::move(server));
  }(ctx, kept));
  // run() returned although two connected sockets are still open: only pending operations are work.
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_TRUE(kept[0].is_open());
  EXPECT_TRUE(kept[1].is_open());
}

// Counts destructions of the copies that live in a coroutine frame.
struct frame_probe {
  explicit frame_probe(int* c) : counter(c) {}
  frame_probe(frame_probe&& o) noexcept : counter(std::exchange(o.counter, nullptr)) {}
  frame_probe(const frame_probe&) = delete;
  ~frame_probe() {
    if (counter != nullptr) ++*counter;
  }
  int* counter;
};

class io_context_teardown_test : public ::testing::TestWithParam<tern::backend_kind> {};
TERN_INSTANTIATE_BACKENDS(io_context_teardown_test);

// Destroying a stopped context with tasks suspended in a sleep, a read, an accept and a read under a timeout
// destroys their frames (and with them the sockets and timer nodes) without touching freed memory; the
// sanitizers check the memory side, the probes that every frame went away.
TEST_P(io_context_teardown_test, destroys_suspended_tasks) {
  int destroyed = 0;
  int started = 0;
  {
    tern::io_context ctx(options_for(GetParam()));
    tern::spawn(ctx, [](frame_probe, int& started) -> tern::task<void> {
      ++started;
      (void)co_await tern::sleep_for(1h);
      ADD_FAILURE() << "the sleep cannot finish";
    }(frame_probe(&destroyed), started)).detach();
    tern::spawn(ctx, [](frame_probe, int& started, tern::io_context& ctx) -> tern::task<void> {
      auto [client, server] = co_await connected_pair(ctx);
      ++started;
      char buf[8];
      (void)co_await client.read_some(tern::mutable_buffer(buf, sizeof(buf)));
      ADD_FAILURE() << "the read cannot finish";
    }(frame_probe(&destroyed), started, ctx)).detach();
    tern::spawn(ctx, [](frame_probe, int& started, tern::io_context& ctx) -> tern::task<void> {
      tern::net::tcp_acceptor acceptor(ctx);
      listen_loopback(acceptor);
      ++started;
      (void)co_await acceptor.accept();
      ADD_FAILURE() << "the accept cannot finish";
    }(frame_probe(&destroyed), started, ctx)).detach();
    tern::spawn(ctx, [](frame_probe, int& started, tern::io_context& ctx) -> tern::task<void> {
      auto [client, server] = co_await connected_pair(ctx);
      ++started;
      char buf[8];
      (void)co_await tern::with_timeout(server.read_some(tern::mutable_buffer(buf, sizeof(buf))), 1h);
      ADD_FAILURE() << "the read cannot finish";
    }(frame_probe(&destroyed), started, ctx)).detach();
    tern::spawn(ctx, [](tern::io_context& ctx) -> tern::task<void> {
      (void)co_await tern::sleep_for(30ms);
      ctx.stop();
    }(ctx)).detach();
    EXPECT_TRUE(run_context_bounded(ctx, 20s));
    EXPECT_EQ(started, 4);
    EXPECT_EQ(destroyed, 0) << "the tasks are still suspended";
  }
  EXPECT_EQ(destroyed, 4) << "destroying the context must destroy every suspended task";
}

// Handlers still queued when their context is destroyed are destroyed without running: both those posted from
// the loop's thread (slab blocks) and those posted from outside (frame-pool blocks). Each captures a probe.
TEST_P(io_context_teardown_test, destroys_queued_handlers_without_running_them) {
  int destroyed = 0;
  int ran = 0;
  {
    tern::io_context ctx(options_for(GetParam()));
    for (int i = 0; i < 3; ++i) ctx.post([p = frame_probe(&destroyed), &ran] { ++ran; });
    ctx.post([&] {
      for (int i = 0; i < 5000; ++i) ctx.post([p = frame_probe(&destroyed), &ran] { ++ran; });
      ctx.stop();
    });
    EXPECT_TRUE(run_context_bounded(ctx, 20s));
    EXPECT_EQ(ran, 3);
    destroyed = 0;  // the probes moved out of the handlers that ran were destroyed too
  }
  EXPECT_EQ(ran, 3) << "a queued handler ran during teardown";
  EXPECT_EQ(destroyed, 5000) << "every queued handler's state must be destroyed with the context";
}

// TERN_BACKEND picks the backend of an automatic context; an explicit option wins over it.
TEST(io_context_environment, tern_backend_overrides_automatic) {
  const char* previous = std::getenv("TERN_BACKEND");
  const std::optional<std::string> saved = previous ? std::optional<std::string>(previous) : std::nullopt;

  ::setenv("TERN_BACKEND", "epoll", 1);
  {
    tern::io_context ctx;
    EXPECT_EQ(ctx.backend(), tern::backend_kind::epoll);
    tern::io_context explicit_ctx(options_for(tern::backend_kind::io_uring));
    EXPECT_EQ(explicit_ctx.backend(), tern::backend_kind::io_uring);
  }
  ::setenv("TERN_BACKEND", "io_uring", 1);
  {
    tern::io_context ctx;
    EXPECT_EQ(ctx.backend(), tern::backend_kind::io_uring);
    tern::io_context explicit_ctx(options_for(tern::backend_kind::epoll));
    EXPECT_EQ(explicit_ctx.backend(), tern::backend_kind::epoll);
  }

  if (saved) {
    ::setenv("TERN_BACKEND", saved->c_str(), 1);
  } else {
    ::unsetenv("TERN_BACKEND");
  }
}

}  // namespace

// A loop is bound to the first thread that runs it (an io_uring ring takes its submissions and waits from one
// thread only). A later run, run_one, poll or block_on from another thread is refused with wrong_loop, on both
// backends, instead of spinning on the kernel's refusals or sleeping on work only the first thread can reap; the
// loop goes on working on its own thread afterwards. The second thread's attempt runs under a watchdog: before the
// rule, it spun (io_uring) or slept (epoll) until stopped.
TEST_P(io_context_test, a_second_thread_cannot_run_a_loop_bound_to_another) {
  std::optional<socket_pair> pair;
  std::error_code read_result;
  std::size_t read_bytes = 0;
  bool read_done = false;
  // A read that stays pending in the kernel across the runs, and a task that stops the first run once it waits.
  tern::spawn(ctx, [](tern::io_context& ctx, std::optional<socket_pair>& pair, std::error_code& result,
                      std::size_t& bytes, bool& done) -> tern::task<void> {
    pair.emplace(co_await connected_pair(ctx));
    ctx.post([&ctx] { ctx.stop(); });
    char buf[16];
    auto [ec, n] = co_await pair->server.read_some(tern::mutable_buffer(buf, sizeof buf));
    result = ec;
    bytes = n;
    done = true;
  }(ctx, pair, read_result, read_bytes, read_done)).detach();
  EXPECT_TRUE(run_context_bounded(ctx, 20s));
  ASSERT_TRUE(pair.has_value());
  ASSERT_FALSE(read_done);
  ctx.restart();

  struct attempt {
    const char* what;
    std::optional<std::error_code> refused;
    bool hung = false;
  };
  std::vector<attempt> attempts = {{"run", {}, false}, {"run_one", {}, false}, {"poll", {}, false}, {"block_on", {}, false}};
  std::thread other([&] {
    for (attempt& a : attempts) {
      watchdog dog(ctx, 3s);
      try {
        if (std::strcmp(a.what, "run") == 0) {
          (void)ctx.run();
        } else if (std::strcmp(a.what, "run_one") == 0) {
          (void)ctx.run_one();
        } else if (std::strcmp(a.what, "poll") == 0) {
          (void)ctx.poll();
        } else {
          ctx.block_on([]() -> tern::task<void> { co_return; }());
        }
      } catch (const std::system_error& e) {
        a.refused = e.code();
      }
      a.hung = dog.fired();
      if (a.hung) ctx.restart();
    }
  });
  other.join();
  for (const attempt& a : attempts) {
    EXPECT_FALSE(a.hung) << a.what << " from a second thread hung until the watchdog stopped it";
    ASSERT_TRUE(a.refused.has_value()) << a.what << " from a second thread was not refused";
    EXPECT_EC(*a.refused, tern::error::wrong_loop) << a.what;
  }

  // The first thread still runs the loop: the pending read gets the bytes written now.
  ASSERT_EQ(::send(pair->client.native_handle(), "ping", 4, MSG_NOSIGNAL), 4);
  tern::spawn(ctx, [](std::optional<socket_pair>& pair, bool& done) -> tern::task<void> {
    while (!done) co_await tern::yield();
    pair.reset();
  }(pair, read_done)).detach();
  EXPECT_TRUE(run_context_bounded(ctx, 20s));
  EXPECT_TRUE(read_done);
  EXPECT_OK(read_result);
  EXPECT_EQ(read_bytes, 4u);
}

// The thread that first runs a loop need not be the one that made it, nor the one that destroys it.
TEST_P(io_context_test, a_loop_made_on_one_thread_runs_on_another_and_dies_on_the_first) {
  auto made_here = std::make_unique<tern::io_context>(options());
  int ran = 0;
  for (int i = 0; i < 3; ++i) made_here->post([&ran] { ++ran; });
  std::thread runner([&] {
    (void)made_here->run();
    made_here->post([&ran] { ++ran; });
    (void)made_here->run();  // the same thread again: allowed
  });
  runner.join();
  EXPECT_EQ(ran, 4);
  made_here.reset();
}
