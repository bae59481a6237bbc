// tern/buffered_reader.hpp
//
// buffered_reader: delimited and line reads over any read_stream (a TCP socket, a Unix stream socket, a pipe, a
// TLS stream).
//
// The reader owns one buffer, allocated when it is made and never grown: its capacity bounds the longest line or
// delimited record it can return, so a peer that never sends a delimiter costs a fixed amount of memory and gets
// tern::error::line_too_long, not an ever-growing buffer. Reads return views into that buffer (no copy), valid
// until the next operation on the reader. The stream is read only when the buffer lacks what was asked for, with
// one read_some into the free part of the buffer, so a burst of small lines costs one system call.
//
// The operations are tasks: they take the awaiting task's stop token (a task_group's cancel, a runtime's
// shutdown), work with with_timeout, and allocate nothing in steady state (their frames come from the frame pool).
// One operation at a time per reader; the stream must outlive the reader, and other reads of the stream made
// around the reader miss what the reader has buffered. read_until copies its delimiter; the buffers given to
// read_exact and read_some must outlive the operation.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "tern/buffer.hpp"
#include "tern/error.hpp"
#include "tern/io_result.hpp"
#include "tern/stream.hpp"
#include "tern/task.hpp"

namespace tern {

template <read_stream Stream>
class buffered_reader {
 public:
  static constexpr std::size_t default_capacity = 16 * 1024;

  // Reads stream through a buffer of capacity bytes (at least 2). Throws std::invalid_argument for less.
  explicit buffered_reader(Stream& stream, std::size_t capacity = default_capacity)
      : stream_(&stream), capacity_(checked(capacity)), buf_(std::make_unique_for_overwrite<char[]>(capacity_)) {}

  // Awaitable: the bytes up to and including the first delim (non-empty), as a view into the buffer, valid until
  // the next operation on the reader; yields io_result<std::string_view>. Errors:
  // - line_too_long: no delim within capacity() bytes. The over-long record is dropped: what arrived of it is
  //   discarded, and the next read_until or read_line first skips the rest of it, through its delimiter, so a
  //   caller that goes on reads the next record whole.
  // - eof: the stream ended; value holds the bytes that came after the last delimiter (empty if none), which are
  //   consumed, so a last line without its delimiter is not lost.
  // - the stream's own errors (operation_canceled, timed_out, connection_reset, ...).
  // delim is copied into the reader (a delimiter of up to 15 bytes allocates nothing).
  TERN_CORO_WRAPPER task<io_result<std::string_view>> read_until(std::string_view delim) {
    delim_.assign(delim);
    return read_delimited(delim_, capacity_, false);
  }
  // read_until for a one-byte delimiter.
  TERN_CORO_WRAPPER task<io_result<std::string_view>> read_until(char delim) {
    single_delim_ = delim;
    return read_delimited(std::string_view(&single_delim_, 1), capacity_, false);
  }
  // Awaitable: one line, without its "\n" or "\r\n"; yields io_result<std::string_view> as read_until does. A line
  // longer than max_length bytes (at most capacity() - 2, which is the default) is line_too_long.
  TERN_CORO_WRAPPER task<io_result<std::string_view>> read_line(std::size_t max_length = static_cast<std::size_t>(-1)) {
    if (max_length > capacity_ - 2) max_length = capacity_ - 2;
    return read_delimited("\n", max_length + 2, true);
  }
  // Awaitable: fills b, first from the buffer, then from the stream (directly into b for the part that is at least
  // as large as the buffer); yields io_result<size_t>, the byte count read before any error (eof if the stream ends
  // first).
  task<io_result<std::size_t>> read_exact(mutable_buffer b);
  // Awaitable: at least one byte into b: what the buffer holds, or else one read of the stream; yields
  // io_result<size_t>. With it the reader is itself a read_stream.
  task<io_result<std::size_t>> read_some(mutable_buffer b);

  // The bytes buffered and not returned yet.
  std::string_view buffered() const noexcept { return {buf_.get() + begin_, end_ - begin_}; }
  // Drops the first n buffered bytes (at most buffered().size()).
  void consume(std::size_t n) noexcept {
    begin_ += std::min(n, end_ - begin_);
    scanned_ = 0;
  }
  std::size_t capacity() const noexcept { return capacity_; }
  Stream& stream() const noexcept { return *stream_; }

 private:
  static std::size_t checked(std::size_t capacity) {
    if (capacity < 2) throw std::invalid_argument("tern::buffered_reader: capacity must be at least 2 bytes");
    return capacity;
  }

  // The common part of read_until and read_line: a record ends with delim and is at most limit bytes long with
  // it; for a line, "\n" or "\r\n" is taken off and the rest must be at most limit - 2 bytes.
  task<io_result<std::string_view>> read_delimited(std::string_view delim, std::size_t limit, bool line);

  // Takes the first n buffered bytes as the result.
  std::string_view take(std::size_t n) noexcept {
    std::string_view out(buf_.get() + begin_, n);
    begin_ += n;
    scanned_ = 0;
    return out;
  }
  // Copies up to b.size() buffered bytes into b; returns how many.
  std::size_t copy_out(mutable_buffer b) noexcept {
    const std::size_t n = std::min(b.size(), end_ - begin_);
    if (n != 0) std::memcpy(b.data(), buf_.get() + begin_, n);
    begin_ += n;
    scanned_ = 0;
    return n;
  }
  // Makes room at the back for the next read: drops what was consumed, and moves what remains to the front when
  // less than a quarter of the buffer is left free behind it (at most one move per read).
  void make_room() noexcept {
    if (begin_ == end_) {
      begin_ = end_ = 0;
    } else if (begin_ != 0 && capacity_ - end_ <= capacity_ / 4) {
      std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
  }
  // One read of the stream into the free part of the buffer.
  task<io_result<std::size_t>> fill() {
    make_room();
    auto r = co_await stream_->read_some(mutable_buffer(buf_.get() + end_, capacity_ - end_));
    if (!r.ec) end_ += r.value;
    co_return r;
  }

  Stream* stream_;
  std::size_t capacity_;
  std::unique_ptr<char[]> buf_;
  std::size_t begin_ = 0;    // first unconsumed byte
  std::size_t end_ = 0;      // one past the last buffered byte
  std::size_t scanned_ = 0;  // bytes after begin_ already searched for the delimiter without finding it
  char single_delim_ = 0;    // read_until(char)'s delimiter, kept here so the view of it stays valid
  std::string delim_;        // read_until(string_view)'s, likewise
  bool skipping_ = false;    // a record was too long: drop bytes through its delimiter before the next one
};

template <read_stream Stream>
task<io_result<std::string_view>> buffered_reader<Stream>::read_delimited(std::string_view delim, std::size_t limit,
                                                                          bool line) {
  using result = io_result<std::string_view>;
  if (delim.empty()) throw std::invalid_argument("tern::buffered_reader: empty delimiter");
  if (limit > capacity_) limit = capacity_;
  for (;;) {
    const std::size_t available = end_ - begin_;
    const std::size_t window = std::min(available, skipping_ ? available : limit);
    if (window >= delim.size()) {
      const std::size_t found = std::string_view(buf_.get() + begin_, window).find(delim, scanned_);
      if (found != std::string_view::npos) {
        std::string_view record = take(found + delim.size());
        if (skipping_) {  // the end of a line that was too long: drop it and start afresh behind it
          skipping_ = false;
          continue;
        }
        if (!line) co_return result{{}, record};
        record.remove_suffix(1);
        if (!record.empty() && record.back() == '\r') record.remove_suffix(1);
        if (record.size() > limit - 2) co_return result{make_error_code(error::line_too_long), {}};
        co_return result{{}, record};
      }
      // A delimiter may straddle the end of what is here: search its last size() - 1 bytes again next time.
      scanned_ = window - (delim.size() - 1);
    }
    if (skipping_) {
      // Keep only what could be the start of a delimiter split by the next read.
      consume(available - std::min(available, delim.size() - 1));
    } else if (available >= limit) {
      // Too long: drop what arrived of the line, and the rest of it up to its delimiter on the next read.
      consume(available - std::min(available, delim.size() - 1));
      skipping_ = true;
      co_return result{make_error_code(error::line_too_long), {}};
    }
    auto [ec, n] = co_await fill();
    if (ec) {
      if (ec == error::eof && end_ != begin_ && !skipping_) co_return result{ec, take(end_ - begin_)};
      co_return result{ec, {}};
    }
  }
}

template <read_stream Stream>
task<io_result<std::size_t>> buffered_reader<Stream>::read_exact(mutable_buffer b) {
  auto* out = static_cast<char*>(b.data());
  std::size_t done = copy_out(b);
  while (done < b.size()) {
    const std::size_t rest = b.size() - done;
    if (rest >= capacity_) {
      // Large enough to skip the buffer: read straight into the caller's memory.
      auto [ec, n] = co_await stream_->read_some(mutable_buffer(out + done, rest));
      if (ec) co_return io_result<std::size_t>{ec, done};
      done += n;
    } else {
      auto [ec, n] = co_await fill();
      if (ec) co_return io_result<std::size_t>{ec, done};
      done += copy_out(mutable_buffer(out + done, rest));
    }
  }
  co_return io_result<std::size_t>{{}, done};
}

template <read_stream Stream>
task<io_result<std::size_t>> buffered_reader<Stream>::read_some(mutable_buffer b) {
  if (b.size() == 0) co_return io_result<std::size_t>{{}, 0};
  if (end_ == begin_) {
    if (b.size() >= capacity_) co_return co_await stream_->read_some(b);
    auto [ec, n] = co_await fill();
    if (ec) co_return io_result<std::size_t>{ec, 0};
  }
  co_return io_result<std::size_t>{{}, copy_out(b)};
}

}  // namespace tern
