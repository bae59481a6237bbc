// Networking helpers for the tern test suite: loopback listeners on ephemeral ports, connected socket pairs,
// byte patterns for payload verification, and raw socket option access through native_handle().
#pragma once

#include "support.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tern_test {

// Listens on the loopback address (v4 or v6) on an ephemeral port; returns the endpoint it is bound to.
inline tern::net::endpoint listen_loopback(tern::net::tcp_acceptor& acceptor, bool v6 = false) {
  auto ec = acceptor.listen(v6 ? tern::net::endpoint::loopback_v6(0) : tern::net::endpoint::loopback_v4(0));
  EXPECT_OK(ec);
  auto [lec, ep] = acceptor.local_endpoint();
  EXPECT_OK(lec);
  EXPECT_NE(ep.port(), 0) << "listening on port 0 must bind an ephemeral port";
  return ep;
}

struct socket_pair {
  tern::net::tcp_socket client;
  tern::net::tcp_socket server;
};

// A connected client/server pair over loopback. The kernel completes the handshake without accept(), so
// connecting first and accepting second is safe on one coroutine.
inline tern::task<socket_pair> connected_pair(tern::io_context& ctx, bool v6 = false) {
  tern::net::tcp_acceptor acceptor(ctx);
  tern::net::endpoint ep = listen_loopback(acceptor, v6);
  tern::net::tcp_socket client(ctx);
  std::error_code ec = co_await client.connect(ep);
  EXPECT_OK(ec);
  auto [aec, server] = co_await acceptor.accept();
  EXPECT_OK(aec);
  co_return socket_pair{std::move(client), std::move(server)};
}

// Deterministic pseudo-random bytes (a 64-bit LCG), so that reordered, dropped or duplicated data is detected.
inline std::vector<char> make_pattern(std::size_t n, std::uint64_t seed = 0x9e3779b97f4a7c15ull) {
  std::vector<char> out(n);
  std::uint64_t x = seed;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = static_cast<char>(x >> 56);
  }
  return out;
}

inline int get_int_option(int fd, int level, int name) {
  int value = -1;
  socklen_t len = sizeof(value);
  if (::getsockopt(fd, level, name, &value, &len) != 0) return -1;
  return value;
}

// Makes the next close() of fd send a RST instead of a FIN.
inline void set_linger_reset(int fd) {
  ::linger lg{1, 0};
  EXPECT_EQ(::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
}

// Fills every free slot of the fd table with dup(); restores it on release() or destruction. By default it first
// lowers RLIMIT_NOFILE just above the fds in use (and restores it too), so that few dups fill it. An operation
// submitted earlier to io_uring keeps the limit of its submission, though (the kernel reads it then): an
// operation that must meet the full table when it retries is met by a filler that keeps the limit
// (lower_limit = false) and dups up to it.
class fd_table_filler {
 public:
  explicit fd_table_filler(bool lower_limit = true) {
    if (::getrlimit(RLIMIT_NOFILE, &saved_) != 0) return;
    if (lower_limit) {
      const int highest = highest_open_fd();
      if (highest < 0) return;
      rlimit lowered = saved_;
      lowered.rlim_cur = static_cast<rlim_t>(highest + 1 + 8);
      if (lowered.rlim_cur > saved_.rlim_cur) return;
      if (::setrlimit(RLIMIT_NOFILE, &lowered) != 0) return;
      lowered_ = true;
    }
    for (;;) {
      int fd = ::dup(0);
      if (fd < 0) {
        full_ = errno == EMFILE;
        break;
      }
      dups_.push_back(fd);
    }
  }
  fd_table_filler(const fd_table_filler&) = delete;
  fd_table_filler& operator=(const fd_table_filler&) = delete;
  ~fd_table_filler() { release(); }

  bool full() const { return full_; }

  void release() {
    for (int fd : dups_) ::close(fd);
    dups_.clear();
    if (lowered_) ::setrlimit(RLIMIT_NOFILE, &saved_);
    lowered_ = false;
    full_ = false;
  }

 private:
  rlimit saved_{};
  bool lowered_ = false;
  bool full_ = false;
  std::vector<int> dups_;
};

}  // namespace tern_test
