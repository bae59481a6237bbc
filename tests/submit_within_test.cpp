// io_context_options::submit_within: under io_uring the operations a turn starts are submitted together when the
// turn ends, unless the turn's handlers run long; then they go to the kernel between two handlers. A write started
// by one task must reach its peer while later tasks of the same turn are still busy, not after all of them.
//
// The peer is checked without any thread or timing on its side: a loopback send completes inside the submission
// itself, so once the write is submitted its byte is in the peer's receive queue, where a non-blocking MSG_PEEK
// sees it. Each busy task runs well past submit_within and then looks.
#include "net_support.hpp"

#include <sys/socket.h>

#include <chrono>
#include <vector>

namespace {

using namespace tern_test;
using namespace std::chrono_literals;

class submit_within_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(submit_within_test);

constexpr int busy_tasks = 10;

// Spins for d, then records (once) the index of the first task that found the peer's byte already there.
tern::task<void> busy(int index, int peer_fd, std::chrono::microseconds d, int& first_seen) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
  char c;
  if (first_seen < 0 && ::recv(peer_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 1) first_seen = index;
  co_return;
}

// One write, then busy_tasks handlers of 2 ms each in the same turn; the index of the first busy task that saw the
// byte at the peer, or -1 if none did.
int first_task_to_see_the_write(tern::io_context& ctx) {
  int first_seen = -1;
  run_bounded(ctx, [](tern::io_context& ctx, int& first_seen) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    std::vector<tern::join_handle<void>> tasks;
    // Spawned tasks run in the order they were spawned, all in the loop's next turn.
    tasks.push_back(tern::spawn(ctx, [](tern::net::tcp_socket& c) -> tern::task<void> {
      auto [ec, n] = co_await c.write_some(tern::const_buffer("x", 1));
      EXPECT_OK(ec);
      EXPECT_EQ(n, 1u);
    }(client)));
    for (int i = 0; i < busy_tasks; ++i) {
      tasks.push_back(tern::spawn(ctx, busy(i, server.native_handle(), 2ms, first_seen)));
    }
    for (auto& t : tasks) co_await std::move(t);
    char c = 0;
    auto [ec, n] = co_await server.read_some(tern::mutable_buffer(&c, 1));
    EXPECT_OK(ec);
    EXPECT_EQ(c, 'x');
  }(ctx, first_seen));
  return first_seen;
}

TEST_P(submit_within_test, a_write_reaches_the_peer_while_later_handlers_of_the_turn_run_long) {
  // The default (50 us): the write is submitted after the first busy task at the latest (under epoll it was sent
  // when it was started).
  const int seen = first_task_to_see_the_write(ctx);
  EXPECT_GE(seen, 0) << "the write reached the peer only after every handler of the turn had run";
  EXPECT_LE(seen, 1);
}

TEST_P(submit_within_test, a_long_submit_within_keeps_the_whole_turn_batched) {
  // The control: with a budget longer than the turn, io_uring submits at the turn's end, after every busy task.
  tern::io_context_options o = options();
  o.submit_within = std::chrono::seconds(10);
  tern::io_context batched(o);
  const int seen = first_task_to_see_the_write(batched);
  if (GetParam() == tern::backend_kind::io_uring) {
    EXPECT_EQ(seen, -1) << "the write was submitted before the turn ended";
  } else {
    EXPECT_EQ(seen, 0) << "epoll sends when the write starts";
  }
}

}  // namespace
