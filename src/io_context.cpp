// The loop: turn structure, sleeping/wake protocol, work accounting and teardown (see io_context.hpp).
#include "tern/io_context.hpp"

#include <bit>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <exception>
#include <optional>
#include <string>
#include <system_error>
#include <unistd.h>

#include "backends.hpp"
#include "tern/error.hpp"
#include "loop_registry.hpp"
#include "tern/task.hpp"  // root_hook: the spawned tasks a dying loop destroys

namespace tern {

// The loop running on the calling thread (io_context::current). The assembler name is what the inline read in
// io_context.hpp refers to; external linkage for that reference.
constinit thread_local io_context* current_ asm("tern_current_loop") = nullptr;

#ifndef TERN_CURRENT_LOOP_INLINE
io_context* io_context::current() noexcept { return current_; }
#endif

namespace detail {
void run_work_item(std::uintptr_t item, std::uintptr_t) {
  auto* w = reinterpret_cast<work_item*>(item);
  w->run(w);
}
void run_completion(std::uintptr_t op, std::uintptr_t) {
  auto* w = reinterpret_cast<work_item*>(op);
  w->run(w);
}
void resume_handle(std::uintptr_t frame, std::uintptr_t) {
  std::coroutine_handle<>::from_address(reinterpret_cast<void*>(frame)).resume();
}
}  // namespace detail

namespace detail {
namespace {
// Relaxed: the counter only has to hand out distinct numbers; nothing is published through it.
std::atomic<std::uint64_t> next_thread_serial{1};
constinit thread_local std::uint64_t own_thread_serial = 0;
}  // namespace
std::uint64_t thread_serial() noexcept {
  if (own_thread_serial == 0) [[unlikely]] own_thread_serial = next_thread_serial.fetch_add(1, std::memory_order_relaxed);
  return own_thread_serial;
}
}  // namespace detail

#ifdef TERN_THREAD_IDENTITY_OUT_OF_LINE
namespace detail {
namespace {
thread_local char identity_anchor;
}
std::uintptr_t thread_identity() noexcept { return reinterpret_cast<std::uintptr_t>(&identity_anchor); }
}  // namespace detail
#endif

const char* to_string(backend_kind k) noexcept {
  switch (k) {
    case backend_kind::io_uring: return "io_uring";
    case backend_kind::epoll: return "epoll";
    case backend_kind::automatic: break;
  }
  return "automatic";
}

// Marks the calling thread as running this loop for the duration of a run call (restores the previous one, so a
// loop may be run from inside another loop's handler).
class io_context::scope {
 public:
  explicit scope(io_context* c) noexcept
      : ctx_(c), prev_(current_), prev_owner_(c->owner_.load(std::memory_order_relaxed)) {
    current_ = c;
    c->owner_.store(detail::thread_identity(), std::memory_order_relaxed);
  }
  ~scope() {
    ctx_->publish_counts();  // every run's end, an exception's included
    current_ = prev_;
    ctx_->owner_.store(prev_owner_, std::memory_order_relaxed);
  }
  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;

 private:
  io_context* ctx_;
  io_context* prev_;
  std::uintptr_t prev_owner_;
};

namespace {
backend_kind resolve(backend_kind requested) {
  if (requested != backend_kind::automatic) return requested;
  if (const char* env = std::getenv("TERN_BACKEND")) {
    if (std::strcmp(env, "epoll") == 0) return backend_kind::epoll;
    if (std::strcmp(env, "io_uring") == 0) return backend_kind::io_uring;
  }
  return backend_kind::automatic;
}
}  // namespace

io_context::io_context() : io_context(io_context_options{}) {}

io_context::io_context(io_context_options opts)
    : timers_(now_ns()),
      loop_time_ns_(now_ns()),
      tsc_(detail::tsc_calibration()),
      spin_ns_(opts.spin_before_park.count() > 0 ? static_cast<std::uint64_t>(opts.spin_before_park.count()) : 0),
      submit_within_ns_(opts.submit_within.count() > 0
                            ? static_cast<std::uint64_t>(opts.submit_within.count()) * 1000
                            : 0),
      receive_buffer_size_(opts.receive_buffer_size),
      receive_buffers_(opts.receive_buffers),
      receive_buffers_max_(opts.receive_buffers_max) {
  backend_kind want = resolve(opts.backend);
  if (want == backend_kind::epoll) {
    backend_ = detail::make_epoll_backend(*this);
  } else if (want == backend_kind::io_uring) {
    backend_ = detail::make_io_uring_backend(*this, opts);
  } else {
    try {
      backend_ = detail::make_io_uring_backend(*this, opts);
    } catch (const std::system_error&) {
      if (opts.sqpoll) throw;  // asked for io_uring's poller thread: not silently something else
      backend_ = detail::make_epoll_backend(*this);  // io_uring disabled or unavailable on this kernel
    }
  }
  kind_ = backend_->kind();
  if (kind_ == backend_kind::io_uring) zero_copy_threshold_ = opts.zero_copy_send_threshold;
  anchor_ = new detail::loop_anchor;
  anchor_->loop.store(this, std::memory_order_relaxed);  // published with the loop itself
  stop_sources_.reserve(spare_stop_sources);
  lag_probe_.owner = this;
  lag_probe_.run = &lag_probe_ran;
  lag_probe_.discard = nullptr;  // a member: nothing to free when a teardown drops it
  detail::loop_registry::add(this);
  exception_handler_ = [](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "tern: unhandled exception in a detached task: %s\n", ex.what());
    } catch (...) {
      std::fprintf(stderr, "tern: unhandled exception of unknown type in a detached task\n");
    }
  };
}

// A slab is a header line followed by its blocks, all cache-line aligned.
struct alignas(io_context::handler_block_size) io_context::handler_slab {
  handler_slab* next;
  struct alignas(handler_block_size) block {
    unsigned char bytes[handler_block_size];
  };
  block blocks[handler_slab_blocks];
};

void* io_context::grow_handler_blocks() {
  if (returned_handlers_.load(std::memory_order_relaxed) != nullptr) {
    handler_block* chain = returned_handlers_.exchange(nullptr, std::memory_order_acquire);
    if (chain != nullptr) {
      assert(handler_blocks_.load(std::memory_order_relaxed) == nullptr && "called only when the list is empty");
      handler_blocks_.store(chain->next, std::memory_order_relaxed);
      return chain;
    }
  }
  if (handler_slab_count_ == handler_slab_limit) return nullptr;
  auto* slab = new handler_slab;
  slab->next = handler_slabs_;
  handler_slabs_ = slab;
  ++handler_slab_count_;
  for (std::size_t i = handler_slab_blocks; i-- > 1;) give_handler_block(&slab->blocks[i]);
  return &slab->blocks[0];
}

io_context::~io_context() {
  scope s(this);
  // 1. Queued items are still valid here: free the handlers that own themselves, skip coroutine resumptions.
  discard_queued();
  // 2. Nothing the kernel may still write goes before the kernel is done with it: cancel and reap what is in flight
  //    (the completions land on the run queue, resumptions that are dropped unread).
  if (!io_shut_down_) shutdown_io();
  run_queue_.clear();
  // 3. Destroy every spawned task still suspended, in teardown mode (teardown_owner): their destructors close
  //    sockets, disarm timers, post handlers and spawn tasks, and whatever they queue that owns itself is kept to
  //    be discarded in 4; resumptions that may point into the frames being destroyed are dropped unread.
  owner_.store(teardown_owner, std::memory_order_relaxed);
  closes_waiters_ = detail::work_queue{};  // awaiters of closes_settled, in frames destroyed below: never resumed
  while (spawned_ != nullptr) spawned_->abandon();
  // 4. The handlers queued meanwhile (by the destructors above, or by other threads), and what their own discards
  //    queue, until nothing is left.
  discard_teardown_items();
  run_queue_.clear();
  handler_blocks_.store(nullptr, std::memory_order_relaxed);
  publish_returned();
  for (returned_block* b = returned_.exchange(nullptr, std::memory_order_acquire); b != nullptr;) {
    returned_block* next = b->next;
    detail::line_pool::deallocate(b);
    b = next;
  }
  while (handler_slabs_ != nullptr) {
    handler_slab* next = handler_slabs_->next;
    delete handler_slabs_;
    handler_slabs_ = next;
  }
  // 5. The backend, then the receive pool, whose buffers the ring's teardown may still name.
  backend_.reset();
  receive_pool_.reset();
  // Closed descriptors whose multishot receive never delivered its last CQE: the ring is gone, so are they.
  while (lingering_ != nullptr) {
    detail::descriptor* d = lingering_;
    lingering_ = d->next_free;
    d->lingering = false;
    d->rx_armed = false;
    d->pending_head = nullptr;
    free_descriptor(d);
  }
  while (spare_pipe_count_ != 0) {
    const int* p = spare_pipes_[--spare_pipe_count_];
    ::close(p[0]);
    ::close(p[1]);
  }
  free_descriptors();
  publish_counts();
  detail::loop_registry::retire(this);  // its counts go on in the process totals
}

void io_context::shutdown_io() noexcept {
  io_shut_down_ = true;
  const std::uint64_t deadline =
      now_ns() + static_cast<std::uint64_t>(std::chrono::nanoseconds(teardown_wait).count());
  const std::size_t left = backend_->quiesce(deadline);
  if (left == 0) return;
  std::fprintf(stderr,
               "tern: io_context teardown: %zu operation(s) still in the kernel %s; their frames and buffers are "
               "freed now, and cancelling them is left to the kernel as the ring closes\n",
               left,
               on_bound_thread() ? "a second after their cancellation"
                                 : "(the loop is destroyed on another thread than the one that ran it, which the "
                                   "ring refuses: destroy a loop on its own thread, or once run() has returned for "
                                   "lack of work)");
}

bool io_context::tearing_down_here() const noexcept {
  return owner_.load(std::memory_order_relaxed) == teardown_owner && current_ == this;
}

void io_context::discard_teardown_items() noexcept {
  for (;;) {
    inbox_.drain_into(teardown_items_);  // from other threads: anything may be there
    detail::work_item* w = teardown_items_.pop_front();
    if (w == nullptr) return;
    if (w->discard != nullptr) w->discard(w);
  }
}

void io_context::free_descriptors() noexcept {
  if (free_descriptors_ == nullptr) {
    free_descriptors_ = remote_free_descriptors_.exchange(nullptr, std::memory_order_acquire);
  } else if (detail::descriptor* rest = remote_free_descriptors_.exchange(nullptr, std::memory_order_acquire)) {
    detail::descriptor* last = rest;
    while (last->next_free != nullptr) last = last->next_free;
    last->next_free = free_descriptors_;
    free_descriptors_ = rest;
  }
  std::size_t freed = 0;
  while (free_descriptors_ != nullptr) {
    detail::descriptor* next = free_descriptors_->next_free;
    delete free_descriptors_;
    free_descriptors_ = next;
    ++freed;
  }
  // Every descriptor made and not freed is held by an object still open: it keeps the anchor, and the last one
  // to close frees it (detail::close_descriptor).
  const std::size_t open = descriptors_made_.load(std::memory_order_relaxed) - freed;
  if (open == 0) {
    delete anchor_;
    return;
  }
  anchor_->orphans.store(open, std::memory_order_relaxed);
  anchor_->loop.store(nullptr, std::memory_order_release);
}

void io_context::publish_returned() noexcept {
  if (returning_ == nullptr) return;
  returned_block* head = returned_.load(std::memory_order_relaxed);
  do {
    returning_last_->next = head;
  } while (!returned_.compare_exchange_weak(head, returning_, std::memory_order_release, std::memory_order_relaxed));
  returning_ = returning_last_ = nullptr;
  returning_count_ = 0;
}

void io_context::reclaim_returned() noexcept {
  if (detail::line_pool::cached() != 0) return;
  returned_block* chain = returned_.exchange(nullptr, std::memory_order_acquire);
  if (chain == nullptr) return;
  std::uint32_t n = 1;
  returned_block* last = chain;
  while (last->next != nullptr) {
    last = last->next;
    ++n;
  }
  detail::line_pool::adopt(chain, last, n);
}

void io_context::discard_queued() noexcept {
  drain_inbox();
  detail::run_slot s;
  while (next_ready(s)) {
    // Only a work item (an operation's completion is one) can own something (detail/run_ring.hpp): a handler in a
    // slot is trivially destructible, and a resumption is forgotten.
    if (s.run != &detail::run_work_item && s.run != &detail::run_completion) continue;
    auto* w = reinterpret_cast<detail::work_item*>(s.a);
    if (w->discard != nullptr) w->discard(w);
  }
}

void io_context::drain_inbox_slow() noexcept {
  std::size_t n = 0;
  for (detail::work_item* w = inbox_.take_all(); w != nullptr;) {
    detail::work_item* next = w->next;
    run_queue_.push_item(w);
    w = next;
    ++n;
  }
  counters_.posts_remote.add(n);
}

bool io_context::has_work() const noexcept {
  return !ready_empty() || pending_ops_ != 0 || timers_.size() != 0 ||
         guards_.load(std::memory_order_relaxed) != 0 || inbox_.maybe_nonempty();
}

std::size_t io_context::run() {
  claim_thread("run");
  return run_loop(nullptr, nullptr);
}

void io_context::run_until(const std::atomic<std::uintptr_t>* done, const detail::root_hook* root) {
  claim_thread("run_until");
  run_loop(done, root);
}

void io_context::claim_thread(const char* operation) {
  const std::uint64_t self = detail::thread_serial();
  std::uint64_t bound = bound_thread_.load(std::memory_order_relaxed);
  if (bound == self) [[likely]] return;
  if (bound == 0 && bound_thread_.compare_exchange_strong(bound, self, std::memory_order_relaxed)) return;
  throw std::system_error(make_error_code(error::wrong_loop),
                          std::string("tern::io_context::") + operation +
                              ": the loop is bound to the thread that first ran it (an io_uring ring takes calls "
                              "from one thread only); run each loop on one thread for its life, or use "
                              "tern::runtime");
}

bool io_context::on_bound_thread() const noexcept {
  const std::uint64_t bound = bound_thread_.load(std::memory_order_relaxed);
  return bound == 0 || bound == detail::thread_serial();
}

bool io_context::attend() noexcept {
  const unsigned a = attention_.load(std::memory_order_relaxed);
  if ((a & attend_root) != 0) {
    attention_.fetch_and(~attend_root, std::memory_order_relaxed);
    // Set by this thread (a spawned task finishing on its home loop), so a relaxed load sees it.
    if (watched_ != nullptr && (watched_->load(std::memory_order_relaxed) & 1) != 0) return true;
  }
  if ((a & (attend_stop | attend_poll)) != 0) return true;
  // Submissions waiting behind long handlers go now, not at the end of the turn (submit_within).
  if ((a & attend_submit) != 0 && deadline_now_ns() - unsubmitted_since_ >= submit_within_ns_) backend_->flush();
  return false;
}

std::size_t io_context::run_loop(const std::atomic<std::uintptr_t>* done_word, const detail::root_hook* root) {
  // run_until's word (null for run()): set by this thread (a spawned task finishing on its home loop), so a relaxed
  // load sees it.
  auto done = [done_word] { return done_word != nullptr && (done_word->load(std::memory_order_relaxed) & 1) != 0; };
  scope s(this);
  struct watch {  // restored on every exit: a run may be nested in a handler of another run
    io_context* c;
    const std::atomic<std::uintptr_t>* prev;
    const detail::root_hook* prev_root;
    ~watch() {
      c->watched_ = prev;
      c->watched_root_ = prev_root;
    }
  } w{this, std::exchange(watched_, done_word), std::exchange(watched_root_, root)};
  std::size_t n = 0;
  while (!stopped() && !done()) {
    drain_inbox();
    counters_.turns.add();
    if ((++turn_ & (lag_sample_turns - 1)) == 0) sample_lag();
    std::size_t ran = 0;
    for (;;) {
      detail::run_slot item;
      if (ran < ring_run_limit_) [[likely]] {
        // Straight from the ring, without its wrap test (the slot may be the sentinel that wraps and runs the
        // first slot: detail::run_ring::pop_or_wrap).
        if (run_queue_.empty()) break;
        item = run_queue_.pop_or_wrap();
      } else {
        if (ran >= batch_limit) break;
        if (shared_count_ == 0) ring_run_limit_ = batch_limit;  // the shareable work is gone (run, or given away)
        detail::run_slot fair;  // its own: the item itself, never taken by address, stays in registers
        if (!next_ready(fair)) break;
        item = fair;
      }
      ++ran;
      run_item(item);
      if (needs_attention() && attend()) [[unlikely]] break;
    }
    n += ran;
    counters_.items_run.add(ran);
    publish_counts();
    if (stopped() || done()) break;
    if (group_ != nullptr) balance();
    if (!has_work()) break;
    poll_io(true);
  }
  return n;
}

std::size_t io_context::run_one() {
  claim_thread("run_one");
  scope s(this);
  while (!stopped()) {
    drain_inbox();
    detail::run_slot s;
    if (next_ready(s)) {
      run_item(s);
      counters_.items_run.add();
      return 1;
    }
    if (!has_work()) return 0;
    poll_io(true);
  }
  return 0;
}

std::size_t io_context::poll() {
  claim_thread("poll");
  if (stopped()) return 0;
  scope s(this);
  poll_io(false);
  drain_inbox();
  // Only what is ready now: items queued by these handlers wait for the next call. Pinned work first, then
  // shareable; a stop leaves the rest queued where it was.
  std::size_t pinned = run_queue_.size();
  std::size_t shared = shared_count_;
  std::size_t n = 0;
  detail::run_slot item;
  while (!stopped()) {
    if (pinned != 0 && !run_queue_.empty()) {
      --pinned;
      item = run_queue_.pop();
    } else if (shared != 0 && pop_shared(item)) {
      pinned = 0;
      --shared;
    } else {
      break;
    }
    ++n;
    run_item(item);
  }
  counters_.items_run.add(n);
  return n;
}

void io_context::stop() noexcept {
  attention_.fetch_or(attend_stop, std::memory_order_relaxed);
  wake_if_sleeping();
}

std::int64_t io_context::timer_timeout_ns() const noexcept {
  std::uint64_t tick = timers_.next_expiry_tick();
  if (tick == detail::timer_wheel::never) return -1;
  std::uint64_t due = tick << detail::timer_wheel::tick_shift;
  std::uint64_t now = now_ns();
  return due > now ? static_cast<std::int64_t>(due - now) : 0;
}

void io_context::poll_io(bool may_block) {
  if ((attention_.load(std::memory_order_relaxed) & attend_poll) != 0) {
    attention_.fetch_and(~attend_poll, std::memory_order_relaxed);
  }
  if (returning_count_ != 0) publish_returned();
  const bool has_timers = timers_.size() != 0;
  if (!may_block || !ready_empty()) {
    if (backend_->busy()) backend_->poll(0);
  } else {
    std::int64_t timeout = has_timers ? timer_timeout_ns() : -1;
    if (group_ != nullptr) group_->set_idle(group_index_, true);
    bool skipped = false;
    if (timeout != 0 && spin_ns_ != 0) {
      if (spin_skips_ != 0) {
        --spin_skips_;  // the last spins found nothing: park at once (io_context_options::spin_before_park)
        skipped = true;
      } else if (spin(timeout)) {
        timeout = 0;
      } else if (has_timers) {
        timeout = timer_timeout_ns();  // the spin used up part of the wait
      }
    }
    if (timeout != 0) {
      // Announce the sleep, then look once more: a poster either sees sleeping_ and wakes us, or we see its item.
      // The exchange is the full barrier (a locked instruction on x86) and the looks are seq_cst loads (plain
      // ones there): a seq_cst store with a seq_cst fence after it also issued an mfence, where 53% of this
      // function's samples sat, at every park (two per request in an HTTP/2 exchange on io_uring). It pairs with
      // the poster's seq_cst push (inbox_) as four seq_cst operations, and with wake_if_sleeping()'s fence as a
      // seq_cst operation on each side of it.
      (void)sleeping_.exchange(true, std::memory_order_seq_cst);
      if (inbox_.nonempty_after_barrier() ||
          (attention_.load(std::memory_order_seq_cst) & attend_stop) != 0 ||
          (guards_.load(std::memory_order_seq_cst) == 0 && pending_ops_ == 0 && !has_timers)) {
        timeout = 0;
      }
    }
    if (timeout != 0) {
      publish_gauges();
      const std::uint64_t parked_at = deadline_now_ns();
      backend_->poll(timeout);
      const std::uint64_t woke_at = deadline_now_ns();
      counters_.parks.add();
      counters_.park_ns.add(woke_at > parked_at ? woke_at - parked_at : 0);
      if (skipped) [[unlikely]] parked_for_spin(woke_at > parked_at ? woke_at - parked_at : 0);
    } else if (backend_->busy()) {
      backend_->poll(timeout);
    }
    // relaxed: a waker that still sees it set only makes one spurious wake-up; nothing is published by it.
    sleeping_.store(false, std::memory_order_relaxed);
    if (group_ != nullptr) group_->set_idle(group_index_, false);
  }
  if (has_timers) {
    loop_time_ns_ = refresh_clock_base();
    timers_.advance(loop_time_ns_);
  }
}

std::uint64_t io_context::refresh_clock_base() noexcept {
  if (!tsc_.usable) return ns_base_ = now_ns();
  // The TSC before the clock, so that the base time is not early for the count; and after it, to see whether the
  // thread was preempted between the two (the estimate would run ahead by the preemption until the next base).
  for (int tries = 0;; ++tries) {
    tsc_base_ = detail::read_tsc();
    ns_base_ = now_ns();
    if (detail::read_tsc() - tsc_base_ <= tsc_.pair_cycles || tries == 2) [[likely]] return ns_base_;
  }
}

detail::work_item* io_context::pop_shared() noexcept {
  detail::work_item* w = shared_queue_.pop_front();
  if (w != nullptr) --shared_count_;
  return w;
}

void io_context::join_share_group(detail::share_group* g, unsigned index) noexcept {
  group_ = g;
  group_index_ = index;
}

// An idle peer gets half of the shareable work at once. A busy but underloaded peer (one that kept a single chain
// of handlers, say, while this loop kept the rest) never goes idle, so loads are also compared: every 16 turns, a
// loop with at least balance_floor items queued hands a peer with less than half as many (minus the floor) enough to
// even the two out. The loads are published per turn, only when they change, each in its own cache line.
void io_context::balance() noexcept {
  if (shared_count_ != published_load_) {
    published_load_ = shared_count_;
    group_->publish_load(group_index_, shared_count_);
  }
  if (shared_count_ <= 1) return;
  if (group_->any_idle()) {
    if (io_context* target = group_->claim_idle(group_index_)) {
      donate(target, shared_count_ / 2);
      return;
    }
  }
  constexpr std::size_t balance_floor = 32;
  if (shared_count_ < balance_floor || (++balance_turn_ & 15) != 0) return;
  std::size_t load = 0;
  io_context* target = group_->least_loaded(group_index_, load);
  if (target != nullptr && shared_count_ > 2 * load + balance_floor) donate(target, (shared_count_ - load) / 2);
}

void io_context::donate(io_context* target, std::size_t give) noexcept {
  // The oldest shareable items, in one push onto the target's inbox.
  detail::work_item* newest = nullptr;
  detail::work_item* oldest = nullptr;
  for (std::size_t i = 0; i < give; ++i) {
    detail::work_item* w = pop_shared();
    if (w == nullptr) break;
    w->next = newest;  // the inbox is a stack: newest first; draining reverses it back to FIFO
    newest = w;
    if (oldest == nullptr) oldest = w;
  }
  if (newest == nullptr) return;
  published_load_ = shared_count_;
  group_->publish_load(group_index_, shared_count_);
  target->enqueue_remote_chain(newest, oldest);
}

bool io_context::spin(std::int64_t limit_ns) {
  std::uint64_t span = spin_ns_;
  // A timer's deadline before the spin's end: the spin says nothing of the waits then, found or not.
  const bool cut = limit_ns > 0 && static_cast<std::uint64_t>(limit_ns) < span;
  if (cut) span = static_cast<std::uint64_t>(limit_ns);
  const std::uint64_t began = now_ns();
  const std::uint64_t until = began + span;
  counters_.spins.add();
  for (unsigned i = 1;; ++i) {
    bool found = inbox_.maybe_nonempty() || stopped();
    if (found) {
      spin_misses_ = 0;  // work from another thread (or a stop): what the loop waited for
    } else if (backend_->busy()) {
      backend_->poll(0);
      found = !ready_empty();
      // Judged by what was found, once per spin that found something: input the loop waited for ends the
      // back-off; a send's own completion (io_uring reports it a moment after the submission this poll made)
      // counts neither way, or a loop that sends before each long wait would never back off.
      if (found && input_queued()) spin_misses_ = 0;
    }
    if (found) {
      counters_.spin_hits.add();
      counters_.spin_ns.add(now_ns() - began);
      return true;
    }
    // The clock costs as much as a few polls of the inbox; look at it every eighth round.
    if ((i & 7) == 0) {
      const std::uint64_t now = now_ns();
      if (now >= until) {
        counters_.spin_ns.add(now - began);
        if (!cut) spin_missed();
        return false;
      }
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();  // let the sibling hyperthread run while this one waits
#endif
  }
}

// After spin_backoff_after misses in a row, 1, 2, 4 ... 2^spin_backoff_doublings parks without a spin before the
// next try: a wait pattern that has changed is found again within that many waits, and a loop whose waits are all
// longer than the spin spins before one wait in 65 (at the cap), against every one.
void io_context::spin_missed() noexcept {
  if (spin_misses_ < spin_backoff_after + spin_backoff_doublings) ++spin_misses_;
  if (spin_misses_ >= spin_backoff_after) spin_skips_ = 1u << (spin_misses_ - spin_backoff_after);
}

// A park in place of a spin that was woken by input sooner than the spin would have ended: the spin would have
// caught it, so the waits are short again and the back-off ends (without waiting out its skips). Out of line: the
// park of a loop that does not spin pays one test for it.
void io_context::parked_for_spin(std::uint64_t parked_ns) noexcept {
  if (parked_ns < spin_ns_ && (inbox_.maybe_nonempty() || input_queued())) {
    spin_misses_ = 0;
    spin_skips_ = 0;
  }
}

// Completions are queued under run_completion, so a completion is told from other items by the slot alone; only
// then is the io_op read. Input is what a loop waits on from a peer or a file: a receive, a read, an accept, a
// readiness to read; a cancelled one is not.
bool io_context::input_queued() const noexcept {
  return run_queue_.any_of([](const detail::run_slot& s) {
    if (s.run != &detail::run_completion) return false;
    const auto* op = static_cast<const detail::io_op*>(reinterpret_cast<const detail::work_item*>(s.a));
    return op->st == detail::io_op::state::done &&
           (detail::waits_for_input(op->code) || op->code == detail::op_code::read_at);
  });
}

// The inbox push is a seq_cst read-modify-write and the loop announces its sleep with a seq_cst exchange before
// its seq_cst re-check of the inbox, so the push itself orders the poster's read of sleeping_: no fence here (a
// full fence costs a post from outside the loop as much as the push). Either the loop's re-check sees the item, or
// this load sees sleeping_ set.
void io_context::enqueue_remote(detail::work_item* w) noexcept {
  if (owner_.load(std::memory_order_relaxed) == teardown_owner && current_ == this) [[unlikely]] {
    // The destroying thread, while its tasks' frames are destroyed: see teardown_owner.
    if (w->discard != nullptr) teardown_items_.push_back(w);
    return;
  }
  inbox_.push(w);
  wake_if_announced();
}

void io_context::enqueue_remote_chain(detail::work_item* newest, detail::work_item* oldest) noexcept {
  inbox_.push_chain(newest, oldest);
  wake_if_announced();
}

// Only after an inbox push (see enqueue_remote); the exchange picks the one waker that makes the system call.
void io_context::wake_if_announced() noexcept {
  if (sleeping_.load(std::memory_order_seq_cst) && sleeping_.exchange(false, std::memory_order_relaxed)) {
    wake_now();
  }
}

// For a state change that is not an inbox push (a guard released, a stop): the seq_cst fence sits between the
// change and this load, as the loop's seq_cst exchange of sleeping_ sits before its seq_cst loads of that state,
// so that either the loop's re-check sees the change or this load sees sleeping_ set. The exchange only picks the
// one waker that makes the system call.
void io_context::wake_if_sleeping() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_relaxed) && sleeping_.exchange(false, std::memory_order_relaxed)) {
    wake_now();
  }
}

void io_context::wake_now() noexcept {
  backend_->wake();
  // Counted by the waker's own loop, the only one whose counters its thread may write; a thread that runs no loop
  // wakes uncounted (the woken loop counts every wake-up it receives either way). The system call of the wake-up
  // is counted by the backend that makes it.
  io_context* waker = current();
  if (waker != nullptr && waker != this && waker->running_here()) waker->counters_.wakeups_sent.add();
}

bool io_context::start(detail::io_op& op) noexcept {
  // op.ctx is this already (every awaiter sets it when made) and is not written here: a stop callback on another
  // thread reads it (the awaiter's context()) while a multi-piece write_all starts its next piece.
  assert(op.ctx == this);
  if (op.code == detail::op_code::receive) {
    op.desc->rx_used = true;
  } else if (op.code == detail::op_code::recv && op.desc != nullptr && op.desc->rx_used) [[unlikely]] {
    // The socket's bytes go through receive()'s queue now; a plain read would skip the queued ones.
    op.res = -EINPROGRESS;
    op.st = detail::io_op::state::done;
    return true;
  }
  counters_.ops_started[static_cast<std::size_t>(op.code)].add();
  if (backend_->start(op)) {
    op.st = detail::io_op::state::done;
    counters_.inline_completions.add();
    counters_.ops_completed[static_cast<std::size_t>(op.code)].add();
    // A peer that is always ready (a writer into a roomy socket buffer) would otherwise keep its coroutine
    // running without ever letting the loop poll; past a few operations, or 128 KiB sent, since it was resumed
    // (run_item), the completion goes through the back of the queue instead, and the turn ends there (see
    // run_loop), so the poll comes before the coroutine goes on. Both bounds matter on loopback: a writer that
    // runs on until the socket buffer is full (megabytes) before the reader on the same loop is woken leaves the
    // receiver's queue nearly full, and the kernel then moves the data in window-limited steps from inside the
    // reader's recv calls, at half the speed of short bursts (sockets/unidirectional at 64 KiB went from 2.9 to
    // 5.2 GB/s). Only bytes sent count: a reader that drains its socket makes room, and bounding it too kept
    // receive queues fuller, and the kernel's receive-buffer tuning then sometimes left one direction of
    // sockets/bidirectional with a quarter of the other's buffer (440 KB against 1.6-2 MB: 3.4 GB/s, not 6).
    if (op.res > 0 && (op.code == detail::op_code::send || op.code == detail::op_code::write ||
                       op.code == detail::op_code::sendmsg)) {
      inline_used_ += static_cast<std::uint64_t>(op.res);
    }
    inline_used_ += inline_op_unit;
    if ((inline_used_ >> inline_op_shift) <= inline_limit && (inline_used_ & (inline_op_unit - 1)) <= inline_byte_limit) {
      return true;
    }
    inline_used_ = 0;
    attention_.fetch_or(attend_poll, std::memory_order_relaxed);
    run_queue_.push_item(&op);
    return false;
  }
  op.st = detail::io_op::state::pending;
  if (op.desc != nullptr) op.desc->link(&op);  // path operations have no descriptor
  ++pending_ops_;
  return false;
}

void io_context::complete(detail::io_op& op) noexcept {
  detail::descriptor* d = op.desc;
  op.st = op.st == detail::io_op::state::cancelling ? detail::io_op::state::cancelled : detail::io_op::state::done;
  counters_.ops_completed[static_cast<std::size_t>(op.code)].add();
  --pending_ops_;
  run_queue_.push_completion(&op);
  if (d == nullptr) return;
  d->unlink(&op);
  if (d->closing && !d->has_pending()) free_descriptor(d);
}

void io_context::cancel(detail::io_op& op) noexcept {
  if (op.st != detail::io_op::state::pending) return;
  op.st = detail::io_op::state::cancelling;
  backend_->cancel(op);
}

void io_context::end_multishot(detail::descriptor* d) noexcept {
  d->rx_armed = false;
  d->rx_cancelling = false;
  if (d->lingering) {
    if (d->linger_prev != nullptr) d->linger_prev->next_free = d->next_free; else lingering_ = d->next_free;
    if (d->next_free != nullptr) d->next_free->linger_prev = d->linger_prev;
    d->next_free = d->linger_prev = nullptr;
    d->lingering = false;
    --pending_ops_;
    if (lingering_ == nullptr) {
      while (detail::work_item* w = closes_waiters_.pop_front()) run_queue_.push_item(w);
    }
  }
  if (d->closing && !d->has_pending()) free_descriptor(d);
}

detail::receive_pool& io_context::receive_pool() {
  if (!receive_pool_) {
    receive_pool_ = std::make_unique<detail::receive_pool>(*this, receive_buffer_size_, receive_buffers_,
                                                           receive_buffers_max_);
    backend_->attach_pool(*receive_pool_);
  }
  return *receive_pool_;
}

void io_context::forget(detail::io_op& op) noexcept {
  if (op.st != detail::io_op::state::pending && op.st != detail::io_op::state::cancelling) return;
  backend_->abandon(op);
  detail::descriptor* d = op.desc;
  op.st = detail::io_op::state::done;
  --pending_ops_;
  if (d == nullptr) return;
  d->unlink(&op);
  if (d->closing && !d->has_pending()) free_descriptor(d);
}

detail::descriptor* io_context::open_descriptor(int fd, bool watched, bool tcp_stream) {
  detail::descriptor* d = nullptr;
  if (running_here()) {
    if (free_descriptors_ == nullptr) {
      free_descriptors_ = remote_free_descriptors_.exchange(nullptr, std::memory_order_acquire);
    }
    d = free_descriptors_;
  }
  std::uint32_t generation = 0;
  if (d != nullptr) {
    free_descriptors_ = d->next_free;
    generation = d->generation + 1;
    *d = detail::descriptor{};
  } else {
    d = new detail::descriptor{};
    descriptors_made_.fetch_add(1, std::memory_order_relaxed);  // read by teardown only, after every open
  }
  d->fd = fd;
  d->anchor = anchor_;
  d->generation = generation;
  d->close_item.run = &close_handed_over;
  d->close_item.discard = &close_handed_over;
  d->unpolled = !watched;
  d->short_read_drains = tcp_stream;
  if (!watched) return d;
  try {
    backend_->attach(*d);
  } catch (...) {
    free_descriptor(d);
    throw;
  }
  return d;
}

void io_context::close_handed_over(detail::work_item* w) noexcept {
  detail::descriptor* d = detail::descriptor::of(w);
  d->anchor->loop.load(std::memory_order_relaxed)->close_descriptor(d);  // queued on that loop: it lives
}

bool io_context::hand_over_needed(const detail::descriptor* d) const noexcept {
  const std::uintptr_t owner = owner_.load(std::memory_order_relaxed);
  if (owner == detail::thread_identity()) return false;  // inside run on this thread
  if (owner == teardown_owner) return current_ != this;  // the destroying thread does everything itself
  if (owner != 0) return true;                            // another thread runs the loop
  // Nobody runs it now, but its thread may start to at any moment (owner_ tells nothing then): whatever of d the
  // loop's thread may touch (its ring, its pending list, bytes queued in the loop's pool) is left to that thread.
  const bool loop_state = d->has_pending() || d->fixed_slot >= 0 || (!d->listening && !d->rx_queue.empty());
  return loop_state && !on_bound_thread();
}

void io_context::close_descriptor(detail::descriptor* d) noexcept {
  if (hand_over_needed(d)) {
    // The pending list, the ring and the free list are the loop's: hand the whole close to it. A loop that never
    // runs again closes it from its teardown.
    enqueue_remote(&d->close_item);
    return;
  }
  if (d->has_pending()) {
    cancel_pending(d);
    backend_->before_close(*d);
  }
  // After before_close: the pending SQEs that name the registered slot have taken their file reference.
  if (d->fixed_slot >= 0) backend_->unregister_file(*d);
  if (d->listening) {
    // Connections a multishot accept queued that nobody took: closed (their peers see a reset, as they would had
    // the kernel's listen backlog held them).
    drop_accepted(d);
  } else if (!d->rx_queue.empty()) {
    // Bytes a multishot receive queued that nobody read: their buffers go back to the pool.
    receive_pool_->drop(d->rx_queue);
  }
  if (d->rx_armed) {
    // The multishot's cancellation is under way; until the last CQE the descriptor is the loop's work (run()
    // reaps it) and on the lingering list (a loop destroyed first frees it).
    d->lingering = true;
    d->linger_prev = nullptr;
    d->next_free = lingering_;
    if (lingering_ != nullptr) lingering_->linger_prev = d;
    lingering_ = d;
    ++pending_ops_;
  }
  if (d->shared_file) backend_->detach(*d);
  ::close(d->fd);
  if (running_here()) counters_.syscalls.add();
  d->fd = -1;
  if (d->has_pending()) {
    d->closing = true;  // recycled by complete() when the last operation finishes
  } else {
    free_descriptor(d);
  }
}

int io_context::release_descriptor(detail::descriptor* d) noexcept {
  // Queued received bytes belong to this loop's pool, and queued connections to this descriptor: they would be
  // lost with the move.
  if (d->has_pending()) return -1;
  if (d->listening) {
    if (!d->accepted->empty()) return -1;
    drop_accepted(d);
  } else if (!d->rx_queue.empty()) {
    return -1;
  }
  const int fd = d->fd;
  if (d->fixed_slot >= 0) backend_->unregister_file(*d);  // the table belongs to this loop's ring
  backend_->detach(*d);
  d->fd = -1;
  free_descriptor(d);
  return fd;
}

void io_context::drop_accepted(detail::descriptor* d) noexcept {
  std::optional<int> fd;
  while (!d->accepted->empty()) {
    d->accepted->pop_front_into(fd);
    ::close(*fd);
  }
  delete d->accepted;
  d->rx_queue = {};  // the union's other member again
  d->listening = false;
}

void io_context::cancel_pending(detail::descriptor* d) noexcept {
  if (d == nullptr) return;
  if (hand_over_needed(d)) {
    // The descriptor may be closed and reused before the post runs; the generation tells.
    post([this, d, generation = d->generation] {
      if (d->generation == generation && d->fd >= 0) cancel_pending(d);
    });
    return;
  }
  for (detail::io_op* op = d->pending_head; op != nullptr;) {
    detail::io_op* next = op->next_pending;  // an epoll cancel unlinks op at once
    cancel(*op);
    op = next;
  }
  if (d->rx_armed) backend_->cancel_multishot(*d);
}

void io_context::free_descriptor(detail::descriptor* d) noexcept {
  if (running_here()) {
    d->next_free = free_descriptors_;
    free_descriptors_ = d;
    return;
  }
  detail::descriptor* head = remote_free_descriptors_.load(std::memory_order_relaxed);
  do {
    d->next_free = head;
  } while (!remote_free_descriptors_.compare_exchange_weak(head, d, std::memory_order_release,
                                                           std::memory_order_relaxed));
}

void io_context::report_exception(std::exception_ptr e) noexcept {
  try {
    if (exception_handler_) {
      exception_handler_(std::move(e));
      return;
    }
  } catch (...) {
  }
  std::fprintf(stderr, "tern: unhandled exception in a detached task\n");
}

std::stop_source io_context::take_stop_source() {
  if (stop_sources_.empty()) return std::stop_source();
  std::stop_source s = std::move(stop_sources_.back());
  stop_sources_.pop_back();
  return s;
}

void io_context::give_stop_source(std::stop_source&& s) noexcept {
  if (stop_sources_.size() < spare_stop_sources) stop_sources_.push_back(std::move(s));
}

bool io_context::take_pipe(int (&fds)[2]) noexcept {
  if (spare_pipe_count_ != 0) {
    const int* p = spare_pipes_[--spare_pipe_count_];
    fds[0] = p[0];
    fds[1] = p[1];
    return true;
  }
  counters_.syscalls.add();
  return ::pipe2(fds, O_CLOEXEC) == 0;
}

void io_context::give_pipe(const int (&fds)[2]) noexcept {
  if (spare_pipe_count_ == spare_pipe_limit) {
    ::close(fds[0]);
    ::close(fds[1]);
    counters_.syscalls.add(2);
    return;
  }
  spare_pipes_[spare_pipe_count_][0] = fds[0];
  spare_pipes_[spare_pipe_count_][1] = fds[1];
  ++spare_pipe_count_;
}

namespace detail {

namespace {
// The close or release of a descriptor whose loop is gone: what the loop's close would do that still matters
// without it. The ring and the epoll set went with the loop (and the registrations in them), and so did the
// receive pool whose buffers an rx_queue names; connections a multishot accept queued are still open fds.
void free_orphan(descriptor* d) noexcept {
  if (d->listening) {
    while (!d->accepted->empty()) {
      std::optional<int> fd;
      d->accepted->pop_front_into(fd);
      ::close(*fd);
    }
    delete d->accepted;
  }
  loop_anchor* anchor = d->anchor;
  delete d;
  if (anchor->orphans.fetch_sub(1, std::memory_order_acq_rel) == 1) delete anchor;
}
}  // namespace

void close_descriptor(descriptor* d) noexcept {
  if (io_context* loop = d->anchor->loop.load(std::memory_order_acquire)) [[likely]] {
    loop->close_descriptor(d);
    return;
  }
  if (d->fd >= 0) ::close(d->fd);
  free_orphan(d);
}

int release_descriptor(descriptor* d) noexcept {
  if (io_context* loop = d->anchor->loop.load(std::memory_order_acquire)) [[likely]] {
    return loop->release_descriptor(d);
  }
  const int fd = d->fd;
  free_orphan(d);
  return fd;
}

}  // namespace detail

// ---- metrics ----

void io_context::publish_gauges() noexcept {
  std::int64_t in_use = 0;
  std::uint64_t cached = 0;
  detail::frame_pool::usage(in_use, cached);
  counters_.frame_blocks_in_use.set(in_use);
  counters_.frame_blocks_cached.set(static_cast<std::int64_t>(cached));
  counters_.line_blocks_cached.set(detail::line_pool::cached());
}

void io_context::sample_lag() noexcept {
  if ((turn_ & 255) == 0) publish_gauges();  // a busy loop that never parks still publishes now and then
  if (lag_probe_queued_ || ready_empty()) return;  // an idle loop has no lag to measure
  lag_probe_queued_ = true;
  lag_probe_.queued_ns = deadline_now_ns();
  run_queue_.push_item(&lag_probe_);
}

void io_context::lag_probe_ran(detail::work_item* w) noexcept {
  auto* probe = static_cast<lag_probe*>(w);
  io_context& self = *probe->owner;
  self.lag_probe_queued_ = false;
  const std::uint64_t now = self.deadline_now_ns();
  // Both readings may be up to a few microseconds high (deadline_clock.hpp), so a short wait can read negative.
  const std::uint64_t lag_ns = now > probe->queued_ns ? now - probe->queued_ns : 0;
  // Bucket i holds lags below 2^i us: the bit width of the lag in whole microseconds.
  std::size_t bucket = static_cast<std::size_t>(std::bit_width(lag_ns / 1000));
  if (bucket >= detail::lag_buckets) bucket = detail::lag_buckets - 1;
  self.counters_.lag_buckets_us[bucket].add();
  self.counters_.lag_sum_ns.add(lag_ns);
}

metrics::loop_snapshot io_context::metrics() const noexcept {
  if (running_here()) {  // the loop's own thread: exact counts, and the caller's own pools as fresh figures
    const_cast<io_context*>(this)->publish_counts();
    const_cast<io_context*>(this)->publish_gauges();
  }
  return tern::metrics::snapshot(*this);
}

}  // namespace tern
