// tern::task: values, void, move-only results, exceptions, laziness, nesting, and chains far deeper than any
// stack could hold if awaiting a task that completes synchronously cost a stack frame.
#include "support.hpp"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace tern_test;

class task_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(task_test);

tern::task<int> answer() { co_return 42; }

tern::task<void> set_flag(bool& flag) {
  flag = true;
  co_return;
}

tern::task<std::unique_ptr<int>> make_unique_int(int v) { co_return std::make_unique<int>(v); }

// Move-only and not default-constructible: task<T> must not need either a copy or a default value.
struct move_only_value {
  explicit move_only_value(std::string s) : text(std::move(s)) {}
  move_only_value(move_only_value&&) = default;
  move_only_value& operator=(move_only_value&&) = default;
  move_only_value(const move_only_value&) = delete;
  move_only_value& operator=(const move_only_value&) = delete;
  std::string text;
};

tern::task<move_only_value> make_move_only(std::string s) { co_return move_only_value(std::move(s)); }

tern::task<int> throws_runtime_error() {
  throw std::runtime_error("boom");
  co_return 0;
}

tern::task<void> void_throws_logic_error() {
  throw std::logic_error("void boom");
  co_return;
}

tern::task<int> level3(std::vector<int>& trace) {
  trace.push_back(3);
  co_await tern::yield();  // suspends for real: the chain must resume through the run queue
  trace.push_back(-3);
  co_return 3;
}

tern::task<int> level2(std::vector<int>& trace) {
  trace.push_back(2);
  int v = co_await level3(trace);
  trace.push_back(-2);
  co_return v * 10 + 2;
}

tern::task<int> level1(std::vector<int>& trace) {
  trace.push_back(1);
  int v = co_await level2(trace);
  trace.push_back(-1);
  co_return v * 10 + 1;
}

tern::task<int> rethrow_through(int depth) {
  if (depth == 0) co_return co_await throws_runtime_error();
  co_return co_await rethrow_through(depth - 1);
}

tern::task<std::uint64_t> identity(std::uint64_t v) { co_return v; }

tern::task<void> sequential_chain(std::uint64_t n, std::uint64_t& sum) {
  for (std::uint64_t i = 0; i < n; ++i) sum += co_await identity(i);
}

tern::task<std::uint64_t> recursive_chain(std::uint64_t depth) {
  if (depth == 0) co_return 0;
  co_return 1 + co_await recursive_chain(depth - 1);
}

tern::task<void> recursive_void_chain(std::uint64_t depth, std::uint64_t& reached) {
  if (depth == 0) {
    reached = 1;
    co_return;
  }
  co_await recursive_void_chain(depth - 1, reached);
  ++reached;
}

TEST_P(task_test, returns_value) {
  int got = 0;
  run_bounded(ctx, [](int& got) -> tern::task<void> { got = co_await answer(); }(got));
  EXPECT_EQ(got, 42);
}

TEST_P(task_test, void_task_runs_body) {
  bool flag = false;
  run_bounded(ctx, [](bool& flag) -> tern::task<void> { co_await set_flag(flag); }(flag));
  EXPECT_TRUE(flag);
}

TEST_P(task_test, move_only_unique_ptr_result) {
  int got = 0;
  run_bounded(ctx, [](int& got) -> tern::task<void> {
    std::unique_ptr<int> p = co_await make_unique_int(7);
    EXPECT_NE(p, nullptr);
    if (p) got = *p;
  }(got));
  EXPECT_EQ(got, 7);
}

TEST_P(task_test, move_only_non_default_constructible_result) {
  std::string got;
  run_bounded(ctx, [](std::string& got) -> tern::task<void> {
    move_only_value v = co_await make_move_only("payload");
    got = v.text;
  }(got));
  EXPECT_EQ(got, "payload");
}

TEST_P(task_test, exception_propagates_to_awaiter) {
  std::string what;
  run_bounded(ctx, [](std::string& what) -> tern::task<void> {
    try {
      (void)co_await throws_runtime_error();
      ADD_FAILURE() << "the exception did not reach the awaiter";
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
  }(what));
  EXPECT_EQ(what, "boom");
}

TEST_P(task_test, exception_from_void_task_propagates) {
  std::string what;
  run_bounded(ctx, [](std::string& what) -> tern::task<void> {
    try {
      co_await void_throws_logic_error();
      ADD_FAILURE() << "the exception did not reach the awaiter";
    } catch (const std::logic_error& e) {
      what = e.what();
    }
  }(what));
  EXPECT_EQ(what, "void boom");
}

TEST_P(task_test, exception_propagates_through_nested_awaits) {
  std::string what;
  run_bounded(ctx, [](std::string& what) -> tern::task<void> {
    try {
      (void)co_await rethrow_through(50);
      ADD_FAILURE() << "the exception did not reach the outermost awaiter";
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
  }(what));
  EXPECT_EQ(what, "boom");
}

TEST_P(task_test, nested_awaits_resume_in_order) {
  std::vector<int> trace;
  int result = 0;
  run_bounded(ctx, [](std::vector<int>& trace, int& result) -> tern::task<void> {
    result = co_await level1(trace);
  }(trace, result));
  EXPECT_EQ(result, 321);
  EXPECT_EQ(trace, (std::vector<int>{1, 2, 3, -3, -2, -1}));
}

TEST_P(task_test, is_lazy_until_awaited) {
  bool started = false;
  tern::task<void> t = set_flag(started);
  EXPECT_FALSE(started) << "creating a task must not run its body";
  run_bounded(ctx, [](tern::task<void> t, bool& started) -> tern::task<void> {
    co_await tern::yield();
    EXPECT_FALSE(started) << "a task that nobody awaits must not run";
    co_await std::move(t);
    EXPECT_TRUE(started);
  }(std::move(t), started));
  EXPECT_TRUE(started);
}

TEST_P(task_test, moved_task_runs_once_from_its_new_owner) {
  int runs = 0;
  run_bounded(ctx, [](int& runs) -> tern::task<void> {
    auto count = [](int& runs) -> tern::task<int> { co_return ++runs; };
    tern::task<int> a = count(runs);
    tern::task<int> b = std::move(a);
    tern::task<int> c = count(runs);
    c = std::move(b);  // destroys c's unstarted frame, takes over b's
    EXPECT_EQ(runs, 0);
    int v = co_await std::move(c);
    EXPECT_EQ(v, 1);
  }(runs));
  EXPECT_EQ(runs, 1);
}

// Ten million sequential awaits of tasks that complete synchronously. If the final resumption of each child
// were a nested call instead of a symmetric transfer, the stack would grow by a frame per iteration.
TEST_P(task_test, ten_million_sequential_synchronous_awaits) {
  constexpr std::uint64_t n = 10'000'000;
  std::uint64_t sum = 0;
  run_bounded(ctx, sequential_chain(n, sum), 110s);
  EXPECT_EQ(sum, n * (n - 1) / 2);
}

// A hundred thousand nested awaits: each level awaits the next, so the chain is 100k frames deep at its bottom.
TEST_P(task_test, deep_recursive_awaits) {
  constexpr std::uint64_t depth = 100'000;
  std::uint64_t got = 0;
  run_bounded(ctx, [](std::uint64_t& got) -> tern::task<void> { got = co_await recursive_chain(depth); }(got), 110s);
  EXPECT_EQ(got, depth);
}

TEST_P(task_test, deep_recursive_void_awaits) {
  constexpr std::uint64_t depth = 100'000;
  std::uint64_t reached = 0;
  run_bounded(ctx, recursive_void_chain(depth, reached), 110s);
  EXPECT_EQ(reached, depth + 1);
}

// Counts destructions of the copies that live in a coroutine frame.
struct lifetime_probe {
  explicit lifetime_probe(int* c) : counter(c) {}
  lifetime_probe(lifetime_probe&& o) noexcept : counter(std::exchange(o.counter, nullptr)) {}
  lifetime_probe(const lifetime_probe&) = delete;
  ~lifetime_probe() {
    if (counter != nullptr) ++*counter;
  }
  int* counter;
};

tern::task<void> probed(lifetime_probe, bool& ran) {
  ran = true;
  co_return;
}

// Needs no io_context: a task that is never awaited is destroyed without running, and its frame (with the
// parameter copies in it) is released.
TEST(task_lifetime, unawaited_task_is_destroyed_without_running) {
  int destroyed = 0;
  bool ran = false;
  {
    tern::task<void> t = probed(lifetime_probe(&destroyed), ran);
    EXPECT_EQ(destroyed, 0) << "the frame's copy of the parameter must live as long as the task";
  }
  EXPECT_FALSE(ran);
  EXPECT_EQ(destroyed, 1) << "destroying the task must destroy its frame";
}

TEST_P(task_test, completed_task_frame_is_released) {
  int destroyed = 0;
  bool ran = false;
  run_bounded(ctx, [](int& destroyed, bool& ran) -> tern::task<void> {
    co_await probed(lifetime_probe(&destroyed), ran);
    EXPECT_TRUE(ran);
  }(destroyed, ran));
  EXPECT_EQ(destroyed, 1);
}

}  // namespace
