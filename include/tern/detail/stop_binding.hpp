// tern/detail/stop_binding.hpp
//
// Ties a cancellable operation to a std::stop_token for as long as the operation is suspended.
//
// Used twice: by with_stop(op, token), and by every task, whose promise wraps each cancellable operation it awaits
// in a binding to the task's own stop token (inherited from its parent, set by task_group, when_any and
// with_timeout on tasks). The registration exists only while suspended, and only if the token can be stopped, so
// a task without a token pays one null check per await. The waits of tern::sync are not wrapped: they register
// the task's token themselves when they suspend (binds_task_stop, stop_registration).
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
#include <cstddef>
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

// The registration of a stop callback that cancels target while it waits: the std::stop_callback and the
// address of a cancellation it sent from another thread, in a block of the thread's frame pool. Target has
// cancel() (loop thread only) and context() (its loop). Used by stop_binding and by the waits that bind their
// task's token themselves (binds_task_stop below).
template <class Target>
class stop_registration {
 public:
  // The bytes of the block to take (frame_pool::allocate) before the operation starts: once it has started,
  // nothing may throw.
  static constexpr std::size_t block_size() noexcept { return sizeof(stop_registration); }

  // Registers target with token in block. A stop requested already runs the callback in here, which cancels
  // target at once.
  static stop_registration* make(void* block, const std::stop_token& token, Target* target) noexcept {
    return ::new (block) stop_registration(token, target);
  }

  // A wait's suspension with a stoppable token: start() begins the wait (true: it suspended), then target is
  // registered with token. The block is taken before the wait starts, since nothing may throw once it has (a throw
  // would resume the coroutine while the wait still holds it); a wait that did not suspend, or whose start threw,
  // gives it back. reg is set only when it suspended. Used by stop_binding and sync_wait alike.
  template <class Start>
  static bool suspend(stop_registration*& reg, const std::stop_token& token, Target* target, Start&& start) {
    void* block = frame_pool::allocate(block_size());
    bool suspended;
    try {
      suspended = start();
    } catch (...) {
      frame_pool::deallocate(block, block_size());
      throw;
    }
    if (!suspended) {
      frame_pool::deallocate(block, block_size());
      return false;
    }
    reg = make(block, token, target);
    return true;
  }

  // Unregisters r (waiting for a callback running on another thread), detaches a cancellation that callback
  // sent, and gives the block back. Returns a bool only to stay clear of clang 16's misreading of a call to a
  // `void f(T*)` of internal linkage in a coroutine as a resume (docs/design.md, "Coroutines"): Target may be a
  // type of an unnamed namespace.
  [[gnu::noinline]] static bool release(stop_registration* r) noexcept {
    r->callback_.~stop_callback();  // waits for a callback running on another thread
    if (r->remote_ != nullptr) r->remote_->reg = nullptr;
    frame_pool::deallocate(r, sizeof(stop_registration));
    return true;
  }

 private:
  struct remote_cancel final : work_item {
    stop_registration* reg;
    explicit remote_cancel(stop_registration* r) noexcept : reg(r) {
      run = &invoke;
      discard = &drop;
    }
    static void invoke(work_item* w) {
      auto* self = static_cast<remote_cancel*>(w);
      if (self->reg != nullptr) {
        self->reg->remote_ = nullptr;  // still registered: release() clears reg first
        self->reg->target_->cancel();
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
    stop_registration* self;
    void operator()() const noexcept {
      io_context& ctx = self->target_->context();
      if (ctx.running_here()) {
        self->target_->cancel();
      } else {
        auto* item = ::new (frame_pool::allocate(sizeof(remote_cancel))) remote_cancel(self);
        self->remote_ = item;
        ctx.enqueue(item);
      }
    }
  };

  stop_registration(const std::stop_token& t, Target* target) noexcept
      : target_(target), callback_(t, on_stop{this}) {}

  Target* target_;
  remote_cancel* remote_ = nullptr;  // before callback_: initialised before the callback can run
  std::stop_callback<on_stop> callback_;
};

// An operation that binds the stop token of the task awaiting it itself, from its await_suspend's typed handle
// (task_stop_token below), instead of being wrapped in a stop_binding by the task's await_transform. The sync
// primitives' waits do: they register only when they suspend and unregister when their queue node runs, so a
// wait that completes at once pays nothing for cancellation (a binding cost each send and receive of a channel
// about 9 instructions: the binding's fields stored, the operation's address loaded back, two tests of an empty
// registration).
template <class Op>
concept binds_task_stop = requires { typename Op::binds_task_stop; };

// Such an operation awaited by name (`auto w = ch.send(v); co_await w;`), through a reference: g++ 12 copies an
// awaiter that await_transform returns as an lvalue reference, and the sync waits cannot be copied.
template <class Op>
struct awaited_by_name {
  Op& op;
  bool await_ready() noexcept(noexcept(op.await_ready())) { return op.await_ready(); }
  template <class H>
  decltype(auto) await_suspend(H h) noexcept(noexcept(op.await_suspend(h))) {
    return op.await_suspend(h);
  }
  decltype(auto) await_resume() noexcept(noexcept(op.await_resume())) { return op.await_resume(); }
};

// The stop token of the coroutine of h if its promise has one that can be stopped (a tern::task's), else null.
template <class P>
const std::stop_token* task_stop_token(std::coroutine_handle<P> h) noexcept {
  if constexpr (requires {
                  { h.promise().stop_token() } -> std::same_as<const std::stop_token*>;
                }) {
    const std::stop_token* t = h.promise().stop_token();
    if (t != nullptr && t->stop_possible()) [[unlikely]] return t;
  }
  return nullptr;
}

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
    return registration::suspend(reg_, token, this, [&] { return suspend_on(op_, h); });
  }

  using registration = stop_registration<stop_binding>;

  // One test when nothing was registered (every await that did not suspend); reg_ is null again after it, which
  // the compiler sees, so the destructor's test after an await_resume folds away.
  [[gnu::always_inline]] void unregister() noexcept {
    if (reg_ != nullptr) [[unlikely]] {
      (void)registration::release(reg_);
      reg_ = nullptr;
    }
  }

  Op op_;
  Token token_;
  registration* reg_ = nullptr;
};

}  // namespace tern::detail
