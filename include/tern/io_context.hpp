// tern/io_context.hpp
//
// io_context: one event loop, run by one thread at a time.
//
// The loop owns a local run queue (coroutines to resume, handlers to call), an inbox for work posted from other
// threads, a timer wheel, and a backend (io_uring or epoll) for the kernel side. One turn of the loop:
//   1. move the inbox into the run queue;
//   2. run up to batch_limit queued items (newly queued items wait for the next turn, so I/O is never starved);
//   3. submit and reap I/O: without blocking if work is queued, otherwise blocking until the next timer is due;
//      the backend is skipped entirely when it has nothing in flight and nothing would block;
//   4. fire the timers that are due.
// A poster from another thread pays for a wake-up (an eventfd write, or a MSG_RING message from another io_uring
// loop) only when the loop has announced that it is going to sleep (the sleeping_ flag, checked Dekker-style: a
// seq_cst exchange and seq_cst looks on the loop's side, the poster's seq_cst inbox push or a fence on the other).
//
// The loop is single-threaded by construction: everything except post(), stop() and wake-ups must be called on the
// thread running it. run() returns when it is stopped or runs out of work: nothing queued, no operation pending,
// no timer armed, and no work_guard alive.
//
// One thread for life: a loop may be made on any thread, and the first thread that runs it (run, run_one, poll,
// run_until, block_on) binds it for good; a run from any other thread later throws std::system_error with
// tern::error::wrong_loop, on both backends. io_uring is why: a SINGLE_ISSUER ring takes submissions and waits from
// the one task the kernel bound it to when it was enabled (the ring is made disabled and enabled by that first run,
// so making a loop elsewhere is fine), the kernel has no call to bind it to another, and a second thread's enters
// would only be refused (EEXIST) while completions wait for the first. epoll could run anywhere, but a program
// must not behave differently on the two backends. One loop per thread is what tern::runtime sets up. The loop may
// be destroyed on any thread; see ~io_context for what its teardown can do there.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <stop_token>
#include <type_traits>
#include <utility>
#include <vector>

#include "tern/detail/backend.hpp"
#include "tern/detail/deadline_clock.hpp"
#include "tern/detail/frame_pool.hpp"
#include "tern/detail/line_pool.hpp"
#include "tern/detail/loop_counters.hpp"
#include "tern/detail/posted.hpp"
#include "tern/detail/run_ring.hpp"
#include "tern/detail/share_group.hpp"
#include "tern/detail/thread_identity.hpp"
#include "tern/detail/timer_wheel.hpp"
#include "tern/detail/work_queue.hpp"
#include "tern/metrics.hpp"

namespace tern {

template <class T>
class task;

// Which kernel interface a loop uses.
enum class backend_kind { automatic, io_uring, epoll };

// "io_uring", "epoll" or "automatic".
const char* to_string(backend_kind k) noexcept;

struct io_context_options {
  // automatic: io_uring where the kernel allows it, else epoll; TERN_BACKEND=epoll|io_uring overrides automatic.
  backend_kind backend = backend_kind::automatic;
  // io_uring submission queue size (the completion queue is twice that).
  unsigned ring_entries = 1024;
  // io_uring: the sizes of the ring's tables of registered files (fs::file::register_file; at most the
  // RLIMIT_NOFILE soft limit when the table is made) and registered buffers (fs::registered_buffers; at most 16384).
  // Each table is made when it is first used; epoll has none.
  unsigned registered_file_slots = 1024;
  unsigned registered_buffer_slots = 1024;
  // Before blocking in the kernel, keep polling (without blocking) this long for completions and posts. Waking a
  // parked thread costs tens of microseconds on a VM, so a loop that expects work from another thread or a peer
  // soon trades CPU for latency here. 0 parks at once. The spin backs off where it does not pay, judged by what
  // ended it: input the loop waited for (a read, receive, accept or file read completing; under epoll, readiness
  // to read; work posted from another thread) is a hit and ends any back-off; a spin that ran its whole time and
  // found nothing is a miss; one ended by anything else (a send's own completion, a timer's deadline) counts
  // neither way. After 4 misses in a row the loop parks at once for 1, then 2, 4 ... up to 64 waits between
  // spins; such a park woken by input sooner than the spin would have lasted ends the back-off too. So set it a
  // little above the wait it is meant to cover (a round trip): where the waits are longer (a batch's answer, an
  // idle connection) the spin all but stops by itself.
  std::chrono::nanoseconds spin_before_park{0};
  // io_uring: the operations that a turn of the loop starts are submitted together when the turn ends, one
  // io_uring_enter for all of them. A turn whose handlers run long (a TLS handshake's public-key work, a parser
  // over a large body) would hold back a send that an earlier handler started, and its peer with it; so once the
  // first operation not yet submitted has waited submit_within, they are submitted before the next handler runs.
  // 0: before every handler that follows one which started an operation. epoll makes its calls at once anyway.
  std::chrono::microseconds submit_within{50};
  // io_uring only: a kernel thread polls the submission queue (IORING_SETUP_SQPOLL) and sleeps after sqpoll_idle
  // without submissions. The loop's constructor throws std::system_error if the kernel refuses it.
  bool sqpoll = false;
  std::chrono::milliseconds sqpoll_idle{1000};
  // io_uring only: the kernel runs this loop's completions only inside the loop's own wait (DEFER_TASKRUN, kernel
  // 6.1 and later), so they come in batches and never interrupt its handlers. false asks for the older mode even
  // where the kernel has it (COOP_TASKRUN: completions run at any system call of the loop's thread), to compare
  // the two or to test code under both; there is no other reason to turn it off. SQPOLL rings never defer.
  bool defer_taskrun = true;
  // receive() (leased_buffer.hpp): the loop's pool of receive buffers, made at the first receive(). Each buffer
  // holds receive_buffer_size bytes; receive_buffers are mapped at first and as many more each time the pool runs
  // dry, up to receive_buffers_max (at most 32768, the kernel's limit on a provided-buffer ring); past that,
  // receives use heap overflow buffers. Mapped pages that were never written cost no memory; io_uring's ring of
  // free buffers is sized to the buffers mapped, not to receive_buffers_max.
  std::size_t receive_buffer_size = 16384;
  unsigned receive_buffers = 64;
  unsigned receive_buffers_max = 4096;
  // io_uring, kernel 6.10 and later (detected when the loop starts): a socket's multishot receive takes as many
  // pool buffers as the bytes waiting fill in one completion (IORING_RECVSEND_BUNDLE) instead of one completion
  // per buffer; receive() still hands them out one buffer at a time, in order. Fewer completions when a peer sends
  // faster than the reader, nothing different otherwise. false: one buffer per completion.
  bool receive_bundles = true;
  // io_uring: the bytes a socket's multishot receive takes while no receive() waits are queued on the socket, in
  // pool buffers, up to receive_queue of them (1 to 255; a few more may land while the multishot is being stopped,
  // one completion's worth with bundles); the multishot is then stopped, and what the peer sends next waits in the
  // kernel's socket buffer (its window closing as it fills) until receive() has taken the queued ones. Without
  // the bound, a peer sending to a socket its reader had left took the whole pool (the other sockets then received
  // into heap overflow buffers). epoll reads only for a receive() that waits, and queues nothing.
  unsigned receive_queue = 64;
  // io_uring: a listener keeps one multishot accept armed from its first accept() on, so that a stream of accepts
  // costs no submission each. Connections it accepts while no accept() waits are queued for the next ones, up to
  // accept_queue of them (a few more may land while the multishot is being stopped); the multishot is then stopped
  // and further connections wait in the kernel's listen backlog until accept() is called again. 0: one ACCEPT per
  // accept(), with nothing accepted ahead. epoll accepts one connection per accept() either way.
  unsigned accept_queue = 64;
  // io_uring only: a send of a stream socket (write_some, and each kernel send of write_all) of at least this many
  // bytes is made zero-copy (IORING_OP_SEND_ZC): the kernel sends from the caller's pages instead of copying them
  // into the socket, and the send completes only once the kernel has let go of them (its notification), so the
  // buffer is the caller's again when the awaiter resumes, as with any send. write_all sends in pieces of 64 KiB;
  // with a larger threshold, in pieces of the threshold while at least that much is left, so that they qualify.
  // A send the kernel has taken in cannot be called back: cancelled (a timeout, a stop, close()), it ends once its
  // bytes are acknowledged, so a peer that stops reading holds the writer until it reads or resets. A socket whose
  // kernel refuses zero-copy sends (a Unix socket) falls back to plain sends; datagram sends stay plain. 0: off,
  // the default, because it does not pay on loopback (the kernel copies looped-back data anyway, and each send
  // costs a second completion): see docs/benchmarks.md. It can pay on a NIC that sends from user pages, for sends
  // of tens of KiB and more. epoll ignores it.
  std::size_t zero_copy_send_threshold = 0;
};

namespace detail {
struct loop_registry;

// A spawned root task, on its loop's list so the context can destroy what is still suspended when it dies
// (task.hpp).
struct root_hook;
}  // namespace detail

// A thread sanitizer does not see a read made by an asm statement: under one, io_context::needs_attention is the
// atomic load it can check.
#if defined(__SANITIZE_THREAD__)
#define TERN_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TERN_THREAD_SANITIZER 1
#endif
#endif
#ifndef TERN_THREAD_SANITIZER
#define TERN_THREAD_SANITIZER 0
#endif

class io_context {
 public:
  // Creates a loop with default options.
  io_context();
  // Creates a loop; throws std::system_error if the requested backend cannot be set up.
  explicit io_context(io_context_options opts);
  // Tears the loop down: drops what is queued (handlers are destroyed without running), cancels what it has in
  // the kernel and waits for those completions (at most a second; see shutdown_io), destroys every spawned task
  // still suspended (their destructors run; handlers they post are destroyed too), then the backend. Sockets and
  // other I/O objects of the loop that are still open stay closable: closing or destroying one later closes its
  // fd without the loop. Any thread, but see shutdown_io for a loop that another thread has run.
  ~io_context();
  io_context(const io_context&) = delete;
  io_context& operator=(const io_context&) = delete;

  // Runs the loop until stop() or until it runs out of work; returns the number of items run. The first run binds
  // the loop to the calling thread; from any other thread, run, run_one, poll and block_on throw std::system_error
  // (tern::error::wrong_loop) and leave the loop as it was.
  std::size_t run();
  // Runs at most one item, blocking until one is ready (or the loop is out of work); returns 0 or 1.
  std::size_t run_one();
  // Runs the items that are ready now, without blocking; returns how many ran.
  std::size_t poll();
  // Makes run() return as soon as the current item finishes. Any thread.
  void stop() noexcept;
  // True after stop() until restart().
  bool stopped() const noexcept { return (attention_.load(std::memory_order_relaxed) & attend_stop) != 0; }
  // Clears the stopped state so that run() may be called again.
  void restart() noexcept { attention_.fetch_and(~attend_stop, std::memory_order_relaxed); }
  // True if items queued from other threads (posts, wake-ups, work handed over by a runtime peer) wait to be run.
  // Any thread; a relaxed look, exact only once every poster is known to have stopped posting.
  bool has_incoming() const noexcept { return inbox_.maybe_nonempty(); }

  // Queues f() to run on the loop. Any thread; never runs f inline.
  template <class F>
  void post(F&& f) {
    using D = std::decay_t<F>;
    if constexpr (detail::fits_run_slot<D>) {
      // The fastest path: a small trivially copyable handler posted from the loop's own thread goes into its run
      // queue slot itself (detail/run_ring.hpp), no block.
      if (running_here()) [[likely]] {
        ++posts_local_;  // before the push, whose rare path is then a tail call
        run_queue_.push_handler<D>(f);
        return;
      }
      post_small_slow<D>(f);  // by value: f is two registers, never spilled to be referred to
      return;
    } else if constexpr (fits_handler_block<D>) {
      // Fast path, kept small enough to inline: a post from the loop's own thread with a free block at hand.
      if (handler_blocks_.load(std::memory_order_relaxed) != nullptr && running_here()) [[likely]] {
        handler_block* b = handler_blocks_.load(std::memory_order_relaxed);
        handler_blocks_.store(b->next, std::memory_order_relaxed);
        run_queue_.push_item(::new (b) detail::posted_here<D>(std::forward<F>(f), this));
        ++posts_local_;
        return;
      }
    }
    post_slow(std::forward<F>(f));
  }

  // post() of a handler that fits a run queue slot, from another thread (or from the loop's while it is destroyed).
  template <class D>
  [[gnu::noinline]] void post_small_slow(D f) {
    post_slow(std::move(f));
  }

  // post() without a free block at hand, or from another thread.
  template <class F>
  [[gnu::noinline]] void post_slow(F&& f) {
    using D = std::decay_t<F>;
    if constexpr (fits_handler_block<D>) {
      if (running_here()) {
        if (void* b = grow_handler_blocks()) {
          run_queue_.push_item(::new (b) detail::posted_here<D>(std::forward<F>(f), this));
          ++posts_local_;
          return;
        }
      }
    }
    if constexpr (sizeof(detail::posted_remote<D>) <= handler_block_size &&
                  alignof(detail::posted_remote<D>) <= alignof(std::max_align_t)) {
      if (!running_here()) {
        if (returned_.load(std::memory_order_relaxed) != nullptr) reclaim_returned();
        using P = detail::posted_remote<D>;
        enqueue_remote(::new (detail::line_pool::allocate()) P(std::forward<F>(f), this));
        return;
      }
    }
    using P = detail::posted<D>;
    auto* p = ::new (detail::frame_pool::allocate(sizeof(P))) P(std::forward<F>(f));
    if (running_here()) ++posts_local_;  // from elsewhere: counted when the loop drains its inbox
    enqueue(p);
  }

  // Loop thread: takes back the block of a handler posted from elsewhere, for the posters to reuse. Blocks go
  // back in batches, with one CAS per batch.
  void return_remote_block(void* p) noexcept {
    auto* b = static_cast<returned_block*>(p);
    b->next = returning_;
    if (returning_ == nullptr) returning_last_ = b;
    returning_ = b;
    if (++returning_count_ == return_batch) publish_returned();
  }

  // Queues f() as shareable work: in a runtime, an idle worker may take it over. Any thread.
  template <class F>
  void post_shared(F&& f) {
    using D = std::decay_t<F>;
    if constexpr (sizeof(detail::posted_roaming<D>) <= handler_block_size &&
                  alignof(detail::posted_roaming<D>) <= handler_block_size) {
      if (running_here()) {
        void* b = handler_blocks_.load(std::memory_order_relaxed);
        if (b != nullptr) {
          handler_blocks_.store(static_cast<handler_block*>(b)->next, std::memory_order_relaxed);
        } else {
          b = grow_handler_blocks();
        }
        if (b != nullptr) {
          shared_queue_.push_back(::new (b) detail::posted_roaming<D>(std::forward<F>(f), this));
          ++shared_count_;
          ring_run_limit_ = 0;
          ++posts_local_;
          return;
        }
      }
    }
    using P = detail::posted<D>;
    auto* p = ::new (detail::frame_pool::allocate(sizeof(P))) P(std::forward<F>(f));
    if (running_here()) ++posts_local_;
    enqueue_shared(p);
  }

  // Runs f() inline if called from within this loop's run on its thread, else posts it.
  template <class F>
  void dispatch(F&& f) {
    if (running_here()) {
      std::forward<F>(f)();
    } else {
      post(std::forward<F>(f));
    }
  }

  // Runs t on this loop until it completes; returns its value or rethrows its exception.
  template <class T>
  T block_on(task<T> t);

  // The backend this loop uses (never automatic).
  backend_kind backend() const noexcept { return kind_; }

  // The loop running on the calling thread, or nullptr. A constinit thread_local, read inline on x86-64 by one
  // volatile asm statement (its offset from the thread pointer, then the load): a coroutine can resume on another
  // thread, and a plain thread_local read inlined into its body may keep an address computed before the
  // suspension (see thread_identity.hpp); the asm is neither hoisted nor reused. Elsewhere an out-of-line call.
  static io_context* current() noexcept;
  // True if the calling thread is inside this loop's run (possibly with another loop's run nested in it). One
  // register read and one load: the check every post and resumption makes.
  bool running_here() const noexcept { return owner_.load(std::memory_order_relaxed) == detail::thread_identity(); }

  // What this loop has done so far, as counters (tern/metrics.hpp). Any thread.
  ::tern::metrics::loop_snapshot metrics() const noexcept;

  // Sets the handler for exceptions that escape detached tasks (default: print to stderr).
  void set_exception_handler(std::function<void(std::exception_ptr)> h) { exception_handler_ = std::move(h); }

  // Keeps run() from returning for lack of work while it lives.
  class work_guard {
   public:
    explicit work_guard(io_context& ctx) noexcept : ctx_(&ctx) { ctx_->guards_.fetch_add(1, std::memory_order_relaxed); }
    work_guard(work_guard&& o) noexcept : ctx_(std::exchange(o.ctx_, nullptr)) {}
    work_guard(const work_guard&) = delete;
    work_guard& operator=(const work_guard&) = delete;
    ~work_guard() { reset(); }
    // Releases the guard; the loop may then run out of work. Any thread.
    void reset() noexcept {
      if (ctx_ != nullptr) {
        if (ctx_->guards_.fetch_sub(1, std::memory_order_acq_rel) == 1) ctx_->wake_if_sleeping();
        ctx_ = nullptr;
      }
    }

   private:
    io_context* ctx_;
  };
  work_guard make_work_guard() noexcept { return work_guard(*this); }

  // ---- Internal interface used by tern's awaiters and I/O objects; not part of the API. ----

  // Runs like run() but also returns as soon as the low bit of *done is set (by this thread: the state word of
  // the spawned task whose entry on the loop's list is root, spawn.hpp).
  void run_until(const std::atomic<std::uintptr_t>* done, const detail::root_hook* root);
  // Binds the loop to the calling thread if no thread has run it yet; throws std::system_error (wrong_loop) if it
  // is bound to another. `operation` names the caller in the message. Every run calls it first.
  void claim_thread(const char* operation);
  // Frees queued handlers and forgets queued resumptions without running them (teardown only).
  void discard_queued() noexcept;
  // The first step of teardown: cancels every operation the loop has in the kernel and reaps their completions
  // (queued as usual, never run), until none is outstanding or teardown_wait has passed, so that no kernel write
  // can reach a frame or a buffer that teardown then frees. Only the thread that ran the loop can do it (an io_uring
  // ring refuses the others), so a runtime's worker calls it on its own thread before it exits; the destructor
  // calls it unless that was done. What it cannot finish is reported on stderr, and closing the ring leaves to the
  // kernel. The loop must not run afterwards.
  void shutdown_io() noexcept;
  static constexpr std::chrono::seconds teardown_wait{1};

  // Queues w on the local run queue (loop thread only).
  void schedule(detail::work_item* w) noexcept { run_queue_.push_item(w); }
  // Queues the resumption of h on the local run queue (loop thread only): the handle alone, in its slot.
  void schedule_handle(std::coroutine_handle<> h) noexcept { run_queue_.push_handle(h); }
  // Queues w from any thread.
  void enqueue(detail::work_item* w) noexcept {
    if (running_here()) {
      run_queue_.push_item(w);
    } else {
      enqueue_remote(w);
    }
  }
  // Queues w as shareable work (see post_shared). Any thread.
  void enqueue_shared(detail::work_item* w) noexcept {
    if (running_here()) {
      shared_queue_.push_back(w);
      ++shared_count_;
      ring_run_limit_ = 0;
    } else {
      enqueue_remote(w);
    }
  }
  // Makes this loop member index of a runtime's share group (before it runs).
  void join_share_group(detail::share_group* g, unsigned index) noexcept;
  // Pushes a chain of items (linked newest -> oldest) onto the inbox at once. Any thread.
  void enqueue_remote_chain(detail::work_item* newest, detail::work_item* oldest) noexcept;
  // Backend-facing: op has finished with op.res; unlink it from its descriptor and queue its awaiter.
  void complete(detail::io_op& op) noexcept;
  // Starts op; returns true if it finished synchronously.
  bool start(detail::io_op& op) noexcept;
  // Requests cancellation of a pending op.
  void cancel(detail::io_op& op) noexcept;
  // Backend-facing: d's multishot receive or accept (started by the backend on its own, never awaited and not
  // counted as the loop's work) has ended; d is recycled if it was closed and this was its last operation.
  void end_multishot(detail::descriptor* d) noexcept;
  // closes_settled (basic_descriptor.hpp): whether a closed descriptor's multishot request is still in the kernel
  // (lingering), and w queued to run once none is (loop thread only).
  bool closes_lingering() const noexcept { return lingering_ != nullptr; }
  void after_closes(detail::work_item* w) noexcept { closes_waiters_.push_back(w); }
  // Closes the connections a listener's multishot accept queued and frees its queue.
  void drop_accepted(detail::descriptor* d) noexcept;
  // The loop's pool of receive buffers, made on first use (loop thread only).
  detail::receive_pool& receive_pool();
  // io_context_options::zero_copy_send_threshold where the backend honours it (io_uring), else 0. write_all sizes
  // its pieces by it (stream_ops.cpp).
  std::size_t zero_copy_threshold() const noexcept { return zero_copy_threshold_; }
  // An op that was never completed is being destroyed with its frame (context teardown only).
  void forget(detail::io_op& op) noexcept;
  // Loop thread: takes w out of the inbox and the run queue if it is queued there.
  void purge(detail::work_item* w) noexcept {
    drain_inbox();
    run_queue_.remove(w);
  }
  // The loop's counters (metrics.hpp), for the backends to bump: from the loop's thread only.
  detail::loop_counters& counters() noexcept { return counters_; }
  const detail::loop_counters& counters() const noexcept { return counters_; }
  // Handlers posted from the loop's own thread, as last published (once per turn, and by every snapshot the loop
  // takes of itself): from another thread, at most one turn behind.
  std::uint64_t posts_local() const noexcept { return counters_.posts_local.get(); }
  // Loop thread: publishes the counts kept in plain integers (posts_local_) for snapshots taken elsewhere.
  void publish_counts() noexcept { counters_.posts_local.set(posts_local_); }
  // Loop thread: publishes the gauges of the loop's thread (its pools) for snapshots taken elsewhere.
  void publish_gauges() noexcept;

  // Handler slabs (loop thread only). A post from the loop's thread, the common case of a handler posting its
  // successor, takes a block from the loop's free list and its run gives it back: no thread-local lookup on either
  // side (the frame pool's lists are thread-local, and reaching them is an out-of-line call). Blocks are cache-line
  // sized and aligned and come from slabs owned by the loop, so a queue of a thousand handlers touches one line
  // each rather than the two that malloc's 16-byte headers would make it straddle. The slabs stop growing at
  // handler_slab_limit; posts beyond that burst use the frame pool.
  static constexpr std::size_t handler_block_size = 64;
  static_assert(handler_block_size == detail::line_pool::block_size, "posts from other threads use line_pool blocks");
  template <class D>
  static constexpr bool fits_handler_block =
      sizeof(detail::posted_here<D>) <= handler_block_size && alignof(detail::posted_here<D>) <= handler_block_size;
  void give_handler_block(void* p) noexcept {
    auto* b = static_cast<handler_block*>(p);
    b->next = handler_blocks_.load(std::memory_order_relaxed);
    handler_blocks_.store(b, std::memory_order_relaxed);
  }
  // Any thread: gives back a block of this loop's slabs used by a handler that ran on another loop. The loop takes
  // the returned blocks back when its free list runs dry (see grow_handler_blocks).
  void return_handler_block(void* p) noexcept {
    auto* b = static_cast<handler_block*>(p);
    handler_block* head = returned_handlers_.load(std::memory_order_relaxed);
    do {
      b->next = head;
    } while (!returned_handlers_.compare_exchange_weak(head, b, std::memory_order_release, std::memory_order_relaxed));
  }

  // An upper bound of now_ns() that is at most a few microseconds high, for computing deadlines (see
  // deadline_clock.hpp). Loop thread only.
  std::uint64_t deadline_now_ns() noexcept {
    // No test of tsc_.usable: an unusable counter has max_span_cycles 0, which no count is below.
    const std::uint64_t cycles = detail::read_tsc() - tsc_base_;
    if (cycles < tsc_.max_span_cycles) return ns_base_ + ((cycles * tsc_.mult) >> detail::tsc_shift);
    return refresh_clock_base();
  }

  detail::timer_wheel& timers() noexcept { return timers_; }
  const detail::timer_wheel& timers() const noexcept { return timers_; }
  // The backend queued a submission that the kernel has not seen yet (io_uring), and it submitted them all.
  // run_loop submits them before the next item once the first has waited submit_within (io_context_options).
  void note_unsubmitted() noexcept {
    if (unsubmitted_since_ == 0) {
      unsubmitted_since_ = deadline_now_ns();
      attention_.fetch_or(attend_submit, std::memory_order_relaxed);
    }
  }
  void note_submitted() noexcept {
    if (unsubmitted_since_ != 0) {
      unsubmitted_since_ = 0;
      attention_.fetch_and(~attend_submit, std::memory_order_relaxed);
    }
  }
  // The clock as last read by the loop (at most one turn old; never ahead of the real clock).
  std::uint64_t loop_time_ns() const noexcept { return loop_time_ns_; }
  detail::backend& backend_impl() noexcept { return *backend_; }
  static std::uint64_t now_ns() noexcept {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
  }
  // True if another thread is inside this loop's run now. Any thread.
  bool running_elsewhere() const noexcept {
    const std::uintptr_t o = owner_.load(std::memory_order_relaxed);
    return o != 0 && o != detail::thread_identity();
  }
  // Wraps fd for this loop. Any thread: off the loop's thread the descriptor is allocated afresh instead of taken
  // from the loop's free list, and the backend's registration (epoll_ctl) is thread-safe. watched false: a regular
  // file, which the backend does not watch (its operations are file_ops). tcp_stream: a TCP stream socket, whose
  // short reads drain it (descriptor::short_read_drains), set before the backend watches it: a loop running on
  // another thread may take its first edge at once.
  detail::descriptor* open_descriptor(int fd, bool watched = true, bool tcp_stream = false);
  // Cancels d's pending operations and closes its fd. Any thread: from a thread that does not run the loop while
  // another does, or that is not the loop's own thread while d has work in the kernel (hand_over_needed), the
  // close is queued on the loop (d's own close_item) and happens there.
  void close_descriptor(detail::descriptor* d) noexcept;
  // Gives up d without closing its fd (the caller owns the fd from now on); d must have no pending operation.
  // Any thread.
  int release_descriptor(detail::descriptor* d) noexcept;
  // Requests cancellation of every pending operation on d (null: nothing). Any thread: where hand_over_needed(d),
  // the request is posted to the loop.
  void cancel_pending(detail::descriptor* d) noexcept;
  // True when the calling thread may not touch d's loop state itself: another thread runs the loop now, or d has
  // operations, a multishot or a registered slot in the ring, or bytes queued in the loop's receive pool, while
  // the caller is not the thread the loop is bound to (the ring refuses calls from any other, and that thread may
  // start a run at any moment).
  bool hand_over_needed(const detail::descriptor* d) const noexcept;
  // True if the calling thread is the one the loop is bound to, or no thread has run the loop yet.
  bool on_bound_thread() const noexcept;
  void report_exception(std::exception_ptr e) noexcept;
  // A stop source for with_timeout on a task (loop thread only). A std::stop_source allocates its shared state, so
  // the loop keeps a few that were never stopped and hands them out again; give_stop_source takes back one that
  // was not stopped (the caller checks), while the cache has room.
  std::stop_source take_stop_source();
  void give_stop_source(std::stop_source&& s) noexcept;
  // The loop's list of spawned tasks: inline, defined in spawn.hpp (where root_hook is complete), the only caller.
  inline void link_spawned(detail::root_hook* s) noexcept;
  // Called on the task's home loop, in the same queued item that then sets the task's done bit (spawn.hpp): for
  // the task run_until watches, this is what makes the loop look at the done word after that item.
  inline void unlink_spawned(detail::root_hook* s) noexcept;
  // send_file's pipes under io_uring (loop thread only): take_pipe hands out a kept pipe (read end, write end), or
  // makes one (false, with errno, if that fails); give_pipe keeps an empty pipe for the next call, or closes it
  // when spare_pipe_limit are kept already. A pipe that may hold bytes must be closed, never given back.
  bool take_pipe(int (&fds)[2]) noexcept;
  void give_pipe(const int (&fds)[2]) noexcept;

 private:
  // How many items a turn runs before it looks at I/O again.
  static constexpr std::size_t batch_limit = 256;
  // How many operations, and how many bytes sent, may complete inline (epoll's speculative syscalls) in one run
  // of a queued item, that is, in one coroutine's stretch from its resumption until it next waits. The byte bound
  // keeps bulk writes in short bursts (see start()). The allowance is each item's own, not the turn's: a shared one
  // is used up by the first items of a turn, and every item after them has its next operation sent to the back of
  // the queue after a single step, so a connection's progress depended on where it stood in the queue.
  static constexpr unsigned inline_limit = 16;
  static constexpr std::size_t inline_byte_limit = std::size_t{128} << 10;

  class scope;
  std::size_t run_loop(const std::atomic<std::uintptr_t>* done, const detail::root_hook* root);
  // The attention word: what must be looked at between two items, one bit per reason, so that the loop tests one
  // word after each item instead of each reason in turn. stop() sets attend_stop from any thread; the others are
  // set and cleared by the loop's thread. Read-modify-writes throughout (a stop never lost to a loop-side update);
  // they are made where a reason starts or ends, never per item.
  static constexpr unsigned attend_stop = 1;    // stop() until restart()
  static constexpr unsigned attend_poll = 2;    // the inline allowance ran out (start): poll before more items
  static constexpr unsigned attend_submit = 4;  // a submission waits for the kernel (note_unsubmitted)
  static constexpr unsigned attend_root = 8;    // the task run_until watches finished (unlink_spawned)
  // After an item that left the attention word set: true if the batch ends here (stop, the watched task done, a
  // poll due); submits the waiting submissions once the first has waited submit_within.
  bool attend() noexcept;
  // attention_ != 0, read after every item. A relaxed load, which on x86-64 is a plain load: written as one compare
  // with memory (2 instructions with the branch), where the compiler loads an atomic into a register to test it
  // (3). Volatile: read anew after each item, never merged with an earlier read.
  bool needs_attention() const noexcept {
#if defined(__x86_64__) && !TERN_THREAD_SANITIZER
    bool set;
    asm volatile("cmpl $0, %1" : "=@ccne"(set) : "m"(attention_));
    return set;
#else
    return attention_.load(std::memory_order_relaxed) != 0;
#endif
  }
  // Runs one queued item with a fresh inline allowance.
  void run_item(const detail::run_slot& s) {
    inline_used_ = 0;
    s.run(s.a, s.b);  // counted in items_run by the caller, once per batch: a bump per item cost dispatch/post 1.5%
  }
  // Moves what other threads queued into the run queue, counting it.
  void drain_inbox() noexcept {
    if (!inbox_.maybe_nonempty()) return;
    drain_inbox_slow();
  }
  void drain_inbox_slow() noexcept;
  // Loop lag sampling: one turn in lag_sample_turns that starts with work queued puts the probe at the back of
  // the run queue with the time; its run records how long it waited (metrics::lag_histogram).
  static constexpr std::uint64_t lag_sample_turns = 64;
  struct lag_probe : detail::work_item {
    io_context* owner = nullptr;
    std::uint64_t queued_ns = 0;
  };
  void sample_lag() noexcept;
  static void lag_probe_ran(detail::work_item* w) noexcept;
  bool ready_empty() const noexcept { return run_queue_.empty() && shared_queue_.empty(); }
  // Pinned work first (completions, resumptions), then shareable work; but when both are queued, at least one
  // item in shared_every + 1 is shareable, so a stream of pinned work (a handler that re-posts itself) cannot
  // starve the shareable queue. The streak is kept only while shareable work waits: a loop without it (every loop
  // outside a runtime) pays one test.
  static constexpr unsigned shared_every = 4;
  // Sets s to the next item to run; false if there is none.
  bool next_ready(detail::run_slot& s) noexcept {
    if (shared_count_ == 0) [[likely]] {
      if (run_queue_.empty()) return false;
      s = run_queue_.pop();
      return true;
    }
    return next_ready_shared(s);
  }
  bool next_ready_shared(detail::run_slot& s) noexcept {
    if (pinned_streak_ < shared_every && !run_queue_.empty()) {
      s = run_queue_.pop();
      ++pinned_streak_;
      return true;
    }
    pinned_streak_ = 0;
    return pop_shared(s);
  }
  detail::work_item* pop_shared() noexcept;
  bool pop_shared(detail::run_slot& s) noexcept {
    detail::work_item* w = pop_shared();
    if (w == nullptr) return false;
    s = {&detail::run_work_item, reinterpret_cast<std::uintptr_t>(w), 0};
    return true;
  }
  // Runs once per turn in a runtime: publishes this loop's load, then gives work to an idle peer, or (every few
  // turns, with plenty queued) to a peer with far less.
  void balance() noexcept;
  void donate(io_context* target, std::size_t count) noexcept;
  bool has_work() const noexcept;
  void enqueue_remote(detail::work_item* w) noexcept;
  // Teardown mode: while the destructor destroys suspended tasks, owner_ holds teardown_owner, so that everything
  // the destroying thread queues goes through enqueue_remote, which keeps the items that own themselves (posted
  // handlers, spawned tasks' first steps, stop requests: discard set) in teardown_items_ and drops the rest
  // (resumptions of frames, which may be gone by the time the queue is read). Not a thread's identity.
  static constexpr std::uintptr_t teardown_owner = 1;
  bool tearing_down_here() const noexcept;
  // Discards teardown_items_ and whatever other threads left in the inbox, until both stay empty.
  void discard_teardown_items() noexcept;
  // Frees the descriptors on the free lists and hands the anchor to the descriptors still open.
  void free_descriptors() noexcept;
  void wake_if_sleeping() noexcept;
  // Wakes the parked loop (its sleeping_ flag already taken by the caller).
  void wake_now() noexcept;
  // wake_if_sleeping() after a seq_cst push onto the inbox, which already orders the check (no fence).
  void wake_if_announced() noexcept;
  // Polls I/O and timers once; blocks only if allowed and nothing is queued.
  void poll_io(bool may_block);
  // Polls without blocking until work shows up or spin_ns_ (at most limit_ns, if positive) has passed; true if
  // work showed up.
  bool spin(std::int64_t limit_ns);
  // The spin's back-off (see spin_before_park): a spin that ran its whole time for nothing, and whether what a
  // spin or a park found (the run queue was empty before it) holds input the loop was waiting for.
  void spin_missed() noexcept;
  [[gnu::noinline]] void parked_for_spin(std::uint64_t parked_ns) noexcept;
  bool input_queued() const noexcept;
  std::int64_t timer_timeout_ns() const noexcept;
  // Reads the clock, and the TSC just before it as the base of deadline_now_ns(); returns the clock.
  std::uint64_t refresh_clock_base() noexcept;
  void free_descriptor(detail::descriptor* d) noexcept;
  static void close_handed_over(detail::work_item* w) noexcept;

  struct handler_block {
    handler_block* next;
  };
  struct handler_slab;
  struct returned_block {
    returned_block* next;
  };
  static constexpr unsigned return_batch = 32;
  // Loop thread: hands the blocks returned so far to the posters.
  void publish_returned() noexcept;
  // Poster: if its own pool has no block of the class, takes every returned block into it.
  void reclaim_returned() noexcept;
  // Blocks per slab, and the most slabs a loop keeps (256 KiB: far more than a steady chain of posts needs).
  static constexpr std::size_t handler_slab_blocks = 63;
  static constexpr std::size_t handler_slab_limit = 64;
  // Refills the free list with the blocks returned by other loops, or else adds a slab to it; returns one block, or
  // null at handler_slab_limit.
  void* grow_handler_blocks();

  // The fields every item touches come first, in one cache line.
  detail::run_ring run_queue_;
  // thread_identity() of the thread inside run, or 0. Written by that thread only; other threads read it to learn
  // that they are not that thread, which any value they can see tells them.
  std::atomic<std::uintptr_t> owner_{0};
  std::atomic<unsigned> attention_{0};  // attend_* bits
  // How many items a batch takes straight from the run ring: batch_limit, or 0 while shareable work may be queued
  // (post_shared and enqueue_shared lower it; run_loop raises it again once the shareable queue is empty), which
  // sends every item through next_ready's fair choice. One compare per item thus bounds the batch and notices
  // shareable work, where a separate test of shared_count_ cost 3 instructions per item.
  std::size_t ring_run_limit_ = batch_limit;
  // The loop thread's free list. Atomic (relaxed, plain moves on x86) only because post() from another thread
  // looks at it before it learns that it is not the loop's thread; only the loop's thread follows or changes it.
  std::atomic<handler_block*> handler_blocks_{nullptr};
  // Handlers posted from the loop's own thread (metrics::loop_snapshot::posts_local): bumped by every such post,
  // so it lives in this line, which the post writes anyway. A plain integer (one add), published to
  // counters_.posts_local once per turn (publish_counts).
  std::uint64_t posts_local_ = 0;
  handler_slab* handler_slabs_ = nullptr;
  returned_block* returning_ = nullptr;  // loop thread: blocks of remote posts that ran, not yet published
  returned_block* returning_last_ = nullptr;
  unsigned returning_count_ = 0;
  std::size_t handler_slab_count_ = 0;
  detail::work_queue shared_queue_;  // work an idle worker of the same runtime may take (runtime::post/spawn)
  std::size_t shared_count_ = 0;
  detail::share_group* group_ = nullptr;
  unsigned group_index_ = 0;
  unsigned pinned_streak_ = 0;  // pinned items run in a row while shareable work waited (see next_ready)
  std::size_t published_load_ = 0;
  unsigned balance_turn_ = 0;
  detail::remote_inbox inbox_;
  detail::timer_wheel timers_;
  std::unique_ptr<detail::backend> backend_;
  // Declared after backend_ and reset after it in the destructor: a ring's teardown must finish with the
  // buffers before they are unmapped.
  std::unique_ptr<detail::receive_pool> receive_pool_;
  // Descriptors closed while their multishot receive was armed, until its last CQE (see descriptor::lingering).
  detail::descriptor* lingering_ = nullptr;
  detail::work_queue closes_waiters_;  // tasks awaiting closes_settled, queued to run when lingering_ empties
  backend_kind kind_;
  std::size_t pending_ops_ = 0;
  // The inline allowance of the item running now, in one word (one store resets it): the operations completed
  // inline times inline_op_unit, plus the bytes they sent.
  static constexpr unsigned inline_op_shift = 48;  // far above any item's bytes (16 operations' worth)
  static constexpr std::uint64_t inline_op_unit = std::uint64_t{1} << inline_op_shift;
  std::uint64_t inline_used_ = 0;
  // The done word run_until watches (null in run()), and its task's entry: its finish (unlink_spawned) raises
  // attend_root.
  const std::atomic<std::uintptr_t>* watched_ = nullptr;
  const detail::root_hook* watched_root_ = nullptr;
  std::uint64_t loop_time_ns_;
  detail::tsc_scale tsc_;
  std::uint64_t tsc_base_ = 0;
  std::uint64_t ns_base_ = 0;
  std::uint64_t spin_ns_;
  // The spin's back-off (poll_io): misses in a row (capped at spin_backoff_after + spin_backoff_doublings), and
  // parks left to make without a spin.
  static constexpr unsigned spin_backoff_after = 4;
  static constexpr unsigned spin_backoff_doublings = 6;
  unsigned spin_misses_ = 0;
  unsigned spin_skips_ = 0;
  std::uint64_t submit_within_ns_;
  std::uint64_t unsubmitted_since_ = 0;  // deadline_now_ns() when the oldest unsubmitted submission was queued
  std::size_t receive_buffer_size_;
  unsigned receive_buffers_;
  unsigned receive_buffers_max_;
  std::size_t zero_copy_threshold_ = 0;  // io_context_options::zero_copy_send_threshold, 0 under epoll
  detail::descriptor* free_descriptors_ = nullptr;  // loop thread only, inside run
  // Descriptors given up by other threads (or by this one outside run), taken back into free_descriptors_ when
  // that runs dry: a lock-free stack, so that no thread but the loop's ever touches the free list.
  std::atomic<detail::descriptor*> remote_free_descriptors_{nullptr};
  detail::root_hook* spawned_ = nullptr;
  detail::work_queue teardown_items_;  // see teardown_owner
  bool io_shut_down_ = false;          // shutdown_io has run
  // Shared with the loop's descriptors (detail::loop_anchor), and the descriptors this loop has allocated (from
  // any thread): what is not on a free list at teardown is still open, and keeps the anchor.
  detail::loop_anchor* anchor_;
  std::atomic<std::size_t> descriptors_made_{0};
  std::function<void(std::exception_ptr)> exception_handler_;
  static constexpr unsigned spare_pipe_limit = 4;  // one per concurrent send_file is the steady state
  int spare_pipes_[spare_pipe_limit][2] = {};
  unsigned spare_pipe_count_ = 0;
  static constexpr std::size_t spare_stop_sources = 16;
  std::vector<std::stop_source> stop_sources_;  // capacity reserved up front: never reallocates
  std::atomic<bool> sleeping_{false};
  alignas(64) std::atomic<returned_block*> returned_{nullptr};  // published blocks; a poster takes them all at once
  // Blocks of this loop's slabs whose handlers ran on another loop (work sharing), for this loop to take back.
  alignas(64) std::atomic<handler_block*> returned_handlers_{nullptr};
  std::atomic<std::size_t> guards_{0};
  // detail::thread_serial() of the thread the loop is bound to (its first run), 0 until then. Set once, by a CAS
  // that decides between two first runs racing; relaxed, since it publishes nothing but itself.
  std::atomic<std::uint64_t> bound_thread_{0};
  // Metrics (loop thread writes, any thread reads; see detail/loop_counters.hpp).
  detail::loop_counters counters_;
  lag_probe lag_probe_;
  bool lag_probe_queued_ = false;
  std::uint64_t turn_ = 0;
  // Every loop of the process, for metrics::process_snapshot (metrics.cpp; under its mutex).
  io_context* registry_prev_ = nullptr;
  io_context* registry_next_ = nullptr;
  friend struct detail::loop_registry;
};

#if defined(__x86_64__)
// io_context.cpp defines the variable under this assembler name; initial-exec: one GOT load of its offset from
// the thread pointer (the linker makes it a constant in an executable), so it serves a shared libtern too.
inline io_context* io_context::current() noexcept {
  io_context* c;
  asm volatile("movq tern_current_loop@gottpoff(%%rip), %0\n\tmovq %%fs:(%0), %0" : "=r"(c));
  return c;
}
#define TERN_CURRENT_LOOP_INLINE 1
#endif

}  // namespace tern

#include "tern/detail/posted_members.hpp"
