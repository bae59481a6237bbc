// tern/buffer.hpp
//
// Non-owning views of the memory an I/O operation reads into or writes from. They convert from any contiguous
// range of bytes (char, signed/unsigned char, std::byte), so std::string, std::vector<char>, std::array<std::byte,N>
// and spans all work without casts. The memory must stay valid until the operation completes.
#pragma once

#include <cstddef>
#include <ranges>
#include <string_view>
#include <type_traits>

namespace tern {

namespace detail {
template <class T>
concept byte_like = sizeof(T) == 1 && std::is_trivially_copyable_v<T>;

template <class R>
concept mutable_byte_range = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
                             byte_like<std::ranges::range_value_t<R>> &&
                             !std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>>;

template <class R>
concept byte_range = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
                     byte_like<std::ranges::range_value_t<R>>;
template <class R>
concept char_literal = std::is_array_v<std::remove_reference_t<R>> &&
                       std::is_same_v<std::remove_extent_t<std::remove_reference_t<R>>, const char>;
}  // namespace detail

// Writable memory: what a read fills.
class mutable_buffer {
 public:
  constexpr mutable_buffer() noexcept = default;
  constexpr mutable_buffer(void* data, std::size_t size) noexcept : data_(data), size_(size) {}
  template <class R>
    requires detail::mutable_byte_range<R>
  constexpr mutable_buffer(R&& r) noexcept  // NOLINT: implicit by design
      : data_(std::ranges::data(r)), size_(std::ranges::size(r)) {}

  constexpr void* data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  // The part after the first n bytes.
  constexpr mutable_buffer operator+(std::size_t n) const noexcept {
    n = n < size_ ? n : size_;
    return {static_cast<std::byte*>(data_) + n, size_ - n};
  }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

// Readable memory: what a write sends.
class const_buffer {
 public:
  constexpr const_buffer() noexcept = default;
  constexpr const_buffer(const void* data, std::size_t size) noexcept : data_(data), size_(size) {}
  constexpr const_buffer(mutable_buffer b) noexcept : data_(b.data()), size_(b.size()) {}  // NOLINT
  constexpr const_buffer(std::string_view s) noexcept : data_(s.data()), size_(s.size()) {}  // NOLINT
  constexpr const_buffer(const char* s) noexcept : const_buffer(std::string_view(s)) {}      // NOLINT
  // String literals take the const char* form above, so their terminating NUL is not sent.
  template <class R>
    requires detail::byte_range<R> && (!detail::char_literal<R>)
  constexpr const_buffer(R&& r) noexcept  // NOLINT: implicit by design
      : data_(std::ranges::data(r)), size_(std::ranges::size(r)) {}

  constexpr const void* data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  // The part after the first n bytes.
  constexpr const_buffer operator+(std::size_t n) const noexcept {
    n = n < size_ ? n : size_;
    return {static_cast<const std::byte*>(data_) + n, size_ - n};
  }

 private:
  const void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace tern
