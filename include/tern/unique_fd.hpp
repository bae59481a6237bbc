// tern/unique_fd.hpp
//
// unique_fd: sole ownership of a file descriptor that no loop watches, closed when the owner goes away. What
// socket.release() hands over, what a Unix socket receives when another process passes it descriptors, and what
// adopt() takes back into a loop. Move-only, like std::unique_ptr.
#pragma once

#include <unistd.h>

#include <utility>

namespace tern {

class unique_fd {
 public:
  unique_fd() noexcept = default;
  // Takes ownership of fd (-1: none).
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  // The descriptor, still owned (-1: none).
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  // Gives up ownership: the caller closes the descriptor from now on.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
  // Closes the descriptor held (if any) and takes fd instead.
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace tern
