// tern/redis/transport.hpp
//
// redis::transport: what a connection runs over when it is not a plain TCP or Unix socket. config::tls holds a
// factory that wraps each new TCP connection in one (tls_transport in <tern/redis/tls.hpp> makes tern::tls
// streams); tern::redis itself knows no TLS library, so a program that uses only plain connections links none.
//
// Operations are tasks of the connection's loop: one read and one write may be pending at once. socket() is the TCP
// socket underneath: the connection cancels its operations to break off a failed connection.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>
#include <system_error>

#include "tern/buffer.hpp"
#include "tern/io_result.hpp"
#include "tern/net/tcp.hpp"
#include "tern/task.hpp"

namespace tern::redis {

class transport {
 public:
  virtual ~transport() = default;

  // The handshake, before anything else: yields std::error_code.
  virtual task<std::error_code> handshake() = 0;
  // At least one byte into b, or an error (tern::error::eof at a clean end).
  virtual task<io_result<std::size_t>> read_some(mutable_buffer b) = 0;
  // All of b, or an error with the count written before it.
  virtual task<io_result<std::size_t>> write_all(const_buffer b) = 0;
  // The TCP socket underneath.
  virtual net::tcp_socket& socket() noexcept = 0;
};

// Wraps a TCP socket connected to host (the configured name: TLS sends it and checks it).
using transport_factory = std::function<std::unique_ptr<transport>(net::tcp_socket socket, std::string_view host)>;

}  // namespace tern::redis
