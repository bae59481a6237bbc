// A connection's output bytes (internal): responses serialised and not yet written.
//
// A plain growable byte array rather than a std::string, because a response head is written into it in place:
// room() gives the bytes a head can take at most, the writer fills them with memcpy and std::to_chars and says
// where it stopped (commit), so each piece costs a copy, not an append's capacity check and size update. The
// memory is kept across clear(): a warm connection allocates nothing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>

namespace tern::http::detail {

class out_buffer {
 public:
  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  const char* data() const noexcept { return data_.get(); }
  void clear() noexcept { size_ = 0; }

  // At least n writable bytes after the content; commit(end) then takes the bytes up to end as written.
  char* room(std::size_t n) {
    if (capacity_ - size_ < n) grow(n);
    return data_.get() + size_;
  }
  void commit(const char* end) noexcept { size_ = static_cast<std::size_t>(end - data_.get()); }

  void append(std::string_view s) {
    char* p = room(s.size());
    if (!s.empty()) std::memcpy(p, s.data(), s.size());
    size_ += s.size();
  }
  void push_back(char c) { *room(1) = c, ++size_; }

 private:
  void grow(std::size_t n) {
    const std::size_t capacity = std::max({size_ + n, 2 * capacity_, std::size_t{512}});
    auto grown = std::make_unique_for_overwrite<char[]>(capacity);
    if (size_ != 0) std::memcpy(grown.get(), data_.get(), size_);
    data_ = std::move(grown);
    capacity_ = capacity;
  }

  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

// Copies s to p; returns the end of the copy.
inline char* put(char* p, std::string_view s) noexcept {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

}  // namespace tern::http::detail
