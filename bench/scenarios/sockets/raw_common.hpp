// What the raw baselines share: descriptors closed on scope exit, and a connected loopback pair made with blocking
// calls before anything is measured.
#pragma once

#include "../../harness/worker.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace tern_bench::raw_impl {

[[noreturn]] inline void fail_errno(const char* what, int err) {
    throw bench_failure(std::string(what) + ": " + std::strerror(err));
}

// A file descriptor closed on scope exit.
struct fd_owner {
    int fd = -1;
    explicit fd_owner(int f) : fd(f) {}
    fd_owner(fd_owner&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
    fd_owner& operator=(fd_owner&&) = delete;
    ~fd_owner() {
        if (fd >= 0) ::close(fd);
    }
};

struct loopback_fds {
    fd_owner client{-1};
    fd_owner server{-1};
};

// n connected loopback pairs through one listener, set up with blocking calls before anything is measured:
// each connect() completes from the backlog, then its accept() takes it. TCP_NODELAY on both ends.
inline std::vector<loopback_fds> connect_loopback_pairs(std::size_t n) {
    fd_owner listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (listener.fd < 0) fail_errno("socket", errno);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail_errno("bind", errno);
    if (::listen(listener.fd, 16) != 0) fail_errno("listen", errno);
    if (::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) fail_errno("getsockname", errno);
    std::vector<loopback_fds> out(n);
    int one = 1;
    for (auto& p : out) {
        p.client.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (p.client.fd < 0) fail_errno("socket", errno);
        if (::connect(p.client.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail_errno("connect", errno);
        p.server.fd = ::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (p.server.fd < 0) fail_errno("accept", errno);
        for (int fd : {p.client.fd, p.server.fd})
            if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) fail_errno("TCP_NODELAY", errno);
    }
    return out;
}

// One connected pair (connect_loopback_pairs above).
inline loopback_fds connect_loopback() { return std::move(connect_loopback_pairs(1).front()); }

}  // namespace tern_bench::raw_impl
