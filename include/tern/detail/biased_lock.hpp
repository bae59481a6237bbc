// tern/detail/biased_lock.hpp
//
// biased_lock: the lock of every synchronisation primitive of tern::sync. A spinlock that, once one thread has
// taken it many times in a row, lets that thread in without any atomic read-modify-write, until another thread
// wants it.
//
// Why: most channels, events and mutexes are used by the coroutines of one loop, but they must stay safe across
// threads. A spinlock costs a locked exchange per acquisition (on a same-loop channel pair, two of those are about
// 10 of the 24 ns a message costs), and plain stores are enough while a single thread uses the lock.
//
// How (asymmetric Dekker, the pattern of biased locking and of user-space RCU):
// - Learning: every acquisition takes the spinlock and, inside it, counts how many times in a row the same thread
//   took it. At bias_after acquisitions in a row, that thread becomes the owner (written once, under the spinlock).
// - Biased: the owner announces itself with a plain store (busy_ = true), a compiler-only barrier, and a check of
//   revoked_; if the lock is not revoked it holds the lock. Unlocking is one release store (busy_ = false).
// - Revocation, by the first other thread that wants the lock: it takes the spinlock, sets revoked_, makes every
//   running thread of the process execute a full memory barrier (membarrier(2), PRIVATE_EXPEDITED), and waits
//   until busy_ is false. After the barrier the owner either had announced itself (and the waiter sees busy_) or
//   will see revoked_ and fall back to the spinlock; the owner's only heavy cost is never paid on its own path.
//   The wait is on a thread inside a critical section (a few pointer moves that never block), like any spinlock's,
//   never on a loop that is parked or not running.
// - Revoked: a plain spinlock for the rest of the lock's life; no re-bias, so a lock shared across threads pays
//   the barrier (a few microseconds: an IPI to each CPU running the process) at most once.
// Where membarrier is unavailable (an old kernel, a seccomp filter), the lock never biases and stays a spinlock.
//
// Like spinlock, unlocking touches nothing of the lock after its releasing store, so the object that holds the
// lock may be destroyed by the next thread to take it.
#pragma once

#include <atomic>
#include <cstdint>

#include "tern/detail/spinlock.hpp"
#include "tern/detail/thread_identity.hpp"

namespace tern::detail {

// Whether heavy_barrier() works here; registers the process for it on the first call.
bool membarrier_biasing_available() noexcept;
// Makes every running thread of the process execute a full memory barrier. Only after
// membarrier_biasing_available() returned true.
void heavy_barrier() noexcept;

class biased_lock {
 public:
  // Consecutive acquisitions by one thread after which the lock biases towards it.
  static constexpr std::uint32_t bias_after = 64;

  // What the lock is doing now, for tests and diagnostics.
  enum class mode : unsigned char { learning, biased, revoked };

  biased_lock() noexcept = default;
  biased_lock(const biased_lock&) = delete;
  biased_lock& operator=(const biased_lock&) = delete;

  void lock() noexcept { (void)lock_biased(); }

  void unlock() noexcept {
    // Only the owner ever sets busy_, and it holds the lock exactly while busy_ is set by its own lock().
    unlock(owner_.load(std::memory_order_relaxed) == thread_identity() && busy_.load(std::memory_order_relaxed));
  }

  // lock() that reports how it got in: true through the bias, false through the spinlock. Handed to unlock(bool),
  // it spares the unlock a second look at the owner and at busy_ (biased_guard below; the sync primitives' paths).
  [[nodiscard]] bool lock_biased() noexcept {
    std::uintptr_t self = thread_identity();
    if (owner_.load(std::memory_order_relaxed) == self) {
      busy_.store(true, std::memory_order_relaxed);
      // Compiler-only barrier: the CPU may still order the load below before the store; a revoking thread's
      // membarrier covers that (see the note at the top).
      std::atomic_signal_fence(std::memory_order_seq_cst);
      // relaxed: while biased only this thread touches what the lock guards; what others wrote before the bias
      // was ordered by the spinlock hand-over that made this thread the owner.
      if (!revoked_.load(std::memory_order_relaxed)) [[likely]] return true;
      // release, like unlock(): a revoking thread that reads this store must see the owner's earlier sections.
      busy_.store(false, std::memory_order_release);
    }
    lock_slow(self);
    return false;
  }

  // Takes the lock through the bias only: true if this thread owns the bias and it holds the lock now (release
  // it with unlock(true)); false, holding nothing, otherwise (then lock_unbiased()). For inline fast paths: the
  // caller's path through the bias knows it holds the lock that way, so its unlock is one store with no test of
  // how the lock was taken (lock_biased() merged the two ways and tested a flag at the unlock).
  [[nodiscard]] bool try_lock_bias() noexcept {
    if (owner_.load(std::memory_order_relaxed) != thread_identity()) return false;
    busy_.store(true, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // as in lock_biased()
    if (!revoked_.load(std::memory_order_relaxed)) [[likely]] return true;
    busy_.store(false, std::memory_order_release);
    return false;
  }
  // lock_biased() out of line, after try_lock_bias() failed; returns what lock_biased() would.
  [[gnu::noinline]] bool lock_unbiased() noexcept { return lock_biased(); }

  // Releases a lock taken by lock_biased(), which returned biased.
  void unlock(bool biased) noexcept {
    if (biased) [[likely]] {
      busy_.store(false, std::memory_order_release);  // publishes the section to a revoking thread
      return;
    }
    spin_.unlock();
  }

  // The current mode (a snapshot).
  mode current_mode() const noexcept {
    if (revoked_.load(std::memory_order_relaxed)) return mode::revoked;
    return owner_.load(std::memory_order_relaxed) != 0 ? mode::biased : mode::learning;
  }

 private:
  [[gnu::noinline]] void lock_slow(std::uintptr_t self) noexcept {
    spin_.lock();
    if (revoked_.load(std::memory_order_relaxed)) return;
    std::uintptr_t owner = owner_.load(std::memory_order_relaxed);
    if (owner != 0) {
      if (owner != self) revoke();
      return;
    }
    // Learning (under the spinlock): count acquisitions in a row by one thread.
    if (candidate_ != self) {
      candidate_ = self;
      streak_ = 1;
      return;
    }
    if (++streak_ < bias_after) return;
    if (!membarrier_biasing_available()) {
      revoked_.store(true, std::memory_order_relaxed);  // never bias; the spinlock from now on
      return;
    }
    // This thread holds the spinlock now and will release it with spin_.unlock() (busy_ is false); its next
    // lock() takes the fast path.
    owner_.store(self, std::memory_order_relaxed);
  }

  // With spin_ held, by a thread other than the owner: ends the bias for good.
  void revoke() noexcept {
    revoked_.store(true, std::memory_order_relaxed);
    heavy_barrier();
    // acquire: pairs with the owner's releasing store, so its last section happens before ours.
    for (unsigned spins = 0; busy_.load(std::memory_order_acquire); ++spins) spinlock::relax(spins);
  }

  std::atomic<std::uintptr_t> owner_{0};  // the biased thread; written once, under spin_
  std::atomic<bool> busy_{false};         // written by the owner only: it holds the lock through the bias
  std::atomic<bool> revoked_{false};      // set once, under spin_
  spinlock spin_;
  std::uintptr_t candidate_ = 0;  // under spin_, while learning
  std::uint32_t streak_ = 0;
};

// The lock held for a scope, like std::lock_guard, remembering how it was taken (see lock_biased).
class [[nodiscard]] biased_guard {
 public:
  explicit biased_guard(biased_lock& l) noexcept : lock_(l), biased_(l.lock_biased()) {}
  // Adopts a lock the caller took with lock_biased().
  biased_guard(biased_lock& l, bool biased) noexcept : lock_(l), biased_(biased) {}
  biased_guard(const biased_guard&) = delete;
  biased_guard& operator=(const biased_guard&) = delete;
  ~biased_guard() { lock_.unlock(biased_); }

 private:
  biased_lock& lock_;
  bool biased_;
};

}  // namespace tern::detail
