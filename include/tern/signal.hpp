// tern/signal.hpp
//
// signal_set: await POSIX signals (SIGINT, SIGTERM, ...) as ordinary operations, through a signalfd on both
// backends.
//
// A signal is delivered to a signalfd only while it is blocked in every thread; otherwise the kernel runs its
// default action (for SIGINT and SIGTERM: terminate) in a thread that does not block it. So the constructor blocks
// the set's signals in the calling thread, and threads created afterwards inherit the mask: create signal sets
// (or call block_signals) in main() before starting other threads, as the examples do. Blocking is left in place
// when the set is destroyed, so that a second set for the same signals keeps working.
//
// wait() reads one signalfd_siginfo on the loop's own thread: it waits for readability (a poll operation) and then
// reads, because a signalfd read made elsewhere (an io_uring worker thread) would not see signals directed at the
// loop's thread. It is a task, so with_timeout and stop tokens reach it; cancel() ends a pending wait.
#pragma once

#include <initializer_list>
#include <signal.h>
#include <sys/signalfd.h>
#include <system_error>

#include "tern/detail/op_awaiter.hpp"
#include "tern/error.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/task.hpp"

namespace tern {

// Blocks the given signals in the calling thread (and the threads it creates afterwards).
[[nodiscard]] std::error_code block_signals(std::initializer_list<int> signals) noexcept;

namespace detail {
// Waits until a descriptor is readable; yields std::error_code.
class [[nodiscard]] readable_awaiter : public op_awaiter {
 public:
  readable_awaiter(io_context& ctx, descriptor* d) noexcept : op_awaiter(ctx, d, op_code::poll_in, nullptr, 0) {}
  std::error_code await_resume() const noexcept { return op_.res < 0 ? error() : std::error_code{}; }
};
}  // namespace detail

class signal_set {
 public:
  // Blocks signals in the calling thread and opens a signalfd for them on ctx; throws std::system_error on
  // failure.
  signal_set(io_context& ctx, std::initializer_list<int> signals);
  signal_set(const signal_set&) = delete;
  signal_set& operator=(const signal_set&) = delete;
  ~signal_set() { close(); }

  // The next delivered signal of the set: io_result<int> with the signal number, operation_canceled, or
  // bad_file_descriptor once closed; wrong_loop when awaited on a thread that does not run the set's loop.
  task<io_result<int>> wait();
  // Cancels a pending wait (it completes with operation_canceled).
  void cancel() noexcept;
  // Cancels a pending wait and closes the signalfd. Idempotent.
  void close() noexcept;
  io_context& context() const noexcept { return *ctx_; }

 private:
  io_context* ctx_;
  detail::descriptor* desc_ = nullptr;
};

}  // namespace tern
