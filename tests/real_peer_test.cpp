// tern against peers it did not write, on both backends: Python's socket module as a UDP echo server, as the
// other end of a Unix socket that passes descriptors both ways (socket.send_fds / recv_fds), as a TCP client
// whose stream tern reads with receive(), and as a TCP client that checks a stream tern sends from a registered
// socket with zero-copy sends.
#include "fs_support.hpp"
#include "net_support.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <optional>
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

// Python lines that connect to 127.0.0.1:port, print "connected" (python_peer waits for that line: the kernel
// completes the connect without accept()), and build make_pattern(n, seed) (tests/net_support.hpp: the top byte
// of each step of a 64-bit LCG) as the bytearray `name`, with N = n.
std::string python_pattern_client(std::size_t n, std::uint64_t seed, std::uint16_t port, const char* name) {
  return "import socket, sys, zlib\nN = " + std::to_string(n) +
         "\nc = socket.create_connection((\"127.0.0.1\", " + std::to_string(port) + "), timeout=20)\n"
         "print(\"connected\")\n" + name + " = bytearray(N)\nx = " + std::to_string(seed) +
         "\nfor i in range(N):\n"
         "    x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF\n"
         "    " + name + "[i] = x >> 56\n";
}

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

// A stream from Python's socket module read with receive(): a few MiB of make_pattern's bytes in sends of uneven
// sizes, then a shutdown of the peer's write side. tern checks every byte against the same pattern and sees eof,
// then answers with the length and Adler-32 of what it received, which the peer checks (its exit status).
TEST_P(real_peer_test, receive_reads_a_python_stream_whole_and_in_order) {
  std::optional<python_peer> peer;
  run_bounded(ctx, [](tern::io_context& ctx, std::optional<python_peer>& peer) -> tern::task<void> {
    constexpr std::size_t size = 3u << 20;
    constexpr std::uint64_t seed = 41;
    tern::net::tcp_acceptor acceptor(ctx);
    const tern::net::endpoint ep = listen_loopback(acceptor);
    peer.emplace(python_pattern_client(size, seed, ep.port(), "data") + R"(
view = memoryview(data)
at, step = 0, 1
while at < N:
    n = min(step, N - at)
    c.sendall(view[at:at + n])
    at += n
    step = step * 7 % 65521 + 1
c.shutdown(socket.SHUT_WR)
reply = b""
while True:
    part = c.recv(256)
    if not part:
        break
    reply += part
expected = ("%d %08x" % (N, zlib.adler32(data))).encode()
if reply != expected:
    print("tern answered %r, expected %r" % (reply, expected), file=sys.stderr)
    sys.exit(1)
)");
    CO_ASSERT(peer->first_line() == "connected");
    auto [aec, s] = co_await tern::with_timeout(acceptor.accept(), 10s);
    CO_ASSERT_OK(aec);
    const std::vector<char> expected = make_pattern(size, seed);
    std::size_t got = 0;
    std::size_t first_wrong = size;  // the offset of the first byte that differs from the pattern
    std::uint32_t a = 1, b = 0;      // Adler-32 of every byte received
    std::error_code end;
    for (;;) {
      auto [ec, lease] = co_await tern::with_timeout(s.receive(), 20s);
      if (ec) {
        end = ec;
        break;
      }
      for (const char c : lease.view()) {
        if (got < size && c != expected[got] && first_wrong == size) first_wrong = got;
        a = (a + static_cast<unsigned char>(c)) % 65521;
        b = (b + a) % 65521;
        ++got;
      }
    }
    EXPECT_EC(end, tern::net::error::eof);
    EXPECT_EQ(got, size) << "bytes lost or duplicated";
    EXPECT_EQ(first_wrong, size) << "the stream differs from the pattern from this offset on";
    char reply[64];
    const int n = std::snprintf(reply, sizeof reply, "%zu %08x", got, (b << 16) | a);
    CO_ASSERT_OK((co_await s.write_all(tern::const_buffer(reply, static_cast<std::size_t>(n)))).ec);
    EXPECT_OK(s.shutdown());
  }(ctx, peer), 60s);
  ASSERT_TRUE(peer.has_value());
  EXPECT_EQ(peer->wait(), 0) << "the peer did not get back the length and checksum of what it sent";
}

// The other way, on a registered socket (every io_uring operation names its slot) of a loop that sends
// zero-copy from 16 KiB: tern writes a few MiB of make_pattern's bytes in writes of uneven sizes, many of them
// SEND_ZC, then shuts its write side down; Python's socket module receives them, checks every byte against the same
// pattern, and answers with the length and Adler-32 of what it received, which tern reads with receive() and checks.
TEST_P(real_peer_test, a_registered_zero_copy_sender_reaches_python_whole_and_in_order) {
  tern::io_context_options o = options();
  o.zero_copy_send_threshold = 16 * 1024;
  tern::io_context zc(o);
  std::optional<python_peer> peer;
  run_bounded(zc, [](tern::io_context& ctx, std::optional<python_peer>& peer) -> tern::task<void> {
    constexpr std::size_t size = 3u << 20;
    constexpr std::uint64_t seed = 43;
    tern::net::tcp_acceptor acceptor(ctx);
    const tern::net::endpoint ep = listen_loopback(acceptor);
    peer.emplace(python_pattern_client(size, seed, ep.port(), "expected") + R"(
got = bytearray()
while True:
    part = c.recv(1 << 16)
    if not part:
        break
    got += part
if got != expected:
    wrong = next((i for i in range(min(len(got), N)) if got[i] != expected[i]), min(len(got), N))
    print("received %d bytes, first difference at %d" % (len(got), wrong), file=sys.stderr)
    sys.exit(1)
c.sendall(("%d %08x" % (len(got), zlib.adler32(got))).encode())
c.close()
)");
    CO_ASSERT(peer->first_line() == "connected");
    auto [aec, s] = co_await tern::with_timeout(acceptor.accept(), 10s);
    CO_ASSERT_OK(aec);
    CO_ASSERT_OK(s.register_descriptor());
    const std::vector<char> payload = make_pattern(size, seed);
    std::size_t at = 0;
    for (std::size_t step = 1000; at < size; step = step * 7 % 200003 + 1) {
      const std::size_t n = std::min(step, size - at);
      auto [wec, wn] = co_await tern::with_timeout(s.write_all(tern::const_buffer(payload.data() + at, n)), 20s);
      CO_ASSERT_OK(wec);
      at += wn;
    }
    EXPECT_OK(s.shutdown());
    std::uint32_t a = 1, b = 0;
    for (const char c : payload) {
      a = (a + static_cast<unsigned char>(c)) % 65521;
      b = (b + a) % 65521;
    }
    char expected[64];
    std::snprintf(expected, sizeof expected, "%zu %08x", size, (b << 16) | a);
    std::string reply;
    for (;;) {
      auto [ec, lease] = co_await tern::with_timeout(s.receive(), 20s);
      if (ec) {
        EXPECT_EC(ec, tern::net::error::eof);
        break;
      }
      reply += lease.view();
    }
    EXPECT_EQ(reply, expected) << "Python received other bytes than tern sent";
  }(zc, peer), 60s);
  ASSERT_TRUE(peer.has_value());
  EXPECT_EQ(peer->wait(), 0) << "the peer saw bytes lost, duplicated or out of order";
  const tern::metrics::loop_snapshot snap = zc.metrics();
  const auto& zc_ops = snap.ops[static_cast<std::size_t>(tern::detail::op_code::send_zc)];
  if (GetParam() == tern::backend_kind::io_uring) {
    EXPECT_GT(zc_ops.started, 0u) << "no send was zero-copy";
  } else {
    EXPECT_EQ(zc_ops.started, 0u);
  }
}

}  // namespace
