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
#include "tern/net/endpoint.hpp"
#include "tern/net/error.hpp"
#include "tern/task.hpp"

namespace tern::net {

// The outcome of an operation that produces a value: ec is set on failure (value is then default).
template <class T>
struct io_result {
  std::error_code ec;
  T value;
};

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

class read_awaiter : public op_awaiter {
 public:
  read_awaiter(io_context& ctx, tern::detail::descriptor* d, mutable_buffer b) noexcept
      : op_awaiter(ctx, d, tern::detail::op_code::recv, b.data(), b.size()) {}
  io_result<std::size_t> await_resume() const noexcept {
    if (op_.res < 0) return {error(), 0};
    if (op_.res == 0 && op_.len != 0) return {make_error_code(error::eof), 0};
    return {{}, static_cast<std::size_t>(op_.res)};
  }
};

class write_awaiter : public op_awaiter {
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
class transfer_awaiter {
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
    if (op_.desc == nullptr) {
      ec_ = {EBADF, std::system_category()};
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

class accept_awaiter : public op_awaiter {
 public:
  accept_awaiter(io_context& ctx, tern::detail::descriptor* d) noexcept
      : op_awaiter(ctx, d, tern::detail::op_code::accept, nullptr, 0) {
    point_at_peer();
  }
  accept_awaiter(const accept_awaiter& o) noexcept : op_awaiter(o) { point_at_peer(); }
  io_result<tcp_socket> await_resume();

 private:
  void point_at_peer() noexcept {
    op_.buf = &peer_;
    op_.addr_len = sizeof peer_;
  }
  sockaddr_storage peer_{};
};

class connect_awaiter : public op_awaiter {
 public:
  connect_awaiter(tcp_socket& s, const endpoint& ep) noexcept;
  connect_awaiter(const connect_awaiter& o) noexcept : op_awaiter(o), socket_(o.socket_), peer_(o.peer_) {
    op_.buf = const_cast<sockaddr*>(peer_.data());
  }
  bool await_ready() noexcept;
  std::error_code await_resume() const noexcept { return op_.res < 0 ? error() : std::error_code{}; }

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

  // Takes ownership of an open stream socket (connected, or one end of a socketpair) and puts it in the mode the
  // loop's backend needs; on failure the fd is closed and the error returned.
  static io_result<tcp_socket> adopt(io_context& ctx, int fd) noexcept;
  // Creates the kernel socket for an address family (AF_INET or AF_INET6), so options can be set before connect.
  std::error_code open(int family);
  // Awaitable: connects to ep (opening the socket first if needed); yields std::error_code.
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
  std::error_code shutdown(shutdown_how how = shutdown_how::send) noexcept;
  // Cancels pending operations (they complete with operation_canceled) and closes the fd. Idempotent.
  void close() noexcept;
  // Cancels pending operations; they complete with operation_canceled. The socket stays open.
  void cancel() noexcept;
  bool is_open() const noexcept { return desc_ != nullptr; }
  // The fd, or -1 when closed.
  int native_handle() const noexcept { return desc_ != nullptr ? desc_->fd : -1; }
  io_context& context() const noexcept { return *ctx_; }

  // TCP_NODELAY: send small writes at once instead of coalescing them (Nagle).
  std::error_code set_no_delay(bool on) noexcept;
  // SO_KEEPALIVE: probe idle connections.
  std::error_code set_keep_alive(bool on) noexcept;
  // SO_SNDBUF / SO_RCVBUF (the kernel doubles the value and caps it at wmem_max / rmem_max).
  std::error_code set_send_buffer_size(int bytes) noexcept;
  std::error_code set_receive_buffer_size(int bytes) noexcept;
  io_result<endpoint> local_endpoint() const noexcept;
  io_result<endpoint> remote_endpoint() const noexcept;

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
  std::error_code listen(const endpoint& ep, acceptor_options opts = {});
  // Awaitable: the next connection; yields io_result<tcp_socket>. A full fd table gives too_many_files_open and
  // leaves both the acceptor and the waiting connection in place, so a later accept can take it.
  detail::accept_awaiter accept() noexcept { return {*ctx_, desc_}; }
  io_result<endpoint> local_endpoint() const noexcept;
  // Cancels pending accepts and closes the socket. Idempotent.
  void close() noexcept;
  // Cancels pending accepts; they complete with operation_canceled.
  void cancel() noexcept;
  bool is_open() const noexcept { return desc_ != nullptr; }
  int native_handle() const noexcept { return desc_ != nullptr ? desc_->fd : -1; }
  io_context& context() const noexcept { return *ctx_; }

 private:
  io_context* ctx_;
  tern::detail::descriptor* desc_ = nullptr;
};

// Opens a socket on ctx and connects it to ep.
task<io_result<tcp_socket>> connect(io_context& ctx, endpoint ep);

}  // namespace tern::net
