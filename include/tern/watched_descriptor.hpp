// tern/watched_descriptor.hpp
//
// watched_descriptor: readiness waits on a descriptor whose reads and writes someone else makes. A library that
// owns its socket and drives it itself (libpq, an SSH or SNMP library, a device driver's fd) wants to be told when
// the descriptor is readable or writable, then calls its own functions; it must not have its reads made by tern.
//
//   auto [ec, w] = tern::watched_descriptor::adopt(ctx, tern::unique_fd(::fcntl(lib_fd, F_DUPFD_CLOEXEC, 0)));
//   auto [wec, ready] = co_await w.wait(tern::readiness::either);
//   if (tern::any(ready & tern::readiness::readable)) lib_read();  // the library's own call
//
// What it differs in from the other descriptor objects:
// - adopt() leaves the descriptor's blocking mode as it is (the other objects set the mode their backend needs):
//   the library chose it, and a duplicate shares it with the original.
// - It has no read or write: only wait(), which reads nothing, on both backends (io_uring: a poll; epoll: a poll()
//   of the descriptor and then its edges), and yields what the descriptor is ready for. An error or a hang-up of
//   the peer counts as ready both ways, so that the library's own call finds it.
// - A wait is level-triggered: it completes at once when the descriptor is ready already.
//
// A descriptor owned by a library that may close it (and open another one under the same number) is best watched
// through a duplicate, as above: the object then owns the duplicate, closing it leaves the library's descriptor
// alone, and a number reused by the library can never be mistaken for the watched one.
//
// Everything else (close, cancel, which thread may use it, release) is basic_descriptor's. move_to() also leaves
// the blocking mode alone.
#pragma once

#include <cstdint>
#include <system_error>

#include "tern/basic_descriptor.hpp"
#include "tern/detail/op_awaiter.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/unique_fd.hpp"

namespace tern {

// What a wait asks for, and what it found: a set of bits.
enum class readiness : std::uint8_t { none = 0, readable = 1, writable = 2, either = 3 };

constexpr readiness operator|(readiness a, readiness b) noexcept {
  return static_cast<readiness>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}
constexpr readiness operator&(readiness a, readiness b) noexcept {
  return static_cast<readiness>(static_cast<std::uint8_t>(a) & static_cast<std::uint8_t>(b));
}
// True if r has any bit set.
constexpr bool any(readiness r) noexcept { return r != readiness::none; }

namespace detail {
// The readiness bits of a poll result (revents): an error or a hang-up counts both ways.
readiness readiness_of(int revents) noexcept;

class [[nodiscard]] readiness_awaiter : public op_awaiter {
 public:
  // code: poll_in, poll_out or poll_inout; refused: complete at once with invalid_argument.
  readiness_awaiter(io_context& ctx, descriptor* d, op_code code, bool refused = false) noexcept
      : op_awaiter(ctx, d, code, nullptr, 0), refused_(refused) {}
  bool await_ready() noexcept {
    if (!refused_) [[likely]] return op_awaiter::await_ready();
    op_.res = -EINVAL;
    return true;
  }
  io_result<readiness> await_resume() const noexcept {
    if (op_.res < 0) return {error(), readiness::none};
    return {{}, readiness_of(op_.res)};
  }

 private:
  bool refused_;
};
}  // namespace detail

class watched_descriptor : public basic_descriptor {
 public:
  // A closed object on ctx.
  explicit watched_descriptor(io_context& ctx) noexcept : basic_descriptor(ctx) {}
  // Takes ownership of any descriptor the kernel can poll, leaving its blocking mode as it is; on failure fd is
  // closed.
  [[nodiscard]] static io_result<watched_descriptor> adopt(io_context& ctx, unique_fd fd) noexcept;

  // Awaitable: waits until the descriptor is ready for what (readable, writable or either); yields
  // io_result<readiness>, what it is ready for (never none on success). Cancellable like every operation;
  // readiness::none asks for nothing and is refused with invalid_argument.
  detail::readiness_awaiter wait(readiness what) noexcept;
  // Awaitable: wait(readiness::readable).
  detail::readiness_awaiter wait_readable() noexcept { return wait(readiness::readable); }
  // Awaitable: wait(readiness::writable).
  detail::readiness_awaiter wait_writable() noexcept { return wait(readiness::writable); }

  // Moves the object to another loop, as basic_descriptor::move_to does, without touching the blocking mode.
  [[nodiscard]] std::error_code move_to(io_context& target) noexcept;
};

}  // namespace tern
