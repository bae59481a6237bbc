// The memory nghttp2 allocates for tern's sessions (see memory.hpp): small blocks from per-thread free lists by size
// class, large ones from malloc.
//
// nghttp2 allocates and frees several small blocks per request (the stream, its header buffers, the outbound items
// of the response); with malloc those were a fifth of a request's instructions (callgrind, the /ping service over
// h2c). A session lives on one loop's thread, so its blocks are taken from and given back to that thread's lists
// without a lock; a block freed on another thread (a session destroyed elsewhere) goes on that thread's lists,
// which is as good. Each block carries its class in a 16-byte header (nghttp2's free() says no size), which keeps
// the 16-byte alignment malloc gives. A list keeps at most 256 blocks or 256 KiB, whichever is more, so what a
// burst took is not held forever: 256 blocks of 256 bytes were too few for 100 streams in flight, whose response
// heads and streams take two or three blocks of that class each, and a quarter of the requests took one from
// malloc.
#include "memory.hpp"

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

namespace tern::http2::detail {

namespace {

constexpr std::size_t header_size = 16;
constexpr std::size_t class_count = 8;  // 64, 128, ..., 8192 bytes, header included
constexpr std::size_t smallest = 64;
constexpr std::size_t largest = smallest << (class_count - 1);
// The blocks each class's list keeps: 4096, 2048, 1024, 512, then 256 (64, 128, 256, 512 bytes, then larger).
constexpr std::uint32_t kept_per_class[class_count] = {4096, 2048, 1024, 512, 256, 256, 256, 256};
constexpr std::size_t large = class_count;  // the class of a block from malloc

struct block_header {
  std::size_t size_class;  // 0..class_count-1, or large
  std::size_t size;        // a large block's usable size (for realloc)
};
static_assert(sizeof(block_header) <= header_size);

// The free blocks of a class are a stack of pointers, not a list linked through the blocks: taking one reads its
// pointer from the stack (whose top is in the cache), not a link from the block itself, which with 100 streams in
// flight had left the cache since it was given back (2.7 L1 misses per request in take, each a load the next
// instruction waited for). The block's first line is written by its new user anyway. A block keeps its header's
// class while it is free, so that taking it writes nothing to it.
struct thread_lists {
  thread_lists();
  ~thread_lists();
  void** top[class_count] = {};     // one past the last free block of each class
  void** bottom[class_count] = {};  // each class's stack, kept_per_class[c] pointers
  std::unique_ptr<void*[]> stacks;  // every class's stack, one allocation
};

constexpr std::size_t stack_slots() noexcept {
  std::size_t n = 0;
  for (std::uint32_t k : kept_per_class) n += k;
  return n;
}

thread_lists::thread_lists() : stacks(std::make_unique_for_overwrite<void*[]>(stack_slots())) {
  void** at = stacks.get();
  for (std::size_t c = 0; c < class_count; ++c) {
    bottom[c] = top[c] = at;
    at += kept_per_class[c];
  }
}

// The thread's lists, through a plain pointer: take and give test it and go on without a call, so that they save
// no register and keep no frame (a thread_local with a destructor is reached through a guard and a call made on
// first use, which cost every call its registers: 20 instructions per request). Null before the thread's first
// use and after its lists are gone (the thread ends): the slow paths see to both.
thread_local constinit thread_lists* current = nullptr;
thread_local constinit bool lists_gone = false;

thread_lists::~thread_lists() {
  current = nullptr;
  lists_gone = true;
  for (std::size_t c = 0; c < class_count; ++c) {
    while (top[c] != bottom[c]) std::free(*--top[c]);
  }
}

// The thread's lists, made on its first use; null once they are gone, or when their stacks could not be made.
thread_lists* lists() {
  if (current == nullptr && !lists_gone) {
    try {
      thread_local thread_lists l;
      current = &l;
    } catch (const std::bad_alloc&) {
      return nullptr;  // blocks come from malloc and go back to it (a later call tries again)
    }
  }
  return current;
}

// The smallest class whose blocks hold total bytes (at most largest): from the highest bit of total - 1, not a
// loop over the classes (nghttp2 takes six blocks per request, of up to a few KiB).
std::size_t class_of(std::size_t total) noexcept {
  if (total <= smallest) return 0;
  return static_cast<std::size_t>(std::bit_width(total - 1)) - std::bit_width(smallest - 1);
}

void* to_user(void* raw) noexcept { return static_cast<char*>(raw) + header_size; }
block_header* header_of(void* user) noexcept {
  return reinterpret_cast<block_header*>(static_cast<char*>(user) - header_size);
}

// A large block, or one of a class whose stack is empty (or gone).
[[gnu::noinline]] void* take_slow(std::size_t size) {
  const std::size_t total = size + header_size;
  if (total > largest) {
    void* raw = std::malloc(total);
    if (raw == nullptr) return nullptr;
    *static_cast<block_header*>(raw) = {large, size};
    return to_user(raw);
  }
  const std::size_t c = class_of(total);
  if (thread_lists* l = lists(); l != nullptr && l->top[c] != l->bottom[c]) return to_user(*--l->top[c]);
  void* raw = std::malloc(smallest << c);
  if (raw == nullptr) return nullptr;
  *static_cast<block_header*>(raw) = {c, 0};
  return to_user(raw);
}

void* take(std::size_t size, void*) {
  const std::size_t total = size + header_size;
  thread_lists* l = current;
  if (l != nullptr && total <= largest) [[likely]] {
    const std::size_t c = class_of(total);
    if (l->top[c] != l->bottom[c]) [[likely]] return to_user(*--l->top[c]);
  }
  return take_slow(size);
}

// A large block, one whose stack is full, or a thread whose lists are not made yet (or gone).
[[gnu::noinline]] void give_slow(block_header* h) {
  const std::size_t c = h->size_class;
  thread_lists* l = lists();
  if (c == large || l == nullptr || l->top[c] == l->bottom[c] + kept_per_class[c]) {
    std::free(h);
    return;
  }
  *l->top[c]++ = h;  // its class stays in its header
}

void give(void* user, void*) {
  if (user == nullptr) return;
  block_header* h = header_of(user);
  const std::size_t c = h->size_class;
  thread_lists* l = current;
  if (l != nullptr && c != large && l->top[c] != l->bottom[c] + kept_per_class[c]) [[likely]] {
    *l->top[c]++ = h;  // its class stays in its header
    return;
  }
  give_slow(h);
}

void* take_zeroed(std::size_t n, std::size_t size, void* user) {
  if (size != 0 && n > (~std::size_t{0} - header_size) / size) return nullptr;
  void* p = take(n * size, user);
  if (p != nullptr) std::memset(p, 0, n * size);
  return p;
}

std::size_t usable(void* user) noexcept {
  const block_header* h = header_of(user);
  return h->size_class == large ? h->size : (smallest << h->size_class) - header_size;
}

void* retake(void* user, std::size_t size, void* data) {
  if (user == nullptr) return take(size, data);
  if (size <= usable(user)) return user;
  void* bigger = take(size, data);
  if (bigger == nullptr) return nullptr;
  std::memcpy(bigger, user, usable(user));
  give(user, data);
  return bigger;
}

nghttp2_mem pooled{nullptr, &take, &give, &take_zeroed, &retake};

}  // namespace

nghttp2_mem* pooled_memory() noexcept {
#if defined(__SANITIZE_ADDRESS__)
  return nullptr;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return nullptr;
#endif
#endif
  return &pooled;
}

}  // namespace tern::http2::detail
