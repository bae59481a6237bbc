// Output readiness that nobody waits for must not wake a parked loop. A Unix socket signals room to write each time
// its peer reads from it; a loop that watched every socket for output woke for each of those signals and parked
// again (a client that writes a request and waits for the answer parked twice per exchange). Under epoll output is
// watched only while an operation waits for room; io_uring polls per operation and never asked. A send that finds
// no room must still wait for it and complete once the peer reads.
#include "net_support.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <stdexcept>
#include <chrono>
#include <string>
#include <string_view>
#include <thread>

namespace {

using namespace tern_test;
using namespace std::chrono_literals;

class output_edge_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(output_edge_test);

// Writes a request and waits for the answer, `rounds` times, while the peer (a thread) reads each request a few
// milliseconds after it came and answers a few milliseconds later; counts the loop's parks while it waits for the answers.
tern::task<void> exchange(tern::net::unix_stream_socket& s, int rounds, std::uint64_t& parks, int& answered) {
  tern::io_context& ctx = *tern::io_context::current();
  for (int i = 0; i < rounds; ++i) {
    auto [wec, written] = co_await s.write_some(tern::const_buffer("request", 7));
    EXPECT_OK(wec);
    EXPECT_EQ(written, 7u);
    char buf[16];
    const std::uint64_t before = ctx.metrics().parks;  // io_uring may have parked for the write's completion
    auto [rec, n] = co_await s.read_some(tern::mutable_buffer(buf, sizeof buf));
    parks += ctx.metrics().parks - before;
    EXPECT_OK(rec);
    if (rec || std::string_view(buf, n) != "answer") co_return;
    ++answered;
  }
}

// The peer's side of exchange(): each request read late, each answer sent later.
void answer_late(int peer, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    pollfd p{peer, POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) return;
    std::this_thread::sleep_for(3ms);  // the loop is parked in its read by now
    char req[16];
    if (::recv(peer, req, sizeof req, 0) != 7) return;  // room again on the loop's side
    std::this_thread::sleep_for(3ms);
    if (::send(peer, "answer", 6, MSG_NOSIGNAL) != 6) return;
  }
}

// The socket under test on the loop, its peer a plain descriptor that no loop watches.
struct watched_pair {
  tern::net::unix_stream_socket socket;
  tern::unique_fd peer;
};

watched_pair make_pair(tern::io_context& ctx) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) throw std::runtime_error("socketpair");
  tern::unique_fd peer(fds[1]);
  auto adopted = tern::net::unix_stream_socket::adopt(ctx, tern::unique_fd(fds[0]));
  if (adopted.ec) throw std::runtime_error("adopt: " + adopted.ec.message());
  return {std::move(adopted.value), std::move(peer)};
}

TEST_P(output_edge_test, a_peer_reading_what_was_written_does_not_wake_the_loop_that_waits_to_read) {
  watched_pair p = make_pair(ctx);
  constexpr int rounds = 20;
  std::uint64_t parks = 0;
  int answered = 0;
  std::thread t(answer_late, p.peer.get(), rounds);
  run_bounded(ctx, exchange(p.socket, rounds, parks, answered));
  t.join();
  EXPECT_EQ(answered, rounds);
  // One park per round, ended by the answer; a loop woken by the room each of the peer's reads made parks twice
  // per round. The slack is for waits a signal interrupts.
  EXPECT_LE(parks, rounds + 4u) << "the loop woke for output readiness that no operation waited for";
}

tern::task<void> write_into_full(tern::net::unix_stream_socket& s, std::atomic<std::size_t>& drained,
                                 std::size_t& written, std::size_t& drained_before) {
  std::string chunk(4096, 'x');
  auto [ec, n] = co_await s.write_some(tern::const_buffer(chunk.data(), chunk.size()));
  EXPECT_OK(ec);
  written = n;
  drained_before = drained.load();
}

TEST_P(output_edge_test, a_write_into_a_full_socket_waits_for_room_and_completes_when_the_peer_reads) {
  watched_pair p = make_pair(ctx);
  const int peer = p.peer.get();
  std::string block(65536, 'y');
  std::size_t filled = 0;
  for (;;) {  // fill it before the write starts, so that the write must wait
    const ssize_t n = ::send(p.socket.native_handle(), block.data(), block.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n <= 0) break;
    filled += static_cast<std::size_t>(n);
  }
  ASSERT_GT(filled, 0u);
  std::atomic<std::size_t> drained{0};
  std::atomic<bool> stop{false};
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);  // the write waits by now
    char buf[65536];
    while (!stop.load()) {
      const ssize_t n = ::recv(peer, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) drained += static_cast<std::size_t>(n);
      else std::this_thread::sleep_for(1ms);
    }
  });
  std::size_t written = 0, drained_before = 0;
  run_bounded(ctx, write_into_full(p.socket, drained, written, drained_before));
  EXPECT_GT(written, 0u);
  EXPECT_GT(drained_before, 0u) << "the write into a full socket completed before the peer read anything";
  // Output edges that come after the write find no operation waiting for one, and the socket stays usable.
  std::this_thread::sleep_for(20ms);
  stop = true;
  t.join();
  char buf[65536];
  while (::recv(peer, buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
  std::uint64_t parks = 0;
  int answered = 0;
  std::thread t2(answer_late, peer, 3);
  run_bounded(ctx, exchange(p.socket, 3, parks, answered));
  t2.join();
  EXPECT_EQ(answered, 3);
}

}  // namespace
