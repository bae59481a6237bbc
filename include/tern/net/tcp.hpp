// tern/net/tcp.hpp
//
// TCP sockets and acceptors.
//
// Results carry a std::error_code and never throw: `auto [ec, n] = co_await s.read_some(buf);`. Each operation is
// an awaiter holding its io_op, so an operation allocates nothing; it can be cancelled (socket.cancel(),
// with_timeout, with_stop) and then completes with operation_canceled. close() cancels what is pending and the
// pending operations complete with operation_canceled; under io_uring they complete only after the kernel has
// let go of their buffers.
//
// A socket owns a pooled descriptor of its io_context; moving the socket moves that pointer only, so a socket
// may be moved while it has no pending operation. At most one read and one write may be pending on a socket at
// a time; a read and a write may be pending together. The io_context must outlive its sockets.
//
// Which thread: a socket belongs to the loop it was created on, and its operations are awaited by tasks that this
// loop runs. An operation awaited on any other thread completes at once with tern::error::wrong_loop (it used to
// be lost). To hand a connection to another loop (another runtime worker), accept it there
// (acceptor.accept(other)), or move it: socket.move_to(other), or release() on one side and adopt() on the other.
// close(), cancel() and the destructor may run on any thread: away from a running loop they are handed to it.
#pragma once

#include <cerrno>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <system_error>
#include <utility>

#include "tern/buffer.hpp"
#include "tern/detail/io_op.hpp"
#include "tern/detail/op_awaiter.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/net/endpoint.hpp"
#include "tern/net/error.hpp"
#include "tern/task.hpp"

namespace tern::net {

using tern::io_result;

enum class shutdown_how { receive = SHUT_RD, send = SHUT_WR, both = SHUT_RDWR };

struct acceptor_options {
  bool reuse_address = true;   // SO_REUSEADDR: rebind while old connections sit in TIME_WAIT
  bool reuse_port = false;     // SO_REUSEPORT: several listeners on one port, the kernel spreads connections
  int backlog = 4096;          // the kernel caps it at net.core.somaxconn
  bool v6_only = false;        // IPV6_V6ONLY for [::] listeners
};

class tcp_socket;
class tcp_acceptor;

namespace detail {

using tern::detail::op_awaiter;

class [[nodiscard]] read_awaiter : public op_awaiter {
 public:
  read_awaiter(io_context& ctx, tern::detail::descriptor* d, mutable_buffer b) noexcept
      : op_awaiter(ctx, d, tern::detail::op_code::recv, b.data(), b.size()) {}
  io_result<std::size_t> await_resume() const noexcept {
    if (op_.res < 0) return {error(), 0};
    if (op_.res == 0 && op_.len != 0) return {make_error_code(error::eof), 0};
    return {{}, static_cast<std::size_t>(op_.res)};
  }
};

class [[nodiscard]] write_awaiter : public op_awaiter {
 public:
  write_awaiter(io_context& ctx, tern::detail::descriptor* d, const_buffer b) noexcept
      : op_awaiter(ctx, d, tern::detail::op_code::send, const_cast<void*>(b.data()), b.size()) {}
  io_result<std::size_t> await_resume() const noexcept {
    if (op_.res < 0) return {error(), 0};
    return {{}, static_cast<std::size_t>(op_.res)};
  }
};

// read_exact and write_all: one io_op issued again for the rest of the buffer after each partial transfer. The
// pieces are chained from the op's own completion, so the awaiting coroutine is resumed once, at the end, and the
// operation needs no frame of its own (it used to be a task looping over read_some/write_some, one frame and one
// resumption per call and one per piece). Cancellation is remembered, so a cancel that arrives while the next
// piece is queued (between two kernel operations) still ends the transfer with operation_canceled; bytes moved
// before it are counted in the result either way.
class [[nodiscard]] transfer_awaiter {
 public:
  transfer_awaiter(io_context& ctx, tern::detail::descriptor* d, tern::detail::op_code code, void* base,
                   std::size_t size) noexcept
      : base_(static_cast<unsigned char*>(base)), size_(size) {
    op_.ctx = &ctx;
    op_.desc = d;
    op_.code = code;
    op_.run = &on_piece;
    op_.self = this;
  }
  transfer_awaiter(const transfer_awaiter& o) noexcept
      : transfer_awaiter(*o.op_.ctx, o.op_.desc, o.op_.code, o.base_, o.size_) {}
  transfer_awaiter& operator=(const transfer_awaiter&) = delete;
  ~transfer_awaiter() { op_.ctx->forget(op_); }

  bool await_ready() noexcept {
    if (const int refused = tern::detail::refusal(*op_.ctx, op_.desc)) [[unlikely]] {
      ec_ = tern::detail::result_error(refused);
      return true;
    }
    return size_ == 0;
  }
  bool await_suspend(std::coroutine_handle<> h) noexcept {
    op_.handle = h;
    return !issue();
  }
  // The byte count moved before any error; ec is eof when a read meets the end of the stream first.
  io_result<std::size_t> await_resume() const noexcept { return {ec_, done_}; }
  void cancel() noexcept {
    canceled_ = true;
    op_.ctx->cancel(op_);
  }
  io_context& context() const noexcept { return *op_.ctx; }

 private:
  struct piece_op : tern::detail::io_op {
    transfer_awaiter* self;
  };
  // Starts pieces until one is pending (false) or the transfer has ended (true).
  bool issue() noexcept;
  // Takes in the result of the piece that just finished; true when the transfer has ended.
  bool finish_piece() noexcept;
  static void on_piece(tern::detail::work_item* w);

  piece_op op_;
  unsigned char* base_;
  std::size_t size_;
  std::size_t done_ = 0;
  std::error_code ec_;
  bool canceled_ = false;
};

class [[nodiscard]] accept_awaiter : public op_awaiter {
 public:
  // target: the loop the accepted socket will belong to.
  accept_awaiter(io_context& ctx, tern::detail::descriptor* d, io_context& target) noexcept
      : op_awaiter(ctx, d, tern::detail::op_code::accept, nullptr, 0), target_(&target) {
    point_at_peer();
  }
  accept_awaiter(const accept_awaiter& o) noexcept : op_awaiter(o), target_(o.target_) { point_at_peer(); }
  io_result<tcp_socket> await_resume();

 private:
  void point_at_peer() noexcept {
    op_.buf = &peer_;
    op_.addr_len = sizeof peer_;
  }
  io_context* target_;
  sockaddr_storage peer_{};
};

class [[nodiscard]] connect_awaiter : public op_awaiter {
 public:
  connect_awaiter(tcp_socket& s, const endpoint& ep) noexcept;
  connect_awaiter(const connect_awaiter& o) noexcept : op_awaiter(o), socket_(o.socket_), peer_(o.peer_) {
    op_.buf = const_cast<sockaddr*>(peer_.data());
  }
  bool await_ready() noexcept;
  // Empty on success. On failure the socket is closed (see connect()).
  std::error_code await_resume() noexcept;

 private:
  tcp_socket* socket_;
  endpoint peer_;
};

}  // namespace detail

class tcp_socket {
 public:
  // A closed socket on ctx; connect() opens it.
  explicit tcp_socket(io_context& ctx) noexcept : ctx_(&ctx) {}
  tcp_socket(tcp_socket&& o) noexcept : ctx_(o.ctx_), desc_(std::exchange(o.desc_, nullptr)) {}
  tcp_socket& operator=(tcp_socket&& o) noexcept;
  tcp_socket(const tcp_socket&) = delete;
  tcp_socket& operator=(const tcp_socket&) = delete;
  // Closes the socket.
  ~tcp_socket() { close(); }

  // Takes ownership of an open stream socket (connected, or one end of a socketpair, or one released by another
  // loop) and puts it in the mode ctx's backend needs; on failure the fd is closed and the error returned. Any
  // thread.
  [[nodiscard]] static io_result<tcp_socket> adopt(io_context& ctx, int fd) noexcept;
  // Creates the kernel socket for an address family (AF_INET or AF_INET6), so options can be set before connect.
  [[nodiscard]] std::error_code open(int family);
  // Awaitable: connects to ep (opening the socket first if needed); yields std::error_code. A connect that fails
  // (refused, unreachable, cancelled, timed out) closes the socket, because a socket whose connect failed cannot
  // be connected again; the next connect() opens a new one, so options set before must be set again.
  detail::connect_awaiter connect(const endpoint& ep) noexcept { return detail::connect_awaiter(*this, ep); }
  // Awaitable: reads what is available, at least one byte; yields io_result<size_t> (eof when the peer closed).
  detail::read_awaiter read_some(mutable_buffer b) noexcept { return {*ctx_, desc_, b}; }
  // Awaitable: writes some of b; yields io_result<size_t>.
  detail::write_awaiter write_some(const_buffer b) noexcept { return {*ctx_, desc_, b}; }
  // Awaitable: reads until b is full; yields io_result<size_t>, the byte count read before any error (eof when
  // the peer closed first). Cancellable like read_some; spawn(ctx, s.read_exact(b)) runs it as its own task.
  detail::transfer_awaiter read_exact(mutable_buffer b) noexcept {
    return {*ctx_, desc_, tern::detail::op_code::recv, b.data(), b.size()};
  }
  // Awaitable: writes all of b; yields io_result<size_t>, the byte count written before any error.
  detail::transfer_awaiter write_all(const_buffer b) noexcept {
    return {*ctx_, desc_, tern::detail::op_code::send, const_cast<void*>(b.data()), b.size()};
  }

  // Shuts down one or both directions (send: the peer reads eof after the data already sent).
  [[nodiscard]] std::error_code shutdown(shutdown_how how = shutdown_how::send) noexcept;
  // Cancels pending operations (they complete with operation_canceled) and closes the fd. Idempotent. Any thread
  // (from a thread that does not run the loop while another does, the close happens on the loop, soon).
  void close() noexcept;
  // Cancels pending operations; they complete with operation_canceled. The socket stays open. Any thread.
  void cancel() noexcept;
  // Detaches the socket from its loop and hands its fd to the caller, who owns it from then on (to adopt() it on
  // another loop). The socket is left closed. Any thread. Fails with operation_in_progress while an operation is
  // pending (the socket is then unchanged), and with bad_file_descriptor when closed.
  [[nodiscard]] io_result<int> release() noexcept;
  // Moves the socket to another loop (release() here, adopt() there): from then on its operations are awaited
  // by tasks of target. Any thread; same errors as release(), and adopt()'s (the socket is then closed).
  [[nodiscard]] std::error_code move_to(io_context& target) noexcept;
  bool is_open() const noexcept { return desc_ != nullptr; }
  // The fd, or -1 when closed.
  int native_handle() const noexcept { return desc_ != nullptr ? desc_->fd : -1; }
  // The loop the socket belongs to.
  io_context& context() const noexcept { return *ctx_; }

  // TCP_NODELAY: send small writes at once instead of coalescing them (Nagle).
  [[nodiscard]] std::error_code set_no_delay(bool on) noexcept;
  // SO_KEEPALIVE: probe idle connections.
  [[nodiscard]] std::error_code set_keep_alive(bool on) noexcept;
  // SO_SNDBUF / SO_RCVBUF (the kernel doubles the value and caps it at wmem_max / rmem_max).
  [[nodiscard]] std::error_code set_send_buffer_size(int bytes) noexcept;
  [[nodiscard]] std::error_code set_receive_buffer_size(int bytes) noexcept;
  [[nodiscard]] io_result<endpoint> local_endpoint() const noexcept;
  [[nodiscard]] io_result<endpoint> remote_endpoint() const noexcept;

  // Internal: adopts an fd that is already set up for the backend (accept, connect).
  tcp_socket(io_context& ctx, tern::detail::descriptor* d) noexcept : ctx_(&ctx), desc_(d) {}
  tern::detail::descriptor* descriptor() const noexcept { return desc_; }

 private:
  friend class detail::connect_awaiter;
  std::error_code set_option(int level, int name, int value) noexcept;

  io_context* ctx_;
  tern::detail::descriptor* desc_ = nullptr;
};

class tcp_acceptor {
 public:
  // A closed acceptor on ctx; listen() opens it.
  explicit tcp_acceptor(io_context& ctx) noexcept : ctx_(&ctx) {}
  tcp_acceptor(tcp_acceptor&& o) noexcept : ctx_(o.ctx_), desc_(std::exchange(o.desc_, nullptr)) {}
  tcp_acceptor& operator=(tcp_acceptor&& o) noexcept;
  tcp_acceptor(const tcp_acceptor&) = delete;
  tcp_acceptor& operator=(const tcp_acceptor&) = delete;
  ~tcp_acceptor() { close(); }

  // Opens a socket, sets the options, binds to ep and listens. Port 0 picks a free port (see local_endpoint()).
  [[nodiscard]] std::error_code listen(const endpoint& ep, acceptor_options opts = {});
  // Awaitable: the next connection; yields io_result<tcp_socket>. A full fd table gives too_many_files_open and
  // leaves both the acceptor and the waiting connection in place, so a later accept can take it.
  detail::accept_awaiter accept() noexcept { return {*ctx_, desc_, *ctx_}; }
  // Awaitable: the next connection, as a socket of target (another runtime worker's loop, say): one acceptor
  // can spread connections over loops. Awaited on the acceptor's own loop, like accept().
  detail::accept_awaiter accept(io_context& target) noexcept { return {*ctx_, desc_, target}; }
  [[nodiscard]] io_result<endpoint> local_endpoint() const noexcept;
  // Cancels pending accepts and closes the socket. Idempotent. Any thread, as for tcp_socket::close().
  void close() noexcept;
  // Cancels pending accepts; they complete with operation_canceled. Any thread.
  void cancel() noexcept;
  bool is_open() const noexcept { return desc_ != nullptr; }
  int native_handle() const noexcept { return desc_ != nullptr ? desc_->fd : -1; }
  // The loop the acceptor belongs to.
  io_context& context() const noexcept { return *ctx_; }

 private:
  io_context* ctx_;
  tern::detail::descriptor* desc_ = nullptr;
};

// Opens a socket on ctx and connects it to ep. Awaited by a task running on ctx.
task<io_result<tcp_socket>> connect(io_context& ctx, endpoint ep);

}  // namespace tern::net
