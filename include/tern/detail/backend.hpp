// tern/detail/backend.hpp
//
// The interface between the loop and a kernel I/O mechanism (io_uring or epoll).
//
// The loop owns the run queue and the timer wheel; a backend owns only the kernel side. It starts operations,
// cancels them, and in poll() submits what was started, waits at most the given time, and hands every finished
// operation back through io_context::complete(). One virtual call per operation is the price of choosing the
// backend at run time; it is small next to the syscall work either side does.
//
// Contract:
// - start(op): begins op. Returns true if op finished synchronously (op.res is set and op is not queued); the
//   awaiter then resumes without suspending. Otherwise op is pending on op.desc and will be completed later.
// - cancel(op): op is pending; make it complete soon with -ECANCELED (or with its real result if it already
//   finished in the kernel). Never completes op synchronously inside the call.
// - before_close(desc): called when a descriptor with pending operations is closed, before the fd is closed, so
//   that no operation can later run on a reused fd number.
// - wake(): any thread; makes a blocked poll() return.
// - register_file / register_buffers: io_uring's tables of registered files and buffers (loop thread). The base
//   versions register nothing and succeed, which is what every backend without such tables (epoll) does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <system_error>

struct iovec;

#include "tern/detail/io_op.hpp"

namespace tern {
enum class backend_kind;
}

namespace tern::detail {

class backend {
 public:
  virtual ~backend() = default;
  virtual backend_kind kind() const noexcept = 0;
  virtual void attach(descriptor& d) = 0;  // a new fd joins the loop (epoll: registered once, for its life)
  // The fd leaves the loop without being closed (released to another loop); it has no pending operation. Any
  // thread.
  virtual void detach(descriptor& d) noexcept = 0;
  virtual bool start(io_op& op) noexcept = 0;
  // op's frame is going away while op is pending (loop teardown): make sure nothing touches op afterwards.
  virtual void abandon(io_op& op) noexcept = 0;
  virtual void cancel(io_op& op) noexcept = 0;
  virtual void before_close(descriptor& d) noexcept = 0;
  // Submits, waits up to timeout_ns (negative: no limit; 0: do not block), and completes finished operations.
  virtual void poll(std::int64_t timeout_ns) = 0;
  virtual void wake() noexcept = 0;
  // True when poll() would have kernel work to do without blocking (submissions queued, or operations in flight).
  virtual bool busy() const noexcept = 0;
  // Gives d a slot in the table of registered files (d.fixed_slot), or leaves it at -1 where there is no table.
  virtual std::error_code register_file(descriptor& d) noexcept {
    (void)d;
    return {};
  }
  // Empties d's slot (d.fixed_slot becomes -1), before its fd is closed or released.
  virtual void unregister_file(descriptor& d) noexcept { d.fixed_slot = -1; }
  // Registers n buffers in consecutive slots of the table of registered buffers; first receives the index of the
  // first one, or file_op::no_buffer_index where there is no table.
  virtual std::error_code register_buffers(const iovec* buffers, unsigned n, std::uint32_t& first) noexcept {
    (void)buffers, (void)n;
    first = file_op::no_buffer_index;
    return {};
  }
  // Empties the n slots from first on (which register_buffers gave).
  virtual void unregister_buffers(std::uint32_t first, unsigned n) noexcept { (void)first, (void)n; }
  // The loop's receive pool has just been made (loop thread): io_uring gives it a provided-buffer ring to feed.
  // Where there is none (epoll, or a kernel that refuses), the pool lends from its own free stack.
  virtual void attach_pool(receive_pool& pool) noexcept { (void)pool; }
  // Cancels d's multishot receive or accept (io_uring; none elsewhere). Its last CQE ends it.
  virtual void cancel_multishot(descriptor& d) noexcept { (void)d; }
  // Hands the kernel what start() and cancel() queued, without waiting or reaping (io_uring; nothing to do where
  // every call is made at once).
  virtual void flush() noexcept {}
  // Teardown (io_context::shutdown_io): cancels every operation in the kernel and completes each as its
  // completion arrives, until none is outstanding or deadline_ns (now_ns() clock) passes; starts and re-arms
  // nothing from then on. Returns how many operations are left in the kernel. epoll has none there (its file
  // calls on the blocking pool are waited for one by one, as their frames go: abandon).
  virtual std::size_t quiesce(std::uint64_t deadline_ns) noexcept {
    (void)deadline_ns;
    return 0;
  }
};

}  // namespace tern::detail
