// tern/detail/ring_buffer.hpp
//
// ring_buffer<T>: the FIFO storage of a channel. A fixed array of raw slots used circularly, so pushing and popping
// never allocate; a bounded channel sizes it once, an unbounded one grows it (doubling) when it is full. T must be
// nothrow-movable, so that moving items in, out and across a growth cannot fail half-way.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

namespace tern::detail {

template <class T>
class ring_buffer {
  static_assert(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_destructible_v<T>,
                "tern::sync::channel<T> needs a T that is nothrow move constructible and nothrow destructible");

 public:
  ring_buffer() noexcept = default;
  explicit ring_buffer(std::size_t capacity) : slots_(allocate(capacity)), capacity_(capacity) {}
  ring_buffer(const ring_buffer&) = delete;
  ring_buffer& operator=(const ring_buffer&) = delete;
  ~ring_buffer() {
    clear();
    deallocate(slots_, capacity_);
  }

  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return capacity_; }
  bool empty() const noexcept { return size_ == 0; }
  bool full() const noexcept { return size_ == capacity_; }

  // Appends v; the buffer must not be full.
  void push_back(T&& v) noexcept {
    ::new (static_cast<void*>(slots_ + wrap(head_ + size_))) T(std::move(v));
    ++size_;
  }

  // Moves the oldest item into out; the buffer must not be empty.
  void pop_front_into(std::optional<T>& out) noexcept {
    T& slot = slots_[head_];
    out.emplace(std::move(slot));
    slot.~T();
    head_ = wrap(head_ + 1);
    --size_;
  }

  // Moves the items into new storage of twice the capacity (at least min_growth); may throw std::bad_alloc, and
  // then leaves the buffer as it was.
  void grow() {
    std::size_t cap = capacity_ < min_growth ? min_growth : capacity_ * 2;
    T* fresh = allocate(cap);
    for (std::size_t i = 0; i < size_; ++i) {
      T& slot = slots_[wrap(head_ + i)];
      ::new (static_cast<void*>(fresh + i)) T(std::move(slot));
      slot.~T();
    }
    deallocate(slots_, capacity_);
    slots_ = fresh;
    capacity_ = cap;
    head_ = 0;
  }

 private:
  static constexpr std::size_t min_growth = 16;

  static T* allocate(std::size_t n) { return n == 0 ? nullptr : std::allocator<T>().allocate(n); }
  static void deallocate(T* p, std::size_t n) noexcept {
    if (p != nullptr) std::allocator<T>().deallocate(p, n);
  }

  // i is below 2 * capacity_: a compare instead of a division, since a bounded capacity need not be a power of 2.
  std::size_t wrap(std::size_t i) const noexcept { return i >= capacity_ ? i - capacity_ : i; }

  void clear() noexcept {
    for (std::size_t i = 0; i < size_; ++i) slots_[wrap(head_ + i)].~T();
    size_ = 0;
  }

  T* slots_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t head_ = 0;  // index of the oldest item
  std::size_t size_ = 0;
};

}  // namespace tern::detail
