// tern/detail/frame_pool.hpp
//
// Per-thread size-class pool for coroutine frames and other short-lived runtime blocks.
//
// Why: a coroutine frame per task and a block per posted handler would otherwise cost a malloc/free pair each
// (20-40 ns, plus contention in multi-threaded allocators). Frames come in few sizes, so a free list per size
// class makes allocation a pointer pop once the pool is warm: no malloc in steady state.
//
// The classes are the sizes glibc's malloc serves without waste: its chunks are 16-byte multiples with an 8-byte
// header, so a request of 16k + 8 bytes fills a chunk exactly, and the classes are 24, 40, 56, ... bytes. A block
// is what a waiting task costs (an idle connection holds its frame and its spawn state): 64-byte classes left up
// to 63 bytes of each unused, 32-byte classes up to 31 plus the chunk's own rounding; these leave none beyond the
// header. More classes cost only their per-thread bookkeeping (3.5 KiB).
//
// Invariants:
// - A block is returned with the size it was allocated with (coroutine promises get the frame size back in
//   operator delete, and every other user knows its size statically).
// - A block may be freed on another thread than the one that allocated it; it then joins the freeing thread's
//   lists. Lists are strictly thread-local, so no atomics are needed. Each list keeps at most the larger of
//   max_cached_bytes and the blocks of its class the thread has brought in from operator new (what its own bursts
//   needed, up to max_burst_bytes), and hands the rest back to operator delete: a thread that only consumes what
//   another produces (posts from a producer thread) does not hoard memory without bound, and a thread's own bursts
//   are served from the pool when they come again. That bookkeeping is done where a block comes from or goes to
//   operator new/delete, never on a pop or a push: taking a cached block is a pop and two decrements.
// - Blocks larger than the largest class go straight to operator new/delete.
// - A thread's cached blocks are released when the thread exits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

namespace tern::detail {

class frame_pool {
 public:
  static constexpr std::size_t granularity = 16;
  static constexpr std::size_t class_count = 128;  // classes up to 2 KiB
  // The size of class c's blocks: 24 + 16c, what a malloc chunk of 32 + 16c bytes holds.
  static constexpr std::size_t class_size(std::size_t c) noexcept { return 24 + granularity * c; }
  static constexpr std::size_t max_pooled = 24 + granularity * (class_count - 1);  // class_size(class_count - 1)
  // Each size class may cache this many bytes per thread whatever the thread's own use (so a thread that only
  // frees what others allocated holds at most this), and more up to the thread's own high-water mark.
  static constexpr std::size_t max_cached_bytes = std::size_t{32} << 20;
  static constexpr std::uint32_t max_cached(std::size_t c) noexcept {
    return static_cast<std::uint32_t>(max_cached_bytes / class_size(c));
  }

  // The hard ceiling of a list grown by the thread's own bursts (a thread whose frees are mostly of blocks that
  // other threads allocated can show a high "peak" without having needed it at once).
  static constexpr std::size_t max_burst_bytes = std::size_t{256} << 20;
  static constexpr std::uint32_t max_burst_cached(std::size_t c) noexcept {
    return static_cast<std::uint32_t>(max_burst_bytes / class_size(c));
  }

  struct free_block {
    free_block* next;
  };
  // Trivially constructible so that thread-local access needs no initialisation guard on the hot path; the
  // cleanup at thread exit is registered on the first refill instead.
  struct lists {
    free_block* heads[class_count];
    std::uint32_t counts[class_count];
    // Blocks of each class this thread has brought in from operator new, never decreased: what the thread has
    // needed at once at most (it refills only when its list is empty). A list may keep that many blocks even past
    // max_cached (a burst of a million tasks is served from the pool the next time), while a thread that only
    // frees what others allocated stays bounded by max_cached. Counted on the refill path, not on every block.
    std::int64_t grown[class_count];
    // Blocks brought in from operator new less those handed back to operator delete, over all classes (slow
    // paths only), and the cached free blocks (the sum of counts): blocks in use are their difference, so that
    // usage() is two loads (a loop publishes it each time it parks, io_context::publish_gauges, which is every
    // round trip of a ping-pong) and the fast paths keep one counter.
    std::int64_t owned_total;
    std::uint64_t cached_total;
    bool cleanup_armed;  // the thread-exit release is registered
  };

  // Returns a block of at least n bytes aligned for any fundamental type.
  static void* allocate(std::size_t n) {
    if (n > max_pooled) return ::operator new(n);
    std::size_t c = class_of(n);
    lists& l = local();
    free_block* b = l.heads[c];
    if (b != nullptr) {
      l.heads[c] = b->next;
      --l.counts[c];
      --l.cached_total;
      return b;
    }
    return refill(c);
  }

  // How many blocks of n's class the calling thread has cached.
  static std::uint32_t cached(std::size_t n) noexcept;
  // The calling thread's blocks of every class taken and not given back (net: a thread that frees blocks other
  // threads took can go below zero), and its cached free blocks (metrics).
  static void usage(std::int64_t& in_use, std::uint64_t& cached) noexcept;
  // Fills this thread's list of every class with about bytes_per_class bytes of blocks (at most what a list may
  // keep), each written once so that its pages are in memory: later allocations of those sizes are pops.
  static void warm(std::size_t bytes_per_class);
  // Puts a chain of blocks (first..last, linked through their first word, count of them) of n's class into the
  // calling thread's cache, as if this thread had freed them.
  static void adopt(void* first, void* last, std::uint32_t count, std::size_t n) noexcept;

  // Returns a block obtained from allocate(n) with the same n.
  static void deallocate(void* p, std::size_t n) noexcept {
    if (n > max_pooled) {
      ::operator delete(p);
      return;
    }
    std::size_t c = class_of(n);
    lists& l = local();
    // Past max_cached the list keeps only what the thread's own bursts needed; a thread that has only ever freed
    // (blocks posted to it) arms its thread-exit release here.
    if (l.counts[c] >= max_cached(c) || !l.cleanup_armed) [[unlikely]] {
      if (!keep(l, c)) {
        --l.owned_total;
        ::operator delete(p);
        return;
      }
    }
    auto* b = static_cast<free_block*>(p);
    b->next = l.heads[c];
    l.heads[c] = b;
    ++l.counts[c];
    ++l.cached_total;
  }

 private:
  static constexpr std::size_t class_of(std::size_t n) noexcept {
    return n <= class_size(0) ? 0 : (n - class_size(0) + granularity - 1) / granularity;
  }

  static void* refill(std::size_t c);  // slow path: registers thread-exit cleanup, then allocates
  static void keep_until_thread_exit() noexcept;  // registers the thread-exit cleanup
  // Slow path of deallocate: whether a block of class c joins the list (else it goes to operator delete).
  static bool keep(lists& l, std::size_t c) noexcept;

  // The calling thread's lists. These functions are inlined into coroutine bodies, and a coroutine can resume on
  // another thread (runtime::switch_to): a plain thread_local access inlined there may have its address computed
  // once and kept across a suspension point, which would then touch the old thread's lists. On x86-64 the address
  // is computed inline by one volatile asm statement (the variable's offset from the thread pointer, plus the
  // thread pointer), which is neither hoisted nor reused, as io_context::current() reads the loop; elsewhere an
  // out-of-line call, made afresh each time.
  static lists& local() noexcept;
  friend struct frame_pool_cleanup;
};

#if defined(__x86_64__)
// frame_pool.cpp defines the lists under this assembler name, initial-exec like io_context::current()'s.
inline frame_pool::lists& frame_pool::local() noexcept {
  lists* l;
  asm volatile("movq tern_frame_pool_lists@gottpoff(%%rip), %0\n\taddq %%fs:0, %0" : "=r"(l));
  return *l;
}
#define TERN_FRAME_POOL_LOCAL_INLINE 1
#endif

// Allocator adaptor for coroutine promise types: inherit to put the frame in the pool.
struct pooled_frame {
  static void* operator new(std::size_t n) { return frame_pool::allocate(n); }
  static void operator delete(void* p, std::size_t n) noexcept { frame_pool::deallocate(p, n); }
};

}  // namespace tern::detail
