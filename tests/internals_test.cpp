// Internal structures whose layout was bent to save the bytes an idle connection holds (docs/design.md, "What waits
// in an idle connection is sized to its chunk"): the descriptor's list of pending operations, which has no tail
// pointer (the head's prev_pending is the last operation), the close item that finds its descriptor by offset, and
// the frame pool, whose size classes follow malloc's chunks and whose totals are kept as blocks come and go. No
// loop and no kernel: these are data structures, tested as such.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tern/detail/frame_pool.hpp"
#include "tern/detail/io_op.hpp"

namespace {

using tern::detail::descriptor;
using tern::detail::frame_pool;
using tern::detail::io_op;

// The operations of d, head to last, as next_pending links them; and checks the backward links on the way: each
// op's prev_pending is the one before it, and the head's is the last.
std::vector<io_op*> pending_of(const descriptor& d) {
  std::vector<io_op*> ops;
  for (io_op* op = d.pending_head; op != nullptr; op = op->next_pending) {
    if (!ops.empty()) {
      EXPECT_EQ(op->prev_pending, ops.back());
    }
    ops.push_back(op);
  }
  if (!ops.empty()) {
    EXPECT_EQ(d.pending_head->prev_pending, ops.back()) << "the head names the last operation";
  }
  return ops;
}

TEST(descriptor_pending, keeps_the_start_order_through_unlinks_anywhere) {
  descriptor d;
  io_op a, b, c, e, f;
  EXPECT_FALSE(d.has_pending());
  d.link(&a);
  EXPECT_EQ(pending_of(d), (std::vector<io_op*>{&a}));
  d.link(&b);
  d.link(&c);
  d.link(&e);
  EXPECT_EQ(pending_of(d), (std::vector<io_op*>{&a, &b, &c, &e}));

  d.unlink(&b);  // from the middle
  EXPECT_EQ(pending_of(d), (std::vector<io_op*>{&a, &c, &e}));
  EXPECT_EQ(b.prev_pending, nullptr);
  EXPECT_EQ(b.next_pending, nullptr);

  d.unlink(&e);  // the last: the head must now name c
  EXPECT_EQ(pending_of(d), (std::vector<io_op*>{&a, &c}));
  d.link(&f);    // appended after c, not after the unlinked e
  EXPECT_EQ(pending_of(d), (std::vector<io_op*>{&a, &c, &f}));

  d.unlink(&a);  // the head: c becomes the head and keeps f as the last
  EXPECT_EQ(pending_of(d), (std::vector<io_op*>{&c, &f}));
  d.unlink(&f);
  EXPECT_EQ(pending_of(d), (std::vector<io_op*>{&c}));
  d.unlink(&c);  // the only one
  EXPECT_EQ(d.pending_head, nullptr);
  EXPECT_FALSE(d.has_pending());

  d.link(&e);    // an emptied list starts over
  d.link(&a);
  EXPECT_EQ(pending_of(d), (std::vector<io_op*>{&e, &a}));
}

TEST(descriptor_close_item, finds_its_descriptor_by_offset) {
  std::vector<descriptor> ds(3);
  for (descriptor& d : ds) EXPECT_EQ(descriptor::of(&d.close_item), &d);
  // What every connection pays: a 112-byte malloc chunk (glibc: 16-byte steps, an 8-byte header).
  EXPECT_LE(sizeof(descriptor), 104u);
}

TEST(frame_pool_classes, each_fills_a_malloc_chunk_and_fits_its_sizes) {
  // A class of 16k + 8 bytes fills a glibc chunk of 16k + 16 exactly.
  for (std::size_t c = 0; c < frame_pool::class_count; ++c) EXPECT_EQ(frame_pool::class_size(c) % 16, 8u) << c;
  EXPECT_EQ(frame_pool::class_size(frame_pool::class_count - 1), frame_pool::max_pooled);
  EXPECT_GE(frame_pool::max_pooled, 2048u);
  // Every size is served by the smallest class that holds it: at each boundary b (a class's size), a block of b
  // bytes goes back to b's list, and one of b + 1 to the next class's list, the one of b + 16.
  for (std::size_t b : {24u, 40u, 232u, 248u, 2040u}) {
    void* at = frame_pool::allocate(b);
    void* past = frame_pool::allocate(b + 1);
    const std::uint32_t own = frame_pool::cached(b);
    const std::uint32_t next = frame_pool::cached(b + 16);
    frame_pool::deallocate(past, b + 1);
    EXPECT_EQ(frame_pool::cached(b), own) << b + 1 << " bytes must not go to the " << b << "-byte class";
    EXPECT_EQ(frame_pool::cached(b + 16), next + 1) << b + 1;
    frame_pool::deallocate(at, b);
    EXPECT_EQ(frame_pool::cached(b), own + 1) << b;
    EXPECT_EQ(frame_pool::cached(b + 16), next + 1) << b;
  }
  // Sizes below the first class share it.
  void* tiny = frame_pool::allocate(1);
  const std::uint32_t first = frame_pool::cached(24);
  frame_pool::deallocate(tiny, 1);
  EXPECT_EQ(frame_pool::cached(24), first + 1);
}

TEST(frame_pool_usage, follows_blocks_taken_freed_and_adopted) {
  std::int64_t in_use0 = 0;
  std::uint64_t cached0 = 0;
  frame_pool::usage(in_use0, cached0);

  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t n : {24u, 100u, 100u, 500u, 1500u}) blocks.emplace_back(frame_pool::allocate(n), n);
  std::int64_t in_use = 0;
  std::uint64_t cached = 0;
  frame_pool::usage(in_use, cached);
  EXPECT_EQ(in_use, in_use0 + 5);

  for (auto [p, n] : blocks) frame_pool::deallocate(p, n);
  frame_pool::usage(in_use, cached);
  EXPECT_EQ(in_use, in_use0);
  EXPECT_GE(cached, 5u) << "the freed blocks are cached";

  // Taking a cached block moves one from cached to in use.
  std::uint64_t cached_before = cached;
  void* p = frame_pool::allocate(100);
  frame_pool::usage(in_use, cached);
  EXPECT_EQ(in_use, in_use0 + 1);
  EXPECT_EQ(cached, cached_before - 1);

  // adopt() takes in a chain freed elsewhere: cached by its count, in use down by as much.
  void* q = frame_pool::allocate(100);
  static_cast<frame_pool::free_block*>(p)->next = static_cast<frame_pool::free_block*>(q);
  frame_pool::usage(in_use, cached_before);
  frame_pool::adopt(p, q, 2, 100);
  frame_pool::usage(in_use, cached);
  EXPECT_EQ(in_use, in_use0);
  EXPECT_EQ(cached, cached_before + 2);
}

}  // namespace
