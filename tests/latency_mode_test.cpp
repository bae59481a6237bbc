// The runtime's latency mode, on both backends: busy polling (no park, timers and shutdown still work),
// SCHED_FIFO on every worker or on none (a refused priority leaves no worker running and no memory locked),
// mlockall and its undoing, warm frame pools, and io_uring's SQPOLL (a poller thread that really exists, I/O that
// still completes; ignored on epoll).
//
// The refusals are checked in a child process (this test binary run again with one test selected), which drops
// CAP_SYS_NICE or CAP_IPC_LOCK and lowers its limits first, so they hold even when the tests run as root.
#include "net_support.hpp"
#include "support.hpp"

#include <linux/capability.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tern/detail/frame_pool.hpp>
#include <tern/metrics.hpp>
#include <tern/runtime.hpp>

#include <chrono>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <optional>
#include <utility>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using namespace tern_test;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif
#else
constexpr bool sanitized = false;
#endif

// Threads of this process now.
int thread_count() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

// The thread count once it is at most `expected`, or after 2 s: a joined thread can still be listed in
// /proc/self/task for a moment (pthread_join returns when the kernel clears the thread's id, which is before the
// task is removed), so a count read right after the join can include it. A thread that is really left stays.
int thread_count_at_most(int expected) {
  int n = thread_count();
  for (int i = 0; i < 200 && n > expected; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    n = thread_count();
  }
  return n;
}

// Names (comm) of this process's threads.
std::vector<std::string> thread_names() {
  std::vector<std::string> names;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
      std::string name;
      std::getline(comm, name);
      names.push_back(name);
    }
    ::closedir(d);
  }
  return names;
}

// VmLck of this process, in kB (-1 if unreadable).
long locked_kb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmLck:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

// Whether this process may make a thread SCHED_FIFO at priority 1 (tried on a thread of its own).
bool fifo_permitted() {
  bool ok = false;
  std::thread probe([&ok] {
    sched_param p{};
    p.sched_priority = 1;
    ok = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) == 0;
  });
  probe.join();
  return ok;
}

// Removes one capability from this process's effective, permitted and inheritable sets.
void drop_capability(int cap) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  ASSERT_EQ(::syscall(SYS_capget, &header, data), 0);
  const unsigned word = static_cast<unsigned>(cap) / 32;
  const std::uint32_t bit = std::uint32_t{1} << (cap % 32);
  data[word].effective &= ~bit;
  data[word].permitted &= ~bit;
  data[word].inheritable &= ~bit;
  ASSERT_EQ(::syscall(SYS_capset, &header, data), 0);
}

// Runs this test binary again with only `test` selected and TERN_LATENCY_CHILD set; returns its exit status.
int run_child(const std::string& test) {
  std::string filter = "--gtest_filter=" + test;
  std::vector<char*> argv{const_cast<char*>("/proc/self/exe"), filter.data(), nullptr};
  std::vector<std::string> env_strings{"TERN_LATENCY_CHILD=1"};
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data()) != 0) return -1;
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs t on worker i and returns its value.
template <class T>
T run_on_worker(tern::runtime& rt, std::size_t i, tern::task<T> t) {
  return rt.block_on([](tern::join_handle<T> h) -> tern::task<T> { co_return co_await std::move(h); }(
      rt.spawn_on(i, std::move(t))));
}

bool in_child() { return std::getenv("TERN_LATENCY_CHILD") != nullptr; }

class latency_mode_test : public ::testing::TestWithParam<tern::backend_kind> {
 protected:
  tern::runtime_options options(unsigned threads) const {
    tern::runtime_options o = tern::runtime_options::low_latency(threads);
    o.backend = GetParam();
    o.busy_poll = false;
    return o;
  }
};
TERN_INSTANTIATE_BACKENDS(latency_mode_test);

TEST_P(latency_mode_test, busy_polling_workers_never_park_yet_run_timers_posts_and_shut_down) {
  tern::runtime_options o = options(2);
  o.busy_poll = true;
  tern::runtime rt(o);
  // Idle for a while: a parking worker would park here.
  std::this_thread::sleep_for(20ms);
  std::atomic<int> posted{0};
  rt.post_to(1, [&posted] { posted.fetch_add(1); });
  const bool slept = rt.block_on([]() -> tern::task<bool> {
    auto t0 = std::chrono::steady_clock::now();
    co_await tern::sleep_for(5ms);
    co_return std::chrono::steady_clock::now() - t0 >= 5ms;
  }());
  EXPECT_TRUE(slept) << "a timer fires on a busy-polling loop, not before its time";
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (posted.load() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(posted.load(), 1);
  const tern::metrics::runtime_snapshot s = rt.metrics();
  ASSERT_EQ(s.workers.size(), 2u);
  for (const auto& w : s.workers) {
    EXPECT_EQ(w.parks, 0u) << "a busy-polling worker blocked in the kernel";
    EXPECT_GE(w.spins, 1u);
  }
  EXPECT_TRUE(rt.shutdown(5s)) << "busy polling must not keep a worker from leaving";
}

TEST_P(latency_mode_test, a_realtime_priority_makes_every_worker_sched_fifo) {
  if (!fifo_permitted()) GTEST_SKIP() << "this process may not use SCHED_FIFO (no CAP_SYS_NICE, RLIMIT_RTPRIO 0)";
  tern::runtime_options o = options(2);
  o.realtime_priority = 1;  // the lowest: nothing on this machine is kept from running for long
  tern::runtime rt(o);
  for (std::size_t i = 0; i < rt.size(); ++i) {
    auto [policy, priority] = run_on_worker(rt, i, []() -> tern::task<std::pair<int, int>> {
      int policy = 0;
      sched_param p{};
      pthread_getschedparam(pthread_self(), &policy, &p);
      co_return std::pair<int, int>{policy, p.sched_priority};
    }());
    EXPECT_EQ(policy, SCHED_FIFO) << "worker " << i;
    EXPECT_EQ(priority, 1) << "worker " << i;
  }
  rt.shutdown(2s);
}

TEST_P(latency_mode_test, a_priority_outside_sched_fifos_range_is_refused_before_any_thread_starts) {
  const int before = thread_count();
  for (int bad : {0, 100, -1}) {
    tern::runtime_options o = options(2);
    o.realtime_priority = bad;
    EXPECT_THROW(tern::runtime rt(o), std::invalid_argument) << bad;
  }
  EXPECT_EQ(thread_count(), before);
}

// The child half of the next test.
TEST_P(latency_mode_test, child_refused_priority) {
  if (!in_child()) GTEST_SKIP() << "run by a_refused_priority_leaves_no_worker_running_and_no_memory_locked";
  drop_capability(CAP_SYS_NICE);
  rlimit none{0, 0};
  ASSERT_EQ(::setrlimit(RLIMIT_RTPRIO, &none), 0);
  ASSERT_FALSE(fifo_permitted());
  const int before = thread_count();
  tern::runtime_options o = options(2);
  o.realtime_priority = 10;
  // The sanitizers make mlockall a no-op (it would lock their shadow memory): only without them.
  o.lock_memory = !sanitized;
  try {
    tern::runtime rt(o);
    ADD_FAILURE() << "the runtime started without the SCHED_FIFO it was asked for";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::error_code(EPERM, std::system_category())) << e.what();
    EXPECT_NE(std::string(e.what()).find("realtime_priority 10"), std::string::npos) << e.what();
  }
  // At most as many threads as before: a worker left behind would add one. (Not equal: a thread the process had
  // before, not tern's, may end meanwhile; the child once started with two threads and ended the test with one.)
  EXPECT_LE(thread_count_at_most(before), before) << "a worker thread is left after the refusal";
  EXPECT_EQ(locked_kb(), 0) << "lock_memory was not undone";
}

TEST_P(latency_mode_test, a_refused_priority_leaves_no_worker_running_and_no_memory_locked) {
  const std::string self = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const std::string child = std::string(::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name()) +
                            ".child_refused_priority/" + self.substr(self.find('/') + 1);
  EXPECT_EQ(run_child(child), 0) << "the child test " << child << " failed";
}

// The child half of the next test.
TEST_P(latency_mode_test, child_refused_memory_lock) {
  if (!in_child()) GTEST_SKIP() << "run by refused_memory_locking_is_a_clear_error";
  if (sanitized) GTEST_SKIP() << "the sanitizers intercept mlockall and make it a no-op";
  drop_capability(CAP_IPC_LOCK);
  rlimit small{64 * 1024, 64 * 1024};
  ASSERT_EQ(::setrlimit(RLIMIT_MEMLOCK, &small), 0);
  const int before = thread_count();
  tern::runtime_options o = options(2);
  o.lock_memory = true;
  try {
    tern::runtime rt(o);
    ADD_FAILURE() << "mlockall beyond RLIMIT_MEMLOCK succeeded";
  } catch (const std::system_error& e) {
    EXPECT_TRUE(e.code() == std::error_code(ENOMEM, std::system_category()) ||
                e.code() == std::error_code(EPERM, std::system_category()))
        << e.what();
    EXPECT_NE(std::string(e.what()).find("lock_memory"), std::string::npos) << e.what();
  }
  EXPECT_LE(thread_count_at_most(before), before) << "a worker thread is left after the refusal";
  EXPECT_EQ(locked_kb(), 0);
}

TEST_P(latency_mode_test, refused_memory_locking_is_a_clear_error) {
  if (sanitized) GTEST_SKIP() << "the sanitizers intercept mlockall and make it a no-op";
  const std::string self = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const std::string child = std::string(::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name()) +
                            ".child_refused_memory_lock/" + self.substr(self.find('/') + 1);
  EXPECT_EQ(run_child(child), 0) << "the child test " << child << " failed";
}

TEST_P(latency_mode_test, lock_memory_locks_the_process_and_the_destructor_unlocks_it) {
  if (sanitized) GTEST_SKIP() << "the sanitizers intercept mlockall and make it a no-op";
  ASSERT_EQ(locked_kb(), 0);
  {
    tern::runtime_options o = options(1);
    o.lock_memory = true;
    std::optional<tern::runtime> rt;
    try {
      rt.emplace(o);
    } catch (const std::system_error& e) {
      GTEST_SKIP() << "mlockall refused here: " << e.what();
    }
    EXPECT_GT(locked_kb(), 0);
    EXPECT_EQ(rt->block_on([]() -> tern::task<int> { co_return 7; }()), 7);
    rt->shutdown(2s);
  }
  EXPECT_EQ(locked_kb(), 0);
}

TEST_P(latency_mode_test, prefaulting_leaves_every_workers_frame_pool_warm) {
  constexpr std::size_t bytes = 16 * 1024;
  tern::runtime_options o = options(2);
  o.prefault_bytes_per_class = bytes;
  tern::runtime rt(o);
  // What warm(bytes) keeps: per class, bytes / size blocks (at least one).
  std::uint64_t expected = 0;
  for (std::size_t c = 0; c < tern::detail::frame_pool::class_count; ++c) {
    const std::size_t size = tern::detail::frame_pool::class_size(c);
    expected += std::max<std::size_t>(1, bytes / size);
  }
  for (std::size_t i = 0; i < rt.size(); ++i) {
    const std::uint64_t held = run_on_worker(rt, i, []() -> tern::task<std::uint64_t> {
      std::int64_t in_use = 0;
      std::uint64_t cached = 0;
      tern::detail::frame_pool::usage(in_use, cached);
      co_return cached + static_cast<std::uint64_t>(std::max<std::int64_t>(in_use, 0));
    }());
    EXPECT_GE(held, expected) << "worker " << i;
  }
  rt.shutdown(2s);
}

TEST_P(latency_mode_test, sqpoll_runs_a_kernel_poller_on_io_uring_and_io_still_completes) {
  auto pollers = [] {
    int n = 0;
    for (const std::string& name : thread_names()) n += name.rfind("iou-sqp-", 0) == 0;
    return n;
  };
  const int pollers_before = pollers();
  tern::runtime_options o = options(1);
  o.sqpoll = true;
  o.sqpoll_idle = 100ms;
  std::optional<tern::runtime> rt;
  try {
    rt.emplace(o);
  } catch (const std::system_error& e) {
    ASSERT_EQ(GetParam(), tern::backend_kind::io_uring) << "sqpoll is ignored on epoll, never an error: "
                                                        << e.what();
    GTEST_SKIP() << "the kernel refuses IORING_SETUP_SQPOLL here: " << e.what();
  }
  EXPECT_EQ(rt->worker(0).backend(), GetParam());
  const std::string echoed = rt->block_on([]() -> tern::task<std::string> {
    auto [client, server] = co_await connected_pair(*tern::io_context::current());
    const std::string text = "through the submission queue poller";
    auto [wec, wn] = co_await client.write_all(tern::const_buffer(text));
    EXPECT_OK(wec);
    std::string back(text.size(), '\0');
    auto [rec, rn] = co_await server.read_exact(tern::mutable_buffer(back));
    EXPECT_OK(rec);
    co_return back;
  }());
  EXPECT_EQ(echoed, "through the submission queue poller");
  if (GetParam() == tern::backend_kind::io_uring) {
    EXPECT_GE(pollers(), 1) << "io_uring: a kernel thread iou-sqp-<pid> polls the ring";
  } else {
    EXPECT_LE(pollers(), pollers_before) << "epoll: no poller thread (one of an earlier ring may still be ending)";
  }
  rt->shutdown(2s);
}

}  // namespace
