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

struct timer_node {
  using fire_fn = void (*)(timer_node*);
  timer_node* prev = nullptr;
  timer_node* next = nullptr;
  std::uint64_t deadline_ns = 0;  // absolute, steady clock
  std::uint64_t deadline_tick = 0;
  fire_fn fire = nullptr;         // called once, after the node is unlinked
  std::uint16_t where = unlinked;  // level * 64 + slot, or unlinked

  static constexpr std::uint16_t unlinked = 0xffff;
  static constexpr std::uint16_t expiring = 0xfffe;  // taken off its slot, about to be fired or re-filed
  bool linked() const noexcept { return where != unlinked; }
};

class timer_wheel {
 public:
  static constexpr unsigned tick_shift = 10;
  static constexpr unsigned slot_bits = 6;
  static constexpr unsigned slots = 1u << slot_bits;
  static constexpr unsigned levels = 7;
  static constexpr std::uint64_t max_span = (std::uint64_t{1} << (slot_bits * levels)) - 1;
  static constexpr std::uint64_t never = ~std::uint64_t{0};

  explicit timer_wheel(std::uint64_t now_ns) noexcept : elapsed_(now_ns >> tick_shift) {}
  timer_wheel(const timer_wheel&) = delete;
  timer_wheel& operator=(const timer_wheel&) = delete;

  static std::uint64_t tick_at_or_after(std::uint64_t ns) noexcept {
    return (ns >> tick_shift) + ((ns & ((std::uint64_t{1} << tick_shift) - 1)) != 0);
  }

  std::size_t size() const noexcept { return size_; }

  // Files n; returns false (and files nothing) if n's deadline tick has already been processed, in which case the
  // caller treats the timer as expired.
  bool insert(timer_node* n) noexcept {
    n->deadline_tick = tick_at_or_after(n->deadline_ns);
    armed_.add();
    if (n->deadline_tick <= elapsed_) {
      fired_.add();  // expired on arrival: the caller fires it at once
      return false;
    }
    file(n);
    ++size_;
    return true;
  }

  // Timers filed so far, and fired (cancelled ones are not); metrics, readable from any thread.
  std::uint64_t armed() const noexcept { return armed_.get(); }
  std::uint64_t fired() const noexcept { return fired_.get(); }

  // Unlinks a filed node. Safe from inside a fire callback, for any node.
  void remove(timer_node* n) noexcept {
    if (n->where == timer_node::expiring) {
      unlink_from(expiring_, n);
    } else {
      unsigned level = n->where / slots;
      unsigned slot = n->where % slots;
      unlink_from(wheel_[level][slot], n);
      if (wheel_[level][slot].head == nullptr) occupied_[level] &= ~(std::uint64_t{1} << slot);
    }
    // prev and next keep stale values: only a linked node's are read, and file() writes both.
    n->where = timer_node::unlinked;
    --size_;
  }

  // The tick at which the next slot must be processed, or never.
  std::uint64_t next_expiry_tick() const noexcept {
    for (unsigned level = 0; level < levels; ++level) {
      if (occupied_[level] != 0) return slot_start(level, next_slot(level));
    }
    return never;
  }

  // Fires (unlinks, then calls fire on) every node whose deadline tick is at or before now_tick, in order.
  void advance(std::uint64_t now_ns) noexcept {
    const std::uint64_t now_tick = now_ns >> tick_shift;
    while (size_ != 0) {
      unsigned level = 0;
      while (level < levels && occupied_[level] == 0) ++level;
      unsigned slot = next_slot(level);
      std::uint64_t start = slot_start(level, slot);
      if (start > now_tick) break;
      elapsed_ = start;
      process(level, slot);
    }
    if (now_tick > elapsed_) elapsed_ = now_tick;
  }

 private:
  struct list {
    timer_node* head = nullptr;
    timer_node* tail = nullptr;
  };

  static unsigned level_for(std::uint64_t elapsed, std::uint64_t when) noexcept {
    std::uint64_t masked = (elapsed ^ when) | (slots - 1);
    unsigned significant = 63u - static_cast<unsigned>(std::countl_zero(masked));
    unsigned level = significant / slot_bits;
    return level < levels ? level : levels - 1;
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

  void file(timer_node* n) noexcept {
    std::uint64_t when = n->deadline_tick;
    // Within level 0's span (the digits above the lowest equal elapsed_'s): the slot is the lowest digit, with no
    // level to compute and no clamp to apply.
    if ((when ^ elapsed_) < slots) {
      file_level0(n, static_cast<unsigned>(when) & (slots - 1));
      return;
    }
    if (when - elapsed_ > max_span) when = elapsed_ + max_span;
    unsigned level = level_for(elapsed_, when);
    unsigned slot = static_cast<unsigned>(when >> (level * slot_bits)) & (slots - 1);
    if (level == 0) {
      file_level0(n, slot);
      return;
    }
    // Above level 0 a slot's order does not matter (it is re-filed when it comes due): appended at the tail.
    list& l = wheel_[level][slot];
    n->where = static_cast<std::uint16_t>(level * slots + slot);
    n->prev = l.tail;
    n->next = nullptr;
    if (l.tail != nullptr) l.tail->next = n; else l.head = n;
    l.tail = n;
    occupied_[level] |= std::uint64_t{1} << slot;
  }

  // Level 0 keeps each slot in deadline order: n goes after the last node due no later (found from the tail).
  void file_level0(timer_node* n, unsigned slot) noexcept {
    list& l = wheel_[0][slot];
    n->where = static_cast<std::uint16_t>(slot);
    timer_node* after = l.tail;
    while (after != nullptr && after->deadline_ns > n->deadline_ns) after = after->prev;
    n->prev = after;
    n->next = after != nullptr ? after->next : l.head;
    if (n->next != nullptr) n->next->prev = n; else l.tail = n;
    if (after != nullptr) after->next = n; else l.head = n;
    occupied_[0] |= std::uint64_t{1} << slot;
  }

  static void unlink_from(list& l, timer_node* n) noexcept {
    if (n->prev != nullptr) n->prev->next = n->next; else l.head = n->next;
    if (n->next != nullptr) n->next->prev = n->prev; else l.tail = n->prev;
  }

  // The slot's list moves to expiring_ and is consumed from its head, so a fire callback may remove any node,
  // including ones of this slot that have not been looked at yet.
  void process(unsigned level, unsigned slot) noexcept {
    expiring_ = wheel_[level][slot];
    wheel_[level][slot] = list{};
    occupied_[level] &= ~(std::uint64_t{1} << slot);
    for (timer_node* n = expiring_.head; n != nullptr; n = n->next) n->where = timer_node::expiring;
    while (timer_node* n = expiring_.head) {
      unlink_from(expiring_, n);
      if (level == 0) {
        n->where = timer_node::unlinked;
        --size_;
        fired_.add();
        n->fire(n);
      } else {
        file(n);  // due ones land in elapsed_'s own level-0 slot, in deadline order, and fire from there
      }
    }
  }

  list wheel_[levels][slots];
  list expiring_;
  std::uint64_t occupied_[levels] = {};
  std::uint64_t elapsed_;
  std::size_t size_ = 0;
  counter armed_;
  counter fired_;
};

}  // namespace tern::detail
