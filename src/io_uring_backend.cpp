// io_uring backend.
//
// One ring per loop, created SINGLE_ISSUER|DEFER_TASKRUN (completions are processed only when the loop asks, in its
// own io_uring_enter, so they arrive in batches and never interrupt user code), falling back to
// COOP_TASKRUN|TASKRUN_FLAG and then to a plain ring on older kernels. The ring is created disabled and enabled by
// the first thread that submits, because SINGLE_ISSUER binds it to that thread and a loop is often created on one
// thread and run on another; the ring fd is registered on that thread too, which saves an fd lookup per enter.
//
// Operations get one SQE each, prepared in start() and submitted together by poll(): one io_uring_enter per loop
// turn both submits and reaps. A CQE's user_data is the io_op itself; reserved values mark the cancel requests
// (whose own completions carry no information), the wake-up poll on an eventfd, and wake-up messages.
//
// Waking a parked loop: from another io_uring loop's thread, a MSG_RING message from the poster's ring lands
// straight in the parked ring's completion queue (the parked thread then has no eventfd to read and re-arm); from
// anywhere else, and whenever the message cannot be confirmed, an eventfd write. Two cases would lose a message:
// a ring not yet enabled rejects it (-EBADFD; a loop announces that it is going to sleep before its first poll
// enables the ring), and a message the kernel could not post at once would be cancelled if the poster's thread
// exits before it is delivered. So a message is sent only to a ring known to be enabled, and the poster looks for
// its completion right after the submit: anything but an immediate success also writes the eventfd.
//
// Cancellation is by user_data (IORING_OP_ASYNC_CANCEL on the op's address), never by fd: an fd number can be reused
// as soon as it is closed, an address cannot while the op is pending. The cancelled op still delivers its own CQE
// (-ECANCELED, or its result if it had already finished), and only then is its coroutine resumed, so the kernel is
// done with the buffer by the time the awaiter looks at it.
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <ctime>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <system_error>
#include <unistd.h>

#include "backends.hpp"
#include "tern/io_context.hpp"

namespace tern::detail {
namespace {

constexpr std::uint64_t cancel_tag = 0;
constexpr std::uint64_t wake_tag = 1;
constexpr std::uint64_t message_tag = 2;  // a wake-up message received from another loop's ring
// The sender's own completion of a wake-up message: this bit plus a sequence number. No io_op address has it.
constexpr std::uint64_t sent_bit = std::uint64_t{1} << 63;

class io_uring_backend final : public backend {
 public:
  io_uring_backend(io_context& ctx, unsigned entries) : ctx_(ctx) {
    const unsigned tries[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED | IORING_SETUP_SUBMIT_ALL,
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_R_DISABLED | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        0,
    };
    int rc = -EINVAL;
    for (unsigned flags : tries) {
      io_uring_params p{};
      p.flags = flags;
      rc = io_uring_queue_init_params(entries, &ring_, &p);
      if (rc == 0) {
        disabled_ = (flags & IORING_SETUP_R_DISABLED) != 0;
        enabled_.store(!disabled_, std::memory_order_relaxed);
        break;
      }
    }
    if (rc < 0) throw std::system_error(-rc, std::system_category(), "io_uring_queue_init_params");
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) {
      int e = errno;
      io_uring_queue_exit(&ring_);
      throw std::system_error(e, std::system_category(), "eventfd");
    }
    arm_wake();
  }

  ~io_uring_backend() override {
    io_uring_queue_exit(&ring_);
    ::close(wake_fd_);
  }

  backend_kind kind() const noexcept override { return backend_kind::io_uring; }

  void attach(descriptor&) override {}
  void detach(descriptor&) noexcept override {}

  bool start(io_op& op) noexcept override {
    io_uring_sqe* sqe = get_sqe();
    if (is_file_op(op.code)) {
      prep_file_op(sqe, static_cast<file_op&>(op));
      io_uring_sqe_set_data(sqe, &op);
      ++in_flight_;
      return false;
    }
    const int fd = op.desc->fd;
    switch (op.code) {
      case op_code::recv:
        io_uring_prep_recv(sqe, fd, op.buf, op.len, 0);
        // A receive that finds the socket empty first tries it, fails, and only then arms its poll. When the
        // last receive drained the socket and a send has completed since (a request/response peer waiting for
        // the answer), arming the poll first (POLL_FIRST) skips that failed attempt: 0.3 us of a 10 us
        // loopback round trip on the raw liburing floor (10.37-10.46 -> 10.08-10.09 us over 3 x 6 rounds),
        // and sockets/pingpong on tern went from 10.38 to 10.13 us. If the data is there after all, the poll
        // finds it ready and the receive runs at once, at the cost of the poll; that is why a drained socket
        // alone is not enough: a stream's reader drains its socket all the time while its writer refills it,
        // and flagging those receives cost the 4 KiB streams 6-7%.
        if (op.desc->answer_awaited) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
        break;
      case op_code::send: io_uring_prep_send(sqe, fd, op.buf, op.len, MSG_NOSIGNAL); break;
      case op_code::accept:
        io_uring_prep_accept(sqe, fd, static_cast<sockaddr*>(op.buf), &op.addr_len, SOCK_CLOEXEC);
        break;
      case op_code::connect:
        io_uring_prep_connect(sqe, fd, static_cast<const sockaddr*>(op.buf), op.len);
        break;
      case op_code::read: io_uring_prep_read(sqe, fd, op.buf, op.len, -1); break;
      case op_code::write: io_uring_prep_write(sqe, fd, op.buf, op.len, -1); break;
      case op_code::poll_in: io_uring_prep_poll_add(sqe, fd, POLLIN); break;
      case op_code::poll_out: io_uring_prep_poll_add(sqe, fd, POLLOUT); break;
      case op_code::recvmsg:
        io_uring_prep_recvmsg(sqe, fd, static_cast<msghdr*>(op.buf), static_cast<unsigned>(op.msg_flags));
        break;
      case op_code::sendmsg:
        io_uring_prep_sendmsg(sqe, fd, static_cast<const msghdr*>(op.buf),
                              static_cast<unsigned>(op.msg_flags | MSG_NOSIGNAL));
        break;
      case op_code::splice: {
        auto& s = static_cast<splice_op&>(op);
        io_uring_prep_splice(sqe, s.fd_in, s.off_in, s.fd_out, -1, op.len, SPLICE_F_MOVE);
        break;
      }
      case op_code::sendfile: io_uring_prep_nop(sqe); break;  // epoll's; never started here
      default: io_uring_prep_nop(sqe); break;
    }
    io_uring_sqe_set_data(sqe, &op);
    ++in_flight_;
    return false;
  }

  void abandon(io_op&) noexcept override {}

  void cancel(io_op& op) noexcept override {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_cancel64(sqe, reinterpret_cast<std::uintptr_t>(&op), 0);
    io_uring_sqe_set_data64(sqe, cancel_tag);
  }

  void before_close(descriptor&) noexcept override {
    // Every pending SQE on this fd must reach the kernel (and take its file reference) before the fd number is
    // released; the cancel requests queued by close() go with them.
    submit();
  }

  void poll(std::int64_t timeout_ns) override {
    enable();
    int rc;
    if (timeout_ns == 0) {
      rc = io_uring_submit_and_get_events(&ring_);
    } else if (timeout_ns < 0) {
      // The plain submit-and-wait: one flush of the SQ tail and the enter. submit_and_wait_timeout without a
      // timeout goes through liburing's get_cqe loop (peek, decide, enter, peek again), which cost 200 more
      // user-space instructions per sockets/pingpong round trip (callgrind: 2239 -> 2039).
      rc = io_uring_submit_and_wait(&ring_, 1);
    } else {
      __kernel_timespec ts{};
      ts.tv_sec = timeout_ns / 1'000'000'000;
      ts.tv_nsec = timeout_ns % 1'000'000'000;
      io_uring_cqe* cqe = nullptr;
      rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
    }
    (void)rc;  // -ETIME and -EINTR only mean there may be nothing to reap; real CQEs are reaped either way
    reap();
  }

  void wake() noexcept override {
    io_context* poster = io_context::current();
    if (poster != nullptr && poster != &ctx_ && poster->backend() == backend_kind::io_uring &&
        enabled_.load(std::memory_order_acquire)) {
      if (static_cast<io_uring_backend&>(poster->backend_impl()).send_wake(ring_.ring_fd)) return;
    }
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }

  bool busy() const noexcept override { return in_flight_ != 0 || io_uring_sq_ready(&ring_) != 0; }

 private:
  void enable() noexcept {
    if (!disabled_) return;
    // liburing 2.3's shared library lacks io_uring_enable_rings; the register call is one line.
    ::syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
    disabled_ = false;
    enabled_.store(true, std::memory_order_release);
    io_uring_register_ring_fd(&ring_);  // optional speed-up; on failure liburing keeps using the plain fd
  }

  // Poster's side (this is the poster's ring, on its own thread): sends a wake-up message to another ring now;
  // true if the kernel has delivered it already.
  bool send_wake(int target_ring_fd) noexcept {
    const std::uint64_t tag = sent_bit | ++messages_sent_;
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_msg_ring(sqe, target_ring_fd, 0, message_tag, 0);
    io_uring_sqe_set_data64(sqe, tag);
    submit();
    // A message the kernel posts at once has completed by the time the submit returns.
    unsigned head;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      if (cqe->user_data == tag) return cqe->res >= 0;
    }
    return false;
  }

  // The SQE of a file operation; path operations (no descriptor) are relative to the current directory.
  static void prep_file_op(io_uring_sqe* sqe, file_op& op) noexcept {
    const int fd = op.desc != nullptr ? op.desc->fd : AT_FDCWD;
    switch (op.code) {
      case op_code::read_at: io_uring_prep_read(sqe, fd, op.buf, op.len, op.offset); break;
      case op_code::write_at: io_uring_prep_write(sqe, fd, op.buf, op.len, op.offset); break;
      case op_code::fsync: io_uring_prep_fsync(sqe, fd, op.flags != 0 ? IORING_FSYNC_DATASYNC : 0); break;
      case op_code::fallocate:
        io_uring_prep_fallocate(sqe, fd, op.flags, static_cast<off_t>(op.offset), static_cast<off_t>(op.length));
        break;
      case op_code::ftruncate:
        // IORING_OP_FTRUNCATE (kernel 6.9) is newer than liburing 2.3's headers: the opcode and the size in off.
        io_uring_prep_rw(ftruncate_opcode, sqe, fd, nullptr, 0, op.offset);
        break;
      case op_code::statx:
        io_uring_prep_statx(sqe, fd, op.path, op.flags, op.mode, static_cast<struct statx*>(op.buf));
        break;
      case op_code::openat:
        io_uring_prep_openat(sqe, AT_FDCWD, op.path, op.flags, op.mode);
        break;
      case op_code::renameat: io_uring_prep_renameat(sqe, AT_FDCWD, op.path, AT_FDCWD, op.path2, 0); break;
      case op_code::unlinkat: io_uring_prep_unlinkat(sqe, AT_FDCWD, op.path, op.flags); break;
      case op_code::mkdirat: io_uring_prep_mkdirat(sqe, AT_FDCWD, op.path, op.mode); break;
      default: io_uring_prep_nop(sqe); break;
    }
  }
  static constexpr int ftruncate_opcode = 55;

  void submit() noexcept {
    enable();
    io_uring_submit(&ring_);
  }

  io_uring_sqe* get_sqe() noexcept {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (sqe == nullptr) {  // queue full: flush it to the kernel and take a fresh entry
      submit();
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }

  void arm_wake() noexcept {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_poll_multishot(sqe, wake_fd_, POLLIN);
    io_uring_sqe_set_data64(sqe, wake_tag);
  }

  void reap() noexcept {
    unsigned head;
    unsigned seen = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      const std::uint64_t ud = cqe->user_data;
      if (ud == cancel_tag || ud == message_tag || (ud & sent_bit) != 0) continue;
      if (ud == wake_tag) {
        std::uint64_t value;
        [[maybe_unused]] ssize_t n = ::read(wake_fd_, &value, sizeof value);
        if ((cqe->flags & IORING_CQE_F_MORE) == 0) arm_wake();
        continue;
      }
      auto* op = reinterpret_cast<io_op*>(static_cast<std::uintptr_t>(ud));
      op->res = cqe->res;
      if (op->code == op_code::recv) {
        // The kernel reports whether data was left in the socket (SOCK_NONEMPTY, from TCP's receive queue).
        op->desc->recv_drained = cqe->res >= 0 && (cqe->flags & IORING_CQE_F_SOCK_NONEMPTY) == 0;
        op->desc->answer_awaited = false;
      } else if (op->code == op_code::send && op->desc->recv_drained) {
        op->desc->answer_awaited = true;
      }
      --in_flight_;
      ctx_.complete(*op);
    }
    io_uring_cq_advance(&ring_, seen);
  }

  io_context& ctx_;
  io_uring ring_{};
  int wake_fd_ = -1;
  unsigned in_flight_ = 0;
  bool disabled_ = false;
  std::atomic<bool> enabled_{false};  // the ring accepts messages (read by other loops' threads)
  std::uint64_t messages_sent_ = 0;
};

}  // namespace

std::unique_ptr<backend> make_io_uring_backend(io_context& ctx, unsigned entries) {
  return std::make_unique<io_uring_backend>(ctx, entries);
}

}  // namespace tern::detail
