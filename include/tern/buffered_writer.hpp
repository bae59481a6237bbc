// tern/buffered_writer.hpp
//
// buffered_writer: coalesces small writes to any write_stream into one buffer, written out when it is full or on
// flush().
//
// A protocol that produces its output in pieces (a status line, headers, a body; one line per item) would pay a
// system call per piece, and under TCP_NODELAY a packet per piece. The writer copies each piece into a buffer
// allocated once, when it is made, and writes the buffer with one write when it fills up or when flush() is called;
// a piece at least as large as the buffer is written straight from the caller's memory after what is buffered.
//
// Nothing is sent until the buffer is full or flush() is awaited: flush before waiting for the peer's answer.
// The first error of the stream is kept: every later write() and flush() reports it again without writing, since
// the stream can no longer be trusted to carry what follows. The operations are tasks (stop tokens and
// with_timeout apply, nothing is allocated in steady state); one at a time per writer; the stream must outlive
// the writer.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <system_error>

#include "tern/buffer.hpp"
#include "tern/io_result.hpp"
#include "tern/stream.hpp"
#include "tern/task.hpp"

namespace tern {

template <write_stream Stream>
class buffered_writer {
 public:
  static constexpr std::size_t default_capacity = 16 * 1024;

  // Writes to stream through a buffer of capacity bytes (at least 1). Throws std::invalid_argument for 0.
  explicit buffered_writer(Stream& stream, std::size_t capacity = default_capacity)
      : stream_(&stream), capacity_(checked(capacity)), buf_(std::make_unique_for_overwrite<char[]>(capacity_)) {}

  // Awaitable: takes b. It is copied into the buffer if it fits; otherwise the buffer is written out first, and b
  // too if it is at least as large as the buffer. Yields io_result<size_t>: b.size(), or the error (the kept one,
  // if the stream failed before) and 0.
  task<io_result<std::size_t>> write(const_buffer b);
  // Awaitable: writes out everything buffered; yields std::error_code.
  task<std::error_code> flush();

  // Bytes waiting in the buffer.
  std::size_t buffered() const noexcept { return used_; }
  std::size_t capacity() const noexcept { return capacity_; }
  // The stream's first error, kept (empty while none).
  std::error_code error() const noexcept { return error_; }
  Stream& stream() const noexcept { return *stream_; }

 private:
  static std::size_t checked(std::size_t capacity) {
    if (capacity == 0) throw std::invalid_argument("tern::buffered_writer: capacity must not be 0");
    return capacity;
  }

  // Writes all of [p, p + n) to the stream; on failure keeps the error and returns it.
  task<std::error_code> write_out(const char* p, std::size_t n) {
    if constexpr (requires(Stream& s, const_buffer b) { s.write_all(b); }) {
      auto [ec, done] = co_await stream_->write_all(const_buffer(p, n));
      (void)done;
      if (ec) error_ = ec;
      co_return ec;
    } else {
      while (n != 0) {
        auto [ec, done] = co_await stream_->write_some(const_buffer(p, n));
        if (ec) {
          error_ = ec;
          co_return ec;
        }
        p += done;
        n -= done;
      }
      co_return std::error_code{};
    }
  }

  Stream* stream_;
  std::size_t capacity_;
  std::unique_ptr<char[]> buf_;
  std::size_t used_ = 0;
  std::error_code error_;
};

template <write_stream Stream>
task<io_result<std::size_t>> buffered_writer<Stream>::write(const_buffer b) {
  if (error_) co_return io_result<std::size_t>{error_, 0};
  const auto* p = static_cast<const char*>(b.data());
  std::size_t n = b.size();
  if (n <= capacity_ - used_) {
    if (n != 0) std::memcpy(buf_.get() + used_, p, n);
    used_ += n;
    co_return io_result<std::size_t>{{}, n};
  }
  // Fill the buffer up and write it out whole (one write per capacity bytes), then take the rest.
  std::size_t taken = 0;
  if (used_ != 0) {
    taken = capacity_ - used_;
    std::memcpy(buf_.get() + used_, p, taken);
    used_ = 0;
    if (std::error_code ec = co_await write_out(buf_.get(), capacity_)) co_return io_result<std::size_t>{ec, 0};
  }
  if (n - taken >= capacity_) {
    if (std::error_code ec = co_await write_out(p + taken, n - taken)) co_return io_result<std::size_t>{ec, 0};
  } else {
    std::memcpy(buf_.get(), p + taken, n - taken);
    used_ = n - taken;
  }
  co_return io_result<std::size_t>{{}, n};
}

template <write_stream Stream>
task<std::error_code> buffered_writer<Stream>::flush() {
  if (error_) co_return error_;
  if (used_ == 0) co_return std::error_code{};
  const std::size_t n = used_;
  used_ = 0;
  co_return co_await write_out(buf_.get(), n);
}

}  // namespace tern
