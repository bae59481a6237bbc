// tern/basic_descriptor.hpp
//
// basic_descriptor: sole ownership of a file descriptor registered with one loop, the base of every I/O object
// that waits on a descriptor (sockets of every kind, pipe ends). It closes the descriptor when destroyed, cancels
// what is pending on it, and hands it over to another loop or to the caller.
//
// Which thread: the object belongs to the loop it was created on, and its operations are awaited by tasks that this
// loop runs; an operation awaited on any other thread completes at once with tern::error::wrong_loop. close(),
// cancel() and the destructor may run on any thread: away from a running loop they are handed to it.
//
// Registered descriptors (io_uring): register_descriptor() puts the descriptor in its loop's table of registered
// files, and the operations that name it then name its slot (IOSQE_FIXED_FILE): the kernel skips the fd table
// lookup and the file's reference count on each of them. The fd stays open beside the slot, for the calls that
// have no io_uring form (socket options, endpoints, shutdown, the epoll fallback of a batch). Registering costs
// one io_uring_register call, and closing one more, so it pays for a descriptor that lives for many operations,
// not for a connection made for one request. The slot belongs to the loop's ring: release() and move_to() give
// it back, and the descriptor arrives unregistered on the other side.
//
// Closing returns at once, with one exception to "nothing is left": under io_uring, a descriptor closed while its
// multishot receive (receive()) or a listener's multishot accept was armed has that request cancelled, and its
// last completion arrives a moment later, reaped by the loop's next poll. A task after which the loop is no longer
// run (the one block_on runs: a server's run()) awaits closes_settled(ctx) before it returns, so that a loop then
// destroyed on another thread, whose ring that thread can no longer reap, has nothing of it left in the kernel.
#pragma once

#include <cassert>
#include <coroutine>
#include <system_error>
#include <utility>

#include "tern/detail/io_op.hpp"
#include "tern/detail/work_queue.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/unique_fd.hpp"

namespace tern {

class basic_descriptor {
 public:
  basic_descriptor(basic_descriptor&& o) noexcept : ctx_(o.ctx_), desc_(std::exchange(o.desc_, nullptr)) {}
  basic_descriptor& operator=(basic_descriptor&& o) noexcept;
  basic_descriptor(const basic_descriptor&) = delete;
  basic_descriptor& operator=(const basic_descriptor&) = delete;
  // Closes the descriptor.
  ~basic_descriptor() { close(); }

  // Cancels pending operations (they complete with operation_canceled) and closes the fd. Idempotent. Any thread
  // (from a thread that does not run the loop while another does, the close happens on the loop, soon).
  void close() noexcept;
  // Cancels pending operations; they complete with operation_canceled. The object stays open. Any thread.
  void cancel() noexcept;
  // Detaches the descriptor from its loop and hands the fd to the caller (to adopt it on another loop). The object
  // is left closed. Any thread. Fails with operation_in_progress while an operation is pending (the object is then
  // unchanged), and with bad_file_descriptor when closed.
  [[nodiscard]] io_result<unique_fd> release() noexcept;
  // Moves the object to another loop (release() here, adopt there): from then on its operations are awaited by
  // tasks of target. Any thread; release()'s errors, and those of registering the fd with target (the object is
  // then closed).
  [[nodiscard]] std::error_code move_to(io_context& target) noexcept;

  bool is_open() const noexcept { return desc_ != nullptr; }
  // The fd, or -1 when closed.
  int native_handle() const noexcept { return desc_ != nullptr ? desc_->fd : -1; }
  // The loop the object belongs to.
  io_context& context() const noexcept { return *ctx_; }

  // Puts the descriptor in its loop's table of registered files (io_uring; see the note above). Idempotent;
  // close(), release() and move_to() give the slot back. Errors: table_full when every slot is taken
  // (io_context_options::registered_file_slots; the descriptor goes on working unregistered), bad_file_descriptor
  // when closed, wrong_loop from a thread that does not run the loop while another does, the kernel's otherwise.
  // Under epoll: does nothing, succeeds.
  [[nodiscard]] std::error_code register_descriptor() noexcept;
  // True while the descriptor holds a slot of its ring's table (never under epoll).
  bool is_registered() const noexcept { return desc_ != nullptr && desc_->fixed_slot >= 0; }

  // Internal: the descriptor (null when closed).
  detail::descriptor* descriptor() const noexcept { return desc_; }

 protected:
  explicit basic_descriptor(io_context& ctx) noexcept : ctx_(&ctx) {}
  basic_descriptor(io_context& ctx, detail::descriptor* d) noexcept : ctx_(&ctx), desc_(d) {}
  // Takes fd for ctx, in the blocking mode ctx's backend needs (already_connected if this object is open); on
  // failure fd is closed. watched false: a regular file, which the backend does not watch.
  std::error_code adopt_fd(io_context& ctx, int fd, bool watched = true) noexcept;
  // The adopt() of every derived type: a new Object of ctx that owns fd (closed, with the error, on failure).
  template <class Object>
  static io_result<Object> adopt_as(io_context& ctx, unique_fd fd, bool watched = true) noexcept {
    Object o(ctx);
    std::error_code ec = o.adopt_fd(ctx, fd.release(), watched);
    return {ec, std::move(o)};
  }

  io_context* ctx_;
  detail::descriptor* desc_ = nullptr;
};

namespace detail {
class [[nodiscard]] closes_awaiter : resume_item {
 public:
  explicit closes_awaiter(io_context& ctx) noexcept : ctx_(&ctx) {}
  bool await_ready() const noexcept {
    assert(ctx_->running_here() && "closes_settled is awaited by a task of its loop");
    return !ctx_->closes_lingering();
  }
  void await_suspend(std::coroutine_handle<> h) noexcept {
    handle = h;
    ctx_->after_closes(this);
  }
  void await_resume() const noexcept {}

 private:
  io_context* ctx_;
};
}  // namespace detail

// Awaitable, by a task of ctx's loop: continues once no descriptor closed on that loop has a request left in the
// kernel (see the note above); at once when none has, and always under epoll. Not cancellable: what it waits for
// was cancelled when its descriptor closed, and ends within the kernel's round trip.
inline detail::closes_awaiter closes_settled(io_context& ctx) noexcept { return detail::closes_awaiter(ctx); }

}  // namespace tern
