// basic_descriptor (see tern/basic_descriptor.hpp): closing, releasing, adopting and moving a descriptor.
#include "tern/basic_descriptor.hpp"

#include <unistd.h>

#include "tern/detail/backend.hpp"
#include "tern/error.hpp"

#include "tern/detail/stream_ops.hpp"

namespace tern {

basic_descriptor& basic_descriptor::operator=(basic_descriptor&& o) noexcept {
  if (this != &o) {
    close();
    ctx_ = o.ctx_;
    desc_ = std::exchange(o.desc_, nullptr);
  }
  return *this;
}

void basic_descriptor::close() noexcept {
  if (desc_ != nullptr) detail::close_descriptor(std::exchange(desc_, nullptr));
}

std::error_code basic_descriptor::register_descriptor() noexcept {
  if (desc_ == nullptr) return std::make_error_code(std::errc::bad_file_descriptor);
  if (ctx_->running_elsewhere()) return make_error_code(error::wrong_loop);
  return ctx_->backend_impl().register_file(*desc_);
}

void basic_descriptor::cancel() noexcept { ctx_->cancel_pending(desc_); }

io_result<unique_fd> basic_descriptor::release() noexcept {
  if (desc_ == nullptr) return {std::make_error_code(std::errc::bad_file_descriptor), unique_fd()};
  const int fd = detail::release_descriptor(desc_);
  if (fd < 0) return {make_error_code(error::operation_in_progress), unique_fd()};
  desc_ = nullptr;
  return {{}, unique_fd(fd)};
}

std::error_code basic_descriptor::move_to(io_context& target) noexcept {
  const bool watched = desc_ == nullptr || !desc_->unpolled;
  auto [ec, fd] = release();
  if (ec) return ec;
  return adopt_fd(target, fd.release(), watched);
}

std::error_code basic_descriptor::adopt_fd(io_context& ctx, int fd, bool watched) noexcept {
  if (desc_ != nullptr) {
    ::close(fd);
    return std::make_error_code(std::errc::already_connected);
  }
  ctx_ = &ctx;
  auto [ec, d] = detail::wrap_fd(ctx, fd, watched, watched);
  desc_ = d;
  return ec;
}

}  // namespace tern
