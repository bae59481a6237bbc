// tern/fs/registered_buffers.hpp
//
// Registered buffers: memory that a loop's io_uring ring has pinned and indexed once, so that a file read or write
// into it (fs::file::read_at and friends with a registered_buffer) is a READ_FIXED/WRITE_FIXED SQE and the kernel
// skips mapping the user pages on every call.
//
// fs::registered_buffers owns `count` buffers of `size` bytes, each aligned to `alignment` (4096 by default, which
// suits direct I/O on every file system), in one allocation. create() registers them in consecutive slots of the
// ring's buffer table (made sparse, on first use, of io_context_options::registered_buffer_slots entries), so many
// sets can live on one loop; destroying the set empties its slots. A full table is tern::error::table_full.
// Under epoll nothing is registered: the memory is plain and the same calls are plain pread/pwrite on the blocking
// pool, so code written for io_uring runs unchanged.
//
// fs::registered_buffer is a view of one buffer, or of a part of one (first, subspan): the bytes plus what the
// ring needs (the slot and the loop). It is only valid while its set lives, and only with files of the loop the set
// was created on: with a file of any other loop, an operation completes with tern::error::wrong_loop instead of
// reaching the kernel with another ring's index.
//
// Which thread: create() and the destructor talk to the ring, which takes registrations only from the thread that
// runs the loop; call them there (or before the loop first runs). create() from a thread that does not run the
// loop, while another does, fails with wrong_loop. The loop must outlive the set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "tern/buffer.hpp"
#include "tern/detail/io_op.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"

namespace tern::fs {

// One registered buffer, or a part of one: a view, cheap to copy.
class registered_buffer {
 public:
  registered_buffer() noexcept = default;

  std::span<std::byte> bytes() const noexcept { return {data_, size_}; }
  std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  // The first n bytes (all of them if n is larger): still registered, with the same slot.
  registered_buffer first(std::size_t n) const noexcept { return {data_, n < size_ ? n : size_, index_, ctx_}; }
  // n bytes from offset on (clamped to the buffer).
  registered_buffer subspan(std::size_t offset, std::size_t n = ~std::size_t{0}) const noexcept {
    offset = offset < size_ ? offset : size_;
    const std::size_t rest = size_ - offset;
    return {data_ + offset, n < rest ? n : rest, index_, ctx_};
  }
  // As plain buffers, for calls that do not take registered memory (socket writes, say).
  operator mutable_buffer() const noexcept { return {data_, size_}; }  // NOLINT: a buffer
  operator const_buffer() const noexcept { return {data_, size_}; }    // NOLINT

  // Internal: the slot in the ring's buffer table (detail::file_op::no_buffer_index under epoll), and the loop.
  std::uint32_t index() const noexcept { return index_; }
  io_context* context() const noexcept { return ctx_; }

 private:
  friend class registered_buffers;
  registered_buffer(std::byte* d, std::size_t n, std::uint32_t index, io_context* ctx) noexcept
      : data_(d), size_(n), index_(index), ctx_(ctx) {}

  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::uint32_t index_ = detail::file_op::no_buffer_index;
  io_context* ctx_ = nullptr;
};

class registered_buffers {
 public:
  // An empty set (no buffers).
  registered_buffers() noexcept = default;
  // count buffers of size bytes (each at most 1 GiB), aligned to alignment (a power of two), zero-filled and
  // registered with ctx's ring. Errors: invalid_argument for a zero count or size, a size over 1 GiB or an alignment
  // that is not a power of two; table_full when the table has no run of count free slots; wrong_loop (see above);
  // the kernel's error otherwise (not_enough_memory when the pages cannot be pinned: RLIMIT_MEMLOCK).
  [[nodiscard]] static io_result<registered_buffers> create(io_context& ctx, std::size_t count, std::size_t size,
                                                            std::size_t alignment = 4096) noexcept;

  registered_buffers(registered_buffers&& o) noexcept { take(o); }
  registered_buffers& operator=(registered_buffers&& o) noexcept {
    if (this != &o) {
      reset();
      take(o);
    }
    return *this;
  }
  registered_buffers(const registered_buffers&) = delete;
  registered_buffers& operator=(const registered_buffers&) = delete;
  // Empties the set's slots in the ring, then frees the memory. No operation may still be using a buffer.
  ~registered_buffers() { reset(); }

  std::size_t count() const noexcept { return count_; }
  std::size_t buffer_size() const noexcept { return size_; }
  // Buffer i (i < count()).
  registered_buffer operator[](std::size_t i) const noexcept {
    const std::uint32_t index =
        first_ == detail::file_op::no_buffer_index ? first_ : first_ + static_cast<std::uint32_t>(i);
    return {data_ + i * stride_, size_, index, ctx_};
  }
  // True when the ring holds the buffers (io_uring); false under epoll, where they are plain memory.
  bool registered() const noexcept { return first_ != detail::file_op::no_buffer_index; }

 private:
  void take(registered_buffers& o) noexcept {
    ctx_ = std::exchange(o.ctx_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    count_ = std::exchange(o.count_, 0);
    size_ = std::exchange(o.size_, 0);
    stride_ = std::exchange(o.stride_, 0);
    first_ = std::exchange(o.first_, detail::file_op::no_buffer_index);
  }
  void reset() noexcept;

  io_context* ctx_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t count_ = 0;
  std::size_t size_ = 0;
  std::size_t stride_ = 0;  // size rounded up to the alignment
  std::uint32_t first_ = detail::file_op::no_buffer_index;
};

}  // namespace tern::fs
