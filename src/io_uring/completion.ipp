// io_uring backend, part of io_uring_backend.cpp: completion dispatch. poll() is the loop's turn: one io_uring_enter
// submits what is queued and waits, then reap() hands each CQE to its owner by its user_data: a reserved tag (cancel
// requests, the wake-up poll, wake-up messages), a descriptor's multishot request (multishot.ipp), or the io_op itself,
// which completes (a zero-copy send's result and notification, here too, complete it together; submission.ipp describes
// them).
#include "io_uring/backend.hpp"

namespace tern::detail {

void io_uring_backend::poll(std::int64_t timeout_ns) {
  enable();
  // Nothing to submit and no completion waiting in the kernel: what the CQ holds is all an enter would find. A
  // busy loop polls every turn and a spinning one every round; each would be a system call.
  int rc = 0;
  if (timeout_ns != 0 || !taskrun_flag_ || !nothing_for_the_kernel()) rc = enter(timeout_ns);
  reap();
  if (ring_movable_ && pool_->ring_too_small()) move_pool_ring();
  if (rc < 0 && !transient_enter_error(rc)) failure_ = rc;
  if (failure_ != 0) fail();
}

// poll()'s io_uring_enter: submits what is queued and waits up to timeout_ns (0: not at all, < 0: for ever).
int io_uring_backend::enter(std::int64_t timeout_ns) noexcept {
  int rc;
  if (timeout_ns != 0 && taskrun_flag_ && ext_arg_) {
    rc = submit_and_wait(timeout_ns);
  } else if (timeout_ns == 0) {
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
  ctx_.note_submitted();
  ctx_.counters().kernel_waits.add();
  ctx_.counters().syscalls.add();
  return rc;
}

// A blocking enter made here rather than through liburing, on a ring that defers its task work (taskrun_flag_,
// so no SQPOLL thread to wake) and takes the wait's timeout as the enter's argument (EXT_ARG): the SQ tail
// published as submit_queued() does it, then one io_uring_enter that submits and waits for a completion, or until
// the timeout. liburing's submit_and_wait_timeout goes through its get_cqe loop (it peeks at the CQ before and
// after the enter, and decides the flags anew each time) and cost 135 user-space instructions per wait; reap()
// reads the CQ afterwards anyway. A CQE already in the CQ ends the wait at once, in the kernel, as it did there.
int io_uring_backend::submit_and_wait(std::int64_t timeout_ns) noexcept {
  io_uring_sq& sq = ring_.sq;
  const unsigned tail = sq.sqe_tail;
  if (sq.sqe_head != tail) {
    sq.sqe_head = tail;
    io_uring_smp_store_release(sq.ktail, tail);
  }
  const unsigned queued = tail - io_uring_smp_load_acquire(sq.khead);
  unsigned flags = IORING_ENTER_GETEVENTS | (ring_fd_registered_ ? IORING_ENTER_REGISTERED_RING : 0u);
  const auto fd = static_cast<unsigned>(ring_.enter_ring_fd);
  if (timeout_ns < 0) return io_uring_enter(fd, queued, 1, flags, nullptr);
  __kernel_timespec ts{};
  ts.tv_sec = timeout_ns / 1'000'000'000;
  ts.tv_nsec = timeout_ns % 1'000'000'000;
  io_uring_getevents_arg arg{};
  arg.sigmask_sz = _NSIG / 8;
  arg.ts = reinterpret_cast<std::uintptr_t>(&ts);
  flags |= IORING_ENTER_EXT_ARG;
  return io_uring_enter2(fd, queued, 1, flags, reinterpret_cast<sigset_t*>(&arg), sizeof arg);
}

void io_uring_backend::reap() noexcept {
  unsigned head;
  unsigned seen = 0;
  io_uring_cqe* cqe;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    ++seen;
    const std::uint64_t ud = cqe->user_data;
    if (ud == message_tag) ctx_.counters().wakeups_received.add();
    if (ud == cancel_tag || ud == message_tag || (ud & sent_bit) != 0) continue;
    if (ud == wake_tag) {
      std::uint64_t value;
      [[maybe_unused]] ssize_t n = ::read(wake_fd_, &value, sizeof value);
      ctx_.counters().wakeups_received.add();
      ctx_.counters().syscalls.add();
      if ((cqe->flags & IORING_CQE_F_MORE) == 0 && !quiescing_) arm_wake();
      continue;
    }
    if ((ud & multishot_bits) != 0) {
      auto* d = reinterpret_cast<descriptor*>(static_cast<std::uintptr_t>(ud & ~multishot_bits));
      if ((ud & accept_multishot_bit) != 0) {
        accept_arrived(*d, cqe->res, cqe->flags);
      } else {
        multishot_arrived(*d, cqe->res, cqe->flags);
      }
      continue;
    }
    auto* op = reinterpret_cast<io_op*>(static_cast<std::uintptr_t>(ud));
    if (op->code == op_code::send && (op->aux & zc_sent) != 0) {
      zero_copy_arrived(*op, cqe->res, cqe->flags);
      continue;
    }
    op->res = cqe->res;
    if (op->code == op_code::receive) {
      plain_receive_done(static_cast<receive_op&>(*op));
    } else if (op->code == op_code::recv) {
      // The kernel reports whether data was left in the socket (SOCK_NONEMPTY, from TCP's receive queue).
      op->desc->recv_drained = cqe->res >= 0 && (cqe->flags & IORING_CQE_F_SOCK_NONEMPTY) == 0;
      op->desc->answer_awaited = false;
    } else if (op->code == op_code::send && op->desc->recv_drained) {
      op->desc->answer_awaited = true;
    } else if ((op->code == op_code::recvmmsg || op->code == op_code::sendmmsg) && cqe->res >= 0) {
      // The first datagram of a batch went through the ring: its length, and a count of one.
      static_cast<mmsghdr*>(buffer_of(*op).buf)->msg_len = static_cast<unsigned>(cqe->res);
      op->res = 1;
    }
    --in_flight_;
    ctx_.complete(*op);
  }
  io_uring_cq_advance(&ring_, seen);
}

// A CQE of a zero-copy send: its result or its notification.
void io_uring_backend::zero_copy_arrived(io_op& op, int res, unsigned flags) noexcept {
  if ((flags & IORING_CQE_F_NOTIF) != 0) {
    if (report_usage_ && (static_cast<unsigned>(res) & IORING_NOTIF_USAGE_ZC_COPIED) != 0) {
      ctx_.counters().zero_copy_copied.add();
    }
    op.aux |= zc_notified;
  } else {
    op.aux |= zc_result;
    if ((flags & IORING_CQE_F_MORE) != 0) op.aux |= zc_more;
    op.res = res;
  }
  // The kernel posts the result first; should the notification ever come first, the op waits for the result.
  if ((op.aux & zc_result) == 0) return;
  if ((op.aux & zc_more) != 0 && (op.aux & zc_notified) == 0) return;  // the kernel may still read the buffer
  ctx_.counters().ops_completed[static_cast<std::size_t>(op_code::send_zc)].add();
  if (op.res == -EOPNOTSUPP || op.res == -EINVAL) {
    if (op.st == io_op::state::cancelling || quiescing_) {
      op.res = -ECANCELED;  // what the plain send would have reported; the refusal was tern's own attempt
    } else {
      // A kernel before 6.2 refuses the usage report with EINVAL: without it, zero copy may still work.
      if (op.res == -EINVAL && report_usage_ && !zero_copy_seen_) {
        report_usage_ = false;
      } else {
        op.desc->zero_copy_refused = true;
      }
      io_uring_sqe* sqe = get_sqe();
      prep_send(sqe, buffer_of(op));
      name_registered(sqe, *op.desc);
      io_uring_sqe_set_data(sqe, &op);
      return;  // still in flight
    }
  } else if (op.res >= 0) {
    zero_copy_seen_ = true;
  }
  if (op.desc->recv_drained) op.desc->answer_awaited = true;  // as for a plain send (reap)
  --in_flight_;
  ctx_.complete(op);
}

}  // namespace tern::detail
