// The loop's pool of receive buffers (see tern/detail/receive_pool.hpp).
#include "tern/detail/receive_pool.hpp"

#include <algorithm>
#include <bit>
#include <liburing.h>
#include <new>
#include <sys/mman.h>

#include "tern/io_context.hpp"

namespace tern::detail {

receive_pool::receive_pool(io_context& ctx, std::size_t buffer_size, std::uint32_t initial_buffers,
                           std::uint32_t max_buffers)
    : ctx_(ctx), size_(buffer_size) {
  if (size_ == 0 || size_ > (std::size_t{1} << 30)) size_ = 16384;
  max_ = std::clamp<std::uint32_t>(max_buffers, 1, max_ring_entries);
  chunk_ = std::bit_ceil(std::clamp<std::uint32_t>(initial_buffers, 1, max_));
  if (chunk_ > max_) chunk_ = std::bit_floor(max_);
  chunk_shift_ = static_cast<std::uint32_t>(std::countr_zero(chunk_));
  max_ = max_ / chunk_ * chunk_;  // whole chunks
  // Reserved once, so that neither growing nor recycling reallocates while buffers are out.
  chunks_.reserve(max_ / chunk_);
  meta_.reserve(max_);
  free_.reserve(max_);
  (void)grow();
}

receive_pool::~receive_pool() {
  const std::size_t chunk_bytes = static_cast<std::size_t>(chunk_) * size_;
  for (char* c : chunks_) ::munmap(c, chunk_bytes);
  for (char* o : overflow_) delete[] o;
}

bool receive_pool::grow() noexcept {
  // While the ring waits for a larger one, more buffers would only wait on the stack too.
  if (count_ >= max_ || ring_too_small()) return false;
  const std::size_t chunk_bytes = static_cast<std::size_t>(chunk_) * size_;
  void* p = ::mmap(nullptr, chunk_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  chunks_.push_back(static_cast<char*>(p));  // capacity reserved
  const std::uint32_t first = count_;
  count_ += chunk_;
  meta_.resize(count_);
  if (kernel_ring_ != nullptr) {
    for (std::uint32_t id = first; id < count_; ++id) offer_to_ring(id);
  } else {
    for (std::uint32_t id = count_; id-- > first;) free_.push_back(id);  // `first` on top of the stack
  }
  return true;
}

std::uint32_t receive_pool::take() noexcept {
  if (kernel_ring_ != nullptr) return none;  // the kernel's ring holds the free buffers
  if (free_.empty() && !grow()) return none;
  const std::uint32_t id = free_.back();
  free_.pop_back();
  return id;
}

std::uint32_t receive_pool::take_overflow() noexcept {
  if (!overflow_free_.empty()) {
    const std::uint32_t id = overflow_free_.back();
    overflow_free_.pop_back();
    return id;
  }
  try {
    overflow_.reserve(overflow_.size() + 1);
    overflow_meta_.reserve(overflow_.size() + 1);
    overflow_free_.reserve(overflow_.size() + 1);
    overflow_.push_back(new char[size_]);
  } catch (...) {
    return none;
  }
  overflow_meta_.emplace_back();
  return overflow_base + static_cast<std::uint32_t>(overflow_.size() - 1);
}

void receive_pool::feed_kernel_ring(void* ring, std::uint32_t entries, std::uint16_t group) noexcept {
  kernel_ring_ = ring;
  ring_entries_ = entries;
  group_ = group;
  in_ring_ = 0;
  ring_last_ = none;
  io_uring_buf_ring_init(static_cast<io_uring_buf_ring*>(ring));
  // The top of the stack first, as the stack would have handed them out; what has no room stays there.
  while (!free_.empty() && in_ring_ < entries) {
    add_to_ring(free_.back());
    free_.pop_back();
  }
}

std::uint32_t receive_pool::ring_entries_wanted() const noexcept {
  constexpr std::uint32_t page_entries = 4096 / sizeof(io_uring_buf);
  return std::min(std::max(std::bit_ceil(count_), page_entries), std::bit_ceil(max_));
}

bool receive_pool::ring_matches(std::uint16_t head) const noexcept {
  const auto* br = static_cast<const io_uring_buf_ring*>(kernel_ring_);
  return br != nullptr && static_cast<std::uint16_t>(br->tail - head) == in_ring_;
}

void receive_pool::unload_ring(std::uint16_t head) noexcept {
  const std::size_t base = free_.size();
  if (in_ring_ != 0) {
    // The ring's buffers were added one after the other, so the order link of each names the next one.
    const auto* br = static_cast<const io_uring_buf_ring*>(kernel_ring_);
    std::uint32_t id = br->bufs[head & (ring_entries_ - 1)].bid;
    for (std::uint32_t i = 0; i < in_ring_ && id != none; ++i) {
      free_.push_back(id);  // capacity reserved: the stack never holds more than every buffer
      id = meta_[id].ring_next;
    }
  }
  std::reverse(free_.begin() + static_cast<std::ptrdiff_t>(base), free_.end());
  in_ring_ = 0;
  ring_last_ = none;
}

void receive_pool::move_kernel_ring(void* ring, std::uint32_t entries, std::uint16_t head) noexcept {
  unload_ring(head);
  feed_kernel_ring(ring, entries, group_);
}

void receive_pool::leave_kernel_ring(std::uint16_t head) noexcept {
  unload_ring(head);
  kernel_ring_ = nullptr;
  ring_entries_ = 0;
}

void receive_pool::offer_to_ring(std::uint32_t id) noexcept {
  // With no more buffers than entries the ring has room for any buffer not in it (it holds distinct buffers).
  if (count_ <= ring_entries_) {
    add_to_ring(id);
  } else {
    free_.push_back(id);  // capacity reserved
  }
}

void receive_pool::add_to_ring(std::uint32_t id) noexcept {
  auto* br = static_cast<io_uring_buf_ring*>(kernel_ring_);
  const int mask = io_uring_buf_ring_mask(ring_entries_);
  // One entry, published at once: the tail store is a release, so the kernel sees the entry whole.
  meta_[id].ring_index = static_cast<std::uint32_t>(br->tail & mask);
  io_uring_buf_ring_add(br, address(id), static_cast<unsigned>(size_), static_cast<unsigned short>(id), mask, 0);
  io_uring_buf_ring_advance(br, 1);
  ++in_ring_;
  meta_[id].ring_next = none;
  if (ring_last_ != none) meta_[ring_last_].ring_next = id;
  ring_last_ = id;
}

std::size_t receive_pool::ring_length(std::uint32_t id) const noexcept {
  const auto* br = static_cast<const io_uring_buf_ring*>(kernel_ring_);
  const io_uring_buf& entry = br->bufs[meta_[id].ring_index];
  // The entry is the kernel's no more (it took the buffer), and ours only once id is added again.
  return entry.bid == id && entry.len != 0 ? std::min<std::size_t>(entry.len, size_) : size_;
}

void receive_pool::give_back(std::uint32_t id) noexcept {
  if (id >= overflow_base) {
    overflow_free_.push_back(id);  // capacity reserved with the buffer
  } else if (kernel_ring_ != nullptr) {
    offer_to_ring(id);
  } else {
    free_.push_back(id);  // capacity reserved
  }
}

void receive_pool::recycle(std::uint32_t id) noexcept {
  if (ctx_.running_here() || !ctx_.running_elsewhere()) {
    give_back(id);
    return;
  }
  // The ring and the stack are the loop's: hand the buffer over. One pooled block, only on this path.
  ctx_.post([this, id] { give_back(id); });
}

void receive_pool::push(queue& q, std::uint32_t id, std::uint32_t len) noexcept {
  slot& s = meta(id);
  s.next = none;
  s.len = len;
  if (q.tail == none) {
    q.head = id;
  } else {
    meta(q.tail).next = id;
  }
  q.tail = id;
}

std::uint32_t receive_pool::pop(queue& q, std::uint32_t& len) noexcept {
  const std::uint32_t id = q.head;
  const slot& s = meta(id);
  len = s.len;
  q.head = s.next;
  if (q.head == none) q.tail = none;
  return id;
}

void receive_pool::drop(queue& q) noexcept {
  while (!q.empty()) {
    std::uint32_t len;
    give_back(pop(q, len));
  }
}

}  // namespace tern::detail
