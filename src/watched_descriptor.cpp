// watched_descriptor (see tern/watched_descriptor.hpp): adopting a descriptor without touching its mode, and
// readiness waits as poll operations.
#include "tern/watched_descriptor.hpp"

#include <poll.h>

#include "tern/detail/stream_ops.hpp"

namespace tern {

namespace detail {
readiness readiness_of(int revents) noexcept {
  if ((revents & (POLLERR | POLLHUP)) != 0) return readiness::either;
  readiness r = readiness::none;
  if ((revents & (POLLIN | POLLPRI | POLLRDHUP)) != 0) r = r | readiness::readable;
  if ((revents & POLLOUT) != 0) r = r | readiness::writable;
  return r;
}
}  // namespace detail

io_result<watched_descriptor> watched_descriptor::adopt(io_context& ctx, unique_fd fd) noexcept {
  watched_descriptor w(ctx);
  auto [ec, d] = detail::wrap_fd(ctx, fd.release(), /*fix_mode=*/false);
  if (d != nullptr) d->shared_file = true;
  w.desc_ = d;
  return {ec, std::move(w)};
}

detail::readiness_awaiter watched_descriptor::wait(readiness what) noexcept {
  switch (what) {
    case readiness::readable: return {*ctx_, desc_, detail::op_code::poll_in};
    case readiness::writable: return {*ctx_, desc_, detail::op_code::poll_out};
    case readiness::either: return {*ctx_, desc_, detail::op_code::poll_inout};
    default: return {*ctx_, desc_, detail::op_code::poll_in, true};
  }
}

std::error_code watched_descriptor::move_to(io_context& target) noexcept {
  auto [ec, fd] = release();
  if (ec) return ec;
  ctx_ = &target;
  auto [wec, d] = detail::wrap_fd(target, fd.release(), /*fix_mode=*/false);
  if (d != nullptr) d->shared_file = true;
  desc_ = d;
  return wec;
}

}  // namespace tern
