// tern/yield.hpp
//
// co_await tern::yield(): lets every other ready coroutine of the loop run, then continues. The awaiter is its own
// queue node, so a switch costs a queue push and pop, no allocation.
#pragma once

#include <coroutine>

#include "tern/detail/work_queue.hpp"
#include "tern/io_context.hpp"

namespace tern {

namespace detail {
// Its fields are written only when it suspends (prepare, then the push writes next).
struct [[nodiscard]] yield_awaiter : resume_item {
  yield_awaiter() noexcept : resume_item(unset_t{}) {}
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) noexcept {
    prepare(h);
    io_context::current()->schedule(this);
  }
  void await_resume() const noexcept {}
};
}  // namespace detail

// Awaitable: re-queues the calling coroutine at the back of the current loop's run queue.
inline detail::yield_awaiter yield() noexcept { return {}; }

}  // namespace tern
