// Registered buffers (see tern/fs/registered_buffers.hpp): one aligned allocation for the whole set, carved into
// equally spaced buffers and handed to the backend, which registers them in consecutive slots of its ring's buffer
// table (io_uring) or does nothing (epoll).
#include "tern/fs/registered_buffers.hpp"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <sys/uio.h>

#include "tern/error.hpp"

namespace tern::fs {

namespace {
// The kernel's limit for one registered buffer.
constexpr std::size_t max_buffer_size = std::size_t{1} << 30;
}  // namespace

io_result<registered_buffers> registered_buffers::create(io_context& ctx, std::size_t count, std::size_t size,
                                                         std::size_t alignment) noexcept {
  if (count == 0 || size == 0 || size > max_buffer_size || count > 0xffff || alignment == 0 ||
      (alignment & (alignment - 1)) != 0) {
    return {std::make_error_code(std::errc::invalid_argument), {}};
  }
  if (ctx.running_elsewhere()) return {make_error_code(error::wrong_loop), {}};
  const std::size_t stride = (size + alignment - 1) / alignment * alignment;
  auto* data = static_cast<std::byte*>(std::aligned_alloc(alignment, stride * count));
  if (data == nullptr) return {std::make_error_code(std::errc::not_enough_memory), {}};
  std::memset(data, 0, stride * count);

  registered_buffers set;
  set.ctx_ = &ctx;
  set.data_ = data;
  set.count_ = count;
  set.size_ = size;
  set.stride_ = stride;
  // The iovecs are only read by the registration call: made here, then dropped.
  std::unique_ptr<iovec[]> iov(new (std::nothrow) iovec[count]);
  if (!iov) return {std::make_error_code(std::errc::not_enough_memory), {}};
  for (std::size_t i = 0; i < count; ++i) iov[i] = iovec{data + i * stride, size};
  std::uint32_t first = detail::file_op::no_buffer_index;
  if (std::error_code ec = ctx.backend_impl().register_buffers(iov.get(), static_cast<unsigned>(count), first)) {
    return {ec, {}};
  }
  set.first_ = first;
  return {{}, std::move(set)};
}

void registered_buffers::reset() noexcept {
  if (data_ == nullptr) return;
  if (first_ != detail::file_op::no_buffer_index) {
    ctx_->backend_impl().unregister_buffers(first_, static_cast<unsigned>(count_));
  }
  std::free(data_);
  data_ = nullptr;
  count_ = size_ = stride_ = 0;
  first_ = detail::file_op::no_buffer_index;
}

}  // namespace tern::fs
