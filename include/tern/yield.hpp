// tern/yield.hpp
//
// co_await tern::yield(): lets every other ready coroutine of the loop run, then continues. The run queue's slot
// holds the coroutine's handle itself (detail/run_ring.hpp), so a switch costs a slot's push and pop, no node and
// no allocation.
#pragma once

#include <coroutine>

#include "tern/detail/work_queue.hpp"
#include "tern/io_context.hpp"

namespace tern {

namespace detail {
// Stateless: the handle goes straight into the run queue's slot.
struct [[nodiscard]] yield_awaiter {
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) noexcept { io_context::current()->schedule_handle(h); }
  void await_resume() const noexcept {}
};
}  // namespace detail

// Awaitable: re-queues the calling coroutine at the back of the current loop's run queue.
inline detail::yield_awaiter yield() noexcept { return {}; }

}  // namespace tern
