// The blocking pool (see tern/detail/blocking_pool.hpp): a mutex-guarded FIFO of jobs and the threads that run them.
#include "tern/detail/blocking_pool.hpp"

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace tern::detail {

struct blocking_pool::state {
  std::mutex mutex;
  std::condition_variable wake;
  blocking_job* head = nullptr;
  blocking_job* tail = nullptr;
  unsigned threads = 0;
  // Threads not running a job. A thread counts itself available again before it marks its job finished, so a loop
  // that submits its next call as soon as it sees the last one finished never finds the pool short of a thread
  // (which would start one more and allocate).
  unsigned available = 0;
  unsigned queued = 0;  // jobs waiting for a thread
  unsigned max_threads = 64;
  bool stopping = false;
  std::vector<std::thread> workers;

  state() {
    if (const char* env = std::getenv("TERN_BLOCKING_THREADS")) {
      const long n = std::strtol(env, nullptr, 10);
      if (n > 0 && n <= 1024) max_threads = static_cast<unsigned>(n);
    }
  }
  ~state() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    for (std::thread& t : workers) t.join();
  }

  // A new thread is counted available by submit().
  void work() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      wake.wait(lock, [this] { return head != nullptr || stopping; });
      if (head == nullptr) return;  // stopping, nothing left
      blocking_job* job = head;
      --queued;
      --available;
      head = job->next;
      if (head != nullptr) head->prev = nullptr; else tail = nullptr;
      job->next = job->prev = nullptr;
      // relaxed: written and read under the mutex (withdraw); wait_idle only needs to see "not finished" here.
      job->state.store(blocking_job::running, std::memory_order_relaxed);
      lock.unlock();
      job->execute(job);
      lock.lock();
      ++available;
      job->finish();  // the last access to the job
    }
  }
};

blocking_pool& blocking_pool::instance() {
  static blocking_pool pool;
  return pool;
}

blocking_pool::state& blocking_pool::shared() noexcept {
  static state s;  // destroyed at exit, after joining the threads
  return s;
}

void blocking_pool::submit(blocking_job* job) noexcept {
  state& shared = this->shared();
  std::unique_lock<std::mutex> lock(shared.mutex);
  job->state.store(blocking_job::queued, std::memory_order_relaxed);  // under the mutex, as withdraw reads it
  job->next = nullptr;
  job->prev = shared.tail;
  if (shared.tail != nullptr) shared.tail->next = job; else shared.head = job;
  shared.tail = job;
  // A thread per job that no available thread will take, up to the limit.
  if (++shared.queued > shared.available && shared.threads < shared.max_threads) {
    ++shared.threads;
    ++shared.available;
    try {
      shared.workers.emplace_back([s = &shared] { s->work(); });
    } catch (...) {
      --shared.threads;  // the running threads will get to it
      --shared.available;
    }
  }
  lock.unlock();
  shared.wake.notify_one();
}

bool blocking_pool::withdraw(blocking_job* job) noexcept {
  state& shared = this->shared();
  std::lock_guard<std::mutex> lock(shared.mutex);
  // relaxed: queued and running are only written under this mutex; finished (release) needs no ordering here,
  // where only "still queued?" is asked.
  if (job->state.load(std::memory_order_relaxed) != blocking_job::queued) return false;
  if (job->prev != nullptr) job->prev->next = job->next; else shared.head = job->next;
  if (job->next != nullptr) job->next->prev = job->prev; else shared.tail = job->prev;
  --shared.queued;
  job->next = job->prev = nullptr;
  job->state.store(blocking_job::idle, std::memory_order_relaxed);  // the caller's own thread reads it next
  return true;
}

unsigned blocking_pool::max_threads() noexcept { return shared().max_threads; }

void blocking_pool::wait_idle(const blocking_job* job) noexcept {
  // A spin, not a futex wait: the pool thread's last access to the job is its final store, and a wake-up after it
  // would touch memory the waiter may already have freed. The waits are short: the end of one system call.
  for (unsigned spins = 0;; ++spins) {
    // acquire: pairs with finish()'s release store, so the job's results (written by execute) are seen.
    const std::uint8_t s = job->state.load(std::memory_order_acquire);
    if (s != blocking_job::running && s != blocking_job::queued) return;
    if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace tern::detail
