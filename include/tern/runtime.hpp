// tern/runtime.hpp
//
// runtime: N worker threads, each running its own io_context (thread-per-core by default).
//
// Why one loop per thread: a loop is single-threaded by construction (its run queue, timer wheel and ring need no
// locks), so adding a core adds a loop instead of adding contention on a shared one. Threads meet only at the
// loops' remote inboxes: posting, spawning or switching onto another worker is one CAS on its inbox, plus a
// wake-up only when that worker is parked.
//
// Placement rules:
// - spawn_on(i, t), post_to(i, f) and switch_to(i) choose the worker.
// - spawn(t) and post(f) let the runtime choose: the calling worker if called on one, else the next worker in
//   round-robin order. This work is shareable: it waits in a separate queue of its loop, and a busy loop hands
//   half of that queue to an idle worker (one whose queues are empty) at the end of a turn, in one push onto the
//   idle worker's inbox. Completions, resumptions and work placed explicitly never move. A spawned task can move
//   only before its first step, so the rule for I/O objects below holds.
// - An I/O object (socket, acceptor, timer) belongs to the loop it was created on and is used only by tasks
//   running on that loop. A task that holds one stays on its loop; spawn such tasks with spawn(ctx, t) or
//   spawn_on, never move them with switch_to while an I/O object of the old loop is still in use.
//
// Shutdown: shutdown(grace) requests stop on stop_token() (tasks watch it, e.g. an accept loop wrapped in
// with_stop), lets every worker run until it is out of work or the grace period ends, then stops the loops; tasks
// still suspended are destroyed with their loops (their destructors run: sockets close, timers disarm). A worker
// that runs out of work first does not leave while a peer is still running: the peer may yet hand it shareable
// work or post to it. It waits outside its loop, polling its inbox, until every worker is out of work with every
// inbox empty (checked under one mutex, so no worker can be inside its loop at that moment), and runs whatever
// arrives meanwhile. Work posted from outside the runtime after that point is dropped with the loops.
#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <stdexcept>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

#include "tern/detail/work_queue.hpp"
#include "tern/io_context.hpp"
#include "tern/spawn.hpp"
#include "tern/task.hpp"

namespace tern {

struct runtime_options {
  // Worker threads; 0 means one per online CPU.
  unsigned threads = 0;
  // Pin worker i to CPU i modulo the CPU count.
  bool pin_threads = false;
  // Backend and ring size of every worker's loop.
  backend_kind backend = backend_kind::automatic;
  unsigned ring_entries = 1024;
  // How long an idle worker keeps polling before it parks (waking a parked vCPU costs tens of microseconds).
  std::chrono::nanoseconds spin_before_park = std::chrono::microseconds(20);

  // ---- Latency mode: each option trades CPU, memory or privilege for a shorter, steadier response. ----
  // Never park an idle worker: it polls its inbox, its ring or epoll and its timers until work comes, so each
  // worker keeps one CPU busy. Replaces spin_before_park.
  bool busy_poll = false;
  // Run every worker under SCHED_FIFO at this priority (sched_get_priority_min..max of SCHED_FIFO, 1..99 on
  // Linux): a loop is then preempted only by higher real-time threads. Needs CAP_SYS_NICE or an RLIMIT_RTPRIO at
  // least this high. Never half-applied: if any worker cannot get it, the constructor stops and joins every
  // worker before any of them ran work, undoes lock_memory, and throws std::system_error (an out-of-range
  // priority throws std::invalid_argument before any thread starts). A busy-polling FIFO worker starves
  // ordinary threads on its CPU: give such workers CPUs of their own.
  std::optional<int> realtime_priority;
  // mlockall(MCL_CURRENT | MCL_FUTURE) before the workers start, so that no page of the process is paged out or
  // faulted in later on a loop's path. Throws std::system_error when refused (RLIMIT_MEMLOCK without
  // CAP_IPC_LOCK). Process-wide; the destructor undoes it (munlockall) when this runtime did it.
  bool lock_memory = false;
  // Each worker, before it runs anything, takes this many bytes of every frame-pool size class (coroutine frames
  // and handler blocks up to 2 KiB, 64 classes 32 bytes apart) and gives them back, so its pool starts warm and
  // its first tasks neither call malloc nor fault pages in.
  std::size_t prefault_bytes_per_class = 0;
  // io_uring only (ignored on epoll): a kernel thread per worker polls its submission queue
  // (IORING_SETUP_SQPOLL), so a submission needs no system call while that thread is awake; it sleeps after
  // sqpoll_idle without submissions. It takes a CPU of its own to pay: on a machine with few cores it competes
  // with the workers (docs/benchmarks.md measures it). Throws std::system_error if the kernel refuses it.
  bool sqpoll = false;
  std::chrono::milliseconds sqpoll_idle{1000};

  // The starting point of latency mode: threads pinned to CPUs and busy polling. Add realtime_priority,
  // lock_memory, prefault_bytes_per_class or sqpoll as the deployment allows.
  static runtime_options low_latency(unsigned threads = 0) {
    runtime_options o;
    o.threads = threads;
    o.pin_threads = true;
    o.busy_poll = true;
    return o;
  }
};

namespace detail {
struct [[nodiscard]] switch_awaiter : resume_item {
  io_context* target;
  bool await_ready() const noexcept { return io_context::current() == target; }
  void await_suspend(std::coroutine_handle<> h) noexcept {
    handle = h;
    target->enqueue(this);
  }
  void await_resume() const noexcept {}
};
}  // namespace detail

class runtime final : private detail::share_group {
 public:
  // Starts the worker threads.
  explicit runtime(runtime_options opts = {});
  // Stops the workers and joins them (no grace period), then destroys their loops.
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  // Number of workers.
  std::size_t size() const noexcept { return workers_.size(); }
  // Worker i's loop.
  io_context& worker(std::size_t i) noexcept { return workers_[i]->ctx; }
  // Index of the worker running on the calling thread, or size() if the caller is not a worker of this runtime.
  std::size_t current_worker() const noexcept;

  // Starts t on worker i.
  template <class T>
  join_handle<T> spawn_on(std::size_t i, task<T> t) {
    return tern::spawn(worker(i), std::move(t));
  }
  // Starts f(args...) on worker i, keeping f and decayed copies of args alive until the task finishes (see
  // tern::spawn(ctx, f, args...)).
  template <class F, class... Args>
    requires detail::task_factory<F, Args...>
  auto spawn_on(std::size_t i, F&& f, Args&&... args) {
    return tern::spawn(worker(i), std::forward<F>(f), std::forward<Args>(args)...);
  }
  // Starts t on the calling worker, or on the next worker in turn when called from outside the runtime. Until
  // its first step runs, an idle worker may take it over (work sharing): spawn this way only tasks that create
  // their I/O objects themselves.
  template <class T>
  join_handle<T> spawn(task<T> t) {
    if (!t.valid()) throw std::invalid_argument("tern::runtime::spawn: empty task");
    return join_handle<T>(detail::spawn_state<T>::create(pick(), t.release(), true));
  }
  // spawn(t) for f(args...), keeping f and decayed copies of args alive until the task finishes.
  template <class F, class... Args>
    requires detail::task_factory<F, Args...>
  auto spawn(F&& f, Args&&... args) {
    return spawn(detail::owned_task(std::forward<F>(f), std::forward<Args>(args)...));
  }
  // Queues f() on worker i.
  template <class F>
  void post_to(std::size_t i, F&& f) {
    worker(i).post(std::forward<F>(f));
  }
  // Queues f() on the calling worker, or on the next worker in turn from outside; an idle worker may take it
  // over (work sharing).
  template <class F>
  void post(F&& f) {
    pick().post_shared(std::forward<F>(f));
  }
  // Awaitable: continues the calling coroutine on worker i (no suspension if it already runs there).
  detail::switch_awaiter switch_to(std::size_t i) noexcept {
    detail::switch_awaiter a;
    a.target = &worker(i);
    return a;
  }

  // Runs t on worker 0 and blocks the calling (non-worker) thread until it finishes; returns its value or
  // rethrows its exception.
  template <class T>
  T block_on(task<T> t);

  // Every worker's counters, in worker order (tern/metrics.hpp). Any thread.
  ::tern::metrics::runtime_snapshot metrics() const;

  // Requested by shutdown(); tasks that serve forever (accept loops) watch it.
  std::stop_token stop_token() const noexcept { return stop_.get_token(); }

  // Requests stop, lets the workers run until they are out of work or grace has passed, then stops and joins
  // them. Returns true if every worker ran out of work within the grace period.
  bool shutdown(std::chrono::nanoseconds grace = std::chrono::seconds(5));

  // Stops every loop at once and joins the threads. Idempotent.
  void stop() noexcept;

 private:
  struct worker_state {
    explicit worker_state(io_context_options o) : ctx(o), guard(ctx) {}
    io_context ctx;
    std::optional<io_context::work_guard> guard;  // keeps an idle worker running until shutdown
    std::thread thread;
    std::atomic<bool> finished{false};
    std::atomic<bool> idle{false};  // parked or about to park with nothing to run (work sharing)
    alignas(64) std::atomic<std::size_t> load{0};  // shareable work queued, as last published (work sharing)
  };

  io_context& pick() noexcept;
  void join_all() noexcept;
  // The body of worker i's thread: runs its loop until stopped, or until the whole runtime is out of work.
  void work(worker_state& w);
  // Called by a worker whose run() returned for lack of work: waits until every worker is out of work (true: the
  // worker may leave) or until this one has work again (false: run again). See "Shutdown" above.
  bool settle(worker_state& w);

  // share_group
  io_context* member(unsigned i) noexcept override { return &workers_[i]->ctx; }
  std::atomic<bool>& idle_flag(unsigned i) noexcept override { return workers_[i]->idle; }
  std::atomic<std::size_t>& load_slot(unsigned i) noexcept override { return workers_[i]->load; }
  unsigned member_count() const noexcept override { return static_cast<unsigned>(workers_.size()); }

  std::vector<std::unique_ptr<worker_state>> workers_;
  std::atomic<std::size_t> next_{0};
  std::stop_source stop_;
  bool joined_ = false;
  std::mutex settle_mutex_;  // guards the two below: workers out of work, and whether all were at once
  std::size_t settled_ = 0;
  bool all_settled_ = false;
  bool unlock_memory_ = false;  // this runtime called mlockall
};

template <class T>
T runtime::block_on(task<T> t) {
  // A std::promise hands the outcome across threads; its shared state outlives whichever side finishes last.
  std::promise<T> result;
  std::future<T> done = result.get_future();
  auto body = [](task<T> inner, std::promise<T> p) -> task<void> {
    try {
      if constexpr (std::is_void_v<T>) {
        co_await std::move(inner);
        p.set_value();
      } else {
        p.set_value(co_await std::move(inner));
      }
    } catch (...) {
      p.set_exception(std::current_exception());
    }
  };
  spawn_on(0, body(std::move(t), std::move(result))).detach();
  return done.get();
}

}  // namespace tern
