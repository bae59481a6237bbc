// tern/detail/stop_binding.hpp
//
// Ties a cancellable operation to a std::stop_token for as long as the operation is suspended.
//
// Used twice: by with_stop(op, token), and by every task, whose promise wraps each cancellable operation it awaits
// in a binding to the task's own stop token (inherited from its parent, set by task_group, when_any and
// with_timeout on tasks). The registration exists only while suspended, and only if the token can be stopped, so
// a task without a token pays one null check per await.
//
// A stop request may come from any thread, but cancel() must run on the operation's loop: on that loop's thread
// the callback cancels directly; from elsewhere it sends a small self-owning item through the loop's inbox. The
// item finds its target only while the target lives: destroying the stop_callback waits for a callback running
// on another thread, after which the binding can safely detach a pending item.
//
// The registration (the std::stop_callback and the pending item's address) lives in a block of the thread's frame
// pool, taken only when a stoppable token is registered, and the binding holds a pointer to it. Held inline it
// would sit in the frame of every task suspended on an operation, stoppable or not: 64 bytes of the frame of each
// idle connection's task (sockets/idle_connections), where tasks with a stoppable token are the minority and pay
// a pool block (a pointer pop) beside the stop_callback's own atomic registration.
#pragma once

#include <concepts>
#include <coroutine>
#include <new>
#include <stop_token>
#include <type_traits>
#include <utility>

#include "tern/detail/frame_pool.hpp"
#include "tern/detail/work_queue.hpp"
#include "tern/io_context.hpp"

namespace tern::detail {

// An awaiter that can be cancelled while suspended: cancel() makes it complete soon with operation_canceled;
// context() is the loop it runs on.
template <class Op>
concept cancellable = requires(Op& op, const Op& cop) {
  { op.await_ready() } -> std::convertible_to<bool>;
  op.await_resume();
  op.cancel();
  { cop.context() } -> std::same_as<io_context&>;
};

// Calls op.await_suspend(h) and reports whether the caller stays suspended.
template <class Op>
bool suspend_on(Op& op, std::coroutine_handle<> h) {
  using R = decltype(op.await_suspend(h));
  if constexpr (std::is_void_v<R>) {
    op.await_suspend(h);
    return true;
  } else {
    static_assert(std::is_same_v<R, bool>, "operations suspend with void or bool");
    return op.await_suspend(h);
  }
}

inline const std::stop_token* token_ptr(const std::stop_token& t) noexcept { return &t; }
inline const std::stop_token* token_ptr(const std::stop_token* t) noexcept { return t; }

// Op is the operation (a value) or a reference to it; Token is a std::stop_token held by value or a pointer to
// one (possibly null).
template <class Op, class Token>
class [[nodiscard]] stop_binding {
 public:
  stop_binding(Op&& op, Token token) noexcept(std::is_nothrow_constructible_v<Op, Op&&>)
      : op_(std::forward<Op>(op)), token_(std::move(token)) {}
  stop_binding(const stop_binding& o) : op_(o.op_), token_(o.token_) {}
  stop_binding& operator=(const stop_binding&) = delete;
  // Inline, like await_resume: nearly every binding registered nothing (the operation completed at once, or the
  // task has no stop token), and then this is one test; out of line it was a call and a return per await.
  [[gnu::always_inline]] ~stop_binding() { unregister(); }

  // Inlined so that an operation's own inlined fast path (a channel's, say) stays inline in the task.
  [[gnu::always_inline]] bool await_ready() { return op_.await_ready(); }
  // Inline up to the operation's own await_suspend when there is no stoppable token (most awaits): out of line,
  // the registering path's try block made every suspension save and restore registers around it.
  [[gnu::always_inline]] bool await_suspend(std::coroutine_handle<> h) {
    const std::stop_token* t = token_ptr(token_);
    if (t == nullptr || !t->stop_possible()) [[likely]] return suspend_on(op_, h);
    return suspend_registered(*t, h);
  }
  [[gnu::always_inline]] decltype(auto) await_resume() {
    unregister();
    return op_.await_resume();
  }
  void cancel() noexcept { op_.cancel(); }
  io_context& context() const noexcept { return op_.context(); }

 private:
  // await_suspend with a stoppable token: the operation starts, then the registration is made.
  [[gnu::noinline]] bool suspend_registered(const std::stop_token& token, std::coroutine_handle<> h) {
    const std::stop_token* t = &token;
    // The block is taken before the operation starts: once it has started, nothing here may throw (a throw would
    // resume the coroutine while the operation still holds it).
    void* block = frame_pool::allocate(sizeof(registration));
    bool suspended;
    try {
      suspended = suspend_on(op_, h);
    } catch (...) {
      frame_pool::deallocate(block, sizeof(registration));
      throw;
    }
    if (!suspended) {
      frame_pool::deallocate(block, sizeof(registration));
      return false;
    }
    // reg_ is set before the callback can run (it runs inside the constructor if a stop was requested already).
    reg_ = static_cast<registration*>(block);
    ::new (block) registration(*t, this);
    return true;
  }

  struct remote_cancel final : work_item {
    stop_binding* target;
    explicit remote_cancel(stop_binding* t) noexcept : target(t) {
      run = &invoke;
      discard = &drop;
    }
    static void invoke(work_item* w) {
      auto* self = static_cast<remote_cancel*>(w);
      if (self->target != nullptr) {
        self->target->reg_->remote = nullptr;  // still registered: unregister() clears target first
        self->target->op_.cancel();
      }
      drop(w);
    }
    static void drop(work_item* w) noexcept {
      auto* self = static_cast<remote_cancel*>(w);
      self->~remote_cancel();
      frame_pool::deallocate(self, sizeof(remote_cancel));
    }
  };

  struct on_stop {
    stop_binding* self;
    void operator()() const noexcept {
      io_context& ctx = self->op_.context();
      if (ctx.running_here()) {
        self->op_.cancel();
      } else {
        auto* item = ::new (frame_pool::allocate(sizeof(remote_cancel))) remote_cancel(self);
        self->reg_->remote = item;
        ctx.enqueue(item);
      }
    }
  };

  struct registration {
    registration(const std::stop_token& t, stop_binding* self) noexcept : callback(t, on_stop{self}) {}
    remote_cancel* remote = nullptr;  // before callback: initialised before the callback can run
    std::stop_callback<on_stop> callback;
  };

  // One test when nothing was registered (every await that did not suspend): remote is set only by a callback,
  // so only while registered.
  [[gnu::always_inline]] void unregister() noexcept {
    if (reg_ != nullptr) [[unlikely]] (void)unregister_registered();
  }
  // Returns a bool only to stay clear of clang 16's misreading of a call to a `void f(T*)` of internal linkage in a
  // coroutine as a resume (docs/design.md, "Coroutines"): Op may be a type of an unnamed namespace.
  [[gnu::noinline]] bool unregister_registered() noexcept {
    registration* r = reg_;
    r->callback.~stop_callback();  // waits for a callback running on another thread
    if (r->remote != nullptr) r->remote->target = nullptr;
    frame_pool::deallocate(r, sizeof(registration));
    reg_ = nullptr;
    return true;
  }

  Op op_;
  Token token_;
  registration* reg_ = nullptr;
};

}  // namespace tern::detail
