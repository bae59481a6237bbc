// tern/detail/sync_waiter.hpp
//
// The waiting machinery shared by every primitive of tern::sync (channel, mutex, semaphore, events, latch,
// wait_group).
//
// A coroutine that has to wait is a sync_waiter: an intrusive node inside its awaiter (so inside its coroutine
// frame), linked on a FIFO waiter_list of the primitive. Nothing is allocated per wait. Each primitive guards its
// state and its lists with one lock (a spinlock biased towards a thread that uses it alone, biased_lock.hpp); the
// node records the loop it was suspended on, and whoever wakes it (from any thread) takes it off the list under
// that lock, writes its result into it, releases the lock, and then queues it on that loop with
// io_context::enqueue. So a waiter always resumes on its own loop, never inline on the waker's stack, and the lock
// is never held across a wake-up (which may cost an eventfd write).
//
// The state of a linked node changes only under the primitive's lock, and exactly one party takes it off the list:
// - a waker (set, unlock, release, send, receive, close): state becomes granted or closed, and the waker queues it;
// - cancel() on the waiter's own loop: state becomes canceled, and cancel() queues it;
// - the awaiter's destructor (its frame destroyed while suspended, as ~io_context does): it unlinks itself.
// Whoever finds the node already off the list leaves it alone, so a cancellation racing a wake-up from another
// thread loses cleanly: the waiter then completes with what it was granted (a value, the lock, a permit), and
// nothing is lost. The waiter reads its result after resuming without the lock: the wake-up's queue push
// (a release CAS on the loop's inbox, or the same thread) orders the waker's writes before the resumption.
//
// After queueing a node, a waker touches neither the node nor the primitive: the resumed coroutine may destroy
// both at once. The loop a waiter was suspended on must outlive every wake-up sent to it.
#pragma once

#include <coroutine>
#include <cstddef>
#include <mutex>
#include <new>
#include <stdexcept>
#include <stop_token>
#include <system_error>
#include <utility>

#include "tern/detail/biased_lock.hpp"
#include "tern/detail/frame_pool.hpp"
#include "tern/detail/stop_binding.hpp"
#include "tern/detail/work_queue.hpp"
#include "tern/error.hpp"
#include "tern/io_context.hpp"

namespace tern::detail {

// Where a waiter stands. Changes only under the owning primitive's lock once the waiter is linked.
enum class wait_state : unsigned char {
  idle,      // not waiting (what abandon() reports for a waiter that never suspended)
  waiting,   // linked on the primitive's list
  granted,   // got what it waited for (a value, a slot, ownership, a permit, a signal)
  closed,    // the channel was closed
  canceled,  // cancel() (or the destructor) took it off the list first
};

// A suspended coroutine: the queue node that resumes it, its links on a waiter list, and its loop.
// A waiter is made on every wait, and most waits complete at once, so its fields are set only when they are
// needed: the node, the links, ctx and state when it is linked (sync_wait::link), state alone when the wait
// completes without suspending.
//
// Why the node is a union member rather than a base: work_item's fields have default member initialisers, which
// every constructor of the base applies (its "unset" constructor too), so a base node cost every wait three stores
// (32 bytes zeroed, 6 instructions of a channel's send and receive). In the union it is constructed only when
// the waiter suspends (sync_wait::link).
struct sync_waiter {
  sync_waiter() noexcept {}
  union {
    resume_item node;  // constructed by sync_wait::link, queued by resume_waiter
  };
  sync_waiter* prev_waiter;
  sync_waiter* next_waiter;
  io_context* ctx;  // the loop the coroutine was suspended on, and resumes on
  wait_state state;
};

// Intrusive FIFO of waiters (doubly linked, so a cancelled waiter unlinks in O(1)). Guarded by the primitive's lock.
class waiter_list {
 public:
  bool empty() const noexcept { return head_ == nullptr; }

  // Appends w and marks it waiting.
  void push_back(sync_waiter* w) noexcept {
    w->state = wait_state::waiting;
    w->next_waiter = nullptr;
    w->prev_waiter = tail_;
    if (tail_ == nullptr) {
      head_ = w;
    } else {
      tail_->next_waiter = w;
    }
    tail_ = w;
  }

  // Removes and returns the oldest waiter (nullptr if none); the caller sets its new state.
  sync_waiter* pop_front() noexcept {
    sync_waiter* w = head_;
    if (w != nullptr) remove(w);
    return w;
  }

  // Unlinks w, which must be on this list.
  void remove(sync_waiter* w) noexcept {
    if (w->prev_waiter != nullptr) {
      w->prev_waiter->next_waiter = w->next_waiter;
    } else {
      head_ = w->next_waiter;
    }
    if (w->next_waiter != nullptr) {
      w->next_waiter->prev_waiter = w->prev_waiter;
    } else {
      tail_ = w->prev_waiter;
    }
    w->prev_waiter = w->next_waiter = nullptr;
  }

  // Empties the list, marking every waiter with s; returns the chain (oldest first, linked by next_waiter) for
  // resume_all once the lock is released.
  sync_waiter* release_all(wait_state s) noexcept {
    for (sync_waiter* w = head_; w != nullptr; w = w->next_waiter) w->state = s;
    sync_waiter* chain = head_;
    head_ = tail_ = nullptr;
    return chain;
  }

  // Takes up to n waiters off the front, marking them granted; returns them as a chain for resume_all and adds
  // their number to taken.
  sync_waiter* release_front(std::size_t n, std::size_t& taken) noexcept {
    if (n == 0 || head_ == nullptr) return nullptr;
    sync_waiter* chain = head_;
    sync_waiter* last = head_;
    last->state = wait_state::granted;
    std::size_t count = 1;
    while (count < n && last->next_waiter != nullptr) {
      last = last->next_waiter;
      last->state = wait_state::granted;
      ++count;
    }
    head_ = last->next_waiter;
    if (head_ == nullptr) {
      tail_ = nullptr;
    } else {
      head_->prev_waiter = nullptr;
    }
    last->next_waiter = nullptr;
    taken += count;
    return chain;
  }

 private:
  sync_waiter* head_ = nullptr;
  sync_waiter* tail_ = nullptr;
};

// Queues a waiter already taken off its list on its loop. Called without the lock; w is not touched afterwards.
inline void resume_waiter(sync_waiter* w) noexcept { w->ctx->enqueue(&w->node); }

// resume_waiter for each waiter of a chain from waiter_list::release_all, oldest first.
inline void resume_all(sync_waiter* chain) noexcept {
  while (chain != nullptr) {
    sync_waiter* next = chain->next_waiter;  // read before the queue push: the waiter may be gone right after it
    resume_waiter(chain);
    chain = next;
  }
}

// The loop of the calling thread, on which a wait suspends.
inline io_context& waiting_loop() {
  io_context* c = io_context::current();
  if (c == nullptr) throw std::logic_error("tern::sync: a coroutine can wait only while an io_context runs it");
  return *c;
}

// The base of every awaiter of tern::sync: links on a primitive's list, cancel(), context(), and the unlink on
// destruction. Together with await_ready/await_suspend/await_resume in the derived awaiter it models
// tern::cancellable_operation, so with_timeout and with_stop apply to every wait.
class sync_wait : public sync_waiter {
 public:
  sync_wait() noexcept = default;
  // Awaiters are moved (into with_timeout, with_stop) before they are awaited, never while suspended.
  sync_wait(sync_wait&&) noexcept : sync_waiter() {}
  sync_wait(const sync_wait&) = delete;
  sync_wait& operator=(const sync_wait&) = delete;
  sync_wait& operator=(sync_wait&&) = delete;
  // Every derived awaiter calls abandon() in its own destructor: it must be off the list before its own members
  // go (a channel's value slot, which a waker writes), and a second test here would cost every wait.
  ~sync_wait() = default;

  // The waits bind the stop token of the task that awaits them themselves (stop_binding.hpp): registered when a
  // wait suspends, unregistered when its node runs, so a wait that completes at once pays nothing for it.
  using binds_task_stop = void;

  // The loop the wait is suspended on (valid once suspended).
  io_context& context() const noexcept { return *ctx; }

  // Loop thread, while suspended: completes the wait soon with operation_canceled, unless a wake-up has already
  // taken it off the list (then it completes with what it was given). No effect when not suspended.
  void cancel() noexcept {
    if (!suspended_) return;
    {
      biased_guard guard(*lock_);
      if (state != wait_state::waiting) return;
      list_->remove(this);
      state = wait_state::canceled;
    }
    resume_waiter(this);
  }

 protected:
  // With lock held: links this waiter at the back of list; h resumes on loop when woken.
  void link(biased_lock& lock, waiter_list& list, io_context& loop, std::coroutine_handle<> h) noexcept {
    ::new (static_cast<void*>(&node)) resume_item();
    node.run = &resume_suspended;
    node.handle = h;
    ctx = &loop;
    lock_ = &lock;
    list_ = &list;
    reg_ = nullptr;
    suspended_ = true;
    list.push_back(this);
  }

  // The await_suspend of a derived wait, whose suspend(h) tries once more under the lock and links the wait or
  // not: if the awaiting coroutine is a task with a stoppable token, the token is registered while it waits.
  template <class P, class Suspend>
  bool suspend_bound(std::coroutine_handle<P> h, Suspend suspend) {
    const std::stop_token* t = task_stop_token(h);
    if (t == nullptr) [[likely]] return suspend(std::coroutine_handle<>(h));
    return suspend_registered(*t, h, suspend);
  }

  // In await_resume: the wait is over; returns how it ended. suspended_ was cleared by the node's run
  // (resume_suspended) if the wait suspended, so a wait that completed at once stores nothing here.
  wait_state resumed() const noexcept { return state; }

  // In destructors: unlinks a waiter whose coroutine is destroyed while suspended. Returns granted if it had been
  // given something it will now never use, so that the derived awaiter can pass it on (unlock, release, set).
  wait_state abandon() noexcept {
    if (!suspended_) [[likely]] return wait_state::idle;
    return abandon_suspended();
  }

 private:
  // The node's run function: the wait is over (the waker or cancel() queued it), so the coroutine is no longer
  // suspended on it; then resumes the coroutine. Clearing suspended_ here rather than in await_resume spares
  // every wait that completes at once a store (1 instruction of a channel's send and of its receive).
  static void resume_suspended(work_item* w) {
    // node is the first member of sync_waiter (in its anonymous union), so it shares the waiter's address.
    auto* self = static_cast<sync_wait*>(reinterpret_cast<sync_waiter*>(static_cast<resume_item*>(w)));
    if (self->reg_ != nullptr) (void)registration::release(self->reg_);
    self->suspended_ = false;
    self->node.handle.resume();
  }

  using registration = stop_registration<sync_wait>;

  // suspend_bound with a stoppable token: the block is taken before the wait can start (nothing may throw once
  // it is linked), the registration made once it is (a stop requested already cancels it at once).
  template <class Suspend>
  [[gnu::noinline]] bool suspend_registered(const std::stop_token& token, std::coroutine_handle<> h,
                                           Suspend suspend) {
    return registration::suspend(reg_, token, this, [&] { return suspend(h); });
  }

  [[gnu::noinline]] wait_state abandon_suspended() noexcept {
    suspended_ = false;
    // Before the lock: waits for a stop callback running on another thread.
    if (reg_ != nullptr) (void)registration::release(reg_);
    biased_guard guard(*lock_);
    if (state == wait_state::waiting) {
      list_->remove(this);
      state = wait_state::canceled;
    }
    return state;
  }

  // The primitive's lock and the list this waiter is on, set when it suspends and read only while suspended_ (so
  // not initialised: most waits complete without suspending).
  biased_lock* lock_;
  waiter_list* list_;
  registration* reg_;  // the task's stop token's registration, or null; set when it suspends, like lock_
  bool suspended_ = false;  // owner's thread only: from a suspension until the node's run resumes the coroutine
};

// An empty error_code whose value the compiler sees: success's category with a literal 0, so a caller's `!ec`
// folds away (a copy of success reads its value from memory: 2 instructions of every wait that tests it).
inline std::error_code wait_success() noexcept { return std::error_code(0, success.category()); }

// The error_code a finished wait reports; a closed channel reports closed_error, made only then.
inline std::error_code wait_error(wait_state s) noexcept {
  if (s == wait_state::canceled) [[unlikely]] return make_error_code(error::operation_canceled);
  return wait_success();
}
template <class E>
std::error_code wait_error(wait_state s, E closed_error) noexcept {
  if (s == wait_state::granted) [[likely]] return wait_success();
  if (s == wait_state::closed) return make_error_code(closed_error);
  return wait_error(s);
}

// The awaiter of a primitive whose waiters all wait for the same kind of thing: mutex (ownership), semaphore (a
// permit), the events (a signal), latch and wait_group (the count reaching zero). P grants it friendship and has:
//   biased_lock lock_;  waiter_list waiters_;
//   bool try_take_locked() noexcept;  // with lock_ held: takes what a waiter waits for if it is available now
//   void give_back() noexcept;        // passes on what was granted to a waiter that will never run
// and may have bool maybe_available() const noexcept (a relaxed look, no lock: false may spare await_ready the lock).
template <class P>
class [[nodiscard]] primitive_wait : public sync_wait {
 public:
  // A wait on p (made by p's wait(), lock() or acquire()).
  explicit primitive_wait(P& p) noexcept : p_(&p) {}
  // Moves a wait that has not been awaited yet (into with_timeout, with_stop).
  primitive_wait(primitive_wait&& o) noexcept : sync_wait(std::move(o)), p_(o.p_) {}
  // A waiter destroyed after being granted (the lock, a permit) but before it ran gives the grant back, so that a
  // frame destroyed with its loop cannot leave a mutex locked or a permit lost.
  ~primitive_wait() {
    if (abandon() == wait_state::granted) p_->give_back();
  }

  // Takes it now if it is available. A primitive with a lock-free hint (maybe_available, a relaxed read) spares
  // the lock when the hint says no: await_suspend checks again under the lock before it waits.
  bool await_ready() noexcept {
    if constexpr (requires(const P& p) { p.maybe_available(); }) {
      if (!p_->maybe_available()) return false;
    }
    biased_guard guard(p_->lock_);
    if (!p_->try_take_locked()) return false;
    state = wait_state::granted;
    return true;
  }
  // Tries again under the lock, and waits if it is still not available.
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> h) {
    return suspend_bound(h, [this](std::coroutine_handle<> c) { return suspend(c); });
  }
  // Empty when granted, operation_canceled when cancelled.
  std::error_code await_resume() noexcept { return wait_error(resumed()); }

 protected:
  P* p_;

 private:
  bool suspend(std::coroutine_handle<> h) {
    io_context& loop = waiting_loop();
    biased_guard guard(p_->lock_);
    if (p_->try_take_locked()) {
      state = wait_state::granted;
      return false;
    }
    link(p_->lock_, p_->waiters_, loop, h);
    return true;
  }
};

}  // namespace tern::detail
