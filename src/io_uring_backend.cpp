// io_uring backend.
//
// One ring per loop, created SINGLE_ISSUER|DEFER_TASKRUN|TASKRUN_FLAG (completions are processed only when the loop
// asks, in its own io_uring_enter, so they arrive in batches and never interrupt user code; the flag tells the loop
// when an enter would find any, so a poll with nothing to submit need not enter), falling back to the same without
// the flag, to COOP_TASKRUN|TASKRUN_FLAG and then to a plain ring on older kernels. The ring is created disabled and enabled by
// the first thread that submits, because SINGLE_ISSUER binds it to that thread and a loop is often created on one
// thread and run on another; the ring fd is registered on that thread too, which saves an fd lookup per enter.
//
// Operations get one SQE each, prepared in start() and submitted together by poll(): one io_uring_enter per loop
// turn both submits and reaps. A turn whose handlers run long submits early (io_context_options::submit_within:
// the loop calls flush() between handlers once the oldest SQE has waited that long), so that a send is not held
// back behind another connection's CPU work. A CQE's user_data is the io_op itself; reserved values mark the
// cancel requests (whose own completions carry no information), the wake-up poll on an eventfd, and wake-up
// messages.
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
//
// receive() (the loop's receive pool, detail/receive_pool.hpp): the pool is a provided-buffer ring registered as
// buffer group 0, and each socket read with receive() keeps one multishot RECV armed (descriptor::rx_armed).
// Its CQEs name the buffer the kernel picked; a buffer nobody is waiting for is queued on the descriptor, and the
// next receive() takes it without entering the kernel. The multishot ends on eof, an error, a cancellation, or an
// empty ring (ENOBUFS): the pool then grows by a chunk and the receive is re-armed if someone waits; at the pool's
// maximum, a waiting receive is submitted as a plain RECV into a heap overflow buffer instead (counted), so an
// exhausted pool slows a socket down but never leaves it waiting for a buffer. The ring has entries for the
// buffers the pool has (a page of them at first), not for its maximum: when the pool grows past it, the ring is
// moved to a larger one at the end of the turn (move_pool_ring), and a receive that finds it empty before then
// uses an overflow buffer. Where the kernel has bundles
// (IORING_FEAT_RECVSEND_BUNDLE, 6.10) the multishot receive is a bundled one: a completion fills as many ring
// buffers as the waiting bytes need, names the first, and the pool knows the rest by the ring's order
// (receive_pool::ring_next); each is queued or handed out on its own, as if it had come in a completion of its own.
//
// accept() on a listener works the same way: its first accept arms a multishot ACCEPT (the descriptor's too),
// whose CQEs complete the accept that waits, oldest first, or queue the new socket on the descriptor for the next
// one. The queue is bounded (io_context_options::accept_queue): at the bound the multishot is cancelled, and the
// connections that follow wait in the kernel's listen backlog, as they do for a server that does not call accept.
// An error (a full fd table: EMFILE) ends the multishot and goes to the waiting accept; the next accept re-arms it,
// so the listener keeps working once fds are free. A kernel without multishot accept (before 5.19) refuses the
// first one with EINVAL; the loop then submits one ACCEPT per accept().
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
//
// Registered files and buffers: the ring's two tables are registered sparse, once, the first time a file or a
// buffer set asks for a slot, and the backend hands out slots from them (files one at a time from a free list,
// buffer sets as runs of consecutive slots). Sparse tables let any number of files and buffer sets come and go
// on one ring with one update call each, where registering a whole table would replace every other user's
// entries. A full table is tern::error::table_full; the file or memory then works unregistered. Any descriptor may
// take a slot (basic_descriptor::register_descriptor): sockets name it in every operation, multishot ones too;
// files in their reads, writes and syncs (statx refuses a registered file).
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
  io_uring_backend(io_context& ctx, const io_context_options& opts)
      : ctx_(ctx),
        file_slots_(opts.registered_file_slots),
        buffer_slots_(opts.registered_buffer_slots),
        accept_queue_(opts.accept_queue),
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

  ~io_uring_backend() override {
    io_uring_queue_exit(&ring_);
    ::close(wake_fd_);
    if (pool_ring_ != nullptr) {
      pool_->forget_kernel_ring();
      ::munmap(pool_ring_, pool_ring_bytes_);
    }
  }

  backend_kind kind() const noexcept override { return backend_kind::io_uring; }

  void attach(descriptor&) override {}
  void detach(descriptor&) noexcept override {}

  bool start(io_op& op) noexcept override {
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

  // A registered descriptor (basic_descriptor::register_descriptor) is named by its slot in the ring's table of
  // files: the kernel then takes no reference on the file and looks up no fd for the operation. After the prep,
  // which clears the flags. Every socket operation takes a registered file; a nop ignores it.
  static void name_registered(io_uring_sqe* sqe, const descriptor& d) noexcept {
    if (d.fixed_slot < 0) return;
    sqe->fd = d.fixed_slot;
    sqe->flags |= IOSQE_FIXED_FILE;
  }

  void abandon(io_op& op) noexcept override {
    if (op.code == op_code::receive && op.desc != nullptr && op.desc->rx_waiter == &op) op.desc->rx_waiter = nullptr;
  }

  void attach_pool(receive_pool& pool) noexcept override {
    pool_ = &pool;
    // The ring is sized to the pool and moved to a larger one as the pool grows (receive_pool.hpp), which needs
    // the kernel's head of the ring between two turns: only where completions, and so the buffers they take,
    // come only inside this loop's own enter (DEFER_TASKRUN; not with SQPOLL, whose thread issues receives on
    // its own) and the kernel reports the head (6.8). Elsewhere the ring has an entry for every buffer the pool
    // may ever have from the start, and is never moved.
    std::uint32_t entries = std::bit_ceil(pool.max_buffers());
    if (defer_taskrun_) entries = pool.ring_entries_wanted();
    if (!register_pool_ring(entries)) return;  // the pool lends from its stack, and receives are plain RECVs
    pool.feed_kernel_ring(pool_ring_, entries, pool_group);
    if (entries == std::bit_ceil(pool.max_buffers())) return;
    pbuf_status st{};
    st.buf_group = pool_group;
    if (::syscall(__NR_io_uring_register, ring_.ring_fd, register_pbuf_status, &st, 1) == 0 &&
        pool.ring_matches(static_cast<std::uint16_t>(st.head))) {
      ring_movable_ = true;
      return;
    }
    // No head to be had: the ring for every buffer after all (nothing has taken a buffer yet).
    void* small = pool_ring_;
    const std::size_t small_bytes = pool_ring_bytes_;
    (void)io_uring_unregister_buf_ring(&ring_, pool_group);
    pool.leave_kernel_ring(0);
    ::munmap(small, small_bytes);
    pool_ring_ = nullptr;
    entries = std::bit_ceil(pool.max_buffers());
    if (register_pool_ring(entries)) pool.feed_kernel_ring(pool_ring_, entries, pool_group);
  }

  // Maps and registers a provided-buffer ring of `entries` as the pool's group (pool_ring_); false if either
  // is refused (pool_ring_ unchanged).
  bool register_pool_ring(std::uint32_t entries) noexcept {
    const std::size_t bytes = entries * sizeof(io_uring_buf);
    void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return false;
    if (!register_ring_memory(mem, entries)) {
      ::munmap(mem, bytes);
      return false;
    }
    pool_ring_ = mem;
    pool_ring_bytes_ = bytes;
    return true;
  }

  bool register_ring_memory(void* mem, std::uint32_t entries) noexcept {
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<std::uintptr_t>(mem);
    reg.ring_entries = entries;
    reg.bgid = pool_group;
    return io_uring_register_buf_ring(&ring_, &reg, 0) == 0;
  }

  // The pool has grown past its ring: move the ring's buffers, and those waiting on the pool's stack, to a ring
  // for all of them. Only between turns, with every completion handled: the kernel takes a buffer only when it
  // posts the completion that names it, inside this loop's enter (DEFER_TASKRUN), so the ring then holds exactly
  // the buffers from the kernel's head to the tail, and no completion still to be handled reads an old entry.
  void move_pool_ring() noexcept {
    receive_pool& pool = *pool_;
    if (io_uring_cq_ready(&ring_) != 0 || (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_CQ_OVERFLOW) != 0) {
      return;  // the next turn
    }
    pbuf_status st{};
    st.buf_group = pool_group;
    const bool have_head = ::syscall(__NR_io_uring_register, ring_.ring_fd, register_pbuf_status, &st, 1) == 0;
    const auto head = static_cast<std::uint16_t>(st.head);
    if (!have_head || !pool.ring_matches(head)) {
      // Not expected (it worked when the ring was made; the pool's count and the kernel's agree between turns).
      // The ring stays as it is, and the buffers past it stay on the pool's stack: receives that find the ring
      // empty use overflow buffers, as at the pool's maximum.
      ring_movable_ = false;
      return;
    }
    const std::uint32_t entries = pool.ring_entries_wanted();
    const std::size_t bytes = entries * sizeof(io_uring_buf);
    void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return;  // the next turn tries again; receives meanwhile use overflow buffers
    if (io_uring_unregister_buf_ring(&ring_, pool_group) != 0) {
      ::munmap(mem, bytes);
      ring_movable_ = false;
      return;
    }
    if (register_ring_memory(mem, entries)) {
      pool.move_kernel_ring(mem, entries, head);
      ::munmap(pool_ring_, pool_ring_bytes_);
      pool_ring_ = mem;
      pool_ring_bytes_ = bytes;
      ctx_.counters().receive_ring_moves.add();
      return;
    }
    // The larger ring was refused: the old one again, refilled from its head; else no ring at all.
    ::munmap(mem, bytes);
    ring_movable_ = false;
    if (register_ring_memory(pool_ring_, pool.kernel_ring_entries())) {
      pool.move_kernel_ring(pool_ring_, pool.kernel_ring_entries(), head);
    } else {
      pool.leave_kernel_ring(head);
      ::munmap(pool_ring_, pool_ring_bytes_);
      pool_ring_ = nullptr;
    }
  }

  // Grows the pool for a receive that found the ring empty (outside a reap, the ring can be moved at once);
  // true if the ring now has a buffer.
  bool grow_pool() noexcept {
    receive_pool& pool = *pool_;
    (void)pool.grow();
    if (pool.ring_too_small() && ring_movable_) move_pool_ring();
    return pool.in_ring() != 0;
  }

  void cancel(io_op& op) noexcept override {
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

  void cancel_multishot(descriptor& d) noexcept override {
    if (!d.rx_armed || d.rx_cancelling) return;
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_cancel64(sqe, multishot_tag(d, d.listening ? accept_multishot_bit : recv_multishot_bit), 0);
    io_uring_sqe_set_data64(sqe, cancel_tag);
    d.rx_cancelling = true;
  }

  // Teardown: one ASYNC_CANCEL matching every request of the ring (IORING_ASYNC_CANCEL_ANY, 5.19; an older
  // kernel answers EINVAL, and what is in flight is then only waited for), then reaps until nothing is in flight
  // or the deadline passes. The reaped operations complete as always (queued, never run, by then). With
  // quiescing_ set nothing is started or re-armed any more: a multishot that ends stays ended, a refused zero-copy
  // send is not made again, the wake-up poll is not re-armed (the loop never runs again). Operations not yet
  // submitted when the ring was never enabled never reached the kernel.
  std::size_t quiesce(std::uint64_t deadline_ns) noexcept override {
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

  void before_close(descriptor&) noexcept override {
    // Every pending SQE on this fd must reach the kernel (and take its file reference) before the fd number is
    // released; the cancel requests queued by close() go with them.
    submit();
  }

  void poll(std::int64_t timeout_ns) override {
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

  // What io_uring_enter(2) may answer that only delays the loop: a signal (EINTR) or the wait's own deadline
  // (ETIME) ended the wait; the kernel was short of memory for requests (EAGAIN) or the completion queue
  // overflowed (EBUSY), and what was not submitted stays queued while the reap that follows makes room, so the
  // next turn enters again. Anything else (a ring that refuses this thread, a ring being torn down, lost
  // completions) would answer the same at every turn.
  static bool transient_enter_error(int rc) noexcept {
    return rc == -EINTR || rc == -ETIME || rc == -EAGAIN || rc == -EBUSY;
  }

  // A lasting failure ends run() with it, rather than spin on it.
  [[noreturn]] void fail() {
    const int e = -std::exchange(failure_, 0);
    throw std::system_error(e, std::system_category(), "tern: io_uring_enter");
  }

  // poll()'s io_uring_enter: submits what is queued and waits up to timeout_ns (0: not at all, < 0: for ever).
  int enter(std::int64_t timeout_ns) noexcept {
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
    ctx_.note_submitted();
    ctx_.counters().kernel_waits.add();
    ctx_.counters().syscalls.add();
    return rc;
  }

  void wake() noexcept override {
    io_context* poster = io_context::current();
    if (poster != nullptr && poster != &ctx_ && poster->backend() == backend_kind::io_uring &&
        enabled_.load(std::memory_order_acquire)) {
      if (static_cast<io_uring_backend&>(poster->backend_impl()).send_wake(ring_.ring_fd)) return;
    }
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
    count_syscall_of_caller();
  }

  bool busy() const noexcept override { return in_flight_ != 0 || io_uring_sq_ready(&ring_) != 0; }

  // With TASKRUN_FLAG the kernel sets IORING_SQ_TASKRUN when it queues work that only this thread's enter will run
  // (DEFER_TASKRUN posts every completion that way, MSG_RING wake-ups included) and clears it when the enter runs
  // it; IORING_SQ_CQ_OVERFLOW says CQEs wait beyond a full CQ. A stale read of the word only delays the enter to
  // the next poll: a blocking wait always enters, and the kernel runs pending work before it sleeps.
  bool nothing_for_the_kernel() const noexcept {
    return io_uring_sq_ready(&ring_) == 0 &&
           (IO_URING_READ_ONCE(*ring_.sq.kflags) & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) == 0;
  }

  std::error_code register_file(descriptor& d) noexcept override {
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

  void unregister_file(descriptor& d) noexcept override {
    if (d.fixed_slot < 0) return;
    // Emptying the slot drops the ring's reference to the file. If the kernel refuses (a thread other than the
    // ring's issuer closes the file while the loop is not running), the slot keeps its file until it is reused
    // or the ring is destroyed; it is free for tern either way.
    const int empty = -1;
    (void)io_uring_register_files_update(&ring_, static_cast<unsigned>(d.fixed_slot), &empty, 1);
    free_files_.push_back(static_cast<std::uint32_t>(d.fixed_slot));  // capacity reserved with the table
    d.fixed_slot = -1;
  }

  std::error_code register_buffers(const iovec* buffers, unsigned n, std::uint32_t& first) noexcept override {
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

  void unregister_buffers(std::uint32_t first, unsigned n) noexcept override {
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

 private:
  // The sparse file table, of file_slots_ entries (capped at the fd limit, which the kernel enforces).
  std::error_code make_file_table() noexcept {
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

  std::error_code make_buffer_table() noexcept {
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
  static std::error_code register_error(int rc) noexcept {
    if (rc == -EEXIST) return make_error_code(error::wrong_loop);
    return {-rc, std::system_category()};
  }
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

  // ---- receive() ----

  // A receive: a buffer the multishot queued, else how the stream ended, else wait (arming the multishot).
  bool start_receive(receive_op& op) noexcept {
    descriptor& d = *op.desc;
    receive_pool& pool = ctx_.receive_pool();
    if (!d.rx_queue.empty()) {
      std::uint32_t len;
      op.set_buffer(pool.pop(d.rx_queue, len));
      op.res = static_cast<int>(len);
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

  // Arms d's multishot receive, or, when the ring is empty at the pool's maximum (or there is no ring), submits
  // `waiter` as a plain RECV into a buffer of its own. 0, or -ENOMEM if not even an overflow buffer was to be had.
  int arm_receive(descriptor& d, receive_op& waiter) noexcept {
    receive_pool& pool = *pool_;
    if (pool.kernel_ring() != nullptr && (pool.in_ring() != 0 || grow_pool())) {
      io_uring_sqe* sqe = get_sqe();
      io_uring_prep_recv_multishot(sqe, d.fd, nullptr, 0, 0);
      name_registered(sqe, d);
      if (bundles_) sqe->ioprio |= recvsend_bundle;
      sqe->flags |= IOSQE_BUFFER_SELECT;
      sqe->buf_group = pool.group();
      io_uring_sqe_set_data64(sqe, multishot_tag(d, recv_multishot_bit));
      d.rx_armed = true;
      ++in_flight_;
      ctx_.counters().ops_started[static_cast<std::size_t>(op_code::recv_multishot)].add();
      return 0;
    }
    std::uint32_t id = pool.kernel_ring() != nullptr ? receive_pool::none : pool.take();
    if (id == receive_pool::none) {
      id = pool.take_overflow();
      if (id == receive_pool::none) return -ENOMEM;
      ctx_.counters().receive_overflows.add();
    }
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_recv(sqe, d.fd, pool.address(id), static_cast<std::size_t>(pool.buffer_size()), 0);
    name_registered(sqe, d);
    io_uring_sqe_set_data(sqe, &waiter);
    waiter.set_buffer(id);
    waiter.set_under_kernel(true);
    ++in_flight_;
    return 0;
  }

  // A receive submitted as a plain RECV has finished (op.res set).
  void plain_receive_done(receive_op& op) noexcept {
    op.set_under_kernel(false);
    if (op.res <= 0) {
      pool_->recycle(op.buffer_id());
      op.set_buffer(receive_pool::none);
      if (op.res != -ECANCELED && op.desc->fd >= 0) op.desc->rx_end = op.res;  // eof or a lasting error
    }
  }

  // len bytes in buffer id for d: to the receive waiting for them, else onto d's queue.
  void deliver(descriptor& d, std::uint32_t id, std::uint32_t len) noexcept {
    if (io_op* w = std::exchange(d.rx_waiter, nullptr)) {
      auto& r = static_cast<receive_op&>(*w);
      r.res = static_cast<int>(len);
      r.set_buffer(id);
      ctx_.complete(r);
    } else {
      pool_->push(d.rx_queue, id, len);
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

  // start()'s SQE for an operation on a caller's buffer (buffer_op).
  void prep_on_buffer(io_uring_sqe* sqe, int fd, buffer_op& op) noexcept {
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

  // ---- zero-copy sends ----

  // A send's SQE: zero-copy if it is large enough, may be, and the socket has not refused it before.
  void prep_send(io_uring_sqe* sqe, buffer_op& op) noexcept {
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

  // A CQE of a zero-copy send: its result or its notification.
  void zero_copy_arrived(io_op& op, int res, unsigned flags) noexcept {
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

  // ---- accept() ----

  // An accept: a socket the multishot queued, else wait for the multishot (arming it if it is not armed).
  bool start_accept(buffer_op& op) noexcept {
    descriptor& d = *op.desc;
    if (d.listening && !d.accepted->empty()) {
      std::optional<int> fd;
      d.accepted->pop_front_into(fd);
      op.res = *fd;
      return true;
    }
    if (!d.rx_armed && !arm_accept(d)) submit_plain_accept(op);
    return false;
  }

  // Arms d's multishot accept; false if its queue could not be allocated (the accept is then a plain one).
  bool arm_accept(descriptor& d) noexcept {
    if (!d.listening) {
      try {
        d.accepted = new ring_buffer<int>(accept_queue_);
      } catch (...) {
        return false;
      }
      d.listening = true;
    }
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_multishot_accept(sqe, d.fd, nullptr, nullptr, SOCK_CLOEXEC);
    name_registered(sqe, d);
    io_uring_sqe_set_data64(sqe, multishot_tag(d, accept_multishot_bit));
    d.rx_armed = true;
    ++in_flight_;
    ctx_.counters().ops_started[static_cast<std::size_t>(op_code::accept_multishot)].add();
    return true;
  }

  void submit_plain_accept(buffer_op& op) noexcept {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_accept(sqe, op.desc->fd, static_cast<sockaddr*>(op.buf), &op.addr_len, SOCK_CLOEXEC);
    name_registered(sqe, *op.desc);
    io_uring_sqe_set_data(sqe, &op);
    op.aux = 1;
    ++in_flight_;
  }

  // The oldest accept of d that waits for the multishot (the pending list keeps the order they were started in).
  static io_op* accept_waiter(descriptor& d) noexcept {
    for (io_op* op = d.pending_head; op != nullptr; op = op->next_pending) {
      if (op->code == op_code::accept && op->aux == 0 && op->st == io_op::state::pending) return op;
    }
    return nullptr;
  }

  // A CQE of d's multishot accept.
  void accept_arrived(descriptor& d, int res, unsigned flags) noexcept {
    const bool open = !d.closing;
    if (res >= 0) {
      multishot_accept_seen_ = true;
      if (!open) {
        ::close(res);  // accepted as the listener was being closed: nobody will take it
      } else if (io_op* w = accept_waiter(d)) {
        w->res = res;
        ctx_.complete(*w);
      } else {
        try {
          if (d.accepted->full()) d.accepted->grow();  // the few that land while the multishot is being stopped
          d.accepted->push_back(int{res});
        } catch (...) {
          ::close(res);  // no memory to keep it: the peer sees the connection reset
        }
        if (d.accepted->size() >= accept_queue_) cancel_multishot(d);
      }
    } else if (res == -EINVAL && !multishot_accept_seen_) {
      multishot_accept_ = false;  // the kernel has no multishot accept: plain ACCEPTs from now on
    } else if (res != -ECANCELED && open) {
      if (io_op* w = accept_waiter(d)) {  // EMFILE and the like: the accept that waits reports it
        w->res = res;
        ctx_.complete(*w);
      }
    }
    if ((flags & IORING_CQE_F_MORE) != 0) return;
    ctx_.counters().ops_completed[static_cast<std::size_t>(op_code::accept_multishot)].add();
    --in_flight_;
    ctx_.end_multishot(&d);  // may recycle d if it was closed
    if (!open || quiescing_) return;
    // Accepts still waiting: re-arm for them (or, without multishot accept, give each its own ACCEPT).
    if (accept_waiter(d) == nullptr) return;
    if (multishot_accept_ && arm_accept(d)) return;
    while (io_op* w = accept_waiter(d)) submit_plain_accept(buffer_of(*w));
  }

  // A datagram batch: the recvmmsg/sendmmsg call, without waiting, on the loop's thread (the socket itself blocks
  // under io_uring). True when it moved datagrams or failed for good; false when the socket is not ready, and the
  // op then waits in the ring for its first datagram. io_uring has no batch opcode, and UDP does not report
  // SOCK_NONEMPTY, so the other order (a RECVMSG first, then a recvmmsg for whatever else waits) would pay a failed
  // call after every datagram that arrived alone; this order pays one only when the socket is empty.
  static bool batch_now(buffer_op& op) noexcept {
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
  static void prep_file_op(io_uring_sqe* sqe, file_op& op) noexcept {
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
  bool ring_fd_registered_ = false;  // ring_.enter_ring_fd is the registered index (IORING_ENTER_REGISTERED_RING)
  bool ring_movable_ = false;   // the pool's ring is sized to the pool and moved as it grows (attach_pool)
  // Multishot accept: the bound of a listener's queue (0: off); whether the kernel has it (until a first EINVAL),
  // and whether one has delivered a socket on this ring (after which EINVAL is a listener's own error).
  unsigned accept_queue_;
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

std::unique_ptr<backend> make_io_uring_backend(io_context& ctx, const io_context_options& opts) {
  return std::make_unique<io_uring_backend>(ctx, opts);
}

}  // namespace tern::detail
