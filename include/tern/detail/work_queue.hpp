// tern/detail/work_queue.hpp
//
// The loop's units of work and the two queues that hold them.
//
// A work_item is an intrusive node with a function pointer: I/O completions, timer expiries, spawned tasks' steps and
// posted handlers in blocks derive from it, so queueing never allocates. The loop's run queue itself is a ring of
// slots (detail/run_ring.hpp), where a work item is one kind of entry, next to handles and small handlers.
//
// - work_queue: a loop-local FIFO (single thread, no atomics): the shareable work, closes_settled's waiters, what a
//   teardown keeps to discard.
// - remote_inbox: posts from other threads. Producers push onto a lock-free LIFO list with one CAS; the loop takes
//   the whole list with one exchange and reverses it to restore FIFO order. Taking everything at once means the
//   consumer never contends with producers node by node, and there is no ABA problem because nodes are never popped
//   individually.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>

namespace tern::detail {

struct work_item {
  using run_fn = void (*)(work_item*);
  using discard_fn = void (*)(work_item*) noexcept;
  work_item* next = nullptr;
  run_fn run = nullptr;
  // Set only for items that own themselves (posted handlers): frees the item without running it, for a loop that
  // is destroyed with work still queued. Items embedded in coroutine frames leave it null.
  discard_fn discard = nullptr;

  work_item() = default;
  work_item(run_fn r, discard_fn d) noexcept : run(r), discard(d) {}

 protected:
  // Leaves the fields unset, for a node that sets them only when it is about to be queued (a sync waiter, made
  // on every wait but queued only when the wait suspends).
  struct unset_t {};
  explicit work_item(unset_t) noexcept {}
};

// A work item that resumes a coroutine.
struct resume_item : work_item {
  std::coroutine_handle<> handle;
  resume_item() noexcept { run = &resume; }
  static void resume(work_item* w) { static_cast<resume_item*>(w)->handle.resume(); }

 protected:
  explicit resume_item(unset_t u) noexcept : work_item(u) {}
  // Sets what resume_item() and work_item() would have; the queue push sets next.
  void prepare(std::coroutine_handle<> h) noexcept {
    run = &resume;
    discard = nullptr;
    handle = h;
  }
};

class work_queue {
 public:
  bool empty() const noexcept { return head_ == nullptr; }

  void push_back(work_item* w) noexcept {
    w->next = nullptr;
    if (tail_ == nullptr) {
      head_ = tail_ = w;
    } else {
      tail_->next = w;
      tail_ = w;
    }
  }

  // Appends a chain already linked through next (first..last).
  void append(work_item* first, work_item* last) noexcept {
    if (tail_ == nullptr) {
      head_ = first;
    } else {
      tail_->next = first;
    }
    tail_ = last;
  }

  work_item* pop_front() noexcept {
    work_item* w = head_;
    if (w != nullptr) {
      head_ = w->next;
      if (head_ == nullptr) tail_ = nullptr;
    }
    return w;
  }

  // Takes w out of the queue if it is there (a linear scan: only for the rare operation whose frame goes away while
  // its completion is queued); returns whether it was.
  bool remove(work_item* w) noexcept {
    work_item* prev = nullptr;
    for (work_item* i = head_; i != nullptr; prev = i, i = i->next) {
      if (i != w) continue;
      if (prev == nullptr) head_ = i->next; else prev->next = i->next;
      if (tail_ == i) tail_ = prev;
      return true;
    }
    return false;
  }

 private:
  work_item* head_ = nullptr;
  work_item* tail_ = nullptr;
};

class remote_inbox {
 public:
  // Any thread. Returns true when the inbox was empty before, a hint that the consumer may need a wake-up.
  bool push(work_item* w) noexcept {
    work_item* old = head_.load(std::memory_order_relaxed);
    do {
      w->next = old;
      // release: the consumer's acquire exchange must see the item's contents and its next link; seq_cst: the
      // push also orders the poster's check of the loop's sleeping flag after it (io_context::enqueue_remote).
    } while (!head_.compare_exchange_weak(old, w, std::memory_order_seq_cst, std::memory_order_relaxed));
    return old == nullptr;
  }

  // Any thread: pushes a chain linked newest -> ... -> oldest through next, with one CAS.
  void push_chain(work_item* newest, work_item* oldest) noexcept {
    work_item* old = head_.load(std::memory_order_relaxed);
    do {
      oldest->next = old;
      // As push: release for the chain's contents and links, seq_cst for the sleeping-flag check after it.
    } while (!head_.compare_exchange_weak(old, newest, std::memory_order_seq_cst, std::memory_order_relaxed));
  }

  // Loop thread only: a cheap check before paying for the exchange. relaxed: a stale null only delays the item
  // to the next look; the look before a sleep is nonempty_after_barrier().
  bool maybe_nonempty() const noexcept { return head_.load(std::memory_order_relaxed) != nullptr; }
  // Loop thread only: the look before a sleep, after the seq_cst exchange that announces it (io_context::poll_io);
  // seq_cst, so that with the poster's seq_cst push and its seq_cst read of the flag one of the two sees the other.
  bool nonempty_after_barrier() const noexcept { return head_.load(std::memory_order_seq_cst) != nullptr; }

  // Loop thread only: takes everything posted so far, as a chain linked oldest first through next (null if none).
  work_item* take_all() noexcept {
    if (!maybe_nonempty()) return nullptr;
    work_item* list = head_.exchange(nullptr, std::memory_order_acquire);
    work_item* prev = nullptr;
    while (list != nullptr) {
      work_item* next = list->next;
      list->next = prev;
      prev = list;
      list = next;
    }
    return prev;
  }

  // Loop thread only: moves everything posted so far to q, oldest first (take_all's order); returns how many items
  // that was.
  std::size_t drain_into(work_queue& q) noexcept {
    std::size_t n = 0;
    for (work_item* w = take_all(); w != nullptr; ++n) {
      work_item* next = w->next;
      q.push_back(w);
      w = next;
    }
    return n;
  }

 private:
  std::atomic<work_item*> head_{nullptr};
};

}  // namespace tern::detail
