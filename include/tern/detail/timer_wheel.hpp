// tern/detail/timer_wheel.hpp
//
// Hierarchical timing wheel, one per loop, with intrusive nodes.
//
// Why this shape: a loop may hold a million live timers (one per connection deadline) that are mostly cancelled
// before they expire. A heap costs O(log n) with a cache miss per level on both schedule and cancel; a wheel makes
// both O(1): schedule computes a level and a slot from the deadline with one count-leading-zeros, cancel unlinks
// a node from a doubly linked list. The nodes live inside the awaiters (in coroutine frames), so arming a timer
// never allocates. There is no syscall per timer either: the loop asks next_expiry() for the kernel wait timeout.
//
// Geometry: time is counted in ticks of 2^10 ns (1.02 us: a coarser tick adds its rounding to every timer's
// lateness; see docs/design.md, Timers). Seven levels of 64 slots; level L slot covers 64^L ticks, so the wheel
// spans 2^42 ticks (about 51 days). A deadline further out is clamped to the span and
// re-filed when it comes due (it then cascades down, as every entry does).
//
// Invariant (relative to elapsed_, the last tick processed): an entry with deadline d sits on the level of the
// highest 6-bit digit in which d and elapsed_ differ, in the slot given by d's digit there. Every occupied slot
// on a level therefore lies after elapsed_'s own slot on that level, and lower levels expire before higher ones.
// A slot's occupied bit may outlive its entries (removal leaves it set): such a slot is processed, or its bit
// cleared, like an occupied one, so the rule holds for every set bit.
// Processing a slot sets elapsed_ to the slot's start; a level-0 slot fires its entries, a higher slot re-files
// them one level down or more (a due entry lands in elapsed_'s own level-0 slot and fires from there). Level 0 lists are kept in deadline order (insertion from the tail,
// O(1) for the usual monotonic arrivals), so timers fire in exact deadline order even within one tick.
//
// Timers fire no earlier than their deadline: a deadline in nanoseconds maps to the first tick at or after it,
// and a tick is processed only once the clock has passed its start.
#pragma once

#include <bit>
#include <cstdint>

#include "tern/detail/loop_counters.hpp"

namespace tern::detail {

// A node's links. The wheel's slots are circles of nodes around a sentinel of this type, so linking and unlinking
// a node never branches on an empty list and never needs to know which slot it is in.
struct timer_link {
  timer_link* prev = nullptr;  // null while the node is on no slot
  timer_link* next = nullptr;
};

struct timer_node : timer_link {
  using fire_fn = void (*)(timer_node*);
  std::uint64_t deadline_ns = 0;  // absolute, steady clock
  fire_fn fire = nullptr;         // called once, after the node is unlinked
  bool linked() const noexcept { return prev != nullptr; }
};

class timer_wheel {
 public:
  static constexpr unsigned tick_shift = 10;
  static constexpr unsigned slot_bits = 6;
  static constexpr unsigned slots = 1u << slot_bits;
  static constexpr unsigned levels = 7;
  static constexpr std::uint64_t max_span = (std::uint64_t{1} << (slot_bits * levels)) - 1;
  static constexpr std::uint64_t never = ~std::uint64_t{0};

  explicit timer_wheel(std::uint64_t now_ns) noexcept : elapsed_(now_ns >> tick_shift) {
    for (auto& level : wheel_) {
      for (timer_link& s : level) s.prev = s.next = &s;
    }
    expiring_.prev = expiring_.next = &expiring_;
  }
  timer_wheel(const timer_wheel&) = delete;
  timer_wheel& operator=(const timer_wheel&) = delete;

  // The rounding up cannot overflow: every deadline is below 2^63 (a clock reading plus at most 2^62, or a
  // time_point's count).
  static std::uint64_t tick_at_or_after(std::uint64_t ns) noexcept {
    return (ns + ((std::uint64_t{1} << tick_shift) - 1)) >> tick_shift;
  }

  std::size_t size() const noexcept { return size_; }

  // Files n; returns false (and files nothing) if n's deadline tick has already been processed, in which case the
  // caller treats the timer as expired.
  bool insert(timer_node* n) noexcept {
    const std::uint64_t tick = tick_at_or_after(n->deadline_ns);
    armed_.add();
    if (tick <= elapsed_) {
      fired_.add();  // expired on arrival: the caller fires it at once
      return false;
    }
    file(n, tick);
    ++size_;
    return true;
  }

  // Timers filed so far, and fired (cancelled ones are not); metrics, readable from any thread.
  std::uint64_t armed() const noexcept { return armed_.get(); }
  std::uint64_t fired() const noexcept { return fired_.get(); }

  // Unlinks a filed node. Safe from inside a fire callback, for any node. The slot's occupied bit is left as it
  // is: a bit set for an emptied slot is cleared where the bits are read (next_expiry_tick, advance), so a removal
  // needs neither the node's slot nor a test of whether the slot is now empty.
  void remove(timer_node* n) noexcept {
    timer_link* prev = n->prev;
    timer_link* next = n->next;
    prev->next = next;
    next->prev = prev;
    n->prev = nullptr;  // next keeps a stale value: only a linked node's links are read
    --size_;
    exact_ = false;  // the first slot may be empty now; due_ is still no later than any slot with its bit set
  }

  // The tick at which the next slot must be processed, or never. Clears the bits of the emptied slots it meets,
  // so that the loop does not wake up for a slot whose timers were all removed.
  // Known without a look at the levels while nothing has been removed or processed since it was found, which
  // is the usual turn: a loop asks before every blocking wait, and its timers (a connection's idle watch) change
  // far less often than it waits.
  std::uint64_t next_expiry_tick() const noexcept {
    if (size_ == 0) return never;
    if (exact_) return due_;
    for (unsigned level = 0; level < levels; ++level) {
      while (occupied_[level] != 0) {
        const unsigned slot = next_slot(level);
        if (!empty(wheel_[level][slot])) {
          // Lower levels expire before higher ones: the first full slot of the lowest level is the earliest of all.
          due_ = slot_start(level, slot);
          exact_ = true;
          return due_;
        }
        occupied_[level] &= ~(std::uint64_t{1} << slot);
      }
    }
    return never;
  }

  // Fires (unlinks, then calls fire on) every node whose deadline tick is at or before now_tick, in order.
  // A turn before due_ (the usual one) has nothing to process and only moves elapsed_ on, which leaves every slot
  // with its bit set where it was (they all start at or after due_).
  void advance(std::uint64_t now_ns) noexcept {
    const std::uint64_t now_tick = now_ns >> tick_shift;
    if (now_tick < due_) [[likely]] {
      if (now_tick > elapsed_) elapsed_ = now_tick;
      return;
    }
    while (size_ != 0) {
      unsigned level = 0;
      while (level < levels && occupied_[level] == 0) ++level;
      unsigned slot = next_slot(level);
      std::uint64_t start = slot_start(level, slot);
      if (start > now_tick) break;
      elapsed_ = start;
      process(level, slot);  // an emptied slot's bit is cleared here like any other's
    }
    // With no timers left, every bit still set is an emptied slot's. elapsed_ may now pass those slots, which the
    // rule above (a set bit lies after elapsed_'s slot on its level) would not allow: clear them.
    if (size_ == 0) {
      for (auto& o : occupied_) o = 0;
    }
    if (now_tick > elapsed_) elapsed_ = now_tick;
    find_due();
  }

 private:
  // Level of a deadline whose highest digit that differs from elapsed_'s is bit b's (b = 6..63; past the top
  // level, the top level): a load instead of a division and a clamp.
  static constexpr unsigned char level_of_bit[64] = {
      0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 5, 5,
      5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6};

  static bool empty(const timer_link& s) noexcept { return s.next == &s; }

  // due_ from the bits: the start of the first slot with its bit set (which may have been emptied), or never.
  void find_due() noexcept {
    exact_ = false;
    unsigned level = 0;
    while (level < levels && occupied_[level] == 0) ++level;
    due_ = level == levels ? never : slot_start(level, next_slot(level));
  }

  // A slot starting at start has been filed into: the earliest of all if it starts before due_, and then known.
  void filed_at(std::uint64_t start) noexcept {
    if (start < due_) {
      due_ = start;
      exact_ = true;
    }
  }

  unsigned next_slot(unsigned level) const noexcept {
    unsigned pos = static_cast<unsigned>(elapsed_ >> (level * slot_bits)) & (slots - 1);
    std::uint64_t rotated = std::rotr(occupied_[level], static_cast<int>(pos));
    return (pos + static_cast<unsigned>(std::countr_zero(rotated))) & (slots - 1);
  }

  std::uint64_t slot_start(unsigned level, unsigned slot) const noexcept {
    const unsigned shift = level * slot_bits;
    const std::uint64_t level_range = std::uint64_t{1} << (shift + slot_bits);
    std::uint64_t start = (elapsed_ & ~(level_range - 1)) + (std::uint64_t{slot} << shift);
    // A slot before elapsed_'s own belongs to the next turn of this level; that happens only on the top level,
    // for clamped far-future deadlines.
    if (start + (std::uint64_t{1} << shift) <= elapsed_) start += level_range;
    return start;
  }

  // Files n, due at tick when (after elapsed_).
  void file(timer_node* n, std::uint64_t when) noexcept {
    std::uint64_t differ = when ^ elapsed_;
    // Within level 0's span (the digits above the lowest equal elapsed_'s): the slot is the lowest digit, with no
    // level to compute and no clamp to apply.
    if (differ < slots) {
      file_level0(n, static_cast<unsigned>(when) & (slots - 1));
      filed_at(when);
      return;
    }
    if (when - elapsed_ > max_span) [[unlikely]] {
      when = elapsed_ + max_span;
      differ = when ^ elapsed_;
    }
    const unsigned level = level_of_bit[63 - __builtin_clzll(differ)];  // differ >= 64: no test for zero
    const unsigned slot = static_cast<unsigned>(when >> (level * slot_bits)) & (slots - 1);
    // Above level 0 a slot's order does not matter (it is re-filed when it comes due): appended at the tail.
    link_after(wheel_[level][slot].prev, n);
    occupied_[level] |= std::uint64_t{1} << slot;
    filed_at(slot_start(level, slot));
  }

  // Level 0 keeps each slot in deadline order: n goes after the last node due no later (found from the tail).
  void file_level0(timer_node* n, unsigned slot) noexcept {
    timer_link* s = &wheel_[0][slot];
    timer_link* after = s->prev;
    while (after != s && static_cast<timer_node*>(after)->deadline_ns > n->deadline_ns) after = after->prev;
    link_after(after, n);
    occupied_[0] |= std::uint64_t{1} << slot;
  }

  static void link_after(timer_link* after, timer_link* n) noexcept {
    timer_link* next = after->next;
    n->prev = after;
    n->next = next;
    next->prev = n;
    after->next = n;
  }

  // The slot's circle moves to expiring_ and is consumed from its head, so a fire callback may remove any node,
  // including ones of this slot that have not been looked at yet.
  void process(unsigned level, unsigned slot) noexcept {
    timer_link& s = wheel_[level][slot];
    occupied_[level] &= ~(std::uint64_t{1} << slot);
    if (empty(s)) return;  // emptied by removals
    expiring_.next = s.next;
    expiring_.prev = s.prev;
    expiring_.next->prev = &expiring_;
    expiring_.prev->next = &expiring_;
    s.prev = s.next = &s;
    while (!empty(expiring_)) {
      auto* n = static_cast<timer_node*>(expiring_.next);
      expiring_.next = n->next;
      n->next->prev = &expiring_;
      if (level == 0) {
        n->prev = nullptr;
        --size_;
        fired_.add();
        n->fire(n);
      } else {
        file(n, tick_at_or_after(n->deadline_ns));  // due ones land in elapsed_'s own level-0 slot, in order
      }
    }
  }

  timer_link wheel_[levels][slots];  // each slot a circle around its sentinel
  timer_link expiring_;
  // Bit s of level L: slot s may hold nodes (clear: it holds none). Set by filing, cleared lazily (see remove).
  mutable std::uint64_t occupied_[levels] = {};
  std::uint64_t elapsed_;
  // No slot with its bit set starts before due_ (never: no bit is set), so advance() has nothing to do before it;
  // exact_: due_ is the start of the first slot and that slot holds a node (next_expiry_tick's answer). Kept by
  // filing (a slot before due_ is the new first), made inexact by a removal (the slot may have emptied) and found
  // again by advance() once it has processed slots, and by next_expiry_tick() when inexact.
  mutable std::uint64_t due_ = never;
  mutable bool exact_ = true;
  std::size_t size_ = 0;
  counter armed_;
  counter fired_;
};

}  // namespace tern::detail
