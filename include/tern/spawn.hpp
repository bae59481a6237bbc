// tern/spawn.hpp
//
// spawn: starts a task as an independent root on a loop, and join_handle: awaits its result.
//
// The spawned task's own frame is the root; a small pooled spawn_state beside it links it into the loop (so the
// loop can destroy it if the loop dies first), holds the awaiting coroutine of a join, and decides who frees what:
// - the task finishes first: it stays in its final suspend point until the handle collects the result (or, if the
//   handle was dropped, it is destroyed at once, and an exception nobody will observe goes to the loop's handler);
// - the handle is dropped first: the task becomes detached and cleans up after itself.
// Spawning queues the task's first resumption; it never runs inside spawn(). spawn may be called from any thread;
// a join may be awaited on any loop (the joiner is resumed on its own loop).
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>
#include <new>
#include <stop_token>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "tern/detail/frame_pool.hpp"
#include "tern/detail/work_queue.hpp"
#include "tern/io_context.hpp"
#include "tern/task.hpp"

namespace tern {

// Two pointers set and cleared: inline, where the call cost spawn + join 20 instructions (coroutine/spawn's probe).
inline void io_context::link_spawned(detail::root_hook* s) noexcept {
  s->prev = nullptr;
  s->next = spawned_;
  if (spawned_ != nullptr) spawned_->prev = s;
  spawned_ = s;
}

inline void io_context::unlink_spawned(detail::root_hook* s) noexcept {
  if (s == watched_root_) [[unlikely]] attention_.fetch_or(attend_root, std::memory_order_relaxed);
  if (s->prev != nullptr) s->prev->next = s->next; else spawned_ = s->next;
  if (s->next != nullptr) s->next->prev = s->prev;
  s->prev = s->next = nullptr;
}

template <class T>
class join_handle;

namespace detail {

// The queue node serves the three steps, which are never queued at once: the first step (on_start, or on_discard
// if the loop dies first), the finish handed to the home loop (on_finish, queued only after the first step has
// run), and the joiner's resumption (the joiner's handle; queued by finish(), after the node has left the queue).
// It is a base, not a member, so that a step finds its state by a cast rather than a pointer of its own.
struct spawn_step : resume_item {};

// Who owns what: the task frame and this state are freed together, by whichever of {the task finishing, the
// handle going away} happens second. The three facts that decide it (done, a joiner is waiting, the handle is
// gone) are bits of one atomic, so a join or a detach on one thread may race the completion on another and
// exactly one side sees the other's bit.
template <class T>
class spawn_state final : public root_hook, public spawn_step {
 public:
  using handle_type = std::coroutine_handle<promise<T>>;

  // Queues the task's first step on ctx. Any thread: the state joins ctx's list of spawned tasks only when that
  // first step runs, on ctx's own thread. shareable: an idle worker of ctx's runtime may take the first step over.
  // Always inline: spawn(task) is this and a check or two, and clang 16 stopped inlining it once the run queue's
  // push held a call to its rare path (coroutine/spawn's probe: 21 instructions more per spawn).
  [[gnu::always_inline]] static spawn_state* create(io_context& ctx, handle_type h, bool shareable = false) {
    spawn_state* s = make(ctx, h, shareable);
    s->start(ctx, shareable);
    return s;
  }
  // The same under a stop token: set before the first step is queued, where another thread may take it.
  static spawn_state* create(io_context& ctx, handle_type h, std::stop_token token, bool shareable = false) {
    spawn_state* s = make(ctx, h, shareable);
    if (token.stop_possible()) {
      s->token_ = std::move(token);
      h.promise().set_stop_token(&s->token_);
    }
    s->start(ctx, shareable);
    return s;
  }

  bool done() const noexcept { return (state_.load(std::memory_order_acquire) & done_bit) != 0; }
  // The word whose low bit is set, on the home loop's thread, when the task has finished: what block_on watches.
  const std::atomic<std::uintptr_t>* done_word() const noexcept { return &state_; }

  // The handle is going away without having taken the result. True if this call freed the state (the task had
  // finished). Not void: a void member of one pointer argument, of a template instantiated with a type of internal
  // linkage, is the shape clang 16 mistakes for a resume inside a coroutine (docs/design.md, "Coroutines").
  bool detach() noexcept {
    if (state_.fetch_add(detached_bit, std::memory_order_acq_rel) & done_bit) {
      report_unobserved();
      release();
      return true;
    }
    return false;
  }

  // A join is waiting on the calling thread's loop; returns false if the task has finished meanwhile.
  bool set_joiner(std::coroutine_handle<> h) noexcept {
    step().handle = h;  // not read by the queue while the node may still be queued for the first step
    const auto joiner = reinterpret_cast<std::uintptr_t>(io_context::current());
    return (state_.fetch_add(joiner | joiner_bit, std::memory_order_acq_rel) & done_bit) == 0;
  }

  // Takes the result (the handle is the only owner left) and frees everything. What throws is out of line, so
  // that the path without an exception is a test of h_ and one of the promise's exception.
  T take() {
    struct cleanup {
      spawn_state* s;
      ~cleanup() { s->release(); }
    } guard{this};
    if (!h_) [[unlikely]] throw_abandoned();
    return h_.promise().take();
  }

 private:
  // state_: the three facts in its low bits, and the joining loop's address above them (set with joiner_bit).
  // Each is set once and never cleared (done by the finish or by the loop's death, the joiner by the one join,
  // detached by the handle's end), so they are set with fetch_add, one lock xadd, where fetch_or compiles to a
  // compare-and-swap loop (the old value is needed).
  static constexpr std::uintptr_t done_bit = 1;  // io_context::run_until watches this bit
  static constexpr std::uintptr_t joiner_bit = 2;
  static constexpr std::uintptr_t detached_bit = 4;
  static constexpr std::uintptr_t bits = done_bit | joiner_bit | detached_bit;
  static_assert(alignof(io_context) > bits, "the joining loop's address leaves the low bits free");

  spawn_state(io_context& ctx, handle_type h, bool shareable) noexcept : ctx_(&ctx), h_(h) {
    step().run = shareable ? &on_start_shared : &on_start;
    step().discard = &on_discard;
  }

  static spawn_state* make(io_context& ctx, handle_type h, bool shareable) {
    auto* s = ::new (frame_pool::allocate(sizeof(spawn_state))) spawn_state(ctx, h, shareable);
    h.promise().set_root(s);
    return s;
  }
  void start(io_context& ctx, bool shareable) noexcept {
    if (shareable) {
      ctx.enqueue_shared(&step());
    } else {
      ctx.enqueue(&step());
    }
  }

  [[noreturn, gnu::cold, gnu::noinline]] static void throw_abandoned() {
    throw std::runtime_error("tern: spawned task was destroyed with its io_context");
  }

  spawn_step& step() noexcept { return *this; }
  static spawn_state* of(work_item* w) noexcept { return static_cast<spawn_state*>(static_cast<spawn_step*>(w)); }

  static void on_start(work_item* w) {
    spawn_state* s = of(w);
    s->ctx_->link_spawned(s);
    s->h_.resume();
  }
  // Shareable work may start on another worker than the one it was given to: that worker becomes its home.
  static void on_start_shared(work_item* w) {
    of(w)->ctx_ = io_context::current();
    on_start(w);
  }
  // The loop died before the first step: nothing ran, nothing to report.
  static void on_discard(work_item* w) noexcept {
    spawn_state* s = of(w);
    s->h_.destroy();
    s->h_ = nullptr;  // what take() reports as abandoned
    if (s->state_.fetch_add(done_bit, std::memory_order_acq_rel) & detached_bit) s->release();
  }
  static void on_finish(work_item* w) { of(w)->finish(); }

  void on_root_done() noexcept override {
    // The task may have moved to another loop (switch_to); its home loop's list is touched on the home thread.
    if (!ctx_->running_here()) {
      step().run = &on_finish;
      step().discard = nullptr;
      ctx_->enqueue(&step());
    } else {
      finish();
    }
  }

  void finish() noexcept {
    ctx_->unlink_spawned(this);
    const std::uintptr_t old = state_.fetch_add(done_bit, std::memory_order_acq_rel);
    if (old & detached_bit) {
      release_detached();  // out of line: finish itself then keeps nothing in a saved register
    } else if (old & joiner_bit) {
      step().run = &resume_item::resume;
      step().discard = nullptr;
      reinterpret_cast<io_context*>(old & ~bits)->enqueue(&step());
    }
  }

  void abandon() noexcept override {
    ctx_->unlink_spawned(this);
    h_.destroy();
    h_ = nullptr;  // what take() reports as abandoned
    if (state_.fetch_add(done_bit, std::memory_order_acq_rel) & detached_bit) release();
  }

  [[gnu::noinline]] void release_detached() noexcept {
    report_unobserved();
    release();
  }

  void report_unobserved() noexcept {
    if (h_ && h_.promise().exception()) ctx_->report_exception(h_.promise().exception());
  }

  void release() noexcept {
    if (h_) h_.destroy();
    this->~spawn_state();
    frame_pool::deallocate(this, sizeof(spawn_state));
  }

  // 88 bytes, a 96-byte malloc chunk, on every spawned task (one per idle connection): one queue node for the
  // three steps instead of three, the node as a base instead of a member with a pointer back, one vtable pointer
  // for both of root_hook's roles, and the joining loop and the three facts in one word took it from 168 bytes
  // (task.hpp, detail/frame_pool.hpp). h_ is null once the task was destroyed unfinished (its loop died).
  io_context* ctx_;
  handle_type h_;
  std::stop_token token_;  // the root task's stop token, if it was spawned with one
  std::atomic<std::uintptr_t> state_{0};
};

// Every spawned task pays this beside its frame: a field more would move it to the next class.
static_assert(sizeof(spawn_state<void>) <= 88);

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
  // Inlined always, like detach(): both are void members of one pointer argument, the shape clang 16 may take for
  // a resume when a coroutine calls it out of line with T of internal linkage (docs/design.md, "Coroutines").
  [[gnu::always_inline]] ~join_handle() { detach(); }

  // True once the task has finished.
  bool done() const noexcept { return s_ != nullptr && s_->done(); }
  // True while the handle refers to a task.
  bool valid() const noexcept { return s_ != nullptr; }

  // Lets the task run on its own; its exception, if any, goes to the loop's exception handler.
  [[gnu::always_inline]] void detach() noexcept {
    if (s_ != nullptr) std::exchange(s_, nullptr)->detach();
  }

  struct [[nodiscard]] awaiter {
    detail::spawn_state<T>* s;
    bool await_ready() const noexcept { return s->done(); }
    bool await_suspend(std::coroutine_handle<> h) noexcept { return s->set_joiner(h); }
    T await_resume() { return s->take(); }
  };

  // Waits for the task; the handle is consumed.
  awaiter operator co_await() && noexcept { return awaiter{std::exchange(s_, nullptr)}; }
  awaiter operator co_await() & noexcept { return awaiter{std::exchange(s_, nullptr)}; }

  // Internal: the word block_on watches, and the task's entry on its loop's list.
  const std::atomic<std::uintptr_t>* done_word() const noexcept { return s_->done_word(); }
  const detail::root_hook* root() const noexcept { return s_; }

 private:
  detail::spawn_state<T>* s_ = nullptr;
};

// Starts t on ctx as an independent task; the first step runs from ctx's run queue.
template <class T>
join_handle<T> spawn(io_context& ctx, task<T> t) {
  if (!t.valid()) throw std::invalid_argument("tern::spawn: empty task");
  return join_handle<T>(detail::spawn_state<T>::create(ctx, t.release()));
}

// Starts t on ctx under a stop token: a stop request cancels what the task (and every task it awaits) waits on.
template <class T>
join_handle<T> spawn(io_context& ctx, task<T> t, std::stop_token token) {
  if (!t.valid()) throw std::invalid_argument("tern::spawn: empty task");
  return join_handle<T>(detail::spawn_state<T>::create(ctx, t.release(), std::move(token)));
}

namespace detail {
template <class Op>
using operation_result_t = decltype(std::declval<Op&>().await_resume());

// The task that spawn(ctx, op) runs: it only awaits op, which lives in its frame.
template <class Op>
task<operation_result_t<Op>> operation_task(Op op) {
  if constexpr (std::is_void_v<operation_result_t<Op>>) {
    co_await op;
  } else {
    co_return co_await op;
  }
}
}  // namespace detail

// Starts one operation (an awaiter such as sock.write_all(b), or a timer wait) on ctx as its own task, so it can
// proceed while the caller does something else; join the handle for its result. The operation object is moved
// into the task's frame, so it needs nothing from the caller except the buffers it names.
template <detail::cancellable Op>
join_handle<detail::operation_result_t<Op>> spawn(io_context& ctx, Op op) {
  return spawn(ctx, detail::operation_task(std::move(op)));
}
// The same under a stop token: a stop request cancels the operation.
template <detail::cancellable Op>
join_handle<detail::operation_result_t<Op>> spawn(io_context& ctx, Op op, std::stop_token token) {
  return spawn(ctx, detail::operation_task(std::move(op)), std::move(token));
}

namespace detail {
// The task type that calling F with Args (as spawn passes them: the callable as an lvalue, the arguments as
// rvalues of their decayed copies) returns.
template <class F, class... Args>
using invoke_task_t = std::invoke_result_t<std::decay_t<F>&, std::decay_t<Args>...>;

// F called with Args makes a task: what spawn(ctx, f, args...) accepts.
template <class F, class... Args>
concept task_factory = std::invocable<std::decay_t<F>&, std::decay_t<Args>...> &&
                       is_task<std::remove_cvref_t<invoke_task_t<F, Args...>>>::value;

// f(args...) for a callable or a member function pointer, as std::invoke does, but marked as returning a task
// without being a coroutine (clang's lifetime checks reject std::invoke itself when it returns a task).
template <class F, class Object, class... Rest>
TERN_CORO_WRAPPER decltype(auto) call_member(F& f, Object&& object, Rest&&... rest) {
  if constexpr (std::is_pointer_v<std::remove_cvref_t<Object>>) {
    return ((*object).*f)(std::forward<Rest>(rest)...);
  } else if constexpr (requires { object.get(); }) {  // std::reference_wrapper
    return (object.get().*f)(std::forward<Rest>(rest)...);
  } else {
    return (std::forward<Object>(object).*f)(std::forward<Rest>(rest)...);
  }
}
template <class F, class... Args>
TERN_CORO_WRAPPER decltype(auto) call_task_factory(F& f, Args&&... args) {
  if constexpr (std::is_member_function_pointer_v<F>) {
    return call_member(f, std::forward<Args>(args)...);
  } else {
    return f(std::forward<Args>(args)...);
  }
}

// The root task of spawn(ctx, f, args...). f and the copies of the arguments are parameters of this coroutine, so
// they live in its frame until the task that f returns has finished: a coroutine lambda's captures (reached
// through its `this`) and reference parameters bound to the arguments stay valid for the task's whole life. The
// arguments are passed on as rvalues, as std::thread does: a by-value parameter takes them over, a const&
// parameter refers to the copy here, and a non-const lvalue reference parameter needs std::ref.
template <class F, class... Args>
std::remove_cvref_t<invoke_task_t<F, Args...>> invoke_owned(F f, Args... args) {
  co_return co_await call_task_factory(f, std::move(args)...);
}

template <class F, class... Args>
TERN_CORO_WRAPPER auto owned_task(F&& f, Args&&... args) {
  return invoke_owned<std::decay_t<F>, std::decay_t<Args>...>(std::forward<F>(f), std::forward<Args>(args)...);
}
}  // namespace detail

// Starts f(args...) on ctx, where f returns a task: f and decayed copies of args are kept alive in the spawned
// frame until that task finishes. The safe way to spawn a coroutine lambda with captures, or a coroutine that
// takes references: spawn(ctx, [msg]() -> task<> { ... co_await sleep_for(1s); use(msg); }) and
// spawn(ctx, print_later, std::string("text")) both keep what they need, where spawn(ctx, lambda()) and
// spawn(ctx, print_later(std::string("text"))) would leave the task referring to destroyed temporaries.
template <class F, class... Args>
  requires detail::task_factory<F, Args...>
auto spawn(io_context& ctx, F&& f, Args&&... args) {
  return spawn(ctx, detail::owned_task(std::forward<F>(f), std::forward<Args>(args)...));
}

// Starts t on the loop running on this thread.
template <class T>
join_handle<T> spawn(task<T> t) {
  io_context* ctx = io_context::current();
  if (ctx == nullptr) throw std::logic_error("tern::spawn: no io_context runs on this thread");
  if (!t.valid()) throw std::invalid_argument("tern::spawn: empty task");
  return join_handle<T>(detail::spawn_state<T>::create(*ctx, t.release()));  // no stop token made and dropped
}

// Starts f(args...) on the loop running on this thread, keeping f and copies of args alive (see above).
template <class F, class... Args>
  requires detail::task_factory<F, Args...>
auto spawn(F&& f, Args&&... args) {
  return spawn(detail::owned_task(std::forward<F>(f), std::forward<Args>(args)...));
}

template <class T>
T io_context::block_on(task<T> t) {
  claim_thread("block_on");  // before the spawn: a refused call leaves nothing queued
  join_handle<T> h = spawn(*this, std::move(t));
  run_until(h.done_word(), h.root());
  if (!h.done()) {
    throw std::logic_error(stopped() ? "tern::io_context::block_on: the loop was stopped"
                                     : "tern::io_context::block_on: the task can never finish (no pending work)");
  }
  auto a = std::move(h).operator co_await();
  return a.await_resume();
}

}  // namespace tern
