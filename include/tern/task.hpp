// tern/task.hpp
//
// task<T>: the coroutine type of tern.
//
// A task is lazy: calling a task-returning function allocates its frame (from the per-thread frame pool) and runs
// nothing. co_await starts it; when it finishes, final_suspend transfers control straight back to the awaiter
// (symmetric transfer), so a chain of any depth of synchronously completing tasks runs in constant stack. The value
// or the exception is stored in the promise and handed to the awaiter by await_resume.
//
// A task is move-only and owns its frame: destroying a task that has not finished destroys the suspended frame.
//
// Cancellation reaches a task through a stop token: a task awaited by another inherits its parent's token, and
// every cancellable operation a task awaits (socket operations, timer waits, sync primitives) is bound to that
// token while it is suspended (await_transform), so a stop request makes the operation complete with
// operation_canceled and the task unwinds through its ordinary error handling. Root tokens come from spawn,
// task_group, when_any and with_timeout on tasks; a task without one pays a null check per await.
// A task can also become the root of a spawned coroutine (see spawn.hpp); then final_suspend notifies its
// spawn_state instead of resuming an awaiter.
//
// Lifetimes: a task's frame keeps its parameters, but a reference parameter refers to the caller's object, and a
// coroutine lambda's frame refers to the lambda object (its captures) through `this`. Awaited at once
// (`co_await f(std::string("x"))`) both outlive the task. A task that is kept (stored, spawned) must not refer to
// temporaries: spawn(ctx, callable, args...) (spawn.hpp) keeps the callable and copies of the arguments alive for
// the task's whole life. Clang 18 and later can check part of this at compile time, on request: define
// TERN_CORO_LIFETIME_CHECKS (or configure tern with -DTERN_CORO_LIFETIME_CHECKS=ON) and task carries clang's
// coro_return_type and coro_lifetimebound attributes, so a task that outlives a temporary it refers to (kept in a
// variable, returned from a plain function) is diagnosed (-Wdangling). Not by default: with coro_return_type,
// clang rejects every function that returns a task without being a coroutine unless it is marked
// TERN_CORO_WRAPPER, and that includes std::invoke and std::function<task<>()>::operator() in the standard
// library. tern's own headers compile either way.
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <new>
#include <type_traits>
#include <utility>

#include "tern/detail/frame_pool.hpp"
#include "tern/detail/stop_binding.hpp"

#if defined(TERN_CORO_LIFETIME_CHECKS) && defined(__clang__) && defined(__has_cpp_attribute)
#if __has_cpp_attribute(clang::coro_return_type) && __has_cpp_attribute(clang::coro_lifetimebound) && \
    __has_cpp_attribute(clang::coro_wrapper)
#define TERN_DETAIL_CORO_ATTRIBUTES 1
#endif
#endif

#ifdef TERN_DETAIL_CORO_ATTRIBUTES
// Marks a function that returns a task without being a coroutine (it returns one made by a coroutine).
#define TERN_CORO_WRAPPER [[clang::coro_wrapper]]
#define TERN_CORO_TASK_ATTRIBUTES [[nodiscard, clang::coro_return_type, clang::coro_lifetimebound]]
#else
#define TERN_CORO_WRAPPER
#define TERN_CORO_TASK_ATTRIBUTES [[nodiscard]]
#endif

namespace tern {

template <class T = void>
class task;

namespace detail {

// The owner of a spawned root task (spawn.hpp), in two roles that share one object and one vtable pointer (a
// pointer less in every spawned task's state): the task reports to it when it finishes (on_root_done), and the
// loop keeps it on a list (prev, next) so that a loop destroyed first can destroy what is still suspended
// (abandon).
struct root_hook {
  root_hook* prev = nullptr;
  root_hook* next = nullptr;
  virtual void on_root_done() noexcept = 0;
  virtual void abandon() noexcept = 0;

 protected:
  ~root_hook() = default;
};

template <class T>
struct is_task : std::false_type {};
template <class T>
struct is_task<task<T>> : std::true_type {};

class promise_base : public pooled_frame {
 public:
  struct final_awaiter {
    bool await_ready() const noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
      const std::uintptr_t after = h.promise().after_;
      if ((after & root_bit) == 0) {
        if (after != 0) return std::coroutine_handle<>::from_address(reinterpret_cast<void*>(after));
        return std::noop_coroutine();
      }
      reinterpret_cast<root_hook*>(after & ~root_bit)->on_root_done();  // may destroy this frame
      return std::noop_coroutine();
    }
    void await_resume() const noexcept {}
  };

  std::suspend_always initial_suspend() const noexcept { return {}; }
  final_awaiter final_suspend() const noexcept { return {}; }
  void unhandled_exception() noexcept { exception_ = std::current_exception(); }

  template <class A>
  decltype(auto) await_transform(A&& a) noexcept(!cancellable<std::remove_cvref_t<A>>) {
    using D = std::remove_cvref_t<A>;
    if constexpr (is_task<D>::value) {
      if (a.handle()) a.handle().promise().stop_ = stop_;
      return std::forward<A>(a);
    } else if constexpr (binds_task_stop<D>) {
      // Registers stop_ itself when it suspends (the sync waits).
      if constexpr (std::is_lvalue_reference_v<A>) {
        return awaited_by_name<D>{a};
      } else {
        return std::forward<A>(a);
      }
    } else if constexpr (cancellable<D>) {
      return stop_binding<A&&, const std::stop_token*>(std::forward<A>(a), stop_);
    } else {
      return std::forward<A>(a);
    }
  }

  void set_continuation(std::coroutine_handle<> c) noexcept {
    after_ = reinterpret_cast<std::uintptr_t>(c.address());
  }
  // The token this task and the tasks it awaits watch (null: none). The token must outlive the task.
  void set_stop_token(const std::stop_token* t) noexcept { stop_ = t; }
  const std::stop_token* stop_token() const noexcept { return stop_; }
  void set_root(root_hook* r) noexcept { after_ = reinterpret_cast<std::uintptr_t>(r) | root_bit; }
  const std::exception_ptr& exception() const noexcept { return exception_; }

 protected:
  void rethrow_if_exception() {
    if (exception_) std::rethrow_exception(exception_);
  }

  // What runs when the task finishes: the coroutine that awaits it, or, for a task spawned as a root, its
  // spawn_state (root_bit set; a root task is never awaited, so never both). One word where two would do: it is
  // in every frame, and the frame of an idle connection's task came to 8 bytes over the frame pool's 256-byte
  // class. Frames and root hooks are at least 8-byte aligned, so the low bit is free.
  static constexpr std::uintptr_t root_bit = 1;
  std::uintptr_t after_ = 0;
  const std::stop_token* stop_ = nullptr;
  std::exception_ptr exception_;
};

template <class T>
class promise final : public promise_base {
 public:
  promise() noexcept {}
  ~promise() {
    if (has_value_) value_.~T();
  }
  task<T> get_return_object() noexcept;

  template <class U>
    requires std::is_convertible_v<U&&, T>
  void return_value(U&& v) noexcept(std::is_nothrow_constructible_v<T, U&&>) {
    ::new (static_cast<void*>(std::addressof(value_))) T(std::forward<U>(v));
    has_value_ = true;
  }

  T take() {
    rethrow_if_exception();
    return std::move(value_);
  }
  // The value where it is, for an awaiter that uses it while the frame lives (no move out of it).
  T& value() {
    rethrow_if_exception();
    return value_;
  }

 private:
  union {
    T value_;
  };
  bool has_value_ = false;
};

template <>
class promise<void> final : public promise_base {
 public:
  task<void> get_return_object() noexcept;
  void return_void() noexcept {}
  void take() { rethrow_if_exception(); }
};

}  // namespace detail

template <class T>
class TERN_CORO_TASK_ATTRIBUTES task {
 public:
  using promise_type = detail::promise<T>;
  using handle_type = std::coroutine_handle<promise_type>;
  using value_type = T;

  task() noexcept = default;
  explicit task(handle_type h) noexcept : h_(h) {}
  task(task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  task& operator=(task&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  task(const task&) = delete;
  task& operator=(const task&) = delete;
  ~task() { reset(); }

  // True if this task owns a coroutine.
  bool valid() const noexcept { return static_cast<bool>(h_); }
  // True once the coroutine has run to completion.
  bool done() const noexcept { return h_ && h_.done(); }

  struct [[nodiscard]] awaiter {
    handle_type h;
    bool await_ready() const noexcept { return !h || h.done(); }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
      h.promise().set_continuation(awaiting);
      return h;
    }
    T await_resume() { return h.promise().take(); }
  };

  // Starts the task and suspends the awaiter until it finishes; yields its value or rethrows its exception.
  awaiter operator co_await() && noexcept { return awaiter{h_}; }
  awaiter operator co_await() & noexcept { return awaiter{h_}; }

  // Gives up ownership of the frame (used by spawn).
  handle_type release() noexcept { return std::exchange(h_, {}); }
  handle_type handle() const noexcept { return h_; }

 private:
  void reset() noexcept {
    if (h_) h_.destroy();
    h_ = {};
  }

  handle_type h_;
};

namespace detail {
// Awaiting this from a task yields the task's stop token (null if it has none) without suspending.
struct [[nodiscard]] stop_token_query {
  const std::stop_token* token = nullptr;
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    token = h.promise().stop_token();
    return false;
  }
  const std::stop_token* await_resume() const noexcept { return token; }
};

// Awaits a task under a given stop token instead of the awaiting task's own.
template <class T>
struct [[nodiscard]] await_with_token {
  task<T>& t;
  const std::stop_token* token;
  bool await_ready() const noexcept { return !t.handle() || t.handle().done(); }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
    t.handle().promise().set_stop_token(token);
    t.handle().promise().set_continuation(awaiting);
    return t.handle();
  }
  T await_resume() { return t.handle().promise().take(); }
};
}  // namespace detail

// Awaitable, in a task: the task's stop token, or nullptr when nothing can cancel it.
inline detail::stop_token_query current_stop_token() noexcept { return {}; }

namespace detail {
template <class T>
task<T> promise<T>::get_return_object() noexcept {
  return task<T>(std::coroutine_handle<promise<T>>::from_promise(*this));
}
inline task<void> promise<void>::get_return_object() noexcept {
  return task<void>(std::coroutine_handle<promise<void>>::from_promise(*this));
}
}  // namespace detail

}  // namespace tern
