// tern/detail/receive_pool.hpp
//
// The loop's pool of receive buffers, which receive() fills and leases to the caller (leased_buffer).
//
// Why a pool: a connection that waits for data should hold no buffer of its own. Under io_uring the pool is a
// provided-buffer ring (IORING_REGISTER_PBUF_RING): the kernel picks a buffer only when bytes arrive, and a
// multishot receive keeps one armed receive per socket for as long as data flows, with no SQE per read. Under
// epoll the pool is a stack of free buffers, taken when readiness says there is something to read and given back
// at once if the read finds nothing.
//
// Buffers are numbered. The pool's memory comes in chunks of `chunk` buffers, mapped when the pool grows (pages
// nobody has written are not resident, so an idle pool costs address space, not memory): buffer i lives in chunk
// i / chunk. The pool starts with one chunk and grows by one when it runs dry, up to max_buffers. Past that, a
// receive still makes progress: it reads into an overflow buffer from the heap (kept for reuse, and counted), so
// a pool that every connection's reader is holding never turns into a silent hang.
//
// A buffer is in one of four places: free (in the kernel's ring, or on the epoll stack), queued on a socket
// (filled by a multishot receive before anyone asked for it: linked through next_ in arrival order), leased to a
// caller, or being filled. recycle() puts one back; from a thread that does not run the loop it is posted there.
//
// The kernel's ring is sized to the pool, not to max_buffers: the kernel pins a ring's pages whole when it is
// registered, and a ring for 4096 buffers is 64 KiB that a loop with a few hundred idle connections never fills
// (as much as 64 bytes per connection at 1000). It starts with a page's worth of entries (256) and is moved to
// a larger one when the pool grows past it. Buffers that the ring has no room for wait on the free stack (the
// spill) until the move, which the backend makes between two turns of the loop (move_kernel_ring): then no
// completion can name a buffer of the old ring that the loop has not handled yet. Until then the ring takes
// nothing new, so no entry of the old ring is written over while a completion may still read it (ring_length).
//
// The kernel takes buffers from its ring in the order they were added, and a bundled receive (io_uring's
// IORING_RECVSEND_BUNDLE) fills several in one completion that names only the first. So the pool remembers the
// ring's order: each buffer added links to the one added after it (ring_next), and a completion's buffers are its
// first one and those that follow it. The link of a buffer is only rewritten when it is added again, which needs
// the completion that took it to have been handled first, so completions handled out of order still find theirs.
//
// Loop thread only, except recycle().
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tern {
class io_context;
}

namespace tern::detail {

class receive_pool {
 public:
  static constexpr std::uint32_t none = ~std::uint32_t{0};
  // Buffer numbers from here on are overflow buffers (heap), outside the kernel ring.
  static constexpr std::uint32_t overflow_base = std::uint32_t{1} << 30;
  // The kernel's limit on a provided-buffer ring (and the 16-bit buffer id of a CQE).
  static constexpr std::uint32_t max_ring_entries = 32768;

  receive_pool(io_context& ctx, std::size_t buffer_size, std::uint32_t initial_buffers, std::uint32_t max_buffers);
  ~receive_pool();
  receive_pool(const receive_pool&) = delete;
  receive_pool& operator=(const receive_pool&) = delete;

  std::size_t buffer_size() const noexcept { return size_; }
  std::uint32_t capacity() const noexcept { return count_; }           // buffers mapped so far
  std::uint32_t max_buffers() const noexcept { return max_; }
  io_context& context() const noexcept { return ctx_; }

  char* address(std::uint32_t id) const noexcept {
    if (id >= overflow_base) return overflow_[id - overflow_base];
    return chunks_[id >> chunk_shift_] + static_cast<std::size_t>(id & (chunk_ - 1)) * size_;
  }

  // ---- Under epoll (and for io_uring's fallback): the free stack. ----
  // A free buffer, growing the pool if it is empty; none when it is at max_buffers and empty.
  std::uint32_t take() noexcept;
  // No free buffer on the stack (the next take() grows the pool, or fails at max_buffers).
  bool stack_empty() const noexcept { return free_.empty(); }
  // An overflow buffer (heap; reused once given back). none only if the heap refuses.
  std::uint32_t take_overflow() noexcept;

  // Gives a buffer back: to the kernel's ring if it feeds one, else to the free stack. Any thread.
  void recycle(std::uint32_t id) noexcept;

  // ---- The kernel's ring (io_uring). ----
  // The io_uring backend maps and registers the ring, then hands it over; the pool fills it with every free
  // buffer and refills it on each recycle(). ring is an io_uring_buf_ring of `entries` (a power of two).
  void feed_kernel_ring(void* ring, std::uint32_t entries, std::uint16_t group) noexcept;
  // The ring's registration is gone (the ring was destroyed): the pool keeps its memory, feeds nothing more.
  void forget_kernel_ring() noexcept { kernel_ring_ = nullptr; }
  // The entries a ring needs to hold every buffer the pool has, and at least a page of them (the kernel pins
  // whole pages), up to what max_buffers needs.
  std::uint32_t ring_entries_wanted() const noexcept;
  // The pool has more buffers than its ring has entries: the extra ones wait on the stack for a larger ring.
  bool ring_too_small() const noexcept { return kernel_ring_ != nullptr && count_ > ring_entries_; }
  // Whether the kernel's head of the current ring (IORING_REGISTER_PBUF_STATUS) agrees with the pool: the ring
  // then holds exactly the buffers the pool counts in it, from head to tail.
  bool ring_matches(std::uint16_t head) const noexcept;
  // Moves the buffers of the current ring (from the kernel's head on, in order) and those waiting on the stack
  // to `ring` of `entries`, which the backend has registered under the same group in place of the current one.
  // Only when no completion that took a buffer is left unhandled, and ring_matches(head). ring may be the
  // current ring's memory (a registration made again).
  void move_kernel_ring(void* ring, std::uint32_t entries, std::uint16_t head) noexcept;
  // The ring is gone and no other could be registered: its buffers and the stack's are lent from the stack (as
  // under epoll), and receives are plain RECVs. head as for move_kernel_ring.
  void leave_kernel_ring(std::uint16_t head) noexcept;
  void* kernel_ring() const noexcept { return kernel_ring_; }
  std::uint32_t kernel_ring_entries() const noexcept { return ring_entries_; }
  std::uint16_t group() const noexcept { return group_; }
  // The kernel took n buffers from the ring (a CQE named the first).
  void kernel_took(std::uint32_t n = 1) noexcept { in_ring_ -= n; }
  // The buffer the kernel's ring held after id (none if nothing was added after it yet).
  std::uint32_t ring_next(std::uint32_t id) const noexcept { return meta_[id].ring_next; }
  // The length of id's entry in the kernel's ring as the kernel left it: buffer_size(), or less where the kernel
  // cut the entry at the ring's head to the bytes it expected (a bundled receive may; only the first buffer of
  // a completion can have been cut). Valid once the kernel has taken id, until id is added again.
  std::size_t ring_length(std::uint32_t id) const noexcept;
  // Buffers waiting in the kernel's ring.
  std::uint32_t in_ring() const noexcept { return in_ring_; }
  // Maps one more chunk (its buffers join the ring or the stack); false at max_buffers, if mmap refuses, or while
  // the ring waits to be moved to a larger one (ring_too_small()).
  bool grow() noexcept;

  // ---- Per-socket queues of filled buffers (a multishot receive's arrivals), linked through the pool. ----
  struct queue {
    std::uint32_t head = none;
    std::uint32_t tail = none;
    bool empty() const noexcept { return head == none; }
  };
  void push(queue& q, std::uint32_t id, std::uint32_t len) noexcept;
  // The oldest buffer of q and its length; q must not be empty.
  std::uint32_t pop(queue& q, std::uint32_t& len) noexcept;
  // Gives back every buffer of q (a socket closed with data nobody read).
  void drop(queue& q) noexcept;

 private:
  struct slot {
    std::uint32_t next = none;       // the next buffer of the socket queue it is on
    std::uint32_t len = 0;           // its bytes, while queued
    std::uint32_t ring_next = none;  // the buffer added to the kernel's ring after it
    std::uint32_t ring_index = 0;    // its entry in the kernel's ring
  };
  slot& meta(std::uint32_t id) noexcept {
    return id >= overflow_base ? overflow_meta_[id - overflow_base] : meta_[id];
  }
  void give_back(std::uint32_t id) noexcept;  // loop thread
  // To the ring, or to the stack while the ring waits for a larger one.
  void offer_to_ring(std::uint32_t id) noexcept;
  void add_to_ring(std::uint32_t id) noexcept;
  // The ids of the current ring from the kernel's head on, in order, onto the stack's top (the first one last,
  // so that it is taken first), and the ring emptied.
  void unload_ring(std::uint16_t head) noexcept;

  io_context& ctx_;
  std::size_t size_;
  std::uint32_t chunk_;        // buffers per chunk, a power of two
  std::uint32_t chunk_shift_;
  std::uint32_t count_ = 0;    // buffers mapped
  std::uint32_t max_;
  std::vector<char*> chunks_;
  std::vector<slot> meta_;
  std::vector<std::uint32_t> free_;  // epoll's free stack; io_uring's spill (reserved to max_)
  std::vector<char*> overflow_;
  std::vector<slot> overflow_meta_;
  std::vector<std::uint32_t> overflow_free_;
  void* kernel_ring_ = nullptr;
  std::uint32_t ring_entries_ = 0;
  std::uint32_t in_ring_ = 0;
  std::uint32_t ring_last_ = none;  // the buffer added to the ring last
  std::uint16_t group_ = 0;
};

}  // namespace tern::detail
