// Shared helpers for the tern test suite.
//
// - backend_test: a value-parameterised fixture that owns an io_context on the backend named by the parameter;
//   TERN_INSTANTIATE_BACKENDS runs a suite on io_uring and on epoll, named after the backend.
// - watchdog: a thread that stops a context which has not finished within a time limit, so that no test can hang
//   on a lost wake-up or a forgotten operation; the test then fails instead of hitting the ctest timeout.
// - run_bounded: runs one task to completion on a context under a watchdog, and requires the context to run out
//   of work afterwards (nothing left pending).
// - CO_ASSERT / CO_ASSERT_OK: fatal assertions usable inside coroutines (gtest's ASSERT_* use `return`).
// - open_fd_count / highest_open_fd: the descriptors this process has open (leak checks, filling the fd table).
#pragma once

#include <tern/tern.hpp>

#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/utsname.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <exception>
#include <mutex>
#include <ostream>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

namespace tern_test {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// Default time limit for one test's run on a context; a hang guard only, far above any expected duration.
inline constexpr std::chrono::milliseconds default_limit = 30s;

inline std::string backend_label(tern::backend_kind kind) {
  switch (kind) {
    case tern::backend_kind::io_uring: return "io_uring";
    case tern::backend_kind::epoll: return "epoll";
    default: return "automatic";
  }
}

// Whether the running kernel is at least major.minor (for features the kernel reports only by working).
inline bool kernel_at_least(int major, int minor) {
  utsname u{};
  if (::uname(&u) != 0) return false;
  int ma = 0, mi = 0;
  if (std::sscanf(u.release, "%d.%d", &ma, &mi) != 2) return false;
  return ma > major || (ma == major && mi >= minor);
}

struct backend_name {
  std::string operator()(const ::testing::TestParamInfo<tern::backend_kind>& info) const {
    return backend_label(info.param);
  }
};

inline tern::io_context_options options_for(tern::backend_kind kind) {
  tern::io_context_options o;
  o.backend = kind;
  return o;
}

// A runtime of `threads` workers on the given backend.
inline tern::runtime_options runtime_options_for(tern::backend_kind kind, unsigned threads) {
  tern::runtime_options o;
  o.threads = threads;
  o.backend = kind;
  return o;
}

class backend_test : public ::testing::TestWithParam<tern::backend_kind> {
 protected:
  tern::io_context_options options() const { return options_for(GetParam()); }

  tern::io_context ctx{options_for(GetParam())};
};

#define TERN_INSTANTIATE_BACKENDS(suite)                                                                   \
  INSTANTIATE_TEST_SUITE_P(backends, suite,                                                                \
                           ::testing::Values(::tern::backend_kind::io_uring, ::tern::backend_kind::epoll), \
                           ::tern_test::backend_name{})

// Stops ctx (through post, which is safe from any thread) once limit has passed, unless destroyed first.
class watchdog {
 public:
  // Returns once the thread runs, so that its start-up never overlaps the test body.
  watchdog(tern::io_context& ctx, std::chrono::milliseconds limit) : ctx_(ctx), thread_([this, limit] { body(limit); }) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return started_; });
  }
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;

  ~watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  bool fired() const { return fired_.load(); }

 private:
  void body(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mutex_);
    started_ = true;
    cv_.notify_all();
    if (cv_.wait_for(lock, limit, [this] { return done_; })) return;
    fired_.store(true);
    tern::io_context* ctx = &ctx_;
    ctx->post([ctx] { ctx->stop(); });
  }

  tern::io_context& ctx_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool started_ = false;
  bool done_ = false;
  std::atomic<bool> fired_{false};
  std::thread thread_;
};

inline void report_exception(const std::exception_ptr& error, const char* where) {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    ADD_FAILURE() << where << ": unexpected exception: " << e.what();
  } catch (...) {
    ADD_FAILURE() << where << ": unexpected exception of unknown type";
  }
}

inline tern::task<void> guarded_main(tern::task<void> body, bool& finished, std::exception_ptr& error) {
  try {
    co_await std::move(body);
  } catch (...) {
    error = std::current_exception();
  }
  finished = true;
}

// Runs ctx.run() under a watchdog; returns false (after recording a failure) if the watchdog had to stop it.
inline bool run_context_bounded(tern::io_context& ctx, std::chrono::milliseconds limit = default_limit) {
  watchdog dog(ctx, limit);
  ctx.run();
  if (dog.fired()) {
    ADD_FAILURE() << "io_context::run() did not return within " << limit.count() << " ms";
    return false;
  }
  return true;
}

// Spawns body on ctx and runs ctx until it is out of work, under a watchdog. Fails the test if body throws, does
// not finish, or leaves work pending so that run() does not return.
inline void run_bounded(tern::io_context& ctx, tern::task<void> body,
                        std::chrono::milliseconds limit = default_limit) {
  bool finished = false;
  std::exception_ptr error;
  {
    watchdog dog(ctx, limit);
    tern::spawn(ctx, guarded_main(std::move(body), finished, error)).detach();
    ctx.run();
    if (dog.fired()) {
      if (finished) {
        ADD_FAILURE() << "the test task finished, but io_context::run() did not return within " << limit.count()
                      << " ms: work was left pending";
      } else {
        ADD_FAILURE() << "the test task did not finish within " << limit.count() << " ms";
      }
    }
  }
  report_exception(error, "test task");
  EXPECT_TRUE(finished) << "the test task did not run to completion";
}

// Calls ctx.poll() until h is done (a completion the kernel may post a moment after the event that causes it),
// at most 100000 times with a 1 ms pause every 1000: a bound in calls, not in time. True if h finished.
template <class Handle>
bool poll_until_done(tern::io_context& ctx, const Handle& h) {
  for (int tries = 0; !h.done() && tries < 100000; ++tries) {
    ctx.poll();
    if (tries % 1000 == 999) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return h.done();
}

// The operations of a loop started and not completed, by kind ("recv x1, accept_multishot x1"), or "".
inline std::string operations_outstanding(const tern::metrics::loop_snapshot& s) {
  std::string out;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    if (s.ops[i].started == s.ops[i].completed) continue;
    if (!out.empty()) out += ", ";
    out += std::string(tern::metrics::op_kind_name(i)) + " x" +
           std::to_string(static_cast<std::int64_t>(s.ops[i].started - s.ops[i].completed));
  }
  return out;
}

inline std::string describe(const std::error_code& ec) {
  return ec ? ec.message() + " (" + ec.category().name() + ":" + std::to_string(ec.value()) + ")" : "no error";
}

// ec compares equal to expected (a std::errc or a tern::net::error).
template <class E>
::testing::AssertionResult ec_is(const std::error_code& ec, E expected) {
  if (ec == expected) return ::testing::AssertionSuccess();
  using std::make_error_code;
  return ::testing::AssertionFailure() << "got " << describe(ec) << ", expected "
                                       << describe(make_error_code(expected));
}

inline ::testing::AssertionResult ec_ok(const std::error_code& ec) {
  if (!ec) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "unexpected error " << describe(ec);
}

// The descriptors this process has open (the count includes the one that lists them).
inline int open_fd_count() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n;
}

// The highest fd number in use, from /proc/self/fd; -1 if it cannot be read.
inline int highest_open_fd() {
  int highest = -1;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  const int own = ::dirfd(dir);
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::atoi(e->d_name);
    if (fd != own) highest = std::max(highest, fd);
  }
  ::closedir(dir);
  return highest;
}

// Writes over the memory a string of n bytes just freed would have used (the heap's, and the stack below the
// caller), so that a test of an operation that should have copied a string sees garbage if it did not.
[[gnu::noinline]] inline void scribble(std::size_t n) {
  std::string heap(n, '#');
  volatile char stack[512];
  for (auto& c : stack) c = '#';
  asm volatile("" ::"r"(heap.data()) : "memory");
}

}  // namespace tern_test

namespace tern {
// Lets gtest print a backend parameter by name.
inline void PrintTo(backend_kind kind, std::ostream* os) { *os << ::tern_test::backend_label(kind); }
}  // namespace tern

// Error-code expectations that print the actual error. Each argument is evaluated once, so it may be a co_await.
#define EXPECT_EC(ec, expected) EXPECT_TRUE(::tern_test::ec_is((ec), (expected)))
#define EXPECT_OK(ec) EXPECT_TRUE(::tern_test::ec_ok((ec)))

// Fatal assertions for coroutine bodies returning task<void>.
#define CO_ASSERT(cond)                          \
  if (!(cond)) {                                 \
    ADD_FAILURE() << "assertion failed: " #cond; \
    co_return;                                   \
  } else                                         \
    (void)0
#define CO_ASSERT_OK(ec)                                                      \
  if (auto tern_test_result_ = ::tern_test::ec_ok((ec)); !tern_test_result_) { \
    ADD_FAILURE() << #ec << ": " << tern_test_result_.message();              \
    co_return;                                                                \
  } else                                                                      \
    (void)0
