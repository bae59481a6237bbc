// tern/leased_buffer.hpp
//
// leased_buffer: bytes a socket's receive() read into one of its loop's pooled buffers, lent to the caller until
// the leased_buffer is destroyed or reset(). Under io_uring the kernel wrote them there itself (a provided-buffer
// ring), so they reach the caller without a copy; under epoll a recv() filled the buffer when data was ready.
//
// Why a lease: a connection that waits for data then holds no memory, and one pool serves every connection of the
// loop. Holding a lease keeps its buffer out of the pool, nothing more: the pool serves the other sockets from the
// rest, grows when it runs dry, and past its maximum falls back to heap buffers, so a lease held across a long
// await never stalls anyone.
//
// Move-only. May be released from any thread (it is then handed back to its loop); must not outlive its loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

#include "tern/buffer.hpp"
#include "tern/detail/receive_pool.hpp"

namespace tern {

class leased_buffer {
 public:
  leased_buffer() noexcept = default;
  leased_buffer(leased_buffer&& o) noexcept
      : pool_(std::exchange(o.pool_, nullptr)), data_(o.data_), id_(o.id_), size_(std::exchange(o.size_, 0u)) {}
  leased_buffer& operator=(leased_buffer&& o) noexcept {
    if (this != &o) {
      reset();
      pool_ = std::exchange(o.pool_, nullptr);
      data_ = o.data_;
      id_ = o.id_;
      size_ = std::exchange(o.size_, 0u);
    }
    return *this;
  }
  leased_buffer(const leased_buffer&) = delete;
  leased_buffer& operator=(const leased_buffer&) = delete;
  ~leased_buffer() { reset(); }

  // The bytes received. They are the caller's to read or modify until the lease ends.
  char* data() noexcept { return data_; }
  const char* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  explicit operator bool() const noexcept { return pool_ != nullptr; }
  std::string_view view() const noexcept { return {data_, size_}; }
  std::span<const std::byte> bytes() const noexcept { return {reinterpret_cast<const std::byte*>(data_), size_}; }
  // As a buffer to write elsewhere (socket.write_all(lease.buffer())).
  const_buffer buffer() const noexcept { return {data_, size_}; }
  // Drops the first n bytes from the view (a parser that consumed part of the buffer); the lease is unchanged.
  void consume(std::size_t n) noexcept {
    if (n > size_) n = size_;
    data_ += n;
    size_ -= static_cast<std::uint32_t>(n);
  }

  // Gives the buffer back to its pool now.
  void reset() noexcept {
    if (pool_ != nullptr) std::exchange(pool_, nullptr)->recycle(id_);
    size_ = 0;
  }

  // Internal (the receive awaiter): a lease of buffer id of pool, holding n bytes (one receive's count: an int).
  leased_buffer(detail::receive_pool& pool, std::uint32_t id, std::size_t n) noexcept
      : pool_(&pool), data_(pool.address(id)), id_(id), size_(static_cast<std::uint32_t>(n)) {}

 private:
  // 24 bytes: the result of a receive waits in the frame of every idle connection's task (io_result<leased_buffer>
  // is in the frame from before the suspension), so a 32-bit size, which any one receive's count fits, keeps the
  // frame a size class lower.
  detail::receive_pool* pool_ = nullptr;
  char* data_ = nullptr;
  std::uint32_t id_ = 0;
  std::uint32_t size_ = 0;
};
static_assert(sizeof(leased_buffer) == 24);

}  // namespace tern
