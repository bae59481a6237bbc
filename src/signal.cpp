// signal_set: signalfd setup (the waiting itself is an ordinary read operation, see signal.hpp).
#include "tern/signal.hpp"

#include <cerrno>
#include <pthread.h>
#include <unistd.h>

namespace tern {

namespace {
sigset_t make_set(std::initializer_list<int> signals) noexcept {
  sigset_t set;
  sigemptyset(&set);
  for (int s : signals) sigaddset(&set, s);
  return set;
}
}  // namespace

std::error_code block_signals(std::initializer_list<int> signals) noexcept {
  sigset_t set = make_set(signals);
  int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return rc == 0 ? std::error_code{} : std::error_code(rc, std::system_category());
}

signal_set::signal_set(io_context& ctx, std::initializer_list<int> signals) : ctx_(&ctx) {
  if (std::error_code ec = block_signals(signals)) throw std::system_error(ec, "pthread_sigmask");
  sigset_t set = make_set(signals);
  // Non-blocking on both backends: wait() reads only after a poll said the fd is readable, and another reader may
  // have taken the signal meanwhile.
  int flags = SFD_CLOEXEC | SFD_NONBLOCK;
  int fd = ::signalfd(-1, &set, flags);
  if (fd < 0) throw std::system_error(errno, std::system_category(), "signalfd");
  try {
    desc_ = ctx.open_descriptor(fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
}

task<io_result<int>> signal_set::wait() {
  // A signalfd read sees only the reading thread's signals, and the poll below is the loop's: refuse other threads.
  if (!ctx_->running_here()) co_return io_result<int>{make_error_code(error::wrong_loop), 0};
  for (;;) {
    if (desc_ == nullptr) co_return io_result<int>{std::make_error_code(std::errc::bad_file_descriptor), 0};
    signalfd_siginfo info{};
    ssize_t n = ::read(desc_->fd, &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) co_return io_result<int>{{}, static_cast<int>(info.ssi_signo)};
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      co_return io_result<int>{std::error_code(errno, std::system_category()), 0};
    }
    if (std::error_code ec = co_await detail::readable_awaiter(*ctx_, desc_)) co_return io_result<int>{ec, 0};
  }
}

void signal_set::cancel() noexcept { ctx_->cancel_pending(desc_); }

void signal_set::close() noexcept {
  if (desc_ != nullptr) detail::close_descriptor(std::exchange(desc_, nullptr));
}

}  // namespace tern
