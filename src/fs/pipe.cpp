// Pipes (see tern/fs/pipe.hpp): creating and adopting the ends, and keeping SIGPIPE from killing the process.
#include "tern/fs/pipe.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

namespace tern::fs {

namespace detail {

void block_sigpipe() noexcept {
  // Out of line: a coroutine may resume on another thread, and an inlined thread_local could be read from the
  // thread it ran on before.
  static thread_local bool blocked = false;
  if (blocked) return;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  blocked = true;
}

void discard_sigpipe() noexcept {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  const timespec zero{};
  while (::sigtimedwait(&set, nullptr, &zero) == SIGPIPE) {
  }
}

}  // namespace detail

io_result<pipe_reader> pipe_reader::adopt(io_context& ctx, unique_fd fd) noexcept {
  return adopt_as<pipe_reader>(ctx, std::move(fd));
}

io_result<pipe_writer> pipe_writer::adopt(io_context& ctx, unique_fd fd) noexcept {
  return adopt_as<pipe_writer>(ctx, std::move(fd));
}

io_result<std::pair<pipe_reader, pipe_writer>> make_pipe(io_context& ctx) noexcept {
  int fds[2];
  const int mode = ctx.backend() == backend_kind::epoll ? O_NONBLOCK : 0;
  if (::pipe2(fds, O_CLOEXEC | mode) < 0) {
    return {{errno, std::system_category()}, {pipe_reader(ctx), pipe_writer(ctx)}};
  }
  unique_fd read_end(fds[0]), write_end(fds[1]);
  auto [rec, r] = tern::detail::wrap_fd(ctx, read_end.release(), false);
  if (rec) return {rec, {pipe_reader(ctx), pipe_writer(ctx)}};
  pipe_reader reader(ctx, r);
  auto [wec, w] = tern::detail::wrap_fd(ctx, write_end.release(), false);
  if (wec) return {wec, {pipe_reader(ctx), pipe_writer(ctx)}};
  return {{}, {std::move(reader), pipe_writer(ctx, w)}};
}

}  // namespace tern::fs
