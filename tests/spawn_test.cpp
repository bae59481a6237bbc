// tern::spawn, join handles, detached tasks and their exception handler, and tern::run / io_context::block_on.
#include "support.hpp"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

// A named namespace, not an anonymous one: the test sources are compiled in unity batches (tests/CMakeLists.txt),
// where this file's helpers would meet task_test.cpp's of the same names.
namespace spawn_tests {

using namespace tern_test;

class spawn_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(spawn_test);

class run_test : public ::testing::TestWithParam<tern::backend_kind> {};
TERN_INSTANTIATE_BACKENDS(run_test);

tern::task<int> answer() { co_return 42; }

tern::task<int> answer_after_sleep() {
  auto ec = co_await tern::sleep_for(5ms);
  EXPECT_OK(ec);
  co_return 43;
}

tern::task<int> throws_runtime_error(std::string message) {
  co_await tern::yield();
  throw std::runtime_error(message);
  co_return 0;
}

tern::task<void> set_flag(bool& flag) {
  flag = true;
  co_return;
}

tern::task<void> append(std::vector<int>& out, int value) {
  out.push_back(value);
  co_return;
}

TEST_P(spawn_test, join_handle_gives_result) {
  int got = 0;
  run_bounded(ctx, [](tern::io_context& ctx, int& got) -> tern::task<void> {
    auto handle = tern::spawn(ctx, answer());
    got = co_await std::move(handle);
  }(ctx, got));
  EXPECT_EQ(got, 42);
}

TEST_P(spawn_test, join_waits_for_a_started_suspended_task) {
  int got = 0;
  run_bounded(ctx, [](tern::io_context& ctx, int& got) -> tern::task<void> {
    auto handle = tern::spawn(ctx, answer_after_sleep());
    co_await tern::yield();  // the task starts and suspends in its sleep
    EXPECT_FALSE(handle.done());
    got = co_await std::move(handle);
  }(ctx, got));
  EXPECT_EQ(got, 43);
}

TEST_P(spawn_test, join_after_task_already_finished) {
  int got = 0;
  run_bounded(ctx, [](tern::io_context& ctx, int& got) -> tern::task<void> {
    auto handle = tern::spawn(ctx, answer());
    for (int i = 0; i < 100 && !handle.done(); ++i) co_await tern::yield();
    EXPECT_TRUE(handle.done()) << "a queued task must run once the spawner yields";
    got = co_await std::move(handle);
  }(ctx, got));
  EXPECT_EQ(got, 42);
}

TEST_P(spawn_test, join_handle_of_void_task) {
  bool flag = false;
  run_bounded(ctx, [](tern::io_context& ctx, bool& flag) -> tern::task<void> {
    auto handle = tern::spawn(ctx, set_flag(flag));
    co_await std::move(handle);
    EXPECT_TRUE(flag);
  }(ctx, flag));
  EXPECT_TRUE(flag);
}

TEST_P(spawn_test, join_handle_with_move_only_result) {
  int got = 0;
  run_bounded(ctx, [](tern::io_context& ctx, int& got) -> tern::task<void> {
    auto make = []() -> tern::task<std::unique_ptr<int>> { co_return std::make_unique<int>(9); };
    std::unique_ptr<int> p = co_await tern::spawn(ctx, make());
    if (p) got = *p;
  }(ctx, got));
  EXPECT_EQ(got, 9);
}

TEST_P(spawn_test, join_handle_rethrows_exception) {
  std::string what;
  run_bounded(ctx, [](tern::io_context& ctx, std::string& what) -> tern::task<void> {
    auto handle = tern::spawn(ctx, throws_runtime_error("joined failure"));
    try {
      (void)co_await std::move(handle);
      ADD_FAILURE() << "joining a failed task must rethrow";
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
  }(ctx, what));
  EXPECT_EQ(what, "joined failure");
}

TEST_P(spawn_test, spawn_never_runs_inline) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    bool flag = false;
    auto handle = tern::spawn(ctx, set_flag(flag));
    EXPECT_FALSE(flag) << "spawn must queue the task, not run it inline";
    co_await std::move(handle);
    EXPECT_TRUE(flag);
  }(ctx));
}

TEST_P(spawn_test, spawn_on_current_context) {
  bool flag = false;
  run_bounded(ctx, [](tern::io_context& ctx, bool& flag) -> tern::task<void> {
    EXPECT_EQ(tern::io_context::current(), &ctx);
    co_await tern::spawn(set_flag(flag));
  }(ctx, flag));
  EXPECT_TRUE(flag);
}

TEST_P(spawn_test, detached_exception_reaches_handler) {
  std::vector<std::string> caught;
  ctx.set_exception_handler([&caught](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::runtime_error& re) {
      caught.push_back(std::string("runtime_error:") + re.what());
    } catch (...) {
      caught.push_back("other");
    }
  });
  bool later_ran = false;
  run_bounded(ctx, [](tern::io_context& ctx, bool& later_ran) -> tern::task<void> {
    tern::spawn(ctx, throws_runtime_error("detached failure")).detach();
    // The loop keeps serving other tasks after a detached task failed.
    for (int i = 0; i < 10; ++i) co_await tern::yield();
    tern::spawn(ctx, set_flag(later_ran)).detach();
  }(ctx, later_ran));
  EXPECT_TRUE(later_ran);
  EXPECT_EQ(caught, (std::vector<std::string>{"runtime_error:detached failure"}));
}

TEST_P(spawn_test, dropped_handle_detaches_and_exception_reaches_handler) {
  int calls = 0;
  std::string what;
  ctx.set_exception_handler([&](std::exception_ptr e) {
    ++calls;
    try {
      std::rethrow_exception(e);
    } catch (const std::runtime_error& re) {
      what = re.what();
    } catch (...) {
    }
  });
  bool flag = false;
  {
    auto ok = tern::spawn(ctx, set_flag(flag));  // dropped: the task still runs
    auto failing = tern::spawn(ctx, throws_runtime_error("dropped handle"));
  }
  EXPECT_TRUE(run_context_bounded(ctx));
  EXPECT_TRUE(flag);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(what, "dropped handle");
}

TEST_P(spawn_test, spawn_order_is_fifo) {
  std::vector<int> order;
  run_bounded(ctx, [](tern::io_context& ctx, std::vector<int>& order) -> tern::task<void> {
    for (int i = 0; i < 100; ++i) tern::spawn(ctx, append(order, i)).detach();
    for (int i = 0; i < 1000 && order.size() < 100; ++i) co_await tern::yield();
  }(ctx, order));
  std::vector<int> expected;
  for (int i = 0; i < 100; ++i) expected.push_back(i);
  EXPECT_EQ(order, expected);
}

// Joining a task before it has had its first turn (the usual spawn-then-await pattern) must still run it first.
TEST_P(spawn_test, join_before_first_turn_runs_all_in_order) {
  std::vector<int> order;
  run_bounded(ctx, [](tern::io_context& ctx, std::vector<int>& order) -> tern::task<void> {
    std::vector<tern::join_handle<void>> handles;
    for (int i = 0; i < 100; ++i) handles.push_back(tern::spawn(ctx, append(order, i)));
    for (auto& h : handles) co_await std::move(h);
  }(ctx, order));
  std::vector<int> expected;
  for (int i = 0; i < 100; ++i) expected.push_back(i);
  EXPECT_EQ(order, expected);
}

TEST_P(spawn_test, spawn_before_run_is_fifo) {
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) tern::spawn(ctx, append(order, i)).detach();
  EXPECT_TRUE(order.empty());
  EXPECT_TRUE(run_context_bounded(ctx));
  std::vector<int> expected;
  for (int i = 0; i < 50; ++i) expected.push_back(i);
  EXPECT_EQ(order, expected);
}

tern::task<void> sleep_an_hour() { (void)co_await tern::sleep_for(1h); }

tern::task<void> stop_after_a_turn(tern::io_context& ctx) {
  co_await tern::yield();
  ctx.stop();
}

// A join handle kept past its task's loop: the loop destroyed the task, unstarted (still queued) or suspended, and
// the join says so with an exception instead of a result.
TEST_P(spawn_test, join_of_a_task_destroyed_with_its_loop_throws) {
  std::vector<tern::join_handle<void>> handles;
  {
    tern::io_context dying(options());
    handles.push_back(tern::spawn(dying, sleep_an_hour()));  // suspended when the loop dies
    tern::spawn(dying, stop_after_a_turn(dying)).detach();
    EXPECT_TRUE(run_context_bounded(dying));
    handles.push_back(tern::spawn(dying, sleep_an_hour()));  // never started
    EXPECT_FALSE(handles[0].done());
  }
  for (auto& h : handles) {
    EXPECT_TRUE(h.done());
    auto join = [](tern::join_handle<void> h) -> tern::task<void> { co_await std::move(h); };
    EXPECT_THROW(ctx.block_on(join(std::move(h))), std::runtime_error);
  }
}

TEST_P(spawn_test, many_spawns_all_complete) {
  constexpr int n = 100'000;
  int completed = 0;
  auto worker = [](int& completed) -> tern::task<void> {
    co_await tern::yield();
    ++completed;
  };
  for (int i = 0; i < n; ++i) tern::spawn(ctx, worker(completed)).detach();
  EXPECT_TRUE(run_context_bounded(ctx, 100s));
  EXPECT_EQ(completed, n);
}

TEST_P(spawn_test, many_joined_spawns_sum_correctly) {
  constexpr int n = 10'000;
  long long sum = 0;
  run_bounded(ctx, [](tern::io_context& ctx, long long& sum) -> tern::task<void> {
    auto square = [](int v) -> tern::task<long long> {
      co_await tern::yield();
      co_return static_cast<long long>(v) * v;
    };
    std::vector<tern::join_handle<long long>> handles;
    handles.reserve(n);
    for (int i = 0; i < n; ++i) handles.push_back(tern::spawn(ctx, square(i)));
    for (auto& h : handles) sum += co_await std::move(h);
  }(ctx, sum));
  long long expected = 0;
  for (long long i = 0; i < n; ++i) expected += i * i;
  EXPECT_EQ(sum, expected);
}

TEST_P(run_test, returns_value) { EXPECT_EQ(tern::run(answer(), options_for(GetParam())), 42); }

TEST_P(run_test, returns_value_after_io) { EXPECT_EQ(tern::run(answer_after_sleep(), options_for(GetParam())), 43); }

TEST_P(run_test, runs_void_task) {
  bool flag = false;
  tern::run(set_flag(flag), options_for(GetParam()));
  EXPECT_TRUE(flag);
}

TEST_P(run_test, rethrows) {
  try {
    (void)tern::run(throws_runtime_error("from run"), options_for(GetParam()));
    ADD_FAILURE() << "tern::run must rethrow the task's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "from run");
  }
}

TEST_P(run_test, runs_on_requested_backend) {
  tern::backend_kind seen = tern::backend_kind::automatic;
  tern::run([](tern::backend_kind& seen) -> tern::task<void> {
    tern::io_context* ctx = tern::io_context::current();
    EXPECT_NE(ctx, nullptr);
    if (ctx != nullptr) seen = ctx->backend();
    co_return;
  }(seen), options_for(GetParam()));
  EXPECT_EQ(seen, GetParam());
}

TEST_P(spawn_test, block_on_returns_value_and_rethrows) {
  EXPECT_EQ(ctx.block_on(answer_after_sleep()), 43);
  try {
    (void)ctx.block_on(throws_runtime_error("from block_on"));
    ADD_FAILURE() << "block_on must rethrow the task's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "from block_on");
  }
}

// ---- spawn(ctx, callable, args...): the callable and copies of the arguments live as long as the task ----

tern::task<std::string> echo_later(const std::string& text) {
  co_await tern::sleep_for(2ms);
  co_return text + "!";
}

struct counter {
  int value = 0;
  tern::task<int> add(int n) {
    co_await tern::yield();
    value += n;
    co_return value;
  }
};

// The forms a newcomer writes. With spawn(ctx, lambda()) the lambda object (holding the captures) dies at the end
// of the statement while its task sleeps, and with spawn(ctx, echo_later(std::string(...))) the string does; the
// callable form keeps both in the spawned frame. Under AddressSanitizer the wrong forms report
// stack-use-after-return; here the right forms must read intact values after a suspension.
TEST_P(spawn_test, callable_form_keeps_lambda_captures_alive) {
  std::string seen;
  run_bounded(ctx, [](tern::io_context& ctx, std::string& seen) -> tern::task<void> {
    std::string message = "hello";
    int n = 7;
    auto handle = tern::spawn(ctx, [message, n]() -> tern::task<std::string> {
      co_await tern::sleep_for(2ms);
      co_return message + " " + std::to_string(n);
    });
    message = "changed";  // the task has its own copy
    seen = co_await std::move(handle);
  }(ctx, seen));
  EXPECT_EQ(seen, "hello 7");
}

TEST_P(spawn_test, callable_form_keeps_arguments_for_reference_parameters) {
  std::string seen;
  run_bounded(ctx, [](tern::io_context& ctx, std::string& seen) -> tern::task<void> {
    auto handle = tern::spawn(ctx, echo_later, std::string("temporary"));
    seen = co_await std::move(handle);
  }(ctx, seen));
  EXPECT_EQ(seen, "temporary!");
}

TEST_P(spawn_test, callable_form_takes_move_only_arguments_and_member_functions) {
  int total = 0;
  run_bounded(ctx, [](tern::io_context& ctx, int& total) -> tern::task<void> {
    auto owned = tern::spawn(ctx, [](std::unique_ptr<int> p) -> tern::task<int> {
      co_await tern::yield();
      co_return *p;
    }, std::make_unique<int>(5));
    counter c;
    auto member = tern::spawn(ctx, &counter::add, &c, 3);
    total = co_await std::move(owned) + co_await std::move(member);
    EXPECT_EQ(c.value, 3);
    // Detached, on the current loop: the lambda outlives the statement that spawned it.
    int done = 0;
    tern::spawn([&done, tag = std::string("tag")]() -> tern::task<void> {
      co_await tern::sleep_for(1ms);
      done = static_cast<int>(tag.size());
    }).detach();
    co_await tern::sleep_for(20ms);
    EXPECT_EQ(done, 3);
  }(ctx, total));
  EXPECT_EQ(total, 8);
}

TEST_P(spawn_test, callable_form_rethrows_at_the_join) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto failing = tern::spawn(ctx, [what = std::string("boom")]() -> tern::task<void> {
      co_await tern::yield();
      throw std::runtime_error(what);
    });
    try {
      co_await std::move(failing);
      ADD_FAILURE() << "the exception must reach the join";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "boom");
    }
  }(ctx));
}

}  // namespace
