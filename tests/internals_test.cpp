// Internal structures whose layout was bent to save the bytes an idle connection holds (docs/design.md, "What waits
// in an idle connection is sized to its chunk"): the descriptor's list of pending operations, which has no tail
// pointer (the head's prev_pending is the last operation), the close item that finds its descriptor by offset, and
// the frame pool, whose size classes follow malloc's chunks and whose totals are kept as blocks come and go; and the
// loop's run queue, a ring of slots that wraps and grows. No loop and no kernel: these are data structures, tested
// as such.
#include <gtest/gtest.h>

#include <algorithm>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <vector>

#include "tern/detail/frame_pool.hpp"
#include "tern/detail/io_op.hpp"
#include "tern/detail/run_ring.hpp"
#include "tern/detail/timer_wheel.hpp"

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

// ---- the loop's run queue (detail/run_ring.hpp) ----

using tern::detail::run_ring;
using tern::detail::run_slot;
using tern::detail::work_item;

// A handler that fits a slot (two words, trivially copyable): it records its value.
struct record {
  std::vector<int>* out;
  int value;
  void operator()() const { out->push_back(value); }
};
static_assert(tern::detail::fits_run_slot<record>);

// A work item that records its value when run.
struct recording_item : work_item {
  std::vector<int>* out = nullptr;
  int value = 0;
  recording_item() { run = &ran; }
  static void ran(work_item* w) {
    auto* self = static_cast<recording_item*>(w);
    self->out->push_back(self->value);
  }
};

// Runs the next slot, taken with pop() or (loop) as the run loop takes it, with pop_or_wrap(), whose slot may be
// the sentinel that wraps and runs the first slot: either way exactly one queued item runs.
void run_one(run_ring& q, bool loop = false) {
  ASSERT_FALSE(q.empty());
  const run_slot s = loop ? q.pop_or_wrap() : q.pop();
  s.run(s.a, s.b);
}

// Pushes and pops in uneven waves, so that the write position wraps past the end many times, and the ring fills up
// and grows while it is wrapped (the queued slots then lie in two pieces); handlers in slots and work items are
// mixed, and everything comes out once, in the order it went in.
TEST(run_ring, keeps_the_order_through_wraps_and_growth) {
 for (const bool loop : {false, true}) {
  SCOPED_TRACE(loop ? "pop_or_wrap" : "pop");
  run_ring q;
  std::vector<int> out;
  std::vector<recording_item> items(100000);
  int next = 0;
  int expected_next = 0;
  std::size_t queued = 0;
  for (int wave = 0; wave < 60; ++wave) {
    const int pushes = 37 + (wave * 53) % 301;  // up to 337: more than the 128 slots a ring starts with
    for (int i = 0; i < pushes; ++i, ++next) {
      if (next % 3 == 0) {
        items[next].out = &out;
        items[next].value = next;
        q.push_item(&items[next]);
      } else {
        q.push_handler(record{&out, next});
      }
    }
    queued += static_cast<std::size_t>(pushes);
    ASSERT_EQ(q.size(), queued);
    const int pops = wave % 4 == 3 ? static_cast<int>(queued) : pushes - 20 + (wave * 7) % 41;
    for (int i = 0; i < pops && !q.empty(); ++i, --queued) run_one(q, loop && i % 5 != 4);
    ASSERT_EQ(q.size(), queued);
    ASSERT_EQ(out.size(), static_cast<std::size_t>(next) - queued) << "one item per slot run, wave " << wave;
    for (; expected_next < static_cast<int>(out.size()); ++expected_next) {
      ASSERT_EQ(out[expected_next], expected_next) << "wave " << wave;
    }
  }
  while (!q.empty()) run_one(q, loop);
  EXPECT_EQ(out.size(), static_cast<std::size_t>(next));
  for (int i = 0; i < next; ++i) ASSERT_EQ(out[i], i);
 }
}

// A ring emptied at its last slot: the reader stands at the sentinel while the writer is at the end, which is
// empty; the next push starts both again at the beginning. And a reader at the sentinel with the writer wrapped
// past it: the sentinel runs the first slot, once. (128 slots, never three quarters full here: no growth.)
TEST(run_ring, empty_at_the_end_and_the_sentinel_runs_one_item) {
  run_ring q;
  std::vector<int> out;
  int next = 0;
  auto push = [&](int k) {
    for (int i = 0; i < k; ++i) q.push_handler(record{&out, next++});
  };
  auto run = [&](int k) {
    for (int i = 0; i < k; ++i) run_one(q, true);
  };
  push(90);  // slots 0..89
  run(90);
  push(38);  // slots 90..127: the writer at the end
  run(38);   // the reader at the end too: empty
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.size(), 0u);
  push(1);  // both start again at slot 0
  EXPECT_EQ(q.size(), 1u);
  run(1);
  EXPECT_TRUE(q.empty());
  push(60);  // slots 1..60
  run(60);
  push(67);  // slots 61..127
  push(2);   // the writer wraps to slots 0 and 1 while the reader is still short of the end
  EXPECT_EQ(q.size(), 69u);
  run(67);
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(out.back(), next - 3);
  run(1);  // the reader's slot is the sentinel now: it runs the first slot's item, only
  EXPECT_EQ(out.back(), next - 2);
  EXPECT_EQ(q.size(), 1u);
  run(1);
  EXPECT_TRUE(q.empty());
  ASSERT_EQ(out.size(), static_cast<std::size_t>(next));
  for (int i = 0; i < next; ++i) ASSERT_EQ(out[i], i);
}

// remove() takes one work item out from anywhere, the wrap included, and the rest keep their order; pushes after it
// neither overwrite a queued slot nor lose one (the free stretch a push checks against is reset).
TEST(run_ring, remove_keeps_the_order_of_the_rest_across_the_wrap) {
  for (int start : {0, 60, 88, 100, 127}) {
    for (int victim : {0, 10, 20, 27, 28, 29, 39}) {
      run_ring q;
      std::vector<int> out;
      std::vector<recording_item> items(400);
      for (int i = 0; i < start; ++i) q.push_handler(record{&out, -1});
      while (!q.empty()) run_one(q, true);  // the read and write positions now stand at start
      out.clear();
      for (int i = 0; i < 40; ++i) {  // from start = 100 on, these wrap past the end
        items[i].out = &out;
        items[i].value = i;
        q.push_item(&items[i]);
      }
      EXPECT_TRUE(q.remove(&items[victim]));
      EXPECT_FALSE(q.remove(&items[victim])) << "removed twice";
      EXPECT_EQ(q.size(), 39u);
      for (int i = 40; i < 400; ++i) {  // past the ring's size: it grows while wrapped
        items[i].out = &out;
        items[i].value = i;
        q.push_item(&items[i]);
      }
      while (!q.empty()) run_one(q);
      std::vector<int> expected;
      for (int i = 0; i < 400; ++i) {
        if (i != victim) expected.push_back(i);
      }
      EXPECT_EQ(out, expected) << "start " << start << ", victim " << victim;
    }
  }
}

// What a teardown goes by: only a work item's slot runs run_work_item; a handler's and a resumption's never do.
TEST(run_ring, only_work_items_are_queued_as_work_items) {
  run_ring q;
  std::vector<int> out;
  recording_item item;
  q.push_item(&item);
  q.push_handler(record{&out, 1});
  q.push_handle(std::noop_coroutine());
  EXPECT_EQ(q.pop().run, &tern::detail::run_work_item);
  EXPECT_NE(q.pop().run, &tern::detail::run_work_item);
  EXPECT_EQ(q.pop().run, &tern::detail::resume_handle);
  EXPECT_TRUE(q.empty());
}

// ---- the timing wheel, alone (time given in ns, ticks of 1024 ns) ----

using tern::detail::timer_node;
using tern::detail::timer_wheel;

struct wheel_timer : timer_node {
  std::vector<wheel_timer*>* fired = nullptr;
  explicit wheel_timer(std::vector<wheel_timer*>* out = nullptr) : fired(out) {
    fire = [](timer_node* n) {
      auto* self = static_cast<wheel_timer*>(n);
      self->fired->push_back(self);
    };
  }
};

std::uint64_t at_tick(std::uint64_t tick) { return tick << timer_wheel::tick_shift; }

// A removal leaves its slot's bit set. Here the bit's slot (level 0, tick 5) is passed while no timer is left, and
// a timer filed after that on level 1 must still be found and fired when due, not held back behind the old bit.
TEST(timer_wheel, a_slot_emptied_by_removal_holds_back_no_later_timer) {
  timer_wheel w(0);
  std::vector<wheel_timer*> fired;
  wheel_timer a(&fired), b(&fired);
  a.deadline_ns = at_tick(5);
  ASSERT_TRUE(w.insert(&a));
  w.remove(&a);
  EXPECT_FALSE(a.linked());
  w.advance(at_tick(10));  // nothing left: the loop's clock moves on past the emptied slot
  b.deadline_ns = at_tick(67);
  ASSERT_TRUE(w.insert(&b));
  // No next_expiry_tick() here (it would clear the old bit): a loop that does not park only advances.
  w.advance(at_tick(67));
  EXPECT_EQ(fired, std::vector<wheel_timer*>{&b}) << "due at tick 67";
  EXPECT_EQ(w.size(), 0u);
  EXPECT_EQ(w.next_expiry_tick(), timer_wheel::never);
}

// next_expiry_tick skips (and forgets) the slots whose timers were all removed: the loop sleeps until a live one.
TEST(timer_wheel, next_expiry_skips_emptied_slots) {
  timer_wheel w(0);
  std::vector<wheel_timer*> fired;
  wheel_timer early(&fired), far_early(&fired), live(&fired), far_live(&fired);
  early.deadline_ns = at_tick(3);
  live.deadline_ns = at_tick(40);
  far_early.deadline_ns = at_tick(5000);
  far_live.deadline_ns = at_tick(300000);
  for (auto* t : {&early, &live, &far_early, &far_live}) ASSERT_TRUE(w.insert(t));
  EXPECT_EQ(w.next_expiry_tick(), 3u);
  w.remove(&early);
  EXPECT_EQ(w.next_expiry_tick(), 40u);
  w.remove(&live);
  EXPECT_EQ(w.next_expiry_tick(), 4096u) << "level 2's slot 1, where tick 5000 is filed";
  w.remove(&far_early);
  EXPECT_EQ(w.next_expiry_tick(), 262144u) << "level 3's slot 1, where tick 300000 is filed";
  w.advance(at_tick(299999));
  EXPECT_TRUE(fired.empty());
  w.advance(at_tick(300000));
  EXPECT_EQ(fired, std::vector<wheel_timer*>{&far_live});
}

// Random timers over every level (and past the wheel's span), random removals, including of nodes that are due in
// the slot being processed, and random steps of time, against a model: each advance fires exactly the timers due
// by then, never one early, in deadline order; next_expiry_tick is never later than the earliest live deadline.
// ask_every: next_expiry_tick is asked every that many rounds (it finds the first slot again after a removal, and
// advance() relies on the bound it keeps between the asks).
void random_wheel_run(std::uint64_t seed, int ask_every) {
  std::mt19937_64 rng(seed);
  constexpr int count = 4000;
  std::vector<wheel_timer*> fired;
  std::vector<wheel_timer> timers;
  timers.reserve(count);
  for (int i = 0; i < count; ++i) timers.emplace_back(&fired);
  std::uint64_t now = 123456789;
  timer_wheel w(now);
  std::map<wheel_timer*, std::uint64_t> live;  // node -> deadline
  auto random_delay = [&] {
    const int kind = static_cast<int>(rng() % 8);
    const unsigned bits = kind == 7 ? 55 : 8 + 5 * static_cast<unsigned>(kind);  // up to 2^43 ns: every level
    return rng() % (std::uint64_t{1} << bits);
  };
  std::vector<wheel_timer*> idle;
  for (auto& t : timers) idle.push_back(&t);
  for (int round = 0; round < 3000; ++round) {
    for (int k = static_cast<int>(rng() % 6); k > 0 && !idle.empty(); --k) {
      wheel_timer* t = idle.back();
      idle.pop_back();
      t->deadline_ns = now + random_delay();
      if (w.insert(t)) {
        live[t] = t->deadline_ns;
      } else {
        ASSERT_LE(timer_wheel::tick_at_or_after(t->deadline_ns), now >> timer_wheel::tick_shift) << "refused, not due";
        idle.push_back(t);
      }
    }
    for (int k = static_cast<int>(rng() % 4); k > 0 && !live.empty(); --k) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      w.remove(it->first);
      ASSERT_FALSE(it->first->linked());
      idle.push_back(it->first);
      live.erase(it);
    }
    ASSERT_EQ(w.size(), live.size());
    const bool ask = round % ask_every == 0;
    if (ask && !live.empty()) {
      std::uint64_t earliest = ~std::uint64_t{0};
      for (auto& [t, d] : live) earliest = std::min(earliest, timer_wheel::tick_at_or_after(d));
      ASSERT_LE(w.next_expiry_tick(), earliest) << "round " << round;
    } else if (ask) {
      ASSERT_EQ(w.next_expiry_tick(), timer_wheel::never);
    }
    const int step = static_cast<int>(rng() % 10);
    now += step < 6 ? rng() % 50000 : step < 9 ? rng() % (std::uint64_t{1} << 30) : rng() % (std::uint64_t{1} << 40);
    fired.clear();
    w.advance(now);
    std::vector<wheel_timer*> expected;
    for (auto& [t, d] : live) {
      if (timer_wheel::tick_at_or_after(d) <= (now >> timer_wheel::tick_shift)) expected.push_back(t);
    }
    ASSERT_EQ(fired.size(), expected.size()) << "round " << round;
    for (std::size_t i = 0; i < fired.size(); ++i) {
      ASSERT_TRUE(live.count(fired[i])) << "fired twice, or removed and fired";
      ASSERT_FALSE(fired[i]->linked());
      ASSERT_LE(timer_wheel::tick_at_or_after(fired[i]->deadline_ns), now >> timer_wheel::tick_shift) << "early";
      if (i > 0) {
        ASSERT_LE(fired[i - 1]->deadline_ns, fired[i]->deadline_ns) << "out of order";
      }
    }
    for (auto* t : fired) {
      live.erase(t);
      idle.push_back(t);
    }
  }
}

TEST(timer_wheel, random_inserts_removals_and_advances_fire_due_timers_in_order) { random_wheel_run(38, 1); }

TEST(timer_wheel, random_advances_without_asking_for_the_next_expiry_fire_due_timers_in_order) {
  random_wheel_run(39, 5);
  random_wheel_run(40, 1000000);
}

// advance() does nothing before the first slot it knows of; a timer filed before that slot afterwards (here on level
// 0, after one on level 3 and a turn that only moved the clock) becomes the first, for advance() and for the wait.
TEST(timer_wheel, an_earlier_timer_filed_after_a_turn_is_the_next_expiry) {
  timer_wheel w(0);
  std::vector<wheel_timer*> fired;
  wheel_timer far(&fired), near(&fired);
  far.deadline_ns = at_tick(300000);
  ASSERT_TRUE(w.insert(&far));
  EXPECT_EQ(w.next_expiry_tick(), 262144u);
  w.advance(at_tick(100));
  near.deadline_ns = at_tick(150);
  ASSERT_TRUE(w.insert(&near));
  EXPECT_EQ(w.next_expiry_tick(), 128u) << "level 1's slot 2, where tick 150 is filed from tick 100";
  w.advance(at_tick(149));
  EXPECT_TRUE(fired.empty());
  w.advance(at_tick(150));
  EXPECT_EQ(fired, std::vector<wheel_timer*>{&near});
  EXPECT_EQ(w.next_expiry_tick(), 262144u);
  w.remove(&far);
  EXPECT_EQ(w.next_expiry_tick(), timer_wheel::never);
}

// A fire callback may remove any node, including one of the slot being processed that has not fired yet.
TEST(timer_wheel, a_callback_removes_a_due_node_of_its_own_slot) {
  timer_wheel w(0);
  std::vector<wheel_timer*> fired;
  wheel_timer a(&fired), c(&fired);
  struct remover : timer_node {
    timer_wheel* w;
    timer_node* victim;
    int runs = 0;
  } b;
  a.deadline_ns = at_tick(2000) + 1;
  b.deadline_ns = at_tick(2000) + 2;
  c.deadline_ns = at_tick(2000) + 3;
  b.w = &w;
  b.victim = &c;
  b.fire = [](timer_node* n) {
    auto* self = static_cast<remover*>(n);
    ++self->runs;
    self->w->remove(self->victim);
  };
  for (timer_node* t : {static_cast<timer_node*>(&a), static_cast<timer_node*>(&b), static_cast<timer_node*>(&c)})
    ASSERT_TRUE(w.insert(t));
  w.advance(at_tick(2001));
  EXPECT_EQ(fired, std::vector<wheel_timer*>{&a});
  EXPECT_EQ(b.runs, 1);
  EXPECT_FALSE(c.linked());
  EXPECT_EQ(w.size(), 0u);
}

}  // namespace
