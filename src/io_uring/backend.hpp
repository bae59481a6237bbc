// The io_uring backend's class and the constants of its protocol with the kernel, for the parts that implement it
// (src/io_uring/*.ipp). Only io_uring_backend.cpp includes this header, and with it every part: the backend is one
// translation unit (the note there says why), so the class lives in an unnamed namespace as it did in one file.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <optional>
#include <sys/mman.h>
#include <utility>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <liburing.h>
#include <span>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <system_error>
#include <unistd.h>
#include <vector>

#include "backends.hpp"
#include "tern/error.hpp"
#include "tern/io_context.hpp"

namespace tern::detail {
namespace {

constexpr std::uint64_t cancel_tag = 0;
constexpr std::uint64_t wake_tag = 1;
constexpr std::uint64_t message_tag = 2;  // a wake-up message received from another loop's ring
// The sender's own completion of a wake-up message: this bit plus a sequence number. No io_op address has it.
constexpr std::uint64_t sent_bit = std::uint64_t{1} << 63;
// Newer than liburing 2.3's header: a bundled send or receive (sqe->ioprio), and the kernel's feature bit for it.
constexpr unsigned recvsend_bundle = 1U << 4;
constexpr unsigned feat_recvsend_bundle = 1U << 14;
// A descriptor's multishot receive or accept: the descriptor's address with one of these low bits (addresses of
// descriptors and io_ops are 8-byte aligned; the reserved values above are smaller than any address).
constexpr std::uint64_t recv_multishot_bit = 1;
constexpr std::uint64_t accept_multishot_bit = 2;
constexpr std::uint64_t multishot_bits = recv_multishot_bit | accept_multishot_bit;
std::uint64_t multishot_tag(const descriptor& d, std::uint64_t bit) noexcept {
  return reinterpret_cast<std::uintptr_t>(&d) | bit;
}

// Newer than liburing 2.3's headers (kernel 6.2): a SEND_ZC flag (in sqe->ioprio) asking the notification to report
// whether the kernel copied the data after all, and the bit of the notification's res that says it did.
#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

// Newer than liburing 2.3's headers (kernel 6.8): IORING_REGISTER_PBUF_STATUS, which reads the kernel's head of a
// provided-buffer ring (the receive pool's ring is moved to a larger one with it), and its argument.
constexpr unsigned register_pbuf_status = 26;
struct pbuf_status {
  std::uint32_t buf_group;  // in
  std::uint32_t head;       // out
  std::uint32_t resv[8];
};

// The state of a zero-copy send, in io_op::aux beside send_plain_only: submitted as SEND_ZC; its result CQE has
// arrived (in op.res); that CQE announced a notification; the notification has arrived.
constexpr std::uint8_t zc_sent = 1;
constexpr std::uint8_t zc_result = 2;
constexpr std::uint8_t zc_more = 4;
constexpr std::uint8_t zc_notified = 8;

class io_uring_backend final : public backend {
 public:
  io_uring_backend(io_context& ctx, const io_context_options& opts);

  ~io_uring_backend() override;

  backend_kind kind() const noexcept override { return backend_kind::io_uring; }

  void attach(descriptor&) override {}
  void detach(descriptor&) noexcept override {}

  bool start(io_op& op) noexcept override;

  // A registered descriptor (basic_descriptor::register_descriptor) is named by its slot in the ring's table of
  // files: the kernel then takes no reference on the file and looks up no fd for the operation. After the prep,
  // which clears the flags. Every socket operation takes a registered file; a nop ignores it.
  static void name_registered(io_uring_sqe* sqe, const descriptor& d) noexcept {
    if (d.fixed_slot < 0) return;
    sqe->fd = d.fixed_slot;
    sqe->flags |= IOSQE_FIXED_FILE;
  }

  void abandon(io_op& op) noexcept override;

  void attach_pool(receive_pool& pool) noexcept override;

  bool register_pool_ring(std::uint32_t entries) noexcept;

  bool register_ring_memory(void* mem, std::uint32_t entries) noexcept;

  void move_pool_ring() noexcept;

  bool grow_pool() noexcept;

  void cancel(io_op& op) noexcept override;

  void cancel_multishot(descriptor& d) noexcept override;

  std::size_t quiesce(std::uint64_t deadline_ns) noexcept override;

  void before_close(descriptor&) noexcept override;

  void poll(std::int64_t timeout_ns) override;

  // What io_uring_enter(2) may answer that only delays the loop: a signal (EINTR) or the wait's own deadline
  // (ETIME) ended the wait; the kernel was short of memory for requests (EAGAIN) or the completion queue
  // overflowed (EBUSY), and what was not submitted stays queued while the reap that follows makes room, so the
  // next turn enters again. Anything else (a ring that refuses this thread, a ring being torn down, lost
  // completions) would answer the same at every turn.
  static bool transient_enter_error(int rc) noexcept {
    return rc == -EINTR || rc == -ETIME || rc == -EAGAIN || rc == -EBUSY;
  }

  [[noreturn]] void fail();

  int enter(std::int64_t timeout_ns) noexcept;

  int submit_and_wait(std::int64_t timeout_ns) noexcept;

  void wake() noexcept override;

  bool busy() const noexcept override { return in_flight_ != 0 || io_uring_sq_ready(&ring_) != 0; }

  // With TASKRUN_FLAG the kernel sets IORING_SQ_TASKRUN when it queues work that only this thread's enter will run
  // (DEFER_TASKRUN posts every completion that way, MSG_RING wake-ups included) and clears it when the enter runs
  // it; IORING_SQ_CQ_OVERFLOW says CQEs wait beyond a full CQ. A stale read of the word only delays the enter to
  // the next poll: a blocking wait always enters, and the kernel runs pending work before it sleeps.
  bool nothing_for_the_kernel() const noexcept {
    return io_uring_sq_ready(&ring_) == 0 &&
           (IO_URING_READ_ONCE(*ring_.sq.kflags) & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) == 0;
  }

  std::error_code register_file(descriptor& d) noexcept override;

  void unregister_file(descriptor& d) noexcept override;

  std::error_code register_buffers(const iovec* buffers, unsigned n, std::uint32_t& first) noexcept override;

  void unregister_buffers(std::uint32_t first, unsigned n) noexcept override;

 private:
  std::error_code make_file_table() noexcept;

  std::error_code make_buffer_table() noexcept;

  static std::error_code register_error(int rc) noexcept;
  static constexpr unsigned max_buffer_slots = 16384;  // the kernel's limit (IORING_MAX_REG_BUFFERS)

  void enable() noexcept {
    if (!disabled_) return;
    // liburing 2.3's shared library lacks io_uring_enable_rings; the register call is one line.
    ::syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
    disabled_ = false;
    enabled_.store(true, std::memory_order_release);
    // Optional speed-up; on failure liburing keeps using the plain fd.
    ring_fd_registered_ = io_uring_register_ring_fd(&ring_) == 1;
  }

  bool send_wake(int target_ring_fd) noexcept;

  // ---- receive() ----

  // A receive: a buffer the multishot queued, else how the stream ended, else wait (arming the multishot).
  bool start_receive(receive_op& op) noexcept {
    descriptor& d = *op.desc;
    receive_pool& pool = ctx_.receive_pool();
    if (!d.rx_queue.empty()) {
      std::uint32_t len;
      op.set_buffer(pool.pop(d.rx_queue, len));
      op.res = static_cast<int>(len);
      if (d.rx_queued != 0) --d.rx_queued;
      return true;
    }
    if (d.rx_end != descriptor::rx_open) {
      op.res = d.rx_end;
      return true;
    }
    op.set_under_kernel(false);
    if (!d.rx_armed) {
      if (const int e = arm_receive(d, op)) {
        op.res = e;
        return true;
      }
    }
    if (!op.under_kernel()) d.rx_waiter = &op;
    return false;
  }

  int arm_receive(descriptor& d, receive_op& waiter) noexcept;

  // A receive submitted as a plain RECV has finished (op.res set).
  void plain_receive_done(receive_op& op) noexcept {
    op.set_under_kernel(false);
    if (op.res <= 0) {
      pool_->recycle(op.buffer_id());
      op.set_buffer(receive_pool::none);
      if (op.res != -ECANCELED && op.desc->fd >= 0) op.desc->rx_end = op.res;  // eof or a lasting error
    }
  }

  // len bytes in buffer id for d: to the receive waiting for them, else onto d's queue, whose bound stops the
  // multishot (re-armed by the receive that finds the queue empty).
  void deliver(descriptor& d, std::uint32_t id, std::uint32_t len) noexcept {
    if (io_op* w = std::exchange(d.rx_waiter, nullptr)) {
      auto& r = static_cast<receive_op&>(*w);
      r.res = static_cast<int>(len);
      r.set_buffer(id);
      ctx_.complete(r);
    } else {
      pool_->push(d.rx_queue, id, len);
      if (d.rx_queued != 255) ++d.rx_queued;
      if (d.rx_queued >= receive_queue_) cancel_multishot(d);
    }
  }

  // A CQE of d's multishot receive.
  void multishot_arrived(descriptor& d, int res, unsigned flags) noexcept {
    receive_pool& pool = *pool_;
    const bool open = !d.closing;
    if ((flags & IORING_CQE_F_BUFFER) != 0) {
      auto id = static_cast<std::uint32_t>(flags >> IORING_CQE_BUFFER_SHIFT);
      if (!bundles_) {
        pool.kernel_took();
        if (res > 0 && open) {
          deliver(d, id, static_cast<std::uint32_t>(res));
        } else {
          pool.recycle(id);
        }
      } else if (res > 0) {
        // A bundle: the buffers from id on in the ring's order, each filled to its entry's length but the last
        // (the first entry may have been cut short; the others are whole). Without bytes it took none (the
        // kernel commits a bundle's buffers by the bytes it put in them), whatever the flag says.
        const std::size_t size = pool.buffer_size();
        auto left = static_cast<std::size_t>(res);
        const std::size_t first = pool.ring_length(id);
        const auto n = static_cast<std::uint32_t>(left <= first ? 1 : 1 + (left - first + size - 1) / size);
        pool.kernel_took(n);
        if (n > 1) ctx_.counters().receive_bundles.add();
        for (std::uint32_t i = 0; i < n && id != receive_pool::none; ++i) {
          const std::uint32_t next = pool.ring_next(id);  // before deliver() links id into a socket queue
          const std::size_t len = std::min(left, i == 0 ? first : size);
          left -= len;
          if (open) {
            deliver(d, id, static_cast<std::uint32_t>(len));
          } else {
            pool.recycle(id);
          }
          id = next;
        }
      }
    } else if (res == -ENOBUFS) {
      // The ring ran dry: every buffer is queued on some socket or leased. Grow the pool; the re-arm below (or
      // the next receive) then finds buffers, or falls back to an overflow buffer at the maximum.
      ctx_.counters().receive_pool_dry.add();
      (void)pool.grow();
    } else if (res != -ECANCELED && open) {
      d.rx_end = res;  // 0: eof; else an error, reported after the queued buffers
    }
    if ((flags & IORING_CQE_F_MORE) != 0) return;
    if (bundles_ && res > 0 && pool.in_ring() == 0) {
      // A bundled receive that emptied the ring ends here, with its bytes, instead of with ENOBUFS next time.
      ctx_.counters().receive_pool_dry.add();
      (void)pool.grow();
    }
    ctx_.counters().ops_completed[static_cast<std::size_t>(op_code::recv_multishot)].add();
    --in_flight_;
    ctx_.end_multishot(&d);  // may recycle d if it was closed
    if (!open || quiescing_) return;
    io_op* w = d.rx_waiter;
    if (w == nullptr) return;
    auto& r = static_cast<receive_op&>(*w);
    if (d.rx_end == descriptor::rx_open) {
      const int e = arm_receive(d, r);
      if (e == 0) {
        if (r.under_kernel()) d.rx_waiter = nullptr;  // now an operation of its own in the ring
        return;
      }
      r.res = e;
    } else {
      r.res = d.rx_end;
    }
    d.rx_waiter = nullptr;
    ctx_.complete(r);
  }

  void prep_on_buffer(io_uring_sqe* sqe, int fd, buffer_op& op) noexcept;

  // ---- zero-copy sends ----

  void prep_send(io_uring_sqe* sqe, buffer_op& op) noexcept;

  void zero_copy_arrived(io_op& op, int res, unsigned flags) noexcept;

  // ---- accept() ----

  bool start_accept(buffer_op& op) noexcept;

  bool arm_accept(descriptor& d) noexcept;

  void submit_plain_accept(buffer_op& op) noexcept;

  static io_op* accept_waiter(descriptor& d) noexcept;

  void accept_arrived(descriptor& d, int res, unsigned flags) noexcept;

  static bool batch_now(buffer_op& op) noexcept;

  static void prep_file_op(io_uring_sqe* sqe, file_op& op) noexcept;
  static constexpr int ftruncate_opcode = 55;

  // Submits what is queued; returns the enter's result (0 when there was nothing to submit). A lasting failure is
  // kept for the loop's next poll, which throws it: the callers (a flush between handlers, a close) cannot.
  int submit() noexcept {
    enable();
    const int rc = submit_queued();
    if (rc > 0) ctx_.counters().syscalls.add();  // with nothing to submit, no enter is made
    if (rc < 0 && !transient_enter_error(rc) && failure_ == 0) failure_ = rc;
    ctx_.note_submitted();
    return rc;
  }

  // Submits the queued SQEs and nothing else. liburing's io_uring_submit adds IORING_ENTER_GETEVENTS whenever the
  // kernel has set IORING_SQ_TASKRUN, and under DEFER_TASKRUN that enter would run the completions waiting for
  // this loop in the middle of a turn (a close, an early flush between handlers): a receive would take the bytes
  // off its socket while the loop still counts the connection idle (http::server::stop() looks at FIONREAD). The
  // loop's poll() is the one place that runs them. So with the flag, the SQ tail is published and the enter made
  // here, as liburing's own flush does it from the same public fields of the ring (no SQPOLL here); what the
  // kernel has not consumed yet is submitted, whether queued now or left by an earlier enter.
  int submit_queued() noexcept {
    if (!taskrun_flag_) return io_uring_submit(&ring_);
    io_uring_sq& sq = ring_.sq;
    const unsigned tail = sq.sqe_tail;
    if (sq.sqe_head != tail) {
      sq.sqe_head = tail;
      io_uring_smp_store_release(sq.ktail, tail);
    }
    const unsigned queued = tail - io_uring_smp_load_acquire(sq.khead);
    if (queued == 0) return 0;
    return io_uring_enter(static_cast<unsigned>(ring_.enter_ring_fd), queued, 0,
                          ring_fd_registered_ ? IORING_ENTER_REGISTERED_RING : 0u, nullptr);
  }

  void flush() noexcept override { submit(); }

  io_uring_sqe* get_sqe() noexcept {
    ctx_.note_unsubmitted();
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (sqe == nullptr) {  // queue full: flush it to the kernel and take a fresh entry
      const int rc = submit();
      sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr && rc < 0 && !transient_enter_error(rc)) {
        // Nothing can be queued, and the caller cannot fail: stop with the reason rather than spin.
        std::fprintf(stderr, "tern: io_uring_enter failed with the submission queue full: %s\n", std::strerror(-rc));
        std::abort();
      }
    }
    return sqe;
  }

  void arm_wake() noexcept;

  void reap() noexcept;

  io_context& ctx_;
  io_uring ring_{};
  int wake_fd_ = -1;
  unsigned in_flight_ = 0;
  bool disabled_ = false;
  std::atomic<bool> enabled_{false};  // the ring accepts messages (read by other loops' threads)
  std::uint64_t messages_sent_ = 0;
  unsigned file_slots_;
  unsigned buffer_slots_;
  bool files_made_ = false;
  bool buffers_made_ = false;
  std::vector<std::uint32_t> free_files_;  // free slots of the file table, the next one at the back
  std::vector<bool> buffer_used_;          // the buffer table's slots in use
  // The receive pool's provided-buffer ring (its entries; the buffers are the pool's).
  static constexpr std::uint16_t pool_group = 0;
  receive_pool* pool_ = nullptr;
  void* pool_ring_ = nullptr;
  std::size_t pool_ring_bytes_ = 0;
  bool defer_taskrun_ = false;  // the ring was made with DEFER_TASKRUN
  bool taskrun_flag_ = false;   // ... and with TASKRUN_FLAG: the kernel flags the work waiting for our enter
  bool ext_arg_ = false;       // the kernel takes a wait's timeout in the enter's argument (IORING_FEAT_EXT_ARG)
  bool ring_fd_registered_ = false;  // ring_.enter_ring_fd is the registered index (IORING_ENTER_REGISTERED_RING)
  bool ring_movable_ = false;   // the pool's ring is sized to the pool and moved as it grows (attach_pool)
  // Multishot accept: the bound of a listener's queue (0: off); whether the kernel has it (until a first EINVAL),
  // and whether one has delivered a socket on this ring (after which EINVAL is a listener's own error).
  unsigned accept_queue_;
  unsigned receive_queue_;  // the bound of a socket's queue of received buffers (io_context_options::receive_queue)
  bool multishot_accept_ = true;
  int failure_ = 0;  // a lasting io_uring_enter failure (-errno) seen outside poll(), for poll() to throw
  bool quiescing_ = false;  // teardown has begun (quiesce): nothing is started or re-armed
  bool multishot_accept_seen_ = false;
  // Zero-copy sends: the threshold (0: off); whether notifications report copies (until a kernel without the
  // report refuses it), and whether a zero-copy send has succeeded on this ring (after which EINVAL is a socket's
  // own refusal).
  std::size_t zero_copy_threshold_;
  bool report_usage_ = true;
  bool zero_copy_seen_ = false;
  // Bundled multishot receives: asked for (io_context_options::receive_bundles), and the kernel has them.
  bool bundles_ = false;
};

}  // namespace
}  // namespace tern::detail
