// The event bus's untyped half: subscriber lists, per-loop delivery queues and the delivery pass.
//
// Locks: the bus's mutex guards the subscriber lists and is taken before a loop_queue's; a loop_queue's mutex
// guards its heap and its subscribers' rings and counters. Handlers run with no lock held, so a handler may
// publish, subscribe or unsubscribe. Posting a delivery pass costs one post per burst (scheduled_), and a post
// from another thread or from the loop itself allocates nothing once warm (tern's handler blocks and line pool).
#include "tern/services/event_bus.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>

namespace tern::services {

namespace detail {

std::size_t next_event_type() noexcept {
  static std::atomic<std::size_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void loop_queue::enqueue(subscriber* s, const void* event) {
  bool post = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s->push(event);
    heap_.push_back(entry{s->priority, sequence_++, s});
    std::push_heap(heap_.begin(), heap_.end(), later{});
    ++s->pending;
    post = !scheduled_;
    scheduled_ = true;
  }
  if (post) post_drain();
}

void loop_queue::post_drain() {
  ctx_->post([self = shared_from_this()] { self->drain(); });
}

void loop_queue::unsubscribe(subscriber* s) noexcept {
  bool free_now = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s->subscribed = false;
    free_now = s->idle();
  }
  if (free_now) delete s;
}

void loop_queue::coroutine_done(subscriber* s) noexcept {
  bool free_now = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --s->coroutines;
    free_now = !s->subscribed && s->idle();
  }
  if (free_now) delete s;
}

void loop_queue::drain() {
  constexpr int deliveries_per_pass = 64;
  for (int n = 0; n < deliveries_per_pass; ++n) {
    subscriber* s = nullptr;
    subscriber* unsubscribed = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (heap_.empty()) {
        scheduled_ = false;
        return;
      }
      std::pop_heap(heap_.begin(), heap_.end(), later{});
      s = heap_.back().target;
      heap_.pop_back();
      --s->pending;
      if (s->subscribed) {
        s->take_front();
        s->delivering = true;
      } else {
        s->drop_front();
        if (s->idle()) unsubscribed = s;
        s = nullptr;
      }
    }
    if (s == nullptr) {
      delete unsubscribed;
      continue;
    }
    std::exception_ptr error;
    bool started = false;
    try {
      started = s->deliver();
    } catch (...) {
      error = std::current_exception();
    }
    bool free_now = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      s->delivering = false;
      // The coroutine was only queued by spawn: it cannot finish before this count is taken.
      if (started) ++s->coroutines;
      free_now = !s->subscribed && s->idle();
    }
    if (free_now) delete s;
    if (error) rethrow_on_loop(error);
    if (started) {
      // The coroutine's first step is queued; the next pass goes after it, so deliveries start in order.
      post_drain();
      return;
    }
  }
  post_drain();  // more may be pending: let the loop's other work run first
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
  std::lock_guard<std::mutex> lock(mutex_);
  return live_;
}

std::shared_ptr<detail::loop_queue> event_bus::queue_for(io_context& loop) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& q : queues_) {
    if (&q->context() == &loop) return q;
  }
  queues_.push_back(std::make_shared<detail::loop_queue>(loop));
  return queues_.back();
}

void event_bus::attach(detail::subscriber* s) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (by_type_.size() <= s->type) by_type_.resize(s->type + 1);
  by_type_[s->type].push_back(s);
  // Its queue may have been dropped by an unsubscribe since queue_for found it: it is the loop's queue again.
  if (s->queue->subscriptions++ == 0 && std::find(queues_.begin(), queues_.end(), s->queue) == queues_.end()) {
    queues_.push_back(s->queue);
  }
  ++live_;
}

void event_bus::detach(detail::subscriber* s) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& list = by_type_[s->type];
  list.erase(std::find(list.begin(), list.end(), s));
  --live_;
  if (--s->queue->subscriptions == 0) std::erase(queues_, s->queue);
  s->queue->unsubscribe(s);
}

void event_bus::publish_erased(std::size_t type, const void* event) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (type >= by_type_.size()) return;
  for (detail::subscriber* s : by_type_[type]) s->queue->enqueue(s, event);
}

}  // namespace tern::services
