// tern/spawn.hpp
//
// spawn: starts a task as an independent root on a loop, and join_handle: awaits its result.
//
// The spawned task's own frame is the root; a small pooled spawn_state beside it links it into the loop (so the
// loop can destroy it if the loop dies first), holds the awaiting coroutine of a join, and decides who frees what:
// - the task finishes first: it stays in its final suspend point until the handle collects the result (or, if the
//   handle was dropped, it is destroyed at once, and an exception nobody will observe goes to the loop's handler);
// - the handle is dropped first: the task becomes detached and cleans up after itself.
// Spawning queues the task's first resumption; it never runs inside spawn(). Spawn and join on the loop's thread
// (or before the loop runs).
#pragma once

#include <coroutine>
#include <exception>
#include <new>
#include <stdexcept>
#include <utility>

#include "tern/detail/frame_pool.hpp"
#include "tern/detail/work_queue.hpp"
#include "tern/io_context.hpp"
#include "tern/task.hpp"

namespace tern {

template <class T>
class join_handle;

namespace detail {

template <class T>
class spawn_state final : public root_hook, public spawn_link {
 public:
  using handle_type = std::coroutine_handle<promise<T>>;

  static spawn_state* create(io_context& ctx, handle_type h) {
    auto* s = ::new (frame_pool::allocate(sizeof(spawn_state))) spawn_state(ctx, h);
    h.promise().set_root(s);
    ctx.link_spawned(s);
    s->start_.handle = h;
    ctx.enqueue(&s->start_);
    return s;
  }

  bool done() const noexcept { return done_; }
  const bool* done_flag() const noexcept { return &done_; }

  // The handle is going away without having taken the result.
  void detach() noexcept {
    if (done_) {
      report_unobserved();
      release();
    } else {
      detached_ = true;
    }
  }

  // A join is waiting: resume it when the task finishes.
  void set_joiner(std::coroutine_handle<> h) noexcept {
    joiner_.handle = h;
    joined_ = true;
  }

  // Takes the result (the handle is the only owner left) and frees everything.
  T take() {
    struct cleanup {
      spawn_state* s;
      ~cleanup() { s->release(); }
    } guard{this};
    if (abandoned_) throw std::runtime_error("tern: spawned task was destroyed with its io_context");
    return h_.promise().take();
  }

 private:
  spawn_state(io_context& ctx, handle_type h) noexcept : ctx_(&ctx), h_(h) {}

  void on_root_done() noexcept override {
    done_ = true;
    ctx_->unlink_spawned(this);
    if (detached_) {
      report_unobserved();
      release();
    } else if (joined_) {
      ctx_->schedule(&joiner_);
    }
  }

  void abandon() noexcept override {
    ctx_->unlink_spawned(this);
    h_.destroy();
    h_ = nullptr;
    abandoned_ = true;
    done_ = true;
    if (detached_) release();
  }

  void report_unobserved() noexcept {
    if (h_ && h_.promise().exception()) ctx_->report_exception(h_.promise().exception());
  }

  void release() noexcept {
    if (h_) h_.destroy();
    this->~spawn_state();
    frame_pool::deallocate(this, sizeof(spawn_state));
  }

  io_context* ctx_;
  handle_type h_;
  resume_item start_;   // the task's first step (may still be queued when a join begins)
  resume_item joiner_;  // the join's wake-up
  bool done_ = false;
  bool detached_ = false;
  bool joined_ = false;
  bool abandoned_ = false;
};

}  // namespace detail

// The result of a spawned task. Awaiting it yields the task's value or rethrows its exception; dropping it
// detaches the task.
template <class T>
class [[nodiscard]] join_handle {
 public:
  join_handle() noexcept = default;
  explicit join_handle(detail::spawn_state<T>* s) noexcept : s_(s) {}
  join_handle(join_handle&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  join_handle& operator=(join_handle&& o) noexcept {
    if (this != &o) {
      detach();
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }
  join_handle(const join_handle&) = delete;
  join_handle& operator=(const join_handle&) = delete;
  ~join_handle() { detach(); }

  // True once the task has finished.
  bool done() const noexcept { return s_ != nullptr && s_->done(); }
  // True while the handle refers to a task.
  bool valid() const noexcept { return s_ != nullptr; }

  // Lets the task run on its own; its exception, if any, goes to the loop's exception handler.
  void detach() noexcept {
    if (s_ != nullptr) std::exchange(s_, nullptr)->detach();
  }

  struct awaiter {
    detail::spawn_state<T>* s;
    bool await_ready() const noexcept { return s->done(); }
    void await_suspend(std::coroutine_handle<> h) noexcept { s->set_joiner(h); }
    T await_resume() { return s->take(); }
  };

  // Waits for the task; the handle is consumed.
  awaiter operator co_await() && noexcept { return awaiter{std::exchange(s_, nullptr)}; }
  awaiter operator co_await() & noexcept { return awaiter{std::exchange(s_, nullptr)}; }

  // Internal: the flag block_on watches.
  const bool* done_flag() const noexcept { return s_->done_flag(); }

 private:
  detail::spawn_state<T>* s_ = nullptr;
};

// Starts t on ctx as an independent task; the first step runs from ctx's run queue.
template <class T>
join_handle<T> spawn(io_context& ctx, task<T> t) {
  if (!t.valid()) throw std::invalid_argument("tern::spawn: empty task");
  return join_handle<T>(detail::spawn_state<T>::create(ctx, t.release()));
}

// Starts t on the loop running on this thread.
template <class T>
join_handle<T> spawn(task<T> t) {
  io_context* ctx = io_context::current();
  if (ctx == nullptr) throw std::logic_error("tern::spawn: no io_context runs on this thread");
  return spawn(*ctx, std::move(t));
}

template <class T>
T io_context::block_on(task<T> t) {
  join_handle<T> h = spawn(*this, std::move(t));
  run_until(h.done_flag());
  if (!h.done()) {
    throw std::logic_error(stopped() ? "tern::io_context::block_on: the loop was stopped"
                                     : "tern::io_context::block_on: the task can never finish (no pending work)");
  }
  auto a = std::move(h).operator co_await();
  return a.await_resume();
}

}  // namespace tern
