// tern against peers it did not write, on both backends: Python's socket module as a UDP echo server, and as the
// other end of a Unix socket that passes descriptors both ways (socket.send_fds / recv_fds).
#include "fs_support.hpp"
#include "net_support.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

extern char** environ;

namespace {

using namespace tern_test;

class real_peer_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(real_peer_test);

// python3 running script, its first line of output read; killed (if still running) and reaped on destruction.
class python_peer {
 public:
  explicit python_peer(const std::string& script) {
    int out[2];
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    std::vector<char*> argv = {const_cast<char*>("python3"), const_cast<char*>("-u"), const_cast<char*>("-c"),
                               const_cast<char*>(script.c_str()), nullptr};
    const int rc = ::posix_spawnp(&pid_, "python3", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    EXPECT_EQ(rc, 0) << "python3 could not be started";
    FILE* f = ::fdopen(out[0], "r");
    char line[512] = {};
    if (rc == 0 && f != nullptr && std::fgets(line, sizeof line, f) != nullptr) first_line_ = line;
    if (f != nullptr) std::fclose(f);
    while (!first_line_.empty() && (first_line_.back() == '\n' || first_line_.back() == '\r')) first_line_.pop_back();
  }
  ~python_peer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  const std::string& first_line() const { return first_line_; }
  // Waits for the peer to exit by itself; its exit status (or -1).
  int wait() {
    int status = 0;
    if (pid_ <= 0 || ::waitpid(pid_, &status, 0) != pid_) return -1;
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = 0;
  std::string first_line_;
};

TEST_P(real_peer_test, udp_exchange_with_python) {
  python_peer peer(R"(
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
s.settimeout(20)
print(s.getsockname()[1])
for _ in range(100):
    data, addr = s.recvfrom(65536)
    s.sendto(data[::-1], addr)
)");
  ASSERT_FALSE(peer.first_line().empty());
  const auto port = static_cast<std::uint16_t>(std::stoi(peer.first_line()));
  run_bounded(ctx, [](tern::io_context& ctx, std::uint16_t port) -> tern::task<void> {
    tern::net::udp_socket s(ctx);
    CO_ASSERT_OK(s.connect(tern::net::endpoint::loopback_v4(port)));
    std::vector<char> back(2000);
    for (int i = 0; i < 100; ++i) {
      std::vector<char> sent = make_pattern(static_cast<std::size_t>(1 + i * 13), i);
      CO_ASSERT_OK((co_await s.send(sent)).ec);
      auto [ec, n] = co_await tern::with_timeout(s.receive(back), 10s);
      CO_ASSERT_OK(ec);
      CO_ASSERT(n == sent.size());
      EXPECT_TRUE(std::equal(sent.rbegin(), sent.rend(), back.begin())) << "the peer reverses each datagram";
    }
  }(ctx, port));
  EXPECT_EQ(peer.wait(), 0);
}

TEST_P(real_peer_test, descriptors_pass_to_and_from_python) {
  temp_dir dir;
  const std::string path = dir.path("peer.sock");
  python_peer peer(R"(
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(")" + path + R"(")
s.listen(1)
print("ready")
c, _ = s.accept()
c.settimeout(20)
# Receive a pipe's write end from tern, write through it.
msg, fds, flags, addr = socket.recv_fds(c, 16, 4)
os.write(fds[0], b"from python via a passed fd")
os.close(fds[0])
# Send tern the read end of a new pipe holding a greeting.
r, w = os.pipe()
os.write(w, b"python's pipe")
os.close(w)
socket.send_fds(c, [b"p"], [r])
os.close(r)
c.recv(1)
)");
  ASSERT_EQ(peer.first_line(), "ready");
  run_bounded(ctx, [](tern::io_context& ctx, std::string path) -> tern::task<void> {
    tern::net::unix_stream_socket s(ctx);
    CO_ASSERT_OK(co_await s.connect(*tern::net::unix_endpoint::path(path)));
    int fds[2];
    CO_ASSERT(::pipe2(fds, O_CLOEXEC) == 0);
    tern::unique_fd read_end(fds[0]), write_end(fds[1]);
    const int give[] = {write_end.get()};
    CO_ASSERT_OK((co_await s.send_fds(tern::const_buffer("t"), give)).ec);
    write_end.reset();
    char text[64] = {};
    std::size_t got = 0;
    for (;;) {  // the peer closes its copy when done, so read until eof
      const ssize_t n = ::read(read_end.get(), text + got, sizeof text - 1 - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    EXPECT_EQ(std::string_view(text, got), "from python via a passed fd");

    std::array<tern::unique_fd, 2> received;
    char byte = 0;
    auto [ec, msg] = co_await tern::with_timeout(s.receive_fds(tern::mutable_buffer(&byte, 1), received), 10s);
    CO_ASSERT_OK(ec);
    EXPECT_EQ(byte, 'p');
    CO_ASSERT(msg.fds == 1u);
    char greeting[32] = {};
    const ssize_t n = ::read(received[0].get(), greeting, sizeof greeting);
    EXPECT_EQ(std::string_view(greeting, n > 0 ? static_cast<std::size_t>(n) : 0), "python's pipe");
    CO_ASSERT_OK((co_await s.write_all(tern::const_buffer("x"))).ec);
  }(ctx, path));
  EXPECT_EQ(peer.wait(), 0);
}

}  // namespace
