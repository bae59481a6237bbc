// tern/detail/ring_buffer.hpp
//
// ring_buffer<T>: the FIFO storage of a channel. A fixed array of raw slots used circularly, so pushing and popping
// never allocate; a bounded channel sizes it once, an unbounded one grows it (doubling) when it is full. T must be
// nothrow-movable, so that moving items in, out and across a growth cannot fail half-way.
//
// The slots are a power of two, so an index wraps with a mask (an `and`) rather than a compare and a subtract; the
// capacity asked for is kept apart and is what full() tests, so a bounded channel of 1000 holds 1000 values in
// 1024 slots.
#pragma once

#include <bit>
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
  explicit ring_buffer(std::size_t capacity)
      : slots_(allocate(slots_for(capacity))), capacity_(capacity), mask_(slots_for(capacity) - 1) {}
  ring_buffer(const ring_buffer&) = delete;
  ring_buffer& operator=(const ring_buffer&) = delete;
  ~ring_buffer() {
    clear();
    deallocate(slots_, slot_count());
  }

  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return capacity_; }
  bool empty() const noexcept { return size_ == 0; }
  bool full() const noexcept { return size_ == capacity_; }

  // Appends v; the buffer must not be full.
  void push_back(T&& v) noexcept {
    ::new (static_cast<void*>(slots_ + ((head_ + size_) & mask_))) T(std::move(v));
    ++size_;
  }

  // The oldest item, and its removal (pop_front destroys it); the buffer must not be empty.
  T& front() noexcept { return slots_[head_]; }
  void pop_front() noexcept {
    slots_[head_].~T();
    head_ = (head_ + 1) & mask_;
    --size_;
  }

  // Moves the oldest item into out; the buffer must not be empty.
  void pop_front_into(std::optional<T>& out) noexcept {
    out.emplace(std::move(front()));
    pop_front();
  }

  // Moves the items into new storage of twice the slots (at least min_growth), all of them usable; may throw
  // std::bad_alloc, and then leaves the buffer as it was.
  void grow() {
    std::size_t cap = slot_count() < min_growth ? min_growth : slot_count() * 2;
    T* fresh = allocate(cap);
    for (std::size_t i = 0; i < size_; ++i) {
      T& slot = slots_[(head_ + i) & mask_];
      ::new (static_cast<void*>(fresh + i)) T(std::move(slot));
      slot.~T();
    }
    deallocate(slots_, slot_count());
    slots_ = fresh;
    capacity_ = cap;
    mask_ = cap - 1;
    head_ = 0;
  }

 private:
  static constexpr std::size_t min_growth = 16;

  // A power of two of at least capacity slots (std::bit_ceil is undefined past the top bit).
  static std::size_t slots_for(std::size_t capacity) {
    if (capacity > std::allocator_traits<std::allocator<T>>::max_size(std::allocator<T>())) throw std::bad_array_new_length();
    return std::bit_ceil(capacity);
  }
  static T* allocate(std::size_t n) { return n == 0 ? nullptr : std::allocator<T>().allocate(n); }
  static void deallocate(T* p, std::size_t n) noexcept {
    if (p != nullptr) std::allocator<T>().deallocate(p, n);
  }

  // The slots allocated: none before an unbounded buffer's first growth, else mask_ + 1.
  std::size_t slot_count() const noexcept { return slots_ == nullptr ? 0 : mask_ + 1; }

  void clear() noexcept {
    for (std::size_t i = 0; i < size_; ++i) slots_[(head_ + i) & mask_].~T();
    size_ = 0;
  }

  T* slots_ = nullptr;
  std::size_t capacity_ = 0;  // the values it may hold (full() at this size)
  std::size_t mask_ = 0;      // the slots (a power of two) minus one
  std::size_t head_ = 0;  // index of the oldest item
  std::size_t size_ = 0;
};

}  // namespace tern::detail
