// net::datagram_batch (see tern/net/datagram_batch.hpp): the slots' memory, made once, and the kernel headers
// pointed at it before each receive or send.
#include "tern/net/datagram_batch.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace tern::net {

datagram_batch::datagram_batch(std::size_t capacity, std::size_t buffer_size)
    : capacity_(capacity), buffer_size_(buffer_size) {
  if (capacity == 0 || capacity > max_capacity) throw std::invalid_argument("datagram_batch: capacity 1..1024");
  if (buffer_size == 0 || buffer_size > (std::size_t{1} << 30)) {
    throw std::invalid_argument("datagram_batch: buffer_size 1..1 GiB");
  }
  buffers_.reset(new std::byte[capacity * buffer_size]);
  headers_.reset(new mmsghdr[capacity]);
  slots_.reset(new slot[capacity]);
  for (std::size_t i = 0; i < capacity; ++i) {
    headers_[i] = mmsghdr{};
    slots_[i] = slot{};
  }
}

datagram_batch::~datagram_batch() = default;

void datagram_batch::set(std::size_t i, std::size_t size, const endpoint& to) noexcept {
  set(i, size);
  slot& s = slots_[i];
  std::memcpy(&s.address, to.data(), std::min<std::size_t>(to.size(), sizeof s.address));
  s.addressed = true;
  headers_[i].msg_hdr.msg_namelen = to.size();
}

void datagram_batch::set(std::size_t i, std::size_t size) noexcept {
  slot& s = slots_[i];
  s.size = static_cast<std::uint32_t>(std::min(size, buffer_size_));
  s.truncated = false;
  s.addressed = false;
  headers_[i].msg_hdr.msg_namelen = 0;
}

void datagram_batch::prepare_receive() noexcept {
  for (std::size_t i = 0; i < capacity_; ++i) {
    slot& s = slots_[i];
    s.iov = {buffers_.get() + i * buffer_size_, buffer_size_};
    msghdr& m = headers_[i].msg_hdr;
    m = msghdr{};
    m.msg_name = &s.address;
    m.msg_namelen = sizeof s.address;
    m.msg_iov = &s.iov;
    m.msg_iovlen = 1;
    headers_[i].msg_len = 0;
  }
}

void datagram_batch::prepare_send(std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    slot& s = slots_[i];
    s.iov = {buffers_.get() + i * buffer_size_, s.size};
    msghdr& m = headers_[i].msg_hdr;
    const socklen_t namelen = m.msg_namelen;
    m = msghdr{};
    m.msg_name = s.addressed ? &s.address : nullptr;
    m.msg_namelen = s.addressed ? namelen : 0;
    m.msg_iov = &s.iov;
    m.msg_iovlen = 1;
  }
}

std::size_t datagram_batch::finish_receive(std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    // With MSG_TRUNC the kernel reports each datagram's full length, also when it was longer than the buffer.
    const std::size_t full = headers_[i].msg_len;
    slot& s = slots_[i];
    s.truncated = full > buffer_size_ || (headers_[i].msg_hdr.msg_flags & MSG_TRUNC) != 0;
    s.size = static_cast<std::uint32_t>(std::min(full, buffer_size_));
    s.addressed = false;
  }
  return n;
}

}  // namespace tern::net
