// Slow path of the frame pool: first use on a thread, and release of the cached blocks at thread exit.
#include "tern/detail/frame_pool.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace tern::detail {

// The assembler name is what the inline frame_pool::local() refers to; external linkage for that reference.
constinit thread_local frame_pool::lists thread_lists asm("tern_frame_pool_lists"){};

#ifndef TERN_FRAME_POOL_LOCAL_INLINE
frame_pool::lists& frame_pool::local() noexcept { return thread_lists; }
#endif

struct frame_pool_cleanup {
  bool armed = false;
  ~frame_pool_cleanup() {
    for (auto& head : thread_lists.heads) {
      while (head != nullptr) {
        frame_pool::free_block* next = head->next;
        ::operator delete(head);
        head = next;
      }
    }
    for (auto& count : thread_lists.counts) count = 0;
    thread_lists.owned_total -= static_cast<std::int64_t>(thread_lists.cached_total);
    thread_lists.cached_total = 0;
  }
};

void frame_pool::keep_until_thread_exit() noexcept {
  // A thread_local with a destructor is registered on first use; touching it here keeps that cost off the fast
  // path (this runs when a list goes from empty to non-empty, and on refills).
  static thread_local frame_pool_cleanup cleanup;
  cleanup.armed = true;
  thread_lists.cleanup_armed = true;
}

std::uint32_t frame_pool::cached(std::size_t n) noexcept { return thread_lists.counts[class_of(n)]; }

void frame_pool::usage(std::int64_t& in_use, std::uint64_t& cached) noexcept {
  in_use = thread_lists.owned_total - static_cast<std::int64_t>(thread_lists.cached_total);
  cached = thread_lists.cached_total;
}

void frame_pool::adopt(void* first, void* last, std::uint32_t count, std::size_t n) noexcept {
  const std::size_t c = class_of(n);
  if (!thread_lists.cleanup_armed) keep_until_thread_exit();
  static_cast<free_block*>(last)->next = thread_lists.heads[c];
  thread_lists.heads[c] = static_cast<free_block*>(first);
  thread_lists.counts[c] += count;
  thread_lists.cached_total += count;
}

void frame_pool::warm(std::size_t bytes_per_class) {
  std::vector<void*> blocks;
  for (std::size_t c = 0; c < class_count; ++c) {
    const std::size_t size = class_size(c);
    const std::size_t want = std::min<std::size_t>(std::max<std::size_t>(1, bytes_per_class / size),
                                                   max_burst_cached(c));
    blocks.clear();
    for (std::size_t i = 0; i < want; ++i) {
      void* b = allocate(size);
      std::memset(b, 0, size);  // fault its pages in now
      blocks.push_back(b);
    }
    // The blocks just brought in from operator new let the list keep all of them.
    for (void* b : blocks) deallocate(b, size);
  }
}

void* frame_pool::refill(std::size_t c) {
  if (!thread_lists.cleanup_armed) keep_until_thread_exit();
  void* b = ::operator new(class_size(c));
  ++thread_lists.grown[c];
  ++thread_lists.owned_total;
  return b;
}

bool frame_pool::keep(lists& l, std::size_t c) noexcept {
  if (!l.cleanup_armed) keep_until_thread_exit();
  return l.counts[c] < max_cached(c) || (l.counts[c] < l.grown[c] && l.counts[c] < max_burst_cached(c));
}

}  // namespace tern::detail
