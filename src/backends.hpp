// Factories of the two backends (private to the library).
#pragma once

#include <memory>

#include "tern/detail/backend.hpp"

namespace tern {
struct io_context_options;
}

namespace tern::detail {

// A system call made on behalf of a loop by a thread that may not run it (a wake-up's eventfd write): counted by
// the caller's own loop if it runs one, since a loop's counters have that one writer (loop_counters.hpp).
void count_syscall_of_caller() noexcept;

// Throws std::system_error if the kernel refuses every ring configuration.
std::unique_ptr<backend> make_io_uring_backend(io_context& ctx, const io_context_options& opts);
std::unique_ptr<backend> make_epoll_backend(io_context& ctx);

}  // namespace tern::detail
