// The runtime's threads: start, placement, shutdown (see runtime.hpp).
#include "tern/runtime.hpp"

#include <pthread.h>
#include <sched.h>

namespace tern {

namespace detail {

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
    std::size_t l = load_slot(i).load(std::memory_order_relaxed);
    if (best == nullptr || l < load) {
      best = member(i);
      load = l;
    }
  }
  return best;
}

}  // namespace detail

runtime::runtime(runtime_options opts) {
  unsigned n = opts.threads != 0 ? opts.threads : std::thread::hardware_concurrency();
  if (n == 0) n = 1;
  io_context_options loop_opts;
  loop_opts.backend = opts.backend;
  loop_opts.ring_entries = opts.ring_entries;
  loop_opts.spin_before_park = opts.spin_before_park;
  workers_.reserve(n);
  for (unsigned i = 0; i < n; ++i) {
    workers_.push_back(std::make_unique<worker_state>(loop_opts));
    workers_.back()->ctx.join_share_group(this, i);
  }
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < n; ++i) {
    worker_state& w = *workers_[i];
    w.thread = std::thread([this, &w, i, cpus, pin = opts.pin_threads] {
      if (pin) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(i % cpus, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
      }
      work(w);
    });
  }
}

runtime::~runtime() {
  stop();
  // Every thread is gone: first drop what is queued on every loop (a task switched to another worker may sit in
  // that worker's queue while its frame belongs to this one), then destroy the loops.
  for (auto& w : workers_) w->ctx.discard_queued();
  workers_.clear();
}

void runtime::work(worker_state& w) {
  for (;;) {
    w.ctx.run();
    if (w.ctx.stopped() || settle(w)) break;
  }
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
  return workers_[next_.fetch_add(1, std::memory_order_relaxed) % workers_.size()]->ctx;
}

bool runtime::shutdown(std::chrono::nanoseconds grace) {
  stop_.request_stop();
  // Releasing a guard is safe from any thread; each worker's run() now returns once it is out of work.
  for (auto& w : workers_) w->ctx.post([&w] { w->guard.reset(); });
  const auto deadline = std::chrono::steady_clock::now() + grace;
  bool drained = true;
  for (auto& w : workers_) {
    while (!w->finished.load(std::memory_order_acquire)) {
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
