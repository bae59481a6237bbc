// tern/detail/blocking_pool.hpp
//
// The threads that run file system calls for epoll loops.
//
// Regular files cannot be polled (epoll_ctl refuses them, and a read of a file is never "not ready"), so under
// the epoll backend a file operation is a blocking system call made on another thread, and its completion is
// posted back to the loop. io_uring loops never use the pool: their file operations are SQEs.
//
// One pool per process, started when the first job arrives: threads are added on demand while every thread is
// busy, up to max_threads (64, or TERN_BLOCKING_THREADS: as many calls as that can wait on a device at once, which
// is what direct reads with many tasks in flight need), and they stay until the process exits. A job is an
// intrusive node inside its operation's awaiter, so submitting allocates nothing. A job still queued can be taken
// back (cancel); one that is running cannot, and whoever must free its memory first waits for it to finish.
#pragma once

#include <atomic>
#include <cstdint>

namespace tern::detail {

struct blocking_job {
  enum : std::uint8_t { idle, queued, running, finished };
  blocking_job* prev = nullptr;
  blocking_job* next = nullptr;
  // Runs on a pool thread. The pool then marks the job finished, its last access: whoever waits for the job
  // (wait_idle) may free it as soon as it sees the job finished.
  void (*execute)(blocking_job*) noexcept = nullptr;
  std::atomic<std::uint8_t> state{idle};
  void finish() noexcept { state.store(finished, std::memory_order_release); }
};

class blocking_pool {
 public:
  static blocking_pool& instance();

  // Queues job (its execute set); a pool thread runs it soon.
  void submit(blocking_job* job) noexcept;
  // Takes job back if no thread has started it yet; true if it will not run.
  bool withdraw(blocking_job* job) noexcept;
  // Returns once job is neither queued nor running (finished, withdrawn, or never submitted).
  static void wait_idle(const blocking_job* job) noexcept;
  // The most threads the pool runs (64, or TERN_BLOCKING_THREADS as read when the pool was first used).
  static unsigned max_threads() noexcept;

  blocking_pool(const blocking_pool&) = delete;
  blocking_pool& operator=(const blocking_pool&) = delete;

 private:
  blocking_pool() = default;
  struct state;
  static state& shared() noexcept;  // made on first use
};

}  // namespace tern::detail
