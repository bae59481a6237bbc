// tern/net/datagram_batch.hpp
//
// net::datagram_batch: a user-owned set of datagram slots for udp_socket::receive_batch and send_batch, which move
// several datagrams per system call (recvmmsg/sendmmsg) where several are waiting.
//
// A batch owns `capacity` buffers of `buffer_size` bytes, one endpoint per slot, and the kernel's headers for all
// of them, allocated once when it is made: receiving or sending a batch allocates nothing. After receive_batch
// yields n, slots 0..n-1 each hold one datagram: data(i) (size(i) bytes), peer(i) the sender, and truncated(i) when
// the datagram was longer than the buffer (its first buffer_size() bytes are kept; the kernel dropped the rest).
// A cut is never silent: check truncated(i) as you would check message_truncated on receive_from. Before
// send_batch(batch, n), fill buffer(i) and call set(i, size, to) (or set(i, size) on a connected socket) for slots
// 0..n-1; send_batch yields how many of them went out, in order (at least one, unless it fails).
//
// The batch must outlive the operation, and one batch serves one operation at a time. On io_uring, which has no
// batch opcode, the batch is first tried with recvmmsg/sendmmsg without waiting; when the socket is not ready the
// operation waits in the ring for one datagram (so a batch that waited yields 1). docs/design.md says why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "tern/detail/op_awaiter.hpp"
#include "tern/io_result.hpp"
#include "tern/net/endpoint.hpp"

namespace tern::net {

class datagram_batch {
 public:
  // The most slots one call takes (the kernel's UIO_MAXIOV).
  static constexpr std::size_t max_capacity = 1024;

  // capacity slots (1..max_capacity) of buffer_size bytes (at least 1) each. Throws std::invalid_argument for
  // sizes out of range and std::bad_alloc.
  datagram_batch(std::size_t capacity, std::size_t buffer_size);
  datagram_batch(datagram_batch&&) noexcept = default;
  datagram_batch& operator=(datagram_batch&&) noexcept = default;
  datagram_batch(const datagram_batch&) = delete;
  datagram_batch& operator=(const datagram_batch&) = delete;
  ~datagram_batch();

  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t buffer_size() const noexcept { return buffer_size_; }

  // Slot i's whole buffer (i < capacity()), to fill before send_batch.
  std::span<std::byte> buffer(std::size_t i) noexcept { return {buffers_.get() + i * buffer_size_, buffer_size_}; }
  // Slot i's datagram: the size(i) bytes received, or set to be sent.
  std::span<const std::byte> data(std::size_t i) const noexcept {
    return {buffers_.get() + i * buffer_size_, slots_[i].size};
  }
  std::size_t size(std::size_t i) const noexcept { return slots_[i].size; }
  // Slot i's datagram was longer than buffer_size(): only its first buffer_size() bytes are in the slot.
  bool truncated(std::size_t i) const noexcept { return slots_[i].truncated; }
  // Slot i's sender (after receive_batch), or its destination (after set).
  endpoint peer(std::size_t i) const noexcept {
    return {reinterpret_cast<const sockaddr*>(&slots_[i].address), headers_[i].msg_hdr.msg_namelen};
  }

  // Makes slot i the datagram of its first size bytes (at most buffer_size()), for `to`.
  void set(std::size_t i, std::size_t size, const endpoint& to) noexcept;
  // The same for a connected socket: to its peer.
  void set(std::size_t i, std::size_t size) noexcept;

  // Internal (the awaiters): point the kernel headers at every slot for a receive, or at the first n set slots for
  // a send; after a receive of n datagrams, record each one's size and truncation.
  mmsghdr* headers() noexcept { return headers_.get(); }
  void prepare_receive() noexcept;
  void prepare_send(std::size_t n) noexcept;
  std::size_t finish_receive(std::size_t n) noexcept;

 private:
  struct slot {
    iovec iov;
    sockaddr_in6 address;  // room for either family
    std::uint32_t size;
    bool truncated;
    bool addressed;  // set() with an endpoint
  };

  std::size_t capacity_;
  std::size_t buffer_size_;
  std::unique_ptr<std::byte[]> buffers_;
  std::unique_ptr<mmsghdr[]> headers_;
  std::unique_ptr<slot[]> slots_;
};

namespace detail {

// receive_batch: recvmmsg with MSG_TRUNC (each datagram's full length comes back, so a cut is seen); yields the
// number of datagrams received.
class [[nodiscard]] batch_receive_awaiter : public tern::detail::op_awaiter {
 public:
  batch_receive_awaiter(io_context& ctx, tern::detail::descriptor* d, datagram_batch& b) noexcept
      : op_awaiter(ctx, d, tern::detail::op_code::recvmmsg, nullptr, 0), batch_(&b) {
    point();
  }
  batch_receive_awaiter(const batch_receive_awaiter& o) noexcept : op_awaiter(o), batch_(o.batch_) { point(); }
  io_result<std::size_t> await_resume() const noexcept {
    if (op_.res < 0) return {error(), 0};
    return {{}, batch_->finish_receive(static_cast<std::size_t>(op_.res))};
  }

 private:
  void point() noexcept {
    batch_->prepare_receive();
    op_.buf = batch_->headers();
    op_.len = static_cast<std::uint32_t>(batch_->capacity());
    op_.msg_flags = MSG_TRUNC;
  }
  datagram_batch* batch_;
};

// send_batch: sendmmsg of the first n slots; yields the number sent. n larger than the batch is invalid_argument;
// n == 0 sends nothing and yields 0.
class [[nodiscard]] batch_send_awaiter : public tern::detail::op_awaiter {
 public:
  batch_send_awaiter(io_context& ctx, tern::detail::descriptor* d, datagram_batch& b, std::size_t n) noexcept
      : op_awaiter(ctx, d, tern::detail::op_code::sendmmsg, nullptr, 0), batch_(&b), n_(n) {
    point();
  }
  batch_send_awaiter(const batch_send_awaiter& o) noexcept : op_awaiter(o), batch_(o.batch_), n_(o.n_) { point(); }
  bool await_ready() noexcept {
    if (n_ > batch_->capacity() || n_ == 0) {
      op_.res = n_ == 0 ? 0 : -EINVAL;
      return true;
    }
    return op_awaiter::await_ready();
  }
  io_result<std::size_t> await_resume() const noexcept {
    if (op_.res < 0) return {error(), 0};
    return {{}, static_cast<std::size_t>(op_.res)};
  }

 private:
  void point() noexcept {
    if (n_ <= batch_->capacity()) batch_->prepare_send(n_);
    op_.buf = batch_->headers();
    op_.len = static_cast<std::uint32_t>(n_);
  }
  datagram_batch* batch_;
  std::size_t n_;
};

}  // namespace detail
}  // namespace tern::net
