// tern/detail/run_ring.hpp
//
// The loop's local run queue: a ring of (run, two words) slots, grown to the peak it has held and never shrunk.
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

  // The ring is never full between calls: a push that fills it grows it at once, so empty is read == write. A push
  // checks only for stop_, the end of the free stretch it last saw (the end of the array, or where read was): the
  // wrap and the full ring are looked at there, not per push.
  void push(run_slot::run_fn run, std::uintptr_t a) noexcept {
    run_slot* w = write_;
    w->run = run;
    w->a = a;
    advance(w);
  }
  void push(run_slot::run_fn run, std::uintptr_t a, std::uintptr_t b) noexcept {
    run_slot* w = write_;
    w->run = run;
    w->a = a;
    w->b = b;
    advance(w);
  }
  void push_item(work_item* w) noexcept { push(&run_work_item, reinterpret_cast<std::uintptr_t>(w)); }
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
    const run_slot s = *r;
    if (++r == end_) r = begin_;
    read_ = r;
    return s;
  }

  void clear() noexcept {
    read_ = write_ = begin_;
    stop_ = end_;
  }

  // Takes the slot of work item w out if it is queued, keeping the order of the rest (a linear scan and a shift:
  // only for the rare operation whose frame goes away while its completion is queued); returns whether it was.
  bool remove(const work_item* w) noexcept {
    const auto key = reinterpret_cast<std::uintptr_t>(w);
    for (run_slot* i = read_; i != write_; i = next(i)) {
      if (i->run != &run_work_item || i->a != key) continue;
      for (run_slot* j = next(i); j != write_; j = next(j)) {
        *i = *j;
        i = j;
      }
      write_ = i;
      stop_ = read_ > i ? read_ : end_;  // write may have stepped back over the wrap
      return true;
    }
    return false;
  }

 private:
  static constexpr std::size_t initial_slots = 128;

  run_slot* next(run_slot* p) const noexcept { return ++p == end_ ? begin_ : p; }

  void advance(run_slot* w) noexcept {
    write_ = ++w;
    if (w == stop_) [[unlikely]] reached_stop();
  }

  // Every slot in [write_, stop_) is free; pops only free more, so a stale stop_ is merely early.
  [[gnu::noinline]] void reached_stop() noexcept {
    run_slot* w = write_;
    if (w == end_) write_ = w = begin_;
    if (w == read_) {
      grow();
    } else {
      stop_ = read_ > w ? read_ : end_;
    }
  }

  void allocate(std::size_t n) {
    begin_ = new run_slot[n]();  // zeroed: a slot's unused word is never read uninitialised
    stop_ = end_ = begin_ + n;
    read_ = write_ = begin_;
  }

  // Full (write caught up with read): twice the slots, the queued ones first, in order.
  void grow() noexcept {
    const std::size_t n = static_cast<std::size_t>(end_ - begin_);
    run_slot* old = begin_;
    run_slot* from = read_;
    auto* slots = new run_slot[2 * n]();
    const std::size_t head = static_cast<std::size_t>(end_ - from);
    std::memcpy(slots, from, head * sizeof(run_slot));
    std::memcpy(slots + head, old, (n - head) * sizeof(run_slot));
    delete[] old;
    begin_ = read_ = slots;
    write_ = slots + n;
    stop_ = end_ = slots + 2 * n;
  }

  run_slot* read_ = nullptr;
  run_slot* write_ = nullptr;
  run_slot* begin_ = nullptr;
  run_slot* end_ = nullptr;
  run_slot* stop_ = nullptr;
};

}  // namespace tern::detail
