// io_uring backend, part of io_uring_backend.cpp: multishot requests and the receive pool's buffer ring.
//
// receive() (the loop's receive pool, detail/receive_pool.hpp): the pool is a provided-buffer ring registered as buffer
// group 0, and each socket read with receive() keeps one multishot RECV armed (descriptor::rx_armed). Its CQEs name the
// buffer the kernel picked; a buffer nobody is waiting for is queued on the descriptor, and the next receive() takes it
// without entering the kernel. The queue is bounded (io_context_options::receive_queue): at the bound the multishot is
// cancelled, and a receive() that finds the queue empty arms it again, so a socket whose reader stopped holds that many
// buffers, not the pool. The multishot ends on eof, an error, a cancellation, or an empty ring (ENOBUFS): the pool then
// grows by a chunk and the receive is re-armed if someone waits; at the pool's maximum, a waiting receive is submitted
// as a plain RECV into a heap overflow buffer instead (counted), so an exhausted pool slows a socket down but never
// leaves it waiting for a buffer. The ring has entries for the buffers the pool has (a page of them at first), not for
// its maximum: when the pool grows past it, the ring is moved to a larger one at the end of the turn (move_pool_ring),
// and a receive that finds it empty before then uses an overflow buffer. Where the kernel has bundles
// (IORING_FEAT_RECVSEND_BUNDLE, 6.10) the multishot receive is a bundled one: a completion fills as many ring buffers
// as the waiting bytes need, names the first, and the pool knows the rest by the ring's order
// (receive_pool::ring_next); each is queued or handed out on its own, as if it had come in a completion of its own.
//
// accept() on a listener works the same way: its first accept arms a multishot ACCEPT (the descriptor's too),
// whose CQEs complete the accept that waits, oldest first, or queue the new socket on the descriptor for the next
// one. The queue is bounded (io_context_options::accept_queue): at the bound the multishot is cancelled, and the
// connections that follow wait in the kernel's listen backlog, as they do for a server that does not call accept.
// An error (a full fd table: EMFILE) ends the multishot and goes to the waiting accept; the next accept re-arms it,
// so the listener keeps working once fds are free. A kernel without multishot accept (before 5.19) refuses the
// first one with EINVAL; the loop then submits one ACCEPT per accept().
#include "io_uring/backend.hpp"

namespace tern::detail {

void io_uring_backend::attach_pool(receive_pool& pool) noexcept {
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
bool io_uring_backend::register_pool_ring(std::uint32_t entries) noexcept {
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

bool io_uring_backend::register_ring_memory(void* mem, std::uint32_t entries) noexcept {
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
void io_uring_backend::move_pool_ring() noexcept {
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
bool io_uring_backend::grow_pool() noexcept {
  receive_pool& pool = *pool_;
  (void)pool.grow();
  if (pool.ring_too_small() && ring_movable_) move_pool_ring();
  return pool.in_ring() != 0;
}

// Arms d's multishot receive, or, when the ring is empty at the pool's maximum (or there is no ring), submits
// `waiter` as a plain RECV into a buffer of its own. 0, or -ENOMEM if not even an overflow buffer was to be had.
int io_uring_backend::arm_receive(descriptor& d, receive_op& waiter) noexcept {
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

// An accept: a socket the multishot queued, else wait for the multishot (arming it if it is not armed).
bool io_uring_backend::start_accept(buffer_op& op) noexcept {
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
bool io_uring_backend::arm_accept(descriptor& d) noexcept {
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

void io_uring_backend::submit_plain_accept(buffer_op& op) noexcept {
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_accept(sqe, op.desc->fd, static_cast<sockaddr*>(op.buf), &op.addr_len, SOCK_CLOEXEC);
  name_registered(sqe, *op.desc);
  io_uring_sqe_set_data(sqe, &op);
  op.aux = 1;
  ++in_flight_;
}

// The oldest accept of d that waits for the multishot (the pending list keeps the order they were started in).
io_op* io_uring_backend::accept_waiter(descriptor& d) noexcept {
  for (io_op* op = d.pending_head; op != nullptr; op = op->next_pending) {
    if (op->code == op_code::accept && op->aux == 0 && op->st == io_op::state::pending) return op;
  }
  return nullptr;
}

// A CQE of d's multishot accept.
void io_uring_backend::accept_arrived(descriptor& d, int res, unsigned flags) noexcept {
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

}  // namespace tern::detail
