// tern/detail/io_op.hpp
//
// The state of one I/O operation, and of the descriptor it works on.
//
// An io_op lives inside its awaiter, hence inside the suspended coroutine's frame: starting an operation never
// allocates. It is a work_item, so a completion is queued on the loop without a callback object. Both backends
// fill in res (a byte count, a new fd, 0, or -errno) and queue the op; the awaiter then reads res.
//
// A descriptor is the per-fd state shared by the socket object and the backend. It is pooled by the io_context and
// stays put while the socket object that owns it moves. It keeps the list of the fd's pending operations, which
// serves three purposes: close() and cancel() find every pending operation of the fd, the epoll backend retries
// them when readiness arrives, and a closed descriptor is recycled only once its last operation has completed
// (an io_uring completion may arrive after close()).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <sys/socket.h>

#include "tern/detail/blocking_pool.hpp"
#include "tern/detail/receive_pool.hpp"
#include "tern/detail/ring_buffer.hpp"
#include "tern/detail/work_queue.hpp"

namespace tern {
class io_context;
}

namespace tern::detail {

// poll_in waits until the fd is readable and reads nothing (for fds that must be read on the loop's own thread,
// such as a signalfd, whose read sees only the reading thread's signals); poll_out until it is writable, and
// poll_inout until it is either (res: the poll events found). All three also serve fds that another library reads
// and writes itself (the resolver's c-ares sockets, watched_descriptor). recvmsg and sendmsg take a msghdr in
// buf (datagrams with their addresses, file descriptors passed over Unix sockets) and their flags in msg_flags.
//
// The file operations, from read_at on, are file_ops (below): positioned reads and writes, and the calls of the file
// system. io_uring runs them as SQEs; epoll, which cannot poll files, runs them on the blocking pool.
//
// splice and sendfile move a file's bytes to a socket without a copy through user space (send_file): io_uring
// splices file -> pipe -> socket, epoll calls sendfile. They are splice_ops (below), on the socket's descriptor.
//
// recvmmsg and sendmmsg move a batch of datagrams (net::datagram_batch): buf is the array of mmsghdr, len its
// length, and res the number of datagrams moved. epoll makes the calls of those names; io_uring, which has no such
// opcodes, tries the call without waiting and, when the socket is not ready, waits with one RECVMSG or SENDMSG of
// the first datagram (see io_uring_backend::start).
//
// receive reads into a buffer of the loop's receive pool (detail/receive_pool.hpp) and leases it to the caller
// (a receive_op, below). Under io_uring it takes what the socket's multishot receive has queued, and arms that
// receive when none is armed; recv_multishot is the armed receive itself, which stays armed across receives and
// is never awaited: it is the descriptor's (rx_armed), not an io_op, and only counted under this name. Under
// epoll a receive is a recv into a buffer taken from the pool when the socket is readable.
//
// accept_multishot is a listener's multishot accept under io_uring, the descriptor's in the same way (a listener
// never receives): armed by the first accept(), it queues the connections it accepts while no accept() waits
// (descriptor::accepted). An accept then waits for it (io_op::aux 0) or, where multishot accept is off or
// unsupported, is a plain ACCEPT of its own (aux 1).
//
// send_zc counts the sends that io_uring made zero-copy (IORING_OP_SEND_ZC: io_context_options::
// zero_copy_send_threshold); like recv_multishot it is never awaited under that name. Such a send is an
// op_code::send, counted as one, and counted again under send_zc: started when its SQE is prepared, completed when
// the kernel has let go of the buffer (or refused the zero-copy send, which is then made again as a plain one).
enum class op_code : std::uint8_t {
  recv, send, accept, connect, read, write, poll_in, poll_out, poll_inout, recvmsg, sendmsg, splice, sendfile, recvmmsg,
  sendmmsg, receive, recv_multishot, accept_multishot, send_zc,
  read_at, write_at, fsync, fallocate, ftruncate, statx, openat, renameat, unlinkat, mkdirat,
};

inline bool is_file_op(op_code c) noexcept { return c >= op_code::read_at; }

// Which readiness an operation waits for under epoll.
inline bool waits_for_input(op_code c) noexcept {
  return c == op_code::recv || c == op_code::accept || c == op_code::read || c == op_code::poll_in ||
         c == op_code::recvmsg || c == op_code::recvmmsg || c == op_code::receive;
}

struct descriptor;

// What a descriptor knows of its loop. Held apart from the loop so that it can outlive it: a loop destroyed while
// some of its descriptors are still open (a socket declared before its io_context) sets `loop` to null and leaves
// the anchor to them, counted in `orphans`; each of them is then closed and freed without the loop
// (close_descriptor below), and the last one frees the anchor.
struct loop_anchor {
  // The loop; null once it is destroyed. Acquire/release: an orphan's close must see the loop's teardown done.
  std::atomic<io_context*> loop{nullptr};
  // Descriptors left open when the loop went (set then, before loop is cleared); each orphan's close takes one off
  // (acq_rel, so that the last one, which frees the anchor, comes after every other).
  std::atomic<std::size_t> orphans{0};
};

// Closes d (cancelling what is pending on it) through its loop, or, if the loop is gone, closes its fd and frees
// it here. What every I/O object's close() and destructor call. Any thread.
void close_descriptor(descriptor* d) noexcept;
// Gives up d without closing its fd, which is returned (-1 while an operation is pending on d), through its loop
// or without it once it is gone. Any thread.
int release_descriptor(descriptor* d) noexcept;

// The largest byte count one kernel operation is asked to move; a larger request simply completes partially.
inline constexpr std::uint32_t max_op_len = 1u << 30;

// The result of an operation that was refused because the awaiting thread does not run the descriptor's loop
// (tern::error::wrong_loop). Outside the range of -errno values, so no kernel result can be mistaken for it.
inline constexpr int wrong_loop_res = -(1 << 20);

struct io_op : resume_item {
  // cancelled: done, after a cancellation was requested (by cancel(), or by close() through cancel_pending). Its
  // result may still be a success, when the kernel had finished first: read_exact and write_all then stop there
  // rather than start another piece on a descriptor that may be closed and reused.
  enum class state : std::uint8_t { idle, pending, cancelling, done, cancelled };

  io_context* ctx = nullptr;
  descriptor* desc = nullptr;
  io_op* prev_pending = nullptr;  // in desc->pending
  io_op* next_pending = nullptr;
  std::uint32_t len = 0;          // buffer_op: the buffer's length (connect: the sockaddr's); splice: the byte count
  int res = 0;
  op_code code = op_code::recv;
  state st = state::idle;
  std::uint8_t aux = 0;           // a flag of the operation's kind (receive_op, accept, send), in what would be padding
};

// An operation on a buffer the caller names: every op_code from recv to sendmmsg but the polls, splice and
// sendfile, and every file operation (file_op). The others (polls, splices, receive) have no such buffer and leave
// these fields out, which keeps a receive, waiting in every idle connection's frame, 16 bytes smaller. Backends
// reach them through buffer_of(op), for the codes above only.
struct buffer_op : io_op {
  void* buf = nullptr;            // recv/send/read/write buffer; accept/connect: sockaddr; recvmsg/sendmsg: msghdr
  socklen_t addr_len = 0;         // accept: in/out sockaddr length
  int msg_flags = 0;              // recvmsg/sendmsg: the flags argument (MSG_TRUNC, MSG_CMSG_CLOEXEC, ...)
};

inline buffer_op& buffer_of(io_op& op) noexcept { return static_cast<buffer_op&>(op); }

// aux of a send: send_plain_only, set by the awaiter, keeps the send plain whatever its size (a datagram socket's
// send: zero-copy sends are for byte streams); the other bits are the io_uring backend's, the state of a
// zero-copy send (io_uring_backend.cpp).
inline constexpr std::uint8_t send_plain_only = 0x80;

// A file operation: an io_op with what the file calls take besides a buffer. Path operations (openat, renameat,
// unlinkat, mkdirat, statx of a path) have no descriptor (desc is null) and work relative to the current directory.
struct file_op : buffer_op {
  static constexpr std::uint64_t current_position = ~std::uint64_t{0};  // what io_uring takes as -1
  // read_at/write_at/fallocate: the file offset (read_at/write_at: current_position for the file's own position,
  // as read(2) and write(2) use); ftruncate: the new size.
  std::uint64_t offset = 0;
  // fallocate: the length. read_at under epoll: the bytes already read on the loop from the page cache (see
  // epoll_backend::read_cached), which the pool's read of the rest adds to its result.
  std::uint64_t length = 0;
  const char* path = nullptr;    // openat/statx/unlinkat/mkdirat: the path; renameat: the old path
  const char* path2 = nullptr;   // renameat: the new path
  unsigned mode = 0;             // openat/mkdirat: the mode bits; statx: the mask
  int flags = 0;                 // openat: O_ flags; fsync: 1 for fdatasync; fallocate: mode; statx/unlinkat: AT_ flags
  // read_at/write_at into a registered buffer (fs::registered_buffers): its index in the ring's buffer table,
  // which makes the SQE a READ_FIXED/WRITE_FIXED. no_buffer_index otherwise, and always under epoll.
  static constexpr std::uint32_t no_buffer_index = ~std::uint32_t{0};
  std::uint32_t buf_index = no_buffer_index;
  void* owner = nullptr;         // the awaiter, for an operation that chains its next call from its completion
  // epoll only: the node by which the blocking pool runs the call, and the item it posts back to the loop.
  struct pool_job : blocking_job {
    file_op* owner = nullptr;
  } job;
  struct pool_completion : work_item {
    file_op* owner = nullptr;
  } completion;
};

// receive: res is the byte count (0: eof) and buffer_id the pool buffer that holds the bytes (receive_pool::none
// when res <= 0). under_kernel: io_uring only, the receive was submitted as a plain RECV into an overflow buffer
// (the pool ran dry at its maximum), so cancelling it takes an ASYNC_CANCEL.
//
// It adds no field to io_op, on purpose: a receive waits in the frame of every idle connection's task, and the
// frame's size class is what an idle connection costs. len, which names no caller's buffer here, holds the buffer
// id, and aux the under_kernel flag.
struct receive_op : io_op {
  receive_op() noexcept { len = receive_pool::none; }
  std::uint32_t buffer_id() const noexcept { return len; }
  void set_buffer(std::uint32_t id) noexcept { len = id; }
  bool under_kernel() const noexcept { return aux != 0; }
  void set_under_kernel(bool on) noexcept { aux = on ? 1 : 0; }
};

// splice (io_uring): moves len bytes from fd_in (at off_in; -1: a pipe) to fd_out. sendfile (epoll): moves len
// bytes from the file fd_in at off_in to the socket of desc.
struct splice_op : io_op {
  int fd_in = -1;
  std::int64_t off_in = -1;
  int fd_out = -1;
};

struct descriptor {
  int fd = -1;
  bool closing = false;        // close() ran while operations were still pending
  bool epoll_registered = false;
  // epoll only: registered for output edges too (see epoll_backend's attach).
  bool epoll_out = false;
  // The last receive left the socket empty. io_uring (see io_uring_backend::start): from the CQE's SOCK_NONEMPTY
  // flag; with answer_awaited (a send has completed since) the next receive is most likely waiting for the peer's
  // answer. epoll (see epoll_backend::start): from an EAGAIN, or a short read where that means empty
  // (short_read_drains), and cleared by every input edge; the next receive then waits without trying.
  bool recv_drained = false;
  bool answer_awaited = false;
  // A descriptor the backend does not watch (a regular file: epoll refuses it); its operations are file_ops.
  bool unpolled = false;
  // epoll only, unpolled descriptors: whether a read may first be tried on the loop with RWF_NOWAIT (unknown until
  // the first read; never for O_DIRECT, whose reads wait for the device even so, or where the file does not
  // support it).
  enum class cached_reads : std::uint8_t { unknown, tried, never };
  cached_reads cached = cached_reads::unknown;
  // io_uring only: the buffers on rx_queue (below), up to 255, exact whenever the queue is empty; at the loop's
  // receive_queue the multishot receive is stopped. In what would be padding.
  std::uint8_t rx_queued = 0;
  // io_uring only: the descriptor's slot in the ring's table of registered files (register_descriptor), which
  // its operations name instead of the fd (IOSQE_FIXED_FILE); -1 when not registered. The fd stays
  // open beside it, for the calls that cannot take a registered file.
  std::int32_t fixed_slot = -1;
  // Bumped at every open, so that a cancel() handed over from another thread cannot reach the next socket that
  // reuses this descriptor.
  std::uint32_t generation = 0;
  // receive() under io_uring: whether the multishot receive is armed (rx_armed; it counts as a pending operation
  // of the descriptor, but not as the loop's work, so an idle connection does not keep run() from returning) and
  // whether its cancellation has been submitted, the buffers it filled that no receive has taken yet, the receive
  // waiting for the next one, and how the stream ended (rx_open while it has not: else 0 for eof or -errno,
  // reported after the queued buffers). The multishot needs no io_op of its own: its CQEs carry the descriptor's
  // address (see io_uring_backend), which keeps 80 bytes off every connection.
  //
  // A listener under io_uring uses rx_armed for its multishot accept instead, and queues the sockets it
  // accepted that no accept() has taken yet in `accepted` (allocated when the multishot is first armed, freed when
  // the listener is closed or released), which shares its storage with rx_queue: a listener never receives, and a
  // descriptor carries every idle connection. `listening` tells which one is live.
  //
  // Every connection has a descriptor (operator new: glibc's 112-byte chunks hold up to 104 bytes), so the fields
  // are ordered to leave no padding: 104 bytes.
  static constexpr int rx_open = 1;
  int rx_end = rx_open;
  bool rx_armed = false;
  bool rx_cancelling = false;
  // receive() has been used (either backend): read_some and read_exact are then refused, since bytes queued for
  // receive() would be skipped by them.
  bool rx_used = false;
  bool listening = false;  // accepted, not rx_queue, is the live member of the union
  // Closed while its multishot (receive or accept) was still armed: linked (through next_free and linger_prev) on
  // the loop's list of such descriptors and counted as the loop's work until the multishot's last CQE, so that
  // run() reaps it; a loop destroyed first frees them from that list.
  bool lingering = false;
  // io_uring only: the kernel refused a zero-copy send on this socket (EOPNOTSUPP: a Unix socket; EINVAL), so its
  // sends stay plain from then on. In what would be padding.
  bool zero_copy_refused = false;
  // A TCP socket (or listener, whose accepted sockets inherit it): a read that returns fewer bytes than it asked
  // for has emptied the receive queue. Not so for a Unix stream socket, whose reads also stop where passed
  // descriptors or another writer's credentials begin, nor for datagrams. Cleared by epoll once the peer's stream
  // has ended (a short read can then be followed by the end, with no edge to come). In what would be padding.
  bool short_read_drains = false;
  // Its open file has other descriptors too (watched_descriptor: a duplicate of a library's). close() ends an epoll
  // registration only with the file's last descriptor, so epoll removes this one's itself before closing it;
  // otherwise the registration would outlive the descriptor, and a later duplicate under the same number would be
  // refused (EEXIST). In what would be padding.
  bool shared_file = false;
  loop_anchor* anchor = nullptr;  // the loop the descriptor belongs to, or what is left of it
  union {
    receive_pool::queue rx_queue{};
    ring_buffer<int>* accepted;
  };
  io_op* rx_waiter = nullptr;
  descriptor* linger_prev = nullptr;
  // The pending operations, in the order they started: next_pending runs from the head to the last (null after
  // it), prev_pending backwards, and the head's prev_pending is the last one, so that appending needs no tail
  // pointer of the descriptor's own.
  io_op* pending_head = nullptr;
  descriptor* next_free = nullptr;
  // close() from a thread that does not run the loop queues this on the loop's inbox, which closes the fd there
  // (io_context::close_descriptor); queued in the descriptor itself, it needs no allocation and cannot be lost:
  // a loop destroyed first still runs it from its teardown. The item finds its descriptor by its offset (of()),
  // not by a pointer of its own.
  work_item close_item;

  static descriptor* of(work_item* close) noexcept {
    return reinterpret_cast<descriptor*>(reinterpret_cast<char*>(close) - offsetof(descriptor, close_item));
  }

  // An operation, or the multishot, is in flight: the descriptor is recycled only after the last of them.
  bool has_pending() const noexcept { return pending_head != nullptr || rx_armed; }

  void link(io_op* op) noexcept {
    op->next_pending = nullptr;
    if (pending_head == nullptr) {
      op->prev_pending = op;
      pending_head = op;
      return;
    }
    io_op* last = pending_head->prev_pending;
    last->next_pending = op;
    op->prev_pending = last;
    pending_head->prev_pending = op;
  }

  void unlink(io_op* op) noexcept {
    io_op* next = op->next_pending;
    if (op == pending_head) {
      pending_head = next;
      if (next != nullptr) next->prev_pending = op->prev_pending;  // the last one
    } else {
      op->prev_pending->next_pending = next;
      (next != nullptr ? next : pending_head)->prev_pending = op->prev_pending;
    }
    op->prev_pending = op->next_pending = nullptr;
  }
};
// Every connection has one (a 112-byte malloc chunk holds up to 104 bytes), and of() needs a standard layout.
static_assert(sizeof(descriptor) <= 104);
static_assert(std::is_standard_layout_v<descriptor>);

}  // namespace tern::detail
