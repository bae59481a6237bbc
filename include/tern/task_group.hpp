// tern/task_group.hpp
//
// Structured concurrency: task_group, when_all, when_any.
//
// A task_group runs child tasks concurrently on one loop and is awaited as a whole. Its children share one stop
// source: the first child that fails, or a cancel() (or a stop of the parent token the group was linked to),
// requests stop, and every operation any child is suspended on completes with operation_canceled. wait() resumes
// only when every child has finished, so nothing a child uses can be destroyed under it; it then rethrows the
// first failure.
//
// The form to reach for first is the scoped one, task_group::run(body): body gets the group, spawns into it, and
// however body ends (return, throw, cancellation) run cancels what must be cancelled and waits for every child
// before it returns or rethrows, so no child can outlive the frame whose locals it uses. A group made by hand
// must be waited before it is destroyed: destroying one with children still running (an exception thrown between
// spawn() and wait(), say) terminates, as std::thread does, because the children refer to it.
//
// The running count and the "someone waits" flag are one atomic (count * 2 + flag), so a child finishing on
// another worker races the waiter correctly: exactly one side sees both facts and resumes the waiter.
//
// when_all and when_any are built on it. when_all returns every result (void becomes std::monostate) or rethrows
// the first failure after cancelling and awaiting the others. when_any returns the index and the result of the
// first task to finish; the others are cancelled and awaited before it returns, and their failures are dropped.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tern/detail/work_queue.hpp"
#include "tern/io_context.hpp"
#include "tern/spawn.hpp"
#include "tern/task.hpp"

namespace tern {

namespace detail {
template <class T>
using result_of_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

// Runs t to completion and returns its value, with void mapped to std::monostate.
template <class T>
task<result_of_t<T>> as_result(task<T> t) {
  if constexpr (std::is_void_v<T>) {
    co_await std::move(t);
    co_return std::monostate{};
  } else {
    co_return co_await std::move(t);
  }
}
}  // namespace detail

class task_group {
 public:
  // A group whose children run on ctx. If parent is given (a task's token, see current_stop_token()), stopping
  // it cancels the group too.
  explicit task_group(io_context& ctx, const std::stop_token* parent = nullptr) : ctx_(&ctx) {
    if (parent != nullptr && parent->stop_possible()) link_.emplace(*parent, canceller{&source_});
  }
  task_group(const task_group&) = delete;
  task_group& operator=(const task_group&) = delete;
  ~task_group() {
    if ((state_.load(std::memory_order_acquire) >> 1) != 0) {
      std::fputs("tern: task_group destroyed with children still running (await wait() first, or use "
                 "task_group::run, which waits on every exit)\n",
                 stderr);
      std::terminate();
    }
  }

  // Starts t as a child. Its result is discarded; an exception cancels the group and is rethrown by wait().
  template <class T>
  void spawn(task<T> t) {
    state_.fetch_add(2, std::memory_order_relaxed);
    tern::spawn(*ctx_, child(std::move(t)), source_.get_token()).detach();
  }
  // Starts f(args...) as a child, keeping f and decayed copies of args alive until it finishes (see
  // tern::spawn(ctx, f, args...)).
  template <class F, class... Args>
    requires detail::task_factory<F, Args...>
  void spawn(F&& f, Args&&... args) {
    spawn(detail::owned_task(std::forward<F>(f), std::forward<Args>(args)...));
  }

  // Runs body(g) for a new group g on ctx, and returns only when every child of g has finished:
  //   co_await task_group::run(ctx, [&](task_group& g) -> task<> { g.spawn(...); g.spawn(...); co_return; });
  // - body returns: run waits for the children, then returns body's value, or rethrows the first child failure;
  // - body throws: the children are cancelled and awaited, then body's exception is rethrown;
  // - a child fails: the group is cancelled, body included (its pending operation completes with
  //   operation_canceled), and the failure is rethrown once everything has finished;
  // - the awaiting task is stopped: body and the children are cancelled the same way.
  // body is kept in run's frame, so a lambda capturing the caller's locals by reference is safe: no child outlives
  // the co_await. To stop background children when body is done, call g.cancel() before returning.
  template <class F>
    requires std::invocable<F&, task_group&> &&
             detail::is_task<std::remove_cvref_t<std::invoke_result_t<F&, task_group&>>>::value
  static std::remove_cvref_t<std::invoke_result_t<F&, task_group&>> run(io_context& ctx, F body) {
    using body_task = std::remove_cvref_t<std::invoke_result_t<F&, task_group&>>;
    using T = typename body_task::value_type;
    const std::stop_token* parent = co_await current_stop_token();
    task_group g(ctx, parent);
    const std::stop_token token = g.stop_token();  // body is cancelled with the children
    std::optional<detail::result_of_t<T>> value;
    std::exception_ptr failure;
    try {
      body_task t = body(g);
      if constexpr (std::is_void_v<T>) {
        co_await detail::await_with_token<T>{t, &token};
        value.emplace();
      } else {
        value.emplace(co_await detail::await_with_token<T>{t, &token});
      }
    } catch (...) {
      failure = std::current_exception();
      g.cancel();
    }
    try {
      co_await g.wait();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
    if (failure) std::rethrow_exception(failure);
    if constexpr (!std::is_void_v<T>) co_return std::move(*value);
  }
  // run(ctx, body) on the loop running the calling task.
  template <class F>
    requires std::invocable<F&, task_group&> &&
             detail::is_task<std::remove_cvref_t<std::invoke_result_t<F&, task_group&>>>::value
  TERN_CORO_WRAPPER static auto run(F body) {
    io_context* ctx = io_context::current();
    if (ctx == nullptr) throw std::logic_error("tern::task_group::run: no io_context runs on this thread");
    return run(*ctx, std::move(body));
  }

  // Requests stop: every child's pending operation completes with operation_canceled. Any thread.
  void cancel() noexcept { source_.request_stop(); }
  // The token the children watch.
  std::stop_token stop_token() const noexcept { return source_.get_token(); }
  // Children still running.
  std::size_t size() const noexcept { return state_.load(std::memory_order_acquire) >> 1; }

  struct [[nodiscard]] wait_awaiter {
    task_group* g;
    bool await_ready() const noexcept { return g->size() == 0; }
    bool await_suspend(std::coroutine_handle<> h) noexcept {
      g->waiter_.handle = h;
      g->waiter_ctx_ = io_context::current();
      // Announce the waiter; if the last child finished meanwhile, take the flag back and do not suspend.
      if ((g->state_.fetch_or(1, std::memory_order_acq_rel) >> 1) == 0) {
        g->state_.fetch_and(~std::size_t{1}, std::memory_order_relaxed);
        return false;
      }
      return true;
    }
    void await_resume() const {
      if (g->error_) std::rethrow_exception(std::exchange(g->error_, nullptr));
    }
  };

  // Awaitable: resumes when every child has finished; rethrows the first child failure.
  wait_awaiter wait() noexcept { return {this}; }

 private:
  struct canceller {
    std::stop_source* source;
    void operator()() const noexcept { source->request_stop(); }
  };

  template <class T>
  task<void> child(task<T> t) {
    try {
      co_await std::move(t);
    } catch (...) {
      if (!failed_.exchange(true, std::memory_order_acq_rel)) error_ = std::current_exception();
      source_.request_stop();
    }
    finished();
  }

  void finished() noexcept {
    // release: the waiter must see error_ and everything the child wrote.
    if (state_.fetch_sub(2, std::memory_order_acq_rel) == 3) {
      state_.fetch_and(~std::size_t{1}, std::memory_order_relaxed);
      waiter_ctx_->enqueue(&waiter_);
    }
  }

  io_context* ctx_;
  std::stop_source source_;
  std::optional<std::stop_callback<canceller>> link_;
  std::atomic<std::size_t> state_{0};  // running children * 2 + (a waiter is suspended)
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  detail::resume_item waiter_;
  io_context* waiter_ctx_ = nullptr;
};

namespace detail {

template <class... T, std::size_t... I>
task<std::tuple<result_of_t<T>...>> when_all_impl(std::index_sequence<I...>, task<T>... ts) {
  const std::stop_token* parent = co_await current_stop_token();
  std::tuple<std::optional<result_of_t<T>>...> slots;
  task_group g(*io_context::current(), parent);
  auto store = [](auto& slot, auto t) -> task<void> { slot.emplace(co_await as_result(std::move(t))); };
  (g.spawn(store(std::get<I>(slots), std::move(ts))), ...);
  co_await g.wait();
  co_return std::tuple<result_of_t<T>...>(std::move(*std::get<I>(slots))...);
}

// Shared by the when_any forms: the first finisher takes the slot and cancels the rest.
template <class R>
struct any_state {
  std::atomic<bool> decided{false};
  std::size_t index = 0;
  std::optional<R> value;
  std::exception_ptr error;
};

template <class R, class T>
task<void> race(any_state<R>& st, task_group& g, std::size_t index, task<T> t) {
  std::optional<R> value;
  std::exception_ptr error;
  try {
    value.emplace(co_await std::move(t));
  } catch (...) {
    error = std::current_exception();
  }
  if (!st.decided.exchange(true, std::memory_order_acq_rel)) {
    st.index = index;
    st.value = std::move(value);
    st.error = error;
    g.cancel();
  }
}

}  // namespace detail

// Runs the tasks concurrently on the current loop; returns all their results, or cancels the others on the first
// failure, awaits them, and rethrows it.
template <class... T>
TERN_CORO_WRAPPER task<std::tuple<detail::result_of_t<T>...>> when_all(task<T>... ts) {
  return detail::when_all_impl(std::index_sequence_for<T...>{}, std::move(ts)...);
}

// Range form of when_all: results in the order of the tasks.
template <class T>
task<std::vector<detail::result_of_t<T>>> when_all(std::vector<task<T>> ts) {
  const std::stop_token* parent = co_await current_stop_token();
  std::vector<std::optional<detail::result_of_t<T>>> slots(ts.size());
  task_group g(*io_context::current(), parent);
  auto store = [](auto& slot, task<T> t) -> task<void> { slot.emplace(co_await detail::as_result(std::move(t))); };
  for (std::size_t i = 0; i < ts.size(); ++i) g.spawn(store(slots[i], std::move(ts[i])));
  co_await g.wait();
  std::vector<detail::result_of_t<T>> out;
  out.reserve(slots.size());
  for (auto& s : slots) out.push_back(std::move(*s));
  co_return out;
}

// Runs the tasks concurrently; returns {index, value} of the first to finish after cancelling and awaiting the
// others. If the first to finish failed, its exception is rethrown (after the others are done).
template <class... T>
task<std::pair<std::size_t, std::variant<detail::result_of_t<T>...>>> when_any(task<T>... ts) {
  using R = std::variant<detail::result_of_t<T>...>;
  const std::stop_token* parent = co_await current_stop_token();
  detail::any_state<R> st;
  task_group g(*io_context::current(), parent);
  std::size_t index = 0;
  auto wrap = []<std::size_t I, class U>(std::integral_constant<std::size_t, I>, task<U> t) -> task<R> {
    co_return R(std::in_place_index<I>, co_await detail::as_result(std::move(t)));
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (g.spawn(detail::race(st, g, index++, wrap(std::integral_constant<std::size_t, I>{}, std::move(ts)))), ...);
  }(std::index_sequence_for<T...>{});
  co_await g.wait();
  if (st.error) std::rethrow_exception(st.error);
  co_return std::pair<std::size_t, R>(st.index, std::move(*st.value));
}

// Range form of when_any: {index, value} of the first task to finish.
template <class T>
task<std::pair<std::size_t, detail::result_of_t<T>>> when_any(std::vector<task<T>> ts) {
  using R = detail::result_of_t<T>;
  if (ts.empty()) throw std::invalid_argument("tern::when_any: no tasks");
  const std::stop_token* parent = co_await current_stop_token();
  detail::any_state<R> st;
  task_group g(*io_context::current(), parent);
  for (std::size_t i = 0; i < ts.size(); ++i) g.spawn(detail::race(st, g, i, detail::as_result(std::move(ts[i]))));
  co_await g.wait();
  if (st.error) std::rethrow_exception(st.error);
  co_return std::pair<std::size_t, R>(st.index, std::move(*st.value));
}

}  // namespace tern
