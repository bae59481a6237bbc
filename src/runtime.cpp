// The runtime's threads: start, placement, shutdown (see runtime.hpp).
#include "tern/runtime.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <cerrno>
#include <condition_variable>
#include <string>
#include <system_error>

#include "tern/detail/frame_pool.hpp"

namespace tern {

namespace detail {

// The idle flags and counts are hints for donors (a wrong read costs one donation too many or too few): the work
// itself travels through the target loop's inbox, whose push and drain order it. acq_rel on the flag's exchange so
// that, of a worker going idle and a donor claiming it, exactly one sees the other's write; the count beside it is
// only ever read as a hint (any_idle), relaxed.
void share_group::set_idle(unsigned i, bool idle) noexcept {
  if (idle_flag(i).exchange(idle, std::memory_order_acq_rel) != idle) {
    if (idle) {
      idle_count_.fetch_add(1, std::memory_order_relaxed);
    } else {
      idle_count_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
}

io_context* share_group::claim_idle(unsigned self) noexcept {
  const unsigned n = member_count();
  for (unsigned k = 1; k < n; ++k) {
    unsigned i = (self + k) % n;  // start after self, so donors spread over the idle workers
    std::atomic<bool>& flag = idle_flag(i);
    // A relaxed look first (no cache-line write for a busy worker); the exchange decides which donor claims it.
    if (flag.load(std::memory_order_relaxed) && flag.exchange(false, std::memory_order_acq_rel)) {
      idle_count_.fetch_sub(1, std::memory_order_relaxed);
      return member(i);
    }
  }
  return nullptr;
}

io_context* share_group::least_loaded(unsigned self, std::size_t& load) noexcept {
  const unsigned n = member_count();
  io_context* best = nullptr;
  for (unsigned k = 1; k < n; ++k) {
    unsigned i = (self + k) % n;
    std::size_t l = load_slot(i).load(std::memory_order_relaxed);  // a figure, publishing nothing: relaxed
    if (best == nullptr || l < load) {
      best = member(i);
      load = l;
    }
  }
  return best;
}

}  // namespace detail

namespace {

// Where the workers of a starting runtime meet the constructor: each reports whether it could apply the
// thread-level options, then waits for the verdict, so that none runs work unless all succeeded.
struct start_gate {
  std::mutex m;
  std::condition_variable cv;
  unsigned reported = 0;
  int error = 0;             // the first worker's errno, 0 if none failed
  bool decided = false;
  bool go = false;

  // A worker: reports its outcome and returns whether to run.
  bool report_and_wait(int err) {
    std::unique_lock<std::mutex> lock(m);
    ++reported;
    if (err != 0 && error == 0) error = err;
    cv.notify_all();
    cv.wait(lock, [this] { return decided; });
    return go;
  }
  // The constructor: waits for n reports and decides (never go when abandon is set); returns the first error
  // (0: all went well).
  int decide(unsigned n, bool abandon = false) {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return reported == n; });
    decided = true;
    go = error == 0 && !abandon;
    cv.notify_all();
    return error;
  }
};

}  // namespace

runtime::runtime(runtime_options opts) {
  unsigned n = opts.threads != 0 ? opts.threads : std::thread::hardware_concurrency();
  if (n == 0) n = 1;
  if (opts.realtime_priority) {
    const int lo = sched_get_priority_min(SCHED_FIFO);
    const int hi = sched_get_priority_max(SCHED_FIFO);
    if (*opts.realtime_priority < lo || *opts.realtime_priority > hi) {
      throw std::invalid_argument("tern::runtime: realtime_priority " + std::to_string(*opts.realtime_priority) +
                                  " is outside SCHED_FIFO's range " + std::to_string(lo) + ".." +
                                  std::to_string(hi));
    }
  }
  io_context_options loop_opts;
  loop_opts.backend = opts.backend;
  loop_opts.ring_entries = opts.ring_entries;
  loop_opts.spin_before_park = opts.busy_poll ? std::chrono::nanoseconds::max() : opts.spin_before_park;
  loop_opts.sqpoll = opts.sqpoll;
  loop_opts.sqpoll_idle = opts.sqpoll_idle;
  if (opts.lock_memory) {
    if (::mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
      throw std::system_error(errno, std::system_category(),
                              "tern::runtime: lock_memory: mlockall(MCL_CURRENT | MCL_FUTURE)");
    }
    unlock_memory_ = true;
  }
  // From here on, a failure undoes what was done: no loop is left, no thread runs, no memory stays locked.
  auto undo = [this] {
    workers_.clear();
    if (unlock_memory_) ::munlockall();
    unlock_memory_ = false;
  };
  try {
    workers_.reserve(n);
    for (unsigned i = 0; i < n; ++i) {
      workers_.push_back(std::make_unique<worker_state>(loop_opts));
      workers_.back()->ctx.join_share_group(this, i);
    }
  } catch (...) {
    undo();
    throw;
  }
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  auto gate = std::make_shared<start_gate>();
  unsigned started = 0;
  try {
    for (unsigned i = 0; i < n; ++i) {
      worker_state& w = *workers_[i];
      w.thread = std::thread([this, &w, i, cpus, gate, pin = opts.pin_threads, prio = opts.realtime_priority,
                              prefault = opts.prefault_bytes_per_class] {
        int err = 0;
        if (pin) {
          cpu_set_t set;
          CPU_ZERO(&set);
          CPU_SET(i % cpus, &set);
          pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort: a CPU may be offline
        }
        if (prio) {
          sched_param param{};
          param.sched_priority = *prio;
          err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param);
        }
        if (err == 0 && prefault != 0) detail::frame_pool::warm(prefault);
        if (!gate->report_and_wait(err)) {
          // release: pairs with shutdown()'s acquire load; the thread's last writes come before it.
          w.finished.store(true, std::memory_order_release);
          return;
        }
        work(w);
      });
      ++started;
    }
  } catch (...) {
    // A thread could not be created: the ones that were wait at the gate for a verdict.
    gate->decide(started, true);
    join_all();
    undo();
    throw;
  }
  if (int err = gate->decide(n); err != 0) {
    join_all();
    undo();
    throw std::system_error(err, std::system_category(),
                            "tern::runtime: realtime_priority " + std::to_string(*opts.realtime_priority) +
                                ": pthread_setschedparam(SCHED_FIFO) (needs CAP_SYS_NICE or RLIMIT_RTPRIO)");
  }
}

runtime::~runtime() {
  stop();
  // Every thread is gone: first drop what is queued on every loop (a task switched to another worker may sit in
  // that worker's queue while its frame belongs to this one), then destroy the loops.
  for (auto& w : workers_) w->ctx.discard_queued();
  workers_.clear();
  if (unlock_memory_) ::munlockall();
}

void runtime::work(worker_state& w) {
  for (;;) {
    w.ctx.run();
    if (w.ctx.stopped() || settle(w)) break;
  }
  // The loop is destroyed on the runtime's thread, after this one is gone; what it has in the kernel must be
  // cancelled and reaped here, by the one thread its ring takes calls from, before its frames can be freed.
  w.ctx.shutdown_io();
  // release: shutdown()'s acquire load of finished then sees everything the loop did, its teardown of I/O included.
  w.finished.store(true, std::memory_order_release);
}

bool runtime::settle(worker_state& w) {
  // Only shutdown gets here (until then a guard keeps every loop running), so a short sleep between looks costs
  // nothing that matters, and a peer's hand-over needs no wake-up: it is seen at the next look.
  {
    std::lock_guard<std::mutex> lock(settle_mutex_);
    ++settled_;
  }
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(settle_mutex_);
      if (all_settled_ || w.ctx.stopped()) return true;
      if (w.ctx.has_incoming()) {
        --settled_;
        return false;
      }
      // Every worker is outside its loop now, and a worker hands work over only from inside its loop: if no inbox
      // holds anything either (what was pushed before a peer settled is visible through this mutex), no more
      // work can appear from within the runtime.
      if (settled_ == workers_.size()) {
        bool quiet = true;
        for (auto& peer : workers_) quiet = quiet && !peer->ctx.has_incoming();
        if (quiet) {
          all_settled_ = true;
          return true;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::size_t runtime::current_worker() const noexcept {
  io_context* cur = io_context::current();
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    if (&workers_[i]->ctx == cur) return i;
  }
  return workers_.size();
}

io_context& runtime::pick() noexcept {
  io_context* cur = io_context::current();
  if (cur != nullptr) {
    for (auto& w : workers_) {
      if (&w->ctx == cur) return *cur;
    }
  }
  // A round-robin counter, publishing nothing: relaxed.
  return workers_[next_.fetch_add(1, std::memory_order_relaxed) % workers_.size()]->ctx;
}

bool runtime::shutdown(std::chrono::nanoseconds grace) {
  stop_.request_stop();
  // Releasing a guard is safe from any thread; each worker's run() now returns once it is out of work.
  for (auto& w : workers_) w->ctx.post([&w] { w->guard.reset(); });
  const auto deadline = std::chrono::steady_clock::now() + grace;
  bool drained = true;
  for (auto& w : workers_) {
    while (!w->finished.load(std::memory_order_acquire)) {  // pairs with work()'s release store
      if (std::chrono::steady_clock::now() >= deadline) {
        drained = false;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  stop();
  return drained;
}

void runtime::stop() noexcept {
  if (joined_) return;
  for (auto& w : workers_) w->ctx.stop();
  join_all();
}

void runtime::join_all() noexcept {
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
  joined_ = true;
}

metrics::runtime_snapshot runtime::metrics() const {
  metrics::runtime_snapshot s;
  s.workers.reserve(workers_.size());
  for (const auto& w : workers_) s.workers.push_back(w->ctx.metrics());
  return s;
}

}  // namespace tern
