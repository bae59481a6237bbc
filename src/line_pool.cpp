// The slow paths of detail::line_pool (tern/detail/line_pool.hpp): refills, the depot, and the hand-over at
// thread exit.
#include "tern/detail/line_pool.hpp"

#include <mutex>
#include <new>

namespace tern::detail {

namespace {

constinit thread_local line_pool::lists thread_list{};

// Blocks no thread holds, and every slab (linked through their first line; never freed). Trivially
// destructible, so a thread that exits after static destruction can still hand its blocks over.
struct depot_state {
  std::mutex mutex;
  line_pool::free_block* head = nullptr;
  std::size_t count = 0;
  void* slabs = nullptr;
};
constinit depot_state depot;

// Blocks moved between a thread and the depot at once: the lock is taken once per thousands of blocks, and the
// walk that cuts the batch stays short.
constexpr std::uint32_t depot_batch = 4096;

// Detaches up to n blocks from the front of head; returns the first, sets last and taken.
line_pool::free_block* cut_front(line_pool::free_block*& head, std::uint32_t n, line_pool::free_block*& last,
                                 std::uint32_t& taken) noexcept {
  line_pool::free_block* first = head;
  last = head;
  taken = 1;
  while (taken < n && last->next != nullptr) {
    last = last->next;
    ++taken;
  }
  head = last->next;
  last->next = nullptr;
  return first;
}

}  // namespace

line_pool::lists& line_pool::local() noexcept { return thread_list; }

std::uint32_t line_pool::cached() noexcept { return thread_list.count; }

std::size_t line_pool::depot_size() noexcept {
  std::lock_guard<std::mutex> g(depot.mutex);
  return depot.count;
}

struct line_pool_cleanup {
  ~line_pool_cleanup() {
    line_pool::lists& l = thread_list;
    if (l.head == nullptr) return;
    line_pool::free_block* last = l.head;
    while (last->next != nullptr) last = last->next;
    std::lock_guard<std::mutex> g(depot.mutex);
    last->next = depot.head;
    depot.head = l.head;
    depot.count += l.count;
    l.head = nullptr;
    l.count = 0;
  }
};

void line_pool::arm() noexcept {
  // A thread_local with a destructor is registered on first use; touching it here keeps that off the fast path.
  static thread_local line_pool_cleanup cleanup;
  (void)cleanup;
  thread_list.cleanup_armed = true;
}

void line_pool::adopt(void* first, void* last, std::uint32_t count) noexcept {
  lists& l = thread_list;
  if (!l.cleanup_armed) arm();
  static_cast<free_block*>(last)->next = l.head;
  l.head = static_cast<free_block*>(first);
  l.count += count;
}

void* line_pool::refill() {
  lists& l = thread_list;
  if (!l.cleanup_armed) arm();
  {
    std::lock_guard<std::mutex> g(depot.mutex);
    if (depot.head != nullptr) {
      free_block* last;
      std::uint32_t taken;
      free_block* first = cut_front(depot.head, depot_batch, last, taken);
      depot.count -= taken;
      last->next = l.head;
      l.head = first->next;
      l.count += taken - 1;
      return first;
    }
  }
  auto* slab = static_cast<char*>(::operator new(slab_bytes, std::align_val_t{block_size}));
  // Blocks in address order, the first one returned.
  for (std::size_t i = blocks_per_slab; i >= 2; --i) {
    auto* b = reinterpret_cast<free_block*>(slab + i * block_size);
    b->next = l.head;
    l.head = b;
  }
  l.count += static_cast<std::uint32_t>(blocks_per_slab - 1);
  {
    std::lock_guard<std::mutex> g(depot.mutex);
    *reinterpret_cast<void**>(slab) = depot.slabs;
    depot.slabs = slab;
  }
  return slab + block_size;
}

void line_pool::spill() noexcept {
  lists& l = thread_list;
  free_block* last;
  std::uint32_t taken;
  free_block* first = cut_front(l.head, depot_batch, last, taken);
  l.count -= taken;
  std::lock_guard<std::mutex> g(depot.mutex);
  last->next = depot.head;
  depot.head = first;
  depot.count += taken;
}

}  // namespace tern::detail
