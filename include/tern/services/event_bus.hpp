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
// - Order: a subscription sees the events of one publishing thread in publish order. Among the subscriptions with
//   events pending on one loop (all event types together), a lower priority number goes first; subscriptions of
//   equal priority take turns in the order they came to have events pending (one publish reaches them in the order
//   they subscribed), each turn delivering the events it had pending then, in a batch. A publish on the
//   subscriber's own loop reaches it at once; one from another thread reaches it when the loop's next delivery pass
//   adopts it.
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
//   towards the publishing thread, and is inlined at the caller for the event's type: a copy into the ring, and an
//   entry in the order queue only if the subscription had nothing pending; a delivery pass is posted once per
//   burst and calls each handler on its batch in a loop. A publish from another thread takes the queue's
//   spinlock, and the pass adopts everything waiting under one acquisition.
// - Lifetimes: the bus outlives its subscriptions (its destructor terminates if one is left) and the loops'
//   activity for it: declare it before the loops, so that it is destroyed after them. A subscription reset from
//   another thread is freed by its loop, so that loop must run once more after it.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <exception>
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

// A number per event type (the index of its subscriber list), dense from 1, given the first time the type is
// subscribed to; 0 while it never was. A publish reads it with one plain load and no initialisation guard: a type
// still at 0 has no subscriber, and list 0 stays empty.
std::size_t next_event_type() noexcept;
template <class E>
inline constinit std::atomic<std::size_t> event_type_id{0};
template <class E>
std::size_t event_type() noexcept {
  // relaxed: a number, publishing nothing; a subscription reaches publishers through the bus's lock.
  std::size_t id = event_type_id<E>.load(std::memory_order_relaxed);
  if (id == 0) [[unlikely]] {
    const std::size_t fresh = next_event_type();
    // Two threads may race to number the type: the first number stored wins (the other one is left unused).
    if (event_type_id<E>.compare_exchange_strong(id, fresh, std::memory_order_relaxed)) id = fresh;
  }
  return id;
}

// A FIFO that keeps its slots: they are overwritten, never destroyed, so a warm ring allocates nothing. Its
// capacity is a power of two: an index wraps with the mask.
template <class E>
class event_ring {
 public:
  bool empty() const noexcept { return count_ == 0; }
  template <class V>
  void push(V&& e) {
    if (count_ == capacity_) grow();
    slots_[(head_ + count_) & (capacity_ - 1)] = std::forward<V>(e);
    ++count_;
  }
  E& front() noexcept { return slots_[head_]; }
  void pop() noexcept {
    head_ = (head_ + 1) & (capacity_ - 1);
    --count_;
  }

 private:
  [[gnu::noinline]] void grow() {  // out of line: a push stays a leaf function
    const std::size_t bigger = capacity_ == 0 ? 8 : capacity_ * 2;
    auto fresh = std::make_unique<E[]>(bigger);
    for (std::size_t i = 0; i < count_; ++i) fresh[i] = std::move(slots_[(head_ + i) & (capacity_ - 1)]);
    slots_ = std::move(fresh);
    capacity_ = bigger;
    head_ = 0;
  }

  std::unique_ptr<E[]> slots_;
  std::size_t capacity_ = 0;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
};

// The local ring of a subscription: an event_ring whose count is kept by its owner (subscriber::pending), so that
// a publish and a delivery each update one counter, not two. Slots are reused by assignment, like event_ring's.
template <class E>
class counted_ring {
 public:
  // Appends e behind the count events held; the owner then counts it.
  template <class V>
  void push(V&& e, std::size_t count) {
    if (count == capacity_) grow(count);
    slots_[(head_ + count) & mask_] = std::forward<V>(e);
  }
  E& front() noexcept { return slots_[head_]; }
  // Takes the front off; the owner uncounts it.
  void pop() noexcept { head_ = (head_ + 1) & mask_; }

 private:
  [[gnu::noinline]] void grow(std::size_t count) {  // out of line, like event_ring's
    const std::size_t bigger = capacity_ == 0 ? 8 : capacity_ * 2;
    auto fresh = std::make_unique<E[]>(bigger);
    for (std::size_t i = 0; i < count; ++i) fresh[i] = std::move(slots_[(head_ + i) & mask_]);
    slots_ = std::move(fresh);
    capacity_ = bigger;
    mask_ = bigger - 1;
    head_ = 0;
  }

  std::unique_ptr<E[]> slots_;
  std::size_t capacity_ = 0;
  std::size_t mask_ = 0;
  std::size_t head_ = 0;
};

class loop_queue;

// What a batch of deliveries did (subscriber::deliver).
struct batch_result {
  std::size_t delivered = 0;     // events taken off the local ring (handed to the handler)
  bool started = false;          // the last one started a coroutine handler: the batch stopped there
  std::exception_ptr error;      // a plain handler threw: the batch stopped after that event
};

// One subscription: its handler and its pending events, in two rings. The local ring is filled by publishes on
// the subscriber's own loop and read by its deliveries, with no lock; the remote ring is filled by other threads
// under the loop_queue's lock, and its events move to the local ring when a delivery pass adopts them. A
// subscriber is freed on its loop, once unsubscribed (released) and idle.
//
// The per-event operations are typed: a publish on the subscriber's loop pushes into the ring of typed_subscriber<E>
// inline, at the caller; the rest are functions reached through pointers set by the handler's type, not virtual
// calls: one from another thread makes one indirect call into a ring push of the event's own type, and a delivery
// pass one per batch, whose loop over the events calls the handler directly.
class subscriber {
 public:
  using push_fn = void (*)(subscriber*, const void*);
  using adopt_fn = void (*)(subscriber*);
  using deliver_fn = batch_result (*)(subscriber*, std::size_t);
  using drop_fn = void (*)(subscriber*, std::size_t) noexcept;

  subscriber(std::shared_ptr<loop_queue> q, std::size_t type, int priority, push_fn push_remote,
             adopt_fn adopt_remote, deliver_fn deliver, drop_fn drop) noexcept;  // after loop_queue
  virtual ~subscriber() = default;
  subscriber(const subscriber&) = delete;
  subscriber& operator=(const subscriber&) = delete;

  // Read by every thread, written once: the first line.
  const std::shared_ptr<loop_queue> queue;  // kept alive by its subscribers (and by a queued delivery pass)
  loop_queue* const loop;                   // queue.get(), read by every publish
  io_context* const context;                // loop's, read by every publish (one load fewer)
  const std::size_t type;
  const int priority;
  // Any other thread, queue lock held: appends a copy of *event to the remote ring.
  const push_fn push_remote;
  // On the loop, queue lock held: moves the oldest remote event to the back of the local ring.
  const adopt_fn adopt_remote;
  // On the loop: delivers up to n local events in order, one after the other, and stops early at an
  // unsubscription, at a coroutine handler's start, at an exception, or when the batch is cut (loop_queue).
  const deliver_fn deliver;
  // On the loop: discards the n oldest local events.
  const drop_fn drop;
  // Cleared by the unsubscription (any thread); a delivery pass checks it before each delivery.
  std::atomic<bool> subscribed{true};
  // The loop's own state (no lock), in a line of its own: a publisher on another thread writes `remote` below,
  // and sharing a line with it made every delivery wait for that line (services/events across two workers).
  alignas(64) std::size_t pending = 0;  // events in the local ring (its count: counted_ring)
  std::size_t coroutines = 0;           // its coroutine handlers still running
  bool queued = false;                  // in the loop's order queue (once, however many events it has pending)
  bool delivering = false;              // its handler is being called now
  bool released = false;                // the loop has seen the unsubscription: freed as soon as it is idle
  // Under the queue's lock:
  alignas(64) std::size_t remote = 0;  // events in the remote ring
};

// The deliveries pending on one loop, for one bus. A subscriber with local events pending sits once in an order
// queue per priority (FIFO within one priority, so the common single-priority case is a ring, not a heap), and a
// delivery pass hands it its events in a batch; publishes from other threads append to a remote list under a
// spinlock, adopted in one batch by the next delivery pass.
class loop_queue : public std::enable_shared_from_this<loop_queue> {
 public:
  explicit loop_queue(io_context& ctx) noexcept : ctx_(&ctx) {}

  std::size_t subscriptions = 0;  // live subscriptions on it; guarded by the bus's lock

  io_context& context() const noexcept { return *ctx_; }
  // Queues s, which just got a local event, and a delivery pass if none is scheduled. On the loop, for a
  // subscriber not queued: while one is queued a pass is scheduled (a pass ends unscheduled only with the order
  // queues empty), so a publish to a queued subscriber, the common event of a burst, is one test.
  void queue_local(subscriber* s);
  // Queues event for s from another thread, and a delivery pass if the remote list was empty.
  void enqueue_remote(subscriber* s, const void* event);
  // s has been unsubscribed (it is off the bus's lists): no delivery starts after this on the loop; from
  // another thread, one under way may finish. s is freed on the loop once idle. Any thread.
  void release(subscriber* s);
  // A coroutine handler of s has finished (on the loop).
  void coroutine_done(subscriber* s) noexcept;
  // True once a subscription of a lower priority number than the batch being delivered got events pending: the
  // batch stops before its next event, so that they go first.
  bool batch_cut() const noexcept { return batch_cut_; }

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
  // Discards what s has pending (it is unsubscribed) and frees it if it is idle.
  void discard_pending(subscriber* s) noexcept;
  void free_if_idle(subscriber* s) noexcept;
  void rethrow_on_loop(std::exception_ptr e);

  io_context* ctx_;
  // The loop's own (no lock):
  std::vector<bucket> buckets_;  // by ascending priority; kept once created, so a warm queue allocates nothing
  bool scheduled_ = false;       // a delivery pass is queued or running
  bool batch_cut_ = false;       // see batch_cut()
  int batch_priority_ = std::numeric_limits<int>::min();  // of the batch being delivered (min: none)
  // Other threads' publishes, under remote_lock_, in lines of their own (the loop's fields above are written on
  // every delivery):
  alignas(64) tern::detail::spinlock remote_lock_;
  std::vector<subscriber*> remote_order_;  // reused: grows to the most remote deliveries ever waiting at once
  std::atomic<bool> remote_waiting_{false};  // remote_order_ is not empty and a pass has been posted for it
};

inline subscriber::subscriber(std::shared_ptr<loop_queue> q, std::size_t type, int priority, push_fn push_remote,
                              adopt_fn adopt_remote, deliver_fn deliver, drop_fn drop) noexcept
    : queue(std::move(q)),
      loop(queue.get()),
      context(&loop->context()),
      type(type),
      priority(priority),
      push_remote(push_remote),
      adopt_remote(adopt_remote),
      deliver(deliver),
      drop(drop) {}

// A subscription's rings, by event type alone: a publish, which knows the event's type but not the handler's,
// pushes into ring_ inline (event_bus::publish), with no indirect call.
template <class E>
class typed_subscriber : public subscriber {
 public:
  using subscriber::subscriber;

  counted_ring<E> ring_;  // on the loop; its count is `pending`
  E current_{};         // the event being delivered to a plain handler (a slot reused like the ring's)
  alignas(64) event_ring<E> remote_ring_;  // under the queue's lock, in its own line (see subscriber)
};

template <class E, class F>
class handler_subscriber final : public typed_subscriber<E> {
  using typed_subscriber<E>::ring_;
  using typed_subscriber<E>::current_;
  using typed_subscriber<E>::remote_ring_;

 public:
  static constexpr bool coroutine = std::is_same_v<std::invoke_result_t<F&, const E&>, task<void>>;

  template <class G>
  handler_subscriber(std::shared_ptr<loop_queue> q, int priority, G&& f)
      : typed_subscriber<E>(std::move(q), event_type<E>(), priority, &push_remote_to,
                            &adopt_remote_of, &deliver_to, &drop_from),
        handler_(std::forward<G>(f)) {}

 private:
  static handler_subscriber* self(subscriber* s) noexcept { return static_cast<handler_subscriber*>(s); }
  static void push_remote_to(subscriber* s, const void* event) {
    self(s)->remote_ring_.push(*static_cast<const E*>(event));
  }
  static void adopt_remote_of(subscriber* s) {
    handler_subscriber* h = self(s);
    h->ring_.push(std::move(h->remote_ring_.front()), h->pending);  // the caller counts it
    h->remote_ring_.pop();
  }
  static void drop_from(subscriber* s, std::size_t n) noexcept {
    for (; n != 0; --n) self(s)->ring_.pop();
  }
  // Each event taken off is uncounted (pending) before its handler runs: a handler that publishes to this
  // subscription pushes behind the events really left. The count of the batch is a local (a register), not the
  // result's field, which the handler's stores could alias.
  static batch_result deliver_to(subscriber* s, std::size_t n) {
    handler_subscriber* h = self(s);
    loop_queue* const loop = h->loop;
    std::size_t done = 0;
    batch_result r;
    while (done != n && !loop->batch_cut() && h->subscribed.load(std::memory_order_acquire)) {
      try {
        ++done;
        --h->pending;
        if constexpr (coroutine) {
          h->current_ = h->ring_.front();
          h->ring_.pop();
          tern::spawn(h->queue->context(), run(h, h->current_)).detach();
          r.started = true;
          break;
        } else if constexpr (std::is_trivially_copyable_v<E> && sizeof(E) <= 4 * sizeof(void*)) {
          // A copy (the handler may publish to this subscription, and a push may grow the ring under a reference)
          // that stays in registers.
          const E event = h->ring_.front();
          h->ring_.pop();
          h->handler_(event);
        } else {
          // A copy into a slot that keeps its capacity (a std::string member's), for the same reason.
          h->current_ = h->ring_.front();
          h->ring_.pop();
          h->handler_(h->current_);
        }
      } catch (...) {
        r.error = std::current_exception();
        break;
      }
    }
    r.delivered = done;
    return r;
  }

  // The coroutine delivery: its frame holds the copy of the event the handler refers to.
  static task<void> run(handler_subscriber* self, E event) {
    struct done_guard {
      handler_subscriber* self;
      ~done_guard() { self->queue->coroutine_done(self); }  // after the handler's task is destroyed (declared first)
    } guard{self};
    task<void> handled = self->handler_(event);
    co_await std::move(handled);
  }

  alignas(64) F handler_;  // read on the loop: out of the remote ring's line
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
    // relaxed: see event_type(); 0 (never subscribed to) finds list 0, which is empty.
    const std::size_t type = detail::event_type_id<E>.load(std::memory_order_relaxed);
    if (lock_.lock_biased()) [[likely]] {
      // Held through the bias: released by one store, known here (no flag kept and tested).
      tern::detail::biased_guard lock(lock_, true);
      publish_locked(type, event);
    } else {
      publish_spinlocked(type, event);
    }
  }
  // Subscriptions alive now.
  std::size_t subscriptions() const;

 private:
  friend class subscription;
  std::shared_ptr<detail::loop_queue> queue_for(io_context& loop);
  void attach(detail::subscriber* s);
  void detach(detail::subscriber* s) noexcept;

  // Under the lock: queues a copy of event for every subscription to its type.
  template <class E>
  void publish_locked(std::size_t type, const E& event) {
    if (type >= types_) return;
    // Inline at the caller, for its type: a subscriber on the publishing thread's loop gets the event pushed
    // straight into its typed ring (no indirect call); one on another loop goes through its queue's lock.
    for (detail::subscriber* s : by_type_[type]) {
      if (s->context->running_here()) [[likely]] {
        const std::size_t pending = s->pending;  // the ring's count (a local: the event's store may alias it)
        static_cast<detail::typed_subscriber<E>*>(s)->ring_.push(event, pending);
        s->pending = pending + 1;
        if (!s->queued) s->loop->queue_local(s);
      } else {
        s->loop->enqueue_remote(s, &event);
      }
    }
  }
  // publish with the lock taken through its spinlock (not biased to this thread), out of the caller's way.
  template <class E>
  [[gnu::noinline]] void publish_spinlocked(std::size_t type, const E& event) {
    tern::detail::biased_guard lock(lock_, false);
    publish_locked(type, event);
  }

  // Guards the lists below; taken before a loop_queue's. Biased: the thread that publishes most takes it with no
  // atomic read-modify-write (tern/detail/biased_lock.hpp).
  mutable tern::detail::biased_lock lock_;
  std::vector<std::vector<detail::subscriber*>> by_type_;  // indexed by detail::event_type<E>()
  std::size_t types_ = 0;                                  // by_type_.size(), without a division per publish
  // One per loop with live subscriptions (dropped with its last one, so a loop made later at the same address
  // gets a fresh queue).
  std::vector<std::shared_ptr<detail::loop_queue>> queues_;
  std::size_t live_ = 0;
};

}  // namespace tern::services
