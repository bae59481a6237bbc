// io_uring backend, part of io_uring_backend.cpp: setting up the ring, its registered tables, and tearing down.
//
// One ring per loop, created SINGLE_ISSUER|DEFER_TASKRUN|TASKRUN_FLAG (completions are processed only when the loop
// asks, in its own io_uring_enter, so they arrive in batches and never interrupt user code; the flag tells the loop
// when an enter would find any, so a poll with nothing to submit need not enter), falling back to the same without
// the flag, to COOP_TASKRUN|TASKRUN_FLAG and then to a plain ring on older kernels. The ring is created disabled and enabled by
// the first thread that submits, because SINGLE_ISSUER binds it to that thread and a loop is often created on one
// thread and run on another; the ring fd is registered on that thread too, which saves an fd lookup per enter.
//
// Registered files and buffers: the ring's two tables are registered sparse, once, the first time a file or a
// buffer set asks for a slot, and the backend hands out slots from them (files one at a time from a free list,
// buffer sets as runs of consecutive slots). Sparse tables let any number of files and buffer sets come and go
// on one ring with one update call each, where registering a whole table would replace every other user's
// entries. A full table is tern::error::table_full; the file or memory then works unregistered. Any descriptor may
// take a slot (basic_descriptor::register_descriptor): sockets name it in every operation, multishot ones too;
// files in their reads, writes and syncs (statx refuses a registered file).
#include "io_uring/backend.hpp"

namespace tern::detail {

io_uring_backend::io_uring_backend(io_context& ctx, const io_context_options& opts)
    : ctx_(ctx),
      file_slots_(opts.registered_file_slots),
      buffer_slots_(opts.registered_buffer_slots),
      accept_queue_(opts.accept_queue),
      receive_queue_(std::clamp(opts.receive_queue, 1u, 255u)),
      zero_copy_threshold_(opts.zero_copy_send_threshold) {
  const unsigned entries = opts.ring_entries;
  // TASKRUN_FLAG: the kernel sets IORING_SQ_TASKRUN in the SQ ring's flags when completions wait for this loop's
  // next enter, so a poll that has nothing to submit reads that word instead of entering (poll() below).
  constexpr unsigned defer = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED |
                             IORING_SETUP_SUBMIT_ALL;
  const unsigned tries[] = {
      defer | IORING_SETUP_TASKRUN_FLAG,
      defer,
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_R_DISABLED | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
      IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
      0,
  };
  // SQPOLL: the kernel's poller thread is the ring's submitter, which rules out DEFER_TASKRUN (it runs task
  // work in the waiting task) and the disabled start; completions still come to this loop's waits.
  const unsigned sqpoll_tries[] = {
      IORING_SETUP_SQPOLL | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
      IORING_SETUP_SQPOLL,
  };
  int rc = -EINVAL;
  // Without defer_taskrun, the tries from the first ring that does not defer.
  const std::span<const unsigned> chosen = opts.sqpoll          ? std::span<const unsigned>(sqpoll_tries)
                                           : opts.defer_taskrun ? std::span<const unsigned>(tries)
                                                                : std::span<const unsigned>(tries).subspan(2);
  for (unsigned flags : chosen) {
    io_uring_params p{};
    p.flags = flags;
    if (opts.sqpoll) p.sq_thread_idle = static_cast<unsigned>(std::max<std::int64_t>(1, opts.sqpoll_idle.count()));
    rc = io_uring_queue_init_params(entries, &ring_, &p);
    if (rc == 0) {
      bundles_ = opts.receive_bundles && (p.features & feat_recvsend_bundle) != 0;
      ext_arg_ = (p.features & IORING_FEAT_EXT_ARG) != 0;
      defer_taskrun_ = (flags & IORING_SETUP_DEFER_TASKRUN) != 0;
      // Only with DEFER_TASKRUN (and SUBMIT_ALL): there every completion waits for this thread's enter, which is
      // what the flag's word reports, and the kernel takes every SQE up to the tail (submit_queued()).
      taskrun_flag_ = (flags & IORING_SETUP_TASKRUN_FLAG) != 0 && defer_taskrun_;
      disabled_ = (flags & IORING_SETUP_R_DISABLED) != 0;
      enabled_.store(!disabled_, std::memory_order_relaxed);
      break;
    }
  }
  if (rc < 0) {
    throw std::system_error(-rc, std::system_category(),
                            opts.sqpoll ? "io_uring_queue_init_params with IORING_SETUP_SQPOLL"
                                        : "io_uring_queue_init_params");
  }
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    int e = errno;
    io_uring_queue_exit(&ring_);
    throw std::system_error(e, std::system_category(), "eventfd");
  }
  arm_wake();
}

io_uring_backend::~io_uring_backend() {
  io_uring_queue_exit(&ring_);
  ::close(wake_fd_);
  if (pool_ring_ != nullptr) {
    pool_->forget_kernel_ring();
    ::munmap(pool_ring_, pool_ring_bytes_);
  }
}

// Teardown: one ASYNC_CANCEL matching every request of the ring (IORING_ASYNC_CANCEL_ANY, 5.19; an older
// kernel answers EINVAL, and what is in flight is then only waited for), then reaps until nothing is in flight
// or the deadline passes. The reaped operations complete as always (queued, never run, by then). With
// quiescing_ set nothing is started or re-armed any more: a multishot that ends stays ended, a refused zero-copy
// send is not made again, the wake-up poll is not re-armed (the loop never runs again). Operations not yet
// submitted when the ring was never enabled never reached the kernel.
std::size_t io_uring_backend::quiesce(std::uint64_t deadline_ns) noexcept {
  quiescing_ = true;
  if (in_flight_ == 0 || disabled_) return 0;
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
  io_uring_sqe_set_data64(sqe, cancel_tag);
  while (in_flight_ != 0) {
    const std::uint64_t now = io_context::now_ns();
    if (now >= deadline_ns) break;
    const std::uint64_t left = deadline_ns - now;
    __kernel_timespec ts{};
    ts.tv_sec = static_cast<long long>(left / 1'000'000'000);
    ts.tv_nsec = static_cast<long long>(left % 1'000'000'000);
    io_uring_cqe* cqe = nullptr;
    const int rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
    reap();
    if (rc < 0 && !transient_enter_error(rc)) break;  // EEXIST: not the ring's thread
  }
  return in_flight_;
}

void io_uring_backend::before_close(descriptor&) noexcept {
  // Every pending SQE on this fd must reach the kernel (and take its file reference) before the fd number is
  // released; the cancel requests queued by close() go with them.
  submit();
}

std::error_code io_uring_backend::register_file(descriptor& d) noexcept {
  if (d.fixed_slot >= 0) return {};
  if (!files_made_) {
    if (std::error_code ec = make_file_table()) return ec;
  }
  if (free_files_.empty()) return make_error_code(error::table_full);
  const std::uint32_t slot = free_files_.back();
  const int rc = io_uring_register_files_update(&ring_, slot, &d.fd, 1);
  if (rc < 0) return register_error(rc);
  free_files_.pop_back();
  d.fixed_slot = static_cast<std::int32_t>(slot);
  return {};
}

void io_uring_backend::unregister_file(descriptor& d) noexcept {
  if (d.fixed_slot < 0) return;
  // Emptying the slot drops the ring's reference to the file. If the kernel refuses (a thread other than the
  // ring's issuer closes the file while the loop is not running), the slot keeps its file until it is reused
  // or the ring is destroyed; it is free for tern either way.
  const int empty = -1;
  (void)io_uring_register_files_update(&ring_, static_cast<unsigned>(d.fixed_slot), &empty, 1);
  free_files_.push_back(static_cast<std::uint32_t>(d.fixed_slot));  // capacity reserved with the table
  d.fixed_slot = -1;
}

std::error_code io_uring_backend::register_buffers(const iovec* buffers, unsigned n, std::uint32_t& first) noexcept {
  first = file_op::no_buffer_index;
  if (!buffers_made_) {
    if (std::error_code ec = make_buffer_table()) return ec;
  }
  // First fit of n consecutive free slots.
  std::uint32_t run = 0;
  std::uint32_t start = 0;
  for (std::uint32_t i = 0; i < buffer_used_.size() && run < n; ++i) {
    if (buffer_used_[i]) {
      run = 0;
      start = i + 1;
    } else {
      ++run;
    }
  }
  if (run < n || n == 0) return make_error_code(error::table_full);
  const int rc = io_uring_register_buffers_update_tag(&ring_, start, buffers, nullptr, n);
  if (rc < 0) return register_error(rc);
  if (static_cast<unsigned>(rc) < n) {  // not expected: the kernel stops only at an error
    unregister_buffers(start, static_cast<unsigned>(rc));
    return std::make_error_code(std::errc::io_error);
  }
  std::fill_n(buffer_used_.begin() + start, n, true);
  first = start;
  return {};
}

void io_uring_backend::unregister_buffers(std::uint32_t first, unsigned n) noexcept {
  if (first == file_op::no_buffer_index) return;
  // As for files: a refused update leaves the pages pinned until the slots are reused or the ring goes.
  iovec empty[64] = {};
  for (unsigned done = 0; done < n;) {
    const unsigned step = std::min(n - done, 64u);
    (void)io_uring_register_buffers_update_tag(&ring_, first + done, empty, nullptr, step);
    done += step;
  }
  std::fill_n(buffer_used_.begin() + first, n, false);
}

// The sparse file table, of file_slots_ entries (capped at the fd limit, which the kernel enforces).
std::error_code io_uring_backend::make_file_table() noexcept {
  unsigned n = file_slots_;
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < n) n = static_cast<unsigned>(lim.rlim_cur);
  if (n == 0) return make_error_code(error::table_full);
  try {
    free_files_.reserve(n);
  } catch (...) {
    return std::make_error_code(std::errc::not_enough_memory);
  }
  const int rc = io_uring_register_files_sparse(&ring_, n);
  if (rc < 0) return register_error(rc);
  for (unsigned i = n; i-- > 0;) free_files_.push_back(i);  // slot 0 handed out first
  files_made_ = true;
  return {};
}

std::error_code io_uring_backend::make_buffer_table() noexcept {
  const unsigned n = std::min(buffer_slots_, max_buffer_slots);
  if (n == 0) return make_error_code(error::table_full);
  try {
    buffer_used_.assign(n, false);
  } catch (...) {
    return std::make_error_code(std::errc::not_enough_memory);
  }
  const int rc = io_uring_register_buffers_sparse(&ring_, n);
  if (rc < 0) {
    buffer_used_.clear();
    return register_error(rc);
  }
  buffers_made_ = true;
  return {};
}

// A SINGLE_ISSUER ring takes registrations only from the thread that runs it (EEXIST from any other).
std::error_code io_uring_backend::register_error(int rc) noexcept {
  if (rc == -EEXIST) return make_error_code(error::wrong_loop);
  return {-rc, std::system_category()};
}

// A lasting failure ends run() with it, rather than spin on it.
[[noreturn]] void io_uring_backend::fail() {
  const int e = -std::exchange(failure_, 0);
  throw std::system_error(e, std::system_category(), "tern: io_uring_enter");
}

void io_uring_backend::arm_wake() noexcept {
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_poll_multishot(sqe, wake_fd_, POLLIN);
  io_uring_sqe_set_data64(sqe, wake_tag);
}

std::unique_ptr<backend> make_io_uring_backend(io_context& ctx, const io_context_options& opts) {
  return std::make_unique<io_uring_backend>(ctx, opts);
}

}  // namespace tern::detail
