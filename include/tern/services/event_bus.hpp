// tern/services/event_bus.hpp
//
// event_bus: typed events published from any thread, delivered to handlers on the loops that subscribed them.
//
//   svc::event_bus bus;
//   svc::subscription sub = bus.subscribe<tick>([](const tick& t) { ... });               // this loop, priority 0
//   svc::subscription log = bus.subscribe<tick>([](const tick& t) -> tern::task<> { ... co_await ...; }, 10);
//   bus.publish(tick{42});                                                                // any thread
//
// Rules:
// - A handler runs on the loop it was subscribed on (the calling task's loop, or the one passed to subscribe). A
//   publish copies the event once per subscription into that subscription's queue and, if the loop has nothing of
//   the bus queued yet, posts one delivery pass to it. publish never runs a handler inline.
// - Order: among the deliveries pending on one loop (all event types together), a lower priority number goes
//   first; equal priorities go in the order the events reached the loop, and one publish reaches equal-priority
//   subscriptions in the order they subscribed. A publish on the subscriber's own loop reaches it at once; one from
//   another thread reaches it when the loop's next delivery pass adopts it. So a subscription sees the events of
//   one publishing thread in publish order.
// - A handler is a callable taking const E&, returning void or tern::task<>. A coroutine handler gets its own copy
//   of the event (it lives in the coroutine's frame) and is started in its turn; the next delivery waits until it
//   has first suspended (or finished), not until it has finished, so a slow coroutine does not hold up the loop.
//   A plain handler's exception, or a coroutine's, goes to the loop's exception handler; delivery goes on.
// - subscription is RAII: destroying it (or reset()) unsubscribes: no delivery starts after that; from another
//   thread, a delivery already under way may still finish. The handler object is destroyed on the subscriber's
//   loop once its last coroutine has finished (at once when unsubscribed there with nothing under way).
// - An event type is a copyable, default-constructible value. Pending events wait in rings per subscription
//   whose slots are reused by assignment; the rings, the loop's order queues and a coroutine handler's frame
//   (tern's frame pool) grow to their high-water mark and then stay: no heap allocation per event in steady state
//   (an event whose copy allocates, a std::string member, reuses the slot's capacity, except in the copy a
//   coroutine handler takes).
// - Cost: a publish on the subscriber's loop takes no atomic read-modify-write once the bus's lock has biased
//   towards the publishing thread: a copy into the ring and an entry in the order queue; a delivery pass is posted
//   once per burst. A publish from another thread takes the queue's spinlock, and the pass adopts everything
//   waiting under one acquisition.
// - Lifetimes: the bus outlives its subscriptions (its destructor terminates if one is left) and the loops'
//   activity for it: declare it before the loops, so that it is destroyed after them. A subscription reset from
//   another thread is freed by its loop, so that loop must run once more after it.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "tern/detail/biased_lock.hpp"
#include "tern/detail/spinlock.hpp"
#include "tern/io_context.hpp"
#include "tern/spawn.hpp"
#include "tern/task.hpp"

namespace tern::services {

class event_bus;

namespace detail {

// A number per event type, dense from 0 (the index of its subscriber list).
std::size_t next_event_type() noexcept;
template <class E>
std::size_t event_type() noexcept {
  static const std::size_t id = next_event_type();
  return id;
}

// A FIFO that keeps its slots: they are overwritten, never destroyed, so a warm ring allocates nothing.
template <class E>
class event_ring {
 public:
  bool empty() const noexcept { return count_ == 0; }
  template <class V>
  void push(V&& e) {
    if (count_ == slots_.size()) grow();
    slots_[(head_ + count_) & (slots_.size() - 1)] = std::forward<V>(e);
    ++count_;
  }
  E& front() noexcept { return slots_[head_]; }
  void pop() noexcept {
    head_ = (head_ + 1) & (slots_.size() - 1);
    --count_;
  }

 private:
  void grow() {
    std::vector<E> bigger(slots_.empty() ? 8 : slots_.size() * 2);  // a power of two, for the masks
    for (std::size_t i = 0; i < count_; ++i) bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    slots_.swap(bigger);
    head_ = 0;
  }

  std::vector<E> slots_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
};

class loop_queue;

// One subscription: its handler and its pending events, in two rings. The local ring is filled by publishes on
// the subscriber's own loop and read by its deliveries, with no lock; the remote ring is filled by other threads
// under the loop_queue's lock, and its events move to the local ring when a delivery pass adopts them. A
// subscriber is freed on its loop, once unsubscribed (released) and idle.
class subscriber {
 public:
  subscriber(std::shared_ptr<loop_queue> q, std::size_t type, int priority) noexcept
      : queue(std::move(q)), type(type), priority(priority) {}
  virtual ~subscriber() = default;
  subscriber(const subscriber&) = delete;
  subscriber& operator=(const subscriber&) = delete;

  // On the loop: appends a copy of *event (an E) to the local ring.
  virtual void push_local(const void* event) = 0;
  // Any other thread, queue lock held: appends a copy of *event to the remote ring.
  virtual void push_remote(const void* event) = 0;
  // On the loop, queue lock held: moves the oldest remote event to the back of the local ring.
  virtual void adopt_remote() = 0;
  // On the loop: takes the oldest local event and runs the handler on it; true if it started a coroutine.
  virtual bool deliver_front() = 0;
  // On the loop: discards the oldest local event.
  virtual void drop_front() noexcept = 0;

  // Read by every thread, written once: the first line.
  const std::shared_ptr<loop_queue> queue;  // kept alive by its subscribers (and by a queued delivery pass)
  const std::size_t type;
  const int priority;
  // Cleared by the unsubscription (any thread); a delivery pass checks it before each delivery.
  std::atomic<bool> subscribed{true};
  // The loop's own state (no lock), in a line of its own: a publisher on another thread writes `remote` below,
  // and sharing a line with it made every delivery wait for that line (services/events across two workers).
  alignas(64) std::size_t pending = 0;  // events in the local ring, each with its entry in the loop's order queue
  std::size_t coroutines = 0;           // its coroutine handlers still running
  bool delivering = false;              // its handler is being called now
  bool released = false;                // the loop has seen the unsubscription: freed as soon as it is idle
  // Under the queue's lock:
  alignas(64) std::size_t remote = 0;  // events in the remote ring
};

// The deliveries pending on one loop, for one bus. Publishes on the loop append to an order queue per priority
// (FIFO within one priority, so the common single-priority case is a ring, not a heap); publishes from other
// threads append to a remote list under a spinlock, adopted in one batch by the next delivery pass.
class loop_queue : public std::enable_shared_from_this<loop_queue> {
 public:
  explicit loop_queue(io_context& ctx) noexcept : ctx_(&ctx) {}

  std::size_t subscriptions = 0;  // live subscriptions on it; guarded by the bus's lock

  io_context& context() const noexcept { return *ctx_; }
  // Queues event for s, and a delivery pass if none is queued. On the loop.
  void enqueue_local(subscriber* s, const void* event);
  // Queues event for s from another thread, and a delivery pass if the remote list was empty.
  void enqueue_remote(subscriber* s, const void* event);
  // s has been unsubscribed (it is off the bus's lists): no delivery starts after this on the loop; from
  // another thread, one under way may finish. s is freed on the loop once idle. Any thread.
  void release(subscriber* s);
  // A coroutine handler of s has finished (on the loop).
  void coroutine_done(subscriber* s) noexcept;

 private:
  struct bucket {
    int priority;
    event_ring<subscriber*> order;
  };
  void push_order(subscriber* s);
  subscriber* pop_order() noexcept;
  void adopt_remote();
  void schedule();
  void post_pass();
  // Delivers pending events in order, a bounded number per pass (the loop's I/O is not starved by a flood).
  void drain();
  void free_if_idle(subscriber* s) noexcept;
  void rethrow_on_loop(std::exception_ptr e);

  io_context* ctx_;
  // The loop's own (no lock):
  std::vector<bucket> buckets_;  // by ascending priority; kept once created, so a warm queue allocates nothing
  bool scheduled_ = false;       // a delivery pass is queued or running
  // Other threads' publishes, under remote_lock_, in lines of their own (the loop's fields above are written on
  // every delivery):
  alignas(64) tern::detail::spinlock remote_lock_;
  std::vector<subscriber*> remote_order_;  // reused: grows to the most remote deliveries ever waiting at once
  std::atomic<bool> remote_waiting_{false};  // remote_order_ is not empty and a pass has been posted for it
};

template <class E, class F>
class handler_subscriber final : public subscriber {
 public:
  static constexpr bool coroutine = std::is_same_v<std::invoke_result_t<F&, const E&>, task<void>>;

  template <class G>
  handler_subscriber(std::shared_ptr<loop_queue> q, int priority, G&& f)
      : subscriber(std::move(q), event_type<E>(), priority), handler_(std::forward<G>(f)) {}

  void push_local(const void* event) override { ring_.push(*static_cast<const E*>(event)); }
  void push_remote(const void* event) override { remote_ring_.push(*static_cast<const E*>(event)); }
  void adopt_remote() override {
    ring_.push(std::move(remote_ring_.front()));
    remote_ring_.pop();
  }
  void drop_front() noexcept override { ring_.pop(); }
  bool deliver_front() override {
    // A copy: the handler may publish to this subscription, and a push may grow the ring under a reference.
    current_ = ring_.front();
    ring_.pop();
    if constexpr (coroutine) {
      tern::spawn(queue->context(), run(this, current_)).detach();
      return true;
    } else {
      handler_(current_);
      return false;
    }
  }

 private:
  // The coroutine delivery: its frame holds the copy of the event the handler refers to.
  static task<void> run(handler_subscriber* self, E event) {
    struct done_guard {
      handler_subscriber* self;
      ~done_guard() { self->queue->coroutine_done(self); }  // after the handler's task is destroyed (declared first)
    } guard{self};
    task<void> handled = self->handler_(event);
    co_await std::move(handled);
  }

  F handler_;
  event_ring<E> ring_;  // on the loop
  E current_{};
  alignas(64) event_ring<E> remote_ring_;  // under the queue's lock, in its own line (see subscriber)  // the event being delivered to a plain handler (a slot reused like the ring's)
};

}  // namespace detail

// An active subscription; destroying it (or reset()) unsubscribes.
class [[nodiscard]] subscription {
 public:
  // No subscription.
  subscription() noexcept = default;
  subscription(subscription&& o) noexcept
      : bus_(std::exchange(o.bus_, nullptr)), subscriber_(std::exchange(o.subscriber_, nullptr)) {}
  subscription& operator=(subscription&& o) noexcept {
    if (this != &o) {
      reset();
      bus_ = std::exchange(o.bus_, nullptr);
      subscriber_ = std::exchange(o.subscriber_, nullptr);
    }
    return *this;
  }
  subscription(const subscription&) = delete;
  subscription& operator=(const subscription&) = delete;
  // Unsubscribes.
  ~subscription() { reset(); }

  // Unsubscribes now (see the rules above); idempotent.
  void reset() noexcept;
  // True while subscribed.
  bool active() const noexcept { return subscriber_ != nullptr; }

 private:
  friend class event_bus;
  subscription(event_bus* bus, detail::subscriber* s) noexcept : bus_(bus), subscriber_(s) {}

  event_bus* bus_ = nullptr;
  detail::subscriber* subscriber_ = nullptr;
};

class event_bus {
 public:
  // An empty bus.
  event_bus() = default;
  // Every subscription must have been reset (terminates otherwise).
  ~event_bus();
  event_bus(const event_bus&) = delete;
  event_bus& operator=(const event_bus&) = delete;

  // Subscribes handler (void or tern::task<> from const E&) to events of type E, delivered on the calling
  // thread's loop with priority (lower first). Throws std::logic_error off a loop.
  template <class E, class F>
  subscription subscribe(F&& handler, int priority = 0) {
    io_context* here = io_context::current();
    if (here == nullptr) throw std::logic_error("tern::services::event_bus::subscribe: no loop runs on this thread");
    return subscribe<E>(*here, std::forward<F>(handler), priority);
  }

  // Subscribes handler to events of type E, delivered on loop with priority (lower first). Any thread.
  template <class E, class F>
  subscription subscribe(io_context& loop, F&& handler, int priority = 0) {
    using H = std::decay_t<F>;
    static_assert(std::is_same_v<E, std::decay_t<E>>, "subscribe to a plain event type (no reference, no const)");
    static_assert(std::default_initializable<E> && std::copyable<E>,
                  "an event type is a copyable, default-constructible value (its queue slots are reused)");
    static_assert(std::invocable<H&, const E&>, "the handler must be callable with const E&");
    if constexpr (std::invocable<H&, const E&>) {
      using R = std::invoke_result_t<H&, const E&>;
      static_assert(std::is_void_v<R> || std::is_same_v<R, task<void>>,
                    "the handler must return void or tern::task<>");
    }
    auto s = std::make_unique<detail::handler_subscriber<E, H>>(queue_for(loop), priority, std::forward<F>(handler));
    attach(s.get());
    return subscription(this, s.release());
  }

  // Queues a copy of event for every subscription to E, on its loop. Any thread; no allocation once warm.
  template <class E>
  void publish(const E& event) {
    publish_erased(detail::event_type<E>(), &event);
  }

  // Subscriptions alive now.
  std::size_t subscriptions() const;

 private:
  friend class subscription;
  std::shared_ptr<detail::loop_queue> queue_for(io_context& loop);
  void attach(detail::subscriber* s);
  void detach(detail::subscriber* s) noexcept;
  void publish_erased(std::size_t type, const void* event);

  // Guards the lists below; taken before a loop_queue's. Biased: the thread that publishes most takes it with no
  // atomic read-modify-write (tern/detail/biased_lock.hpp).
  mutable tern::detail::biased_lock lock_;
  std::vector<std::vector<detail::subscriber*>> by_type_;  // indexed by detail::event_type<E>()
  // One per loop with live subscriptions (dropped with its last one, so a loop made later at the same address
  // gets a fresh queue).
  std::vector<std::shared_ptr<detail::loop_queue>> queues_;
  std::size_t live_ = 0;
};

}  // namespace tern::services
