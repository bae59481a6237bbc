// tern/detail/run_ring.hpp
//
// The loop's local run queue: a ring of (run, two words) slots, doubled whenever a push finds it three quarters full
// (so at most 8/3 of the peak it has held) and never shrunk.
//
// A slot holds what running it needs, so that most queued work is no node of its own: a coroutine resumption is
// the handle (resume_handle), a small trivially copyable handler given to post() is its bytes (run_handler<F>),
// and everything else is a work_item (a completion, a timer's expiry, a handler in a block) that run_work_item
// runs. Queueing is three stores and a pointer bump, running a slot a load of it and an indirect call; the
// intrusive list this replaced wrote a node's next link, its run and discard fields, a block's home, and took and
// gave back a block per post.
//
// Only work_item slots can own anything: a handler kept in a slot is trivially destructible, and a resumption
// dropped unrun is forgotten, as a queued resume_item always was. So a slot whose run is run_work_item is the only
// kind that a teardown has to look at (its item's discard).
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>

#include "tern/detail/work_queue.hpp"

namespace tern::detail {

struct run_slot {
  using run_fn = void (*)(std::uintptr_t, std::uintptr_t);
  run_fn run;
  std::uintptr_t a;
  std::uintptr_t b;
};

// Out of line (io_context.cpp), so that each has one address the ring and the teardown compare with.
void run_work_item(std::uintptr_t item, std::uintptr_t);
// run_work_item for an operation's completion (io_context::complete): the same run under an address of its own,
// so that the spin before a park can tell what it found (an io_op, and its op_code) without a cost per completion.
void run_completion(std::uintptr_t op, std::uintptr_t);
void resume_handle(std::uintptr_t frame, std::uintptr_t);

// A handler that post() keeps in the slot itself: its bytes fit the slot's two words, and copying them is moving
// it (trivially copyable, hence trivially destructible: dropping it unrun is forgetting it).
template <class F>
inline constexpr bool fits_run_slot = sizeof(F) <= 2 * sizeof(std::uintptr_t) &&
                                      alignof(F) <= alignof(std::uintptr_t) && std::is_trivially_copyable_v<F>;

template <class F>
void run_handler(std::uintptr_t a, std::uintptr_t b) {
  const std::uintptr_t words[2] = {a, b};
  alignas(F) unsigned char bytes[sizeof(F)];
  std::memcpy(bytes, words, sizeof(F));  // makes the F (trivially copyable) in this frame, off the ring
  (*std::launder(reinterpret_cast<F*>(bytes)))();
}

class run_ring {
 public:
  run_ring() { allocate(initial_slots); }
  ~run_ring() { delete[] begin_; }
  run_ring(const run_ring&) = delete;
  run_ring& operator=(const run_ring&) = delete;

  bool empty() const noexcept { return read_ == write_; }
  std::size_t size() const noexcept {
    return write_ >= read_ ? static_cast<std::size_t>(write_ - read_)
                           : static_cast<std::size_t>((end_ - read_) + (write_ - begin_));
  }

  // A push checks only for stop_, the end of the free stretch it last saw (the end of the array, or the slot before
  // where read was): the wrap and the full ring are looked at there, not per push. Empty is read == write: a writer
  // that has wrapped stops one slot short of the reader, and a writer at the end wraps on its next push.
  // The rare path is the whole push, the last thing the fast path does: a caller that pushes last tail-calls it and
  // keeps nothing in a register across it (no register saved and restored around every post).
  void push(run_slot::run_fn run, std::uintptr_t a) noexcept {
    run_slot* w = write_;
    if (w == stop_) [[unlikely]] return push_at_stop(run, a, 0);
    w->run = run;
    w->a = a;
    write_ = w + 1;
  }
  void push(run_slot::run_fn run, std::uintptr_t a, std::uintptr_t b) noexcept {
    run_slot* w = write_;
    if (w == stop_) [[unlikely]] return push_at_stop(run, a, b);
    w->run = run;
    w->a = a;
    w->b = b;
    write_ = w + 1;
  }
  void push_item(work_item* w) noexcept { push(&run_work_item, reinterpret_cast<std::uintptr_t>(w)); }
  // w is an io_op (detail/io_op.hpp): see run_completion.
  void push_completion(work_item* w) noexcept { push(&run_completion, reinterpret_cast<std::uintptr_t>(w)); }
  void push_handle(std::coroutine_handle<> h) noexcept {
    push(&resume_handle, reinterpret_cast<std::uintptr_t>(h.address()));
  }
  template <class F>
  void push_handler(const F& f) noexcept {
    std::uintptr_t words[2] = {0, 0};
    std::memcpy(words, &f, sizeof(F));
    if constexpr (sizeof(F) <= sizeof(std::uintptr_t)) {
      push(&run_handler<F>, words[0]);
    } else {
      push(&run_handler<F>, words[0], words[1]);
    }
  }

  // Not empty(). The slot is copied out before it runs, so what it queues may reuse its place.
  run_slot pop() noexcept {
    run_slot* r = read_;
    if (r == end_) r = begin_;  // the reader stood at the sentinel (pop_or_wrap)
    const run_slot s = *r;
    read_ = r + 1;
    return s;
  }

  // pop() for the run loop, without the wrap test: not empty(); the slot returned is either the next one, or the
  // sentinel after the last slot, whose run moves the read position to the beginning and runs the first slot
  // there (wrap). Either way running it runs exactly one queued item. Only for a caller that runs what it pops: a
  // sentinel that is not run leaves the ring broken.
  run_slot pop_or_wrap() noexcept {
    run_slot* r = read_;
    read_ = r + 1;
    return *r;
  }

  // Whether f is true of any queued slot, in queue order (a linear scan: for the spin's look at what it found).
  template <class F>
  bool any_of(F f) const noexcept {
    if (empty()) return false;
    const run_slot* i = read_ == end_ ? begin_ : read_;  // the reader at the sentinel: its next slot is the first
    while (i != write_) {
      if (f(*i)) return true;
      if (++i == end_ && write_ != end_) i = begin_;  // as next(): a writer at the end has not wrapped
    }
    return false;
  }

  void clear() noexcept {
    read_ = write_ = begin_;
    stop_ = end_;
  }

  // Takes the slot of work item w out if it is queued, keeping the order of the rest (a linear scan and a shift:
  // only for the rare operation whose frame goes away while its completion is queued); returns whether it was.
  bool remove(const work_item* w) noexcept {
    if (empty()) return false;
    if (read_ == end_) read_ = begin_;  // the reader at the sentinel: its next slot is the first
    const auto key = reinterpret_cast<std::uintptr_t>(w);
    for (run_slot* i = read_; i != write_; i = next(i)) {
      if ((i->run != &run_work_item && i->run != &run_completion) || i->a != key) continue;
      for (run_slot* j = next(i); j != write_; j = next(j)) {
        *i = *j;
        i = j;
      }
      // Write may have stepped back over the wrap: a writer at the beginning with the reader further on stands
      // at the end instead, not yet wrapped (a wrapped writer has always written the first slot).
      write_ = i == begin_ && read_ != begin_ ? end_ : i;
      stop_ = write_ < read_ ? read_ - 1 : end_;
      return true;
    }
    stop_ = write_ < read_ ? read_ - 1 : end_;  // read_ may have moved off the sentinel
    return false;
  }

 private:
  static constexpr std::size_t initial_slots = 128;

  // The slot after p in queue order: a writer at the end has not wrapped, and the queued slots end there.
  run_slot* next(run_slot* p) const noexcept { return ++p == end_ && write_ != end_ ? begin_ : p; }

  // The sentinel's run: the reader has passed the last slot; it takes the first (never empty here: a wrapped
  // writer has written it) and runs it.
  static void wrap(std::uintptr_t ring, std::uintptr_t) {
    auto* q = reinterpret_cast<run_ring*>(ring);
    run_slot* r = q->begin_;
    const run_slot s = *r;
    q->read_ = r + 1;
    s.run(s.a, s.b);
  }

  // write_ == stop_: returns where the push writes. Every slot in [write_, stop_) is free; pops only free more, so a
  // stale stop_ is merely early. A ring three quarters full grows: a writer close behind the reader would come here
  // every few pushes (dispatch/post's 1000 chains in 1024 slots: every 23, 2.2 instructions per post).
  run_slot* make_room() noexcept {
    run_slot* w = write_;
    run_slot* r = read_;
    if (w == end_ && r == end_) {  // everything read: both start again at the beginning
      read_ = begin_;
      stop_ = end_;
      return begin_;
    }
    const std::size_t n = static_cast<std::size_t>(end_ - begin_);
    if (size() >= n - n / 4) return grow();
    if (w == end_) w = begin_;  // wrap (the reader is past the beginning: the ring is not full)
    if (r <= w) {               // the reader has wrapped too (or is level with the writer: empty)
      stop_ = end_;
      return w;
    }
    if (w + 1 < r) {  // a wrapped writer stops one short of the reader: read == write stays empty
      stop_ = r - 1;
      return w;
    }
    return grow();
  }

  [[gnu::noinline]] void push_at_stop(run_slot::run_fn run, std::uintptr_t a, std::uintptr_t b) noexcept {
    run_slot* w = make_room();
    *w = {run, a, b};
    write_ = w + 1;
  }

  void allocate(std::size_t n) {
    begin_ = new run_slot[n + 1]();  // zeroed: a slot's unused word is never read uninitialised
    stop_ = end_ = begin_ + n;
    *end_ = {&wrap, reinterpret_cast<std::uintptr_t>(this), 0};
    read_ = write_ = begin_;
  }

  // Twice the slots, the queued ones first, in order; returns where the push writes.
  run_slot* grow() noexcept {
    const std::size_t n = static_cast<std::size_t>(end_ - begin_);
    run_slot* old = begin_;
    const bool wrapped = write_ < read_;
    const std::size_t head = static_cast<std::size_t>((wrapped ? end_ : write_) - read_);
    const std::size_t tail = wrapped ? static_cast<std::size_t>(write_ - begin_) : 0;
    auto* slots = new run_slot[2 * n + 1]();
    std::memcpy(slots, read_, head * sizeof(run_slot));
    std::memcpy(slots + head, old, tail * sizeof(run_slot));
    delete[] old;
    begin_ = read_ = slots;
    stop_ = end_ = slots + 2 * n;
    *end_ = {&wrap, reinterpret_cast<std::uintptr_t>(this), 0};
    write_ = slots + head + tail;
    return write_;
  }

  run_slot* read_ = nullptr;
  run_slot* write_ = nullptr;
  run_slot* begin_ = nullptr;
  run_slot* end_ = nullptr;
  run_slot* stop_ = nullptr;
};

}  // namespace tern::detail
