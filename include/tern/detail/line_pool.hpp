// tern/detail/line_pool.hpp
//
// line_pool: 64-byte blocks, one cache line each, carved from 16 KiB slabs, for the handlers that threads post to
// a loop they do not run (io_context::post from outside the loop).
//
// Why not the frame pool: a thread that posts to a loop which runs behind needs a fresh block per post until the
// loop catches up, and the loop hands blocks back only as it runs them. With one operator new per block (the
// frame pool's refill), many posting threads contended on malloc's arenas and their growth (mprotect under the
// mmap lock), and each 64-byte block took 80 bytes over two cache lines: dispatch/cross_thread at 20 producers ran
// 9-12M posts/s. From slabs, one allocation serves 255 blocks, each on its own line: 50-56M in the same run.
// The frame pool keeps one allocation per block: its classes serve coroutine frames and spawn states, for which
// slabs were measured slower (coro/spawn 1M tasks: 32 ns per task became 55; a frame and its spawn state no
// longer sit side by side).
//
// Rules:
// - Per-thread free list, no atomics on allocate/deallocate. A block may be freed on any thread; it joins that
//   thread's list.
// - A block from a slab never goes to operator delete. What a thread does not keep (past max_cached blocks, or
//   all of it when the thread exits) goes to a process-wide depot under a mutex, in batches, and refills take from
//   the depot before they carve a new slab.
// - Slabs are kept for the life of the process: at most the peak number of blocks in use at once, reused, never
//   returned to the system (and always reachable from the depot, so leak checkers do not report them).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::detail {

class line_pool {
 public:
  static constexpr std::size_t block_size = 64;
  static constexpr std::size_t slab_bytes = std::size_t{16} << 10;
  // Blocks per slab: the slab's first line links it to the others.
  static constexpr std::size_t blocks_per_slab = slab_bytes / block_size - 1;
  // A thread keeps at most this many (8 MiB); the rest goes to the depot.
  static constexpr std::uint32_t max_cached = std::uint32_t{1} << 17;

  struct free_block {
    free_block* next;
  };
  // Trivially constructible, so that thread-local access needs no initialisation guard on the hot path.
  struct lists {
    free_block* head;
    std::uint32_t count;
    bool cleanup_armed;  // the thread-exit hand-over to the depot is registered
  };

  // A 64-byte block aligned to a cache line.
  static void* allocate() {
    lists& l = local();
    free_block* b = l.head;
    if (b != nullptr) [[likely]] {
      l.head = b->next;
      --l.count;
      return b;
    }
    return refill();
  }

  // Gives back a block from allocate(), on any thread.
  static void deallocate(void* p) noexcept {
    lists& l = local();
    if (l.count >= max_cached) [[unlikely]] spill();
    if (!l.cleanup_armed) [[unlikely]] arm();
    auto* b = static_cast<free_block*>(p);
    b->next = l.head;
    l.head = b;
    ++l.count;
  }

  // How many blocks the calling thread holds.
  static std::uint32_t cached() noexcept;
  // Puts a chain of count blocks (first..last, linked through their first word) into the calling thread's list.
  static void adopt(void* first, void* last, std::uint32_t count) noexcept;
  // Blocks in the depot now (a snapshot; for tests).
  static std::size_t depot_size() noexcept;

 private:
  // Out of line, like frame_pool::local: a coroutine may resume on another thread, and an inlined thread_local
  // address could be kept across the suspension.
  static lists& local() noexcept;
  static void* refill();          // from the depot, else a new slab
  static void spill() noexcept;   // a batch of this thread's list to the depot
  static void arm() noexcept;     // registers the thread-exit hand-over
  friend struct line_pool_cleanup;
};

}  // namespace tern::detail
