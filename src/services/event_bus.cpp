// The event bus's untyped half: subscriber lists, per-loop delivery queues and the delivery pass.
//
// Threads and locks: the bus's lock (biased towards the thread that takes it most) guards the subscriber lists and
// is held through a whole publish, so an unsubscription that took it after a publish sees that publish's pushes
// done. A loop_queue's order queues, each subscriber's local ring and its loop-side counters belong to the loop's
// thread and take no lock; other threads append to the remote list and rings under the queue's spinlock, and the
// next delivery pass adopts them all under one acquisition. Handlers run with no lock held, so a handler may
// publish, subscribe or unsubscribe. A delivery pass is posted once per burst (scheduled_ on the loop,
// remote_waiting_ for other threads); a post allocates nothing once warm (tern's handler blocks and line pool).
#include "tern/services/event_bus.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <limits>

namespace tern::services {

namespace detail {

std::size_t next_event_type() noexcept {
  static std::atomic<std::size_t> next{1};  // 0: a type never subscribed to
  return next.fetch_add(1, std::memory_order_relaxed);  // a unique number, publishing nothing: relaxed
}

void loop_queue::push_order(subscriber* s) {
  s->queued = true;
  if (s->priority < batch_priority_) batch_cut_ = true;
  auto it = buckets_.begin();
  for (; it != buckets_.end(); ++it) {
    if (it->priority == s->priority) {
      it->order.push(s);
      return;
    }
    if (it->priority > s->priority) break;
  }
  it = buckets_.insert(it, bucket{s->priority, {}});
  it->order.push(s);
}

subscriber* loop_queue::pop_order() noexcept {
  for (bucket& b : buckets_) {
    if (!b.order.empty()) {
      subscriber* s = b.order.front();
      b.order.pop();
      s->queued = false;
      return s;
    }
  }
  return nullptr;
}

void loop_queue::enqueue_remote(subscriber* s, const void* event) {
  bool post = false;
  {
    std::lock_guard<tern::detail::spinlock> lock(remote_lock_);
    s->push_remote(s, event);
    ++s->remote;
    remote_order_.push_back(s);
    // relaxed: written only under remote_lock_ (here and in adopt_remote), which orders it.
    post = !remote_waiting_.load(std::memory_order_relaxed);
    if (post) remote_waiting_.store(true, std::memory_order_relaxed);
  }
  if (post) post_pass();
}

void loop_queue::adopt_remote() {
  std::lock_guard<tern::detail::spinlock> lock(remote_lock_);
  for (subscriber* s : remote_order_) {
    s->adopt_remote(s);
    --s->remote;
    ++s->pending;
    if (!s->queued) push_order(s);
  }
  remote_order_.clear();
  remote_waiting_.store(false, std::memory_order_relaxed);
}

void loop_queue::queue_local(subscriber* s) {
  push_order(s);
  if (!scheduled_) schedule();
}

void loop_queue::schedule() {
  scheduled_ = true;
  post_pass();
}

void loop_queue::post_pass() {
  ctx_->post([self = shared_from_this()] { self->drain(); });
}

void loop_queue::release(subscriber* s) {
  // release, paired with drain()'s acquire load: a pass that sees the subscriber gone also sees what the
  // unsubscribing thread did before.
  s->subscribed.store(false, std::memory_order_release);
  if (io_context::current() == ctx_) {
    s->released = true;
    free_if_idle(s);
    return;
  }
  // Its loop-side state is the loop's to read: the loop frees it.
  ctx_->post([self = shared_from_this(), s] {
    s->released = true;
    self->free_if_idle(s);
  });
}

void loop_queue::coroutine_done(subscriber* s) noexcept {
  if (io_context::current() != ctx_) {
    // A handler that ended on another thread: the count is the loop's (a post here costs no allocation once warm).
    ctx_->post([self = shared_from_this(), s] { self->coroutine_done(s); });
    return;
  }
  --s->coroutines;
  if (s->released) free_if_idle(s);
}

void loop_queue::free_if_idle(subscriber* s) noexcept {
  if (s->pending != 0 || s->queued || s->coroutines != 0 || s->delivering) return;
  {
    // Unsubscribed, so no publish adds to it any more; events still in its remote ring are adopted (and dropped)
    // by a pass that is already posted.
    std::lock_guard<tern::detail::spinlock> lock(remote_lock_);
    if (s->remote != 0) return;
  }
  delete s;
}

void loop_queue::drain() {
  // relaxed: a hint only; a false one costs a lock, a stale false is followed by the pass the publisher posts.
  if (remote_waiting_.load(std::memory_order_relaxed)) adopt_remote();
  constexpr std::size_t deliveries_per_pass = 64;
  std::size_t budget = deliveries_per_pass;
  while (budget != 0) {
    subscriber* s = pop_order();
    if (s == nullptr) {
      scheduled_ = false;
      return;
    }
    // The events pending now, as a batch: one published by a handler of the batch queues s again, behind the
    // subscribers waiting already.
    const std::size_t n = std::min(s->pending, budget);
    s->delivering = true;
    batch_priority_ = s->priority;
    batch_cut_ = false;
    batch_result r = s->deliver(s, n);  // uncounts from pending each event it takes
    batch_priority_ = std::numeric_limits<int>::min();
    s->delivering = false;
    budget -= r.delivered;
    // The coroutine was only queued by spawn: it cannot finish before this count is taken.
    if (r.started) ++s->coroutines;
    if (!s->subscribed.load(std::memory_order_acquire)) {
      discard_pending(s);  // may free s
    } else if (s->pending != 0 && !s->queued) {
      push_order(s);
    }
    if (r.error) rethrow_on_loop(r.error);
    if (r.started) {
      // The coroutine's first step is queued; the next pass goes after it, so deliveries start in order.
      scheduled_ = true;
      post_pass();
      return;
    }
  }
  for (const bucket& b : buckets_) {
    if (!b.order.empty()) {
      scheduled_ = true;
      post_pass();  // more is pending: let the loop's other work run first
      return;
    }
  }
  scheduled_ = false;
}

void loop_queue::discard_pending(subscriber* s) noexcept {
  s->drop(s, s->pending);
  s->pending = 0;
  if (s->released) free_if_idle(s);
}

void loop_queue::rethrow_on_loop(std::exception_ptr e) {
  // A detached task's exception reaches the loop's exception handler, which is where a handler's belongs.
  tern::spawn(*ctx_, [](std::exception_ptr error) -> task<void> {
    std::rethrow_exception(error);
    co_return;
  }, std::move(e)).detach();
}

}  // namespace detail

void subscription::reset() noexcept {
  if (subscriber_ == nullptr) return;
  bus_->detach(std::exchange(subscriber_, nullptr));
  bus_ = nullptr;
}

event_bus::~event_bus() {
  if (live_ != 0) {
    std::fputs("tern::services::event_bus destroyed with subscriptions alive (reset them first)\n", stderr);
    std::terminate();
  }
}

std::size_t event_bus::subscriptions() const {
  std::lock_guard<tern::detail::biased_lock> lock(lock_);
  return live_;
}

std::shared_ptr<detail::loop_queue> event_bus::queue_for(io_context& loop) {
  std::lock_guard<tern::detail::biased_lock> lock(lock_);
  for (auto& q : queues_) {
    if (&q->context() == &loop) return q;
  }
  queues_.push_back(std::make_shared<detail::loop_queue>(loop));
  return queues_.back();
}

void event_bus::attach(detail::subscriber* s) {
  std::lock_guard<tern::detail::biased_lock> lock(lock_);
  if (by_type_.size() <= s->type) {
    by_type_.resize(s->type + 1);
    types_ = by_type_.size();
  }
  by_type_[s->type].push_back(s);
  // Its queue may have been dropped by an unsubscribe since queue_for found it: it is the loop's queue again.
  if (s->queue->subscriptions++ == 0 && std::find(queues_.begin(), queues_.end(), s->queue) == queues_.end()) {
    queues_.push_back(s->queue);
  }
  ++live_;
}

void event_bus::detach(detail::subscriber* s) noexcept {
  std::lock_guard<tern::detail::biased_lock> lock(lock_);
  auto& list = by_type_[s->type];
  list.erase(std::find(list.begin(), list.end(), s));
  --live_;
  if (--s->queue->subscriptions == 0) std::erase(queues_, s->queue);
  s->queue->release(s);
}

}  // namespace tern::services
