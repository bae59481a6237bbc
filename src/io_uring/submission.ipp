// io_uring backend, part of io_uring_backend.cpp: submission. start() gives an operation its SQE (prepared here,
// submitted with the next enter), cancel() asks the kernel to drop one, and wake() rouses a parked loop.
//
// Cancellation is by user_data (IORING_OP_ASYNC_CANCEL on the op's address), never by fd: an fd number can be reused
// as soon as it is closed, an address cannot while the op is pending. The cancelled op still delivers its own CQE
// (-ECANCELED, or its result if it had already finished), and only then is its coroutine resumed, so the kernel is
// done with the buffer by the time the awaiter looks at it.
//
// Waking a parked loop: from another io_uring loop's thread, a MSG_RING message from the poster's ring lands
// straight in the parked ring's completion queue (the parked thread then has no eventfd to read and re-arm); from
// anywhere else, and whenever the message cannot be confirmed, an eventfd write. Two cases would lose a message:
// a ring not yet enabled rejects it (-EBADFD; a loop announces that it is going to sleep before its first poll
// enables the ring), and a message the kernel could not post at once would be cancelled if the poster's thread
// exits before it is delivered. So a message is sent only to a ring known to be enabled, and the poster looks for
// its completion right after the submit: anything but an immediate success also writes the eventfd.
//
// Zero-copy sends (io_context_options::zero_copy_send_threshold): a large enough send of a stream socket is a
// SEND_ZC, which has two CQEs with the op's address: the result (IORING_CQE_F_MORE set when a notification
// follows) and, once the kernel has let go of the pages (the data was acknowledged, or copied on the way), the
// notification (IORING_CQE_F_NOTIF). The op completes only after both, or after the result alone when it says
// no notification follows, so the awaiter never gets its buffer back while the kernel may still read it; until
// then it stays pending (and in flight), so run() waits for it. A cancellation reaches the send while it waits in
// the kernel; once its result is in, there is nothing left to cancel and the op ends with the notification, like a
// plain send cancelled too late. A refusal (EOPNOTSUPP on a socket without zero-copy support, such as a Unix
// socket; EINVAL) makes the same op a plain SEND, after the notification if one was announced (the op's address
// must not name two requests in the ring), and the descriptor remembers it (descriptor::zero_copy_refused). The
// sends ask the kernel to report whether it copied the pages after all (IORING_SEND_ZC_REPORT_USAGE, 6.2), which
// loopback always does: counted as zero_copy_copied.
#include "io_uring/backend.hpp"

namespace tern::detail {

bool io_uring_backend::start(io_op& op) noexcept {
  if (op.code == op_code::receive) return start_receive(static_cast<receive_op&>(op));
  if (op.code == op_code::accept) {
    op.aux = 0;
    if (accept_queue_ != 0 && multishot_accept_) return start_accept(buffer_of(op));
    op.aux = 1;
  }
  if (op.code == op_code::recvmmsg || op.code == op_code::sendmmsg) {
    ctx_.counters().syscalls.add();
    if (batch_now(buffer_of(op))) return true;
  }
  io_uring_sqe* sqe = get_sqe();
  if (is_file_op(op.code)) {
    prep_file_op(sqe, static_cast<file_op&>(op));
    io_uring_sqe_set_data(sqe, &op);
    ++in_flight_;
    return false;
  }
  const int fd = op.desc->fd;
  switch (op.code) {
    case op_code::poll_in: io_uring_prep_poll_add(sqe, fd, POLLIN); break;
    case op_code::poll_out: io_uring_prep_poll_add(sqe, fd, POLLOUT); break;
    case op_code::poll_inout: io_uring_prep_poll_add(sqe, fd, POLLIN | POLLOUT); break;
    case op_code::splice: {
      // Named by fd: the descriptor may be either end, and the other end is not registered.
      auto& s = static_cast<splice_op&>(op);
      io_uring_prep_splice(sqe, s.fd_in, s.off_in, s.fd_out, -1, op.len, SPLICE_F_MOVE);
      io_uring_sqe_set_data(sqe, &op);
      ++in_flight_;
      return false;
    }
    case op_code::sendfile: io_uring_prep_nop(sqe); break;  // epoll's; never started here
    case op_code::recv: case op_code::send: case op_code::accept: case op_code::connect: case op_code::read:
    case op_code::write: case op_code::recvmsg: case op_code::sendmsg: case op_code::recvmmsg:
    case op_code::sendmmsg:
      prep_on_buffer(sqe, fd, buffer_of(op));
      break;
    default: io_uring_prep_nop(sqe); break;
  }
  name_registered(sqe, *op.desc);
  io_uring_sqe_set_data(sqe, &op);
  ++in_flight_;
  return false;
}

void io_uring_backend::abandon(io_op& op) noexcept {
  if (op.code == op_code::receive && op.desc != nullptr && op.desc->rx_waiter == &op) op.desc->rx_waiter = nullptr;
}

void io_uring_backend::cancel(io_op& op) noexcept {
  if (op.code == op_code::receive && !static_cast<receive_op&>(op).under_kernel()) {
    // Waiting for the multishot receive's next buffer: nothing of it is in the kernel. The multishot stays
    // armed, and what it brings is queued for the next receive.
    op.desc->rx_waiter = nullptr;
    op.res = -ECANCELED;
    ctx_.complete(op);
    return;
  }
  if (op.code == op_code::accept && op.aux == 0) {
    // Waiting for the multishot accept: as for a receive, nothing of it is in the kernel.
    op.res = -ECANCELED;
    ctx_.complete(op);
    return;
  }
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_cancel64(sqe, reinterpret_cast<std::uintptr_t>(&op), 0);
  io_uring_sqe_set_data64(sqe, cancel_tag);
}

void io_uring_backend::cancel_multishot(descriptor& d) noexcept {
  if (!d.rx_armed || d.rx_cancelling) return;
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_cancel64(sqe, multishot_tag(d, d.listening ? accept_multishot_bit : recv_multishot_bit), 0);
  io_uring_sqe_set_data64(sqe, cancel_tag);
  d.rx_cancelling = true;
}

void io_uring_backend::wake() noexcept {
  io_context* poster = io_context::current();
  if (poster != nullptr && poster != &ctx_ && poster->backend() == backend_kind::io_uring &&
      enabled_.load(std::memory_order_acquire)) {
    if (static_cast<io_uring_backend&>(poster->backend_impl()).send_wake(ring_.ring_fd)) return;
  }
  std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  count_syscall_of_caller();
}

// Poster's side (this is the poster's ring, on its own thread): sends a wake-up message to another ring now;
// true if the kernel has delivered it already.
bool io_uring_backend::send_wake(int target_ring_fd) noexcept {
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

// start()'s SQE for an operation on a caller's buffer (buffer_op).
void io_uring_backend::prep_on_buffer(io_uring_sqe* sqe, int fd, buffer_op& op) noexcept {
  switch (op.code) {
    case op_code::recv:
      io_uring_prep_recv(sqe, fd, op.buf, op.len, op.msg_flags);  // MSG_TRUNC for a datagram, else 0
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
    case op_code::send: prep_send(sqe, op); break;
    case op_code::accept:
      io_uring_prep_accept(sqe, fd, static_cast<sockaddr*>(op.buf), &op.addr_len, SOCK_CLOEXEC);
      break;
    case op_code::connect: io_uring_prep_connect(sqe, fd, static_cast<const sockaddr*>(op.buf), op.len); break;
    case op_code::read: io_uring_prep_read(sqe, fd, op.buf, op.len, -1); break;
    case op_code::write: io_uring_prep_write(sqe, fd, op.buf, op.len, -1); break;
    case op_code::recvmsg:
      io_uring_prep_recvmsg(sqe, fd, static_cast<msghdr*>(op.buf), static_cast<unsigned>(op.msg_flags));
      break;
    case op_code::sendmsg:
      io_uring_prep_sendmsg(sqe, fd, static_cast<const msghdr*>(op.buf),
                            static_cast<unsigned>(op.msg_flags | MSG_NOSIGNAL));
      break;
    case op_code::recvmmsg:
      // batch_now() found the socket empty, so the receive arms its poll first (no second failed attempt).
      io_uring_prep_recvmsg(sqe, fd, &static_cast<mmsghdr*>(op.buf)->msg_hdr, static_cast<unsigned>(op.msg_flags));
      sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
      break;
    case op_code::sendmmsg:
      io_uring_prep_sendmsg(sqe, fd, &static_cast<mmsghdr*>(op.buf)->msg_hdr,
                            static_cast<unsigned>(op.msg_flags | MSG_NOSIGNAL));
      break;
    default: io_uring_prep_nop(sqe); break;
  }
}

// A send's SQE: zero-copy if it is large enough, may be, and the socket has not refused it before.
void io_uring_backend::prep_send(io_uring_sqe* sqe, buffer_op& op) noexcept {
  op.aux &= send_plain_only;
  if (zero_copy_threshold_ != 0 && op.len >= zero_copy_threshold_ && op.aux == 0 && !op.desc->zero_copy_refused) {
    io_uring_prep_send_zc(sqe, op.desc->fd, op.buf, op.len, MSG_NOSIGNAL,
                          report_usage_ ? IORING_SEND_ZC_REPORT_USAGE : 0);
    op.aux = zc_sent;
    ctx_.counters().ops_started[static_cast<std::size_t>(op_code::send_zc)].add();
  } else {
    io_uring_prep_send(sqe, op.desc->fd, op.buf, op.len, MSG_NOSIGNAL);
  }
}

// A datagram batch: the recvmmsg/sendmmsg call, without waiting, on the loop's thread (the socket itself blocks
// under io_uring). True when it moved datagrams or failed for good; false when the socket is not ready, and the
// op then waits in the ring for its first datagram. io_uring has no batch opcode, and UDP does not report
// SOCK_NONEMPTY, so the other order (a RECVMSG first, then a recvmmsg for whatever else waits) would pay a failed
// call after every datagram that arrived alone; this order pays one only when the socket is empty.
bool io_uring_backend::batch_now(buffer_op& op) noexcept {
  auto* msgs = static_cast<mmsghdr*>(op.buf);
  int r;
  do {
    r = op.code == op_code::recvmmsg
            ? ::recvmmsg(op.desc->fd, msgs, op.len, op.msg_flags | MSG_DONTWAIT, nullptr)
            : ::sendmmsg(op.desc->fd, msgs, op.len, op.msg_flags | MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (r < 0 && errno == EINTR);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  op.res = r < 0 ? -errno : r;
  return true;
}

// The SQE of a file operation; path operations (no descriptor) are relative to the current directory. A
// registered file is named by its slot in the reads, writes and syncs (statx refuses a registered file, so the
// other calls keep the fd); a registered buffer makes a read or write READ_FIXED/WRITE_FIXED.
void io_uring_backend::prep_file_op(io_uring_sqe* sqe, file_op& op) noexcept {
  const bool fixed = op.desc != nullptr && op.desc->fixed_slot >= 0 &&
                     (op.code == op_code::read_at || op.code == op_code::write_at || op.code == op_code::fsync ||
                      op.code == op_code::fallocate);
  const int fd = fixed ? op.desc->fixed_slot : op.desc != nullptr ? op.desc->fd : AT_FDCWD;
  const bool fixed_buffer = op.buf_index != file_op::no_buffer_index;
  switch (op.code) {
    case op_code::read_at:
      if (fixed_buffer) {
        io_uring_prep_read_fixed(sqe, fd, op.buf, op.len, op.offset, static_cast<int>(op.buf_index));
      } else {
        io_uring_prep_read(sqe, fd, op.buf, op.len, op.offset);
      }
      break;
    case op_code::write_at:
      if (fixed_buffer) {
        io_uring_prep_write_fixed(sqe, fd, op.buf, op.len, op.offset, static_cast<int>(op.buf_index));
      } else {
        io_uring_prep_write(sqe, fd, op.buf, op.len, op.offset);
      }
      break;
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
  if (fixed) sqe->flags |= IOSQE_FIXED_FILE;  // after the prep, which clears the flags
}

}  // namespace tern::detail
