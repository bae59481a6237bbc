// I/O objects used from a thread that does not run their loop: every operation completes at once with
// tern::error::wrong_loop (it used to be lost, and the task hung), close() and cancel() from such a thread are
// handed to the loop, and a connection moves between loops with accept(target), move_to(), or release()/adopt().
// Every test has a deadline and asserts the result, so a lost operation fails the test instead of hanging it.
#include "net_support.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using namespace tern_test;
using tern::net::tcp_acceptor;
using tern::net::tcp_socket;

class wrong_loop_test : public ::testing::TestWithParam<tern::backend_kind> {
 protected:
  tern::runtime_options options() const { return runtime_options_for(GetParam(), 2); }

  // Runs body on worker 0 and waits for it at most limit; records a failure (and stops the runtime) if it does not
  // finish in time.
  static void run_within(tern::runtime& rt, tern::task<void> body, std::chrono::milliseconds limit = 20s) {
    std::promise<void> done;
    std::future<void> finished = done.get_future();
    rt.spawn_on(
          0,
          [](tern::task<void> body, std::promise<void> done) -> tern::task<void> {
            try {
              co_await std::move(body);
              done.set_value();
            } catch (...) {
              done.set_exception(std::current_exception());
            }
          },
          std::move(body), std::move(done))
        .detach();
    if (finished.wait_for(limit) != std::future_status::ready) {
      ADD_FAILURE() << "the test task did not finish within " << limit.count() << " ms";
      rt.stop();
      return;
    }
    try {
      finished.get();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the test task threw: " << e.what();
    }
  }
};
TERN_INSTANTIATE_BACKENDS(wrong_loop_test);

// A connected pair over a socketpair, both ends adopted by ctx.
socket_pair adopted_pair(tern::io_context& ctx) {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  auto [aec, a] = tcp_socket::adopt(ctx, fds[0]);
  auto [bec, b] = tcp_socket::adopt(ctx, fds[1]);
  EXPECT_OK(aec);
  EXPECT_OK(bec);
  return {std::move(a), std::move(b)};
}

TEST_P(wrong_loop_test, every_operation_from_another_worker_completes_at_once_with_wrong_loop) {
  tern::runtime rt(options());
  run_within(rt, [](tern::runtime& rt) -> tern::task<void> {
    CO_ASSERT(rt.current_worker() == 0);
    auto [client, server] = co_await connected_pair(rt.worker(0));
    tcp_acceptor acceptor(rt.worker(0));
    CO_ASSERT_OK(acceptor.listen(tern::net::endpoint::loopback_v4(0)));
    tern::timer timer(rt.worker(0));
    timer.expires_after(1h);

    co_await rt.spawn_on(
        1,
        [](tern::runtime& rt, tcp_socket& client, tcp_socket& server, tcp_acceptor& acceptor,
           tern::timer& timer) -> tern::task<void> {
          EXPECT_EQ(rt.current_worker(), 1u);
          char buf[4];
          auto [w_ec, w_n] = co_await client.write_all(tern::const_buffer("ping"));
          EXPECT_EC(w_ec, tern::error::wrong_loop);
          EXPECT_EQ(w_n, 0u);
          auto [ws_ec, ws_n] = co_await client.write_some(tern::const_buffer("ping"));
          EXPECT_EC(ws_ec, tern::error::wrong_loop);
          // With a deadline far longer than the test's: the operation must not wait for it.
          auto [r_ec, r_n] = co_await tern::with_timeout(server.read_exact(buf), 1h);
          EXPECT_EC(r_ec, tern::error::wrong_loop);
          auto [rs_ec, rs_n] = co_await tern::with_timeout(server.read_some(buf), 1h);
          EXPECT_EC(rs_ec, tern::error::wrong_loop);
          auto [a_ec, accepted] = co_await tern::with_timeout(acceptor.accept(), 1h);
          EXPECT_EC(a_ec, tern::error::wrong_loop);
          EXPECT_FALSE(accepted.is_open());
          EXPECT_EC(co_await tern::with_timeout(timer.wait(), 1h), tern::error::wrong_loop);
          EXPECT_EC(co_await tern::sleep_for(rt.worker(0), 1h), tern::error::wrong_loop);
          // A connect refused this way leaves the socket as it was.
          tcp_socket other(rt.worker(0));
          CO_ASSERT_OK(other.open(AF_INET));
          const int fd = other.native_handle();
          EXPECT_EC(co_await other.connect(tern::net::endpoint::loopback_v4(9)), tern::error::wrong_loop);
          EXPECT_EQ(other.native_handle(), fd);
          (void)w_n, (void)r_n, (void)rs_n, (void)ws_n;
        },
        std::ref(rt), std::ref(client), std::ref(server), std::ref(acceptor), std::ref(timer));

    // Nothing was lost or half-started: on their own loop the sockets work as before.
    auto [w_ec, w_n] = co_await client.write_all(tern::const_buffer("ping"));
    CO_ASSERT_OK(w_ec);
    char buf[4];
    auto [r_ec, r_n] = co_await tern::with_timeout(server.read_exact(buf), 10s);
    CO_ASSERT_OK(r_ec);
    EXPECT_EQ(std::string_view(buf, r_n), "ping");
    (void)w_n;
  }(rt));
}

// The habit from other runtimes: sockets made on one worker, each handed to a task that the runtime may start on
// any worker. It used to hang (both workers parked, the timeout never firing); now every task finishes, with its
// I/O done or refused, and the fix, move_to() the worker that runs the task, makes every one succeed.
TEST_P(wrong_loop_test, sockets_handed_to_shared_tasks_never_hang) {
  tern::runtime rt(options());
  constexpr int connections = 200;
  for (bool move_first : {false, true}) {
    std::atomic<int> ok{0}, refused{0}, other{0};
    run_within(rt, [](tern::runtime& rt, bool move_first, std::atomic<int>& ok, std::atomic<int>& refused,
                      std::atomic<int>& other) -> tern::task<void> {
      tern::sync::latch done(connections);
      std::vector<tcp_socket> peers;
      for (int i = 0; i < connections; ++i) {
        auto [mine, theirs] = adopted_pair(rt.worker(0));
        peers.push_back(std::move(theirs));
        rt.spawn(
              [](tcp_socket s, bool move_first, std::atomic<int>& ok, std::atomic<int>& refused,
                 std::atomic<int>& other, tern::sync::latch& done) -> tern::task<void> {
                if (move_first) {
                  EXPECT_OK(s.move_to(*tern::io_context::current()));
                }
                char byte = 0;
                auto [w_ec, w_n] = co_await s.write_all(tern::const_buffer("x"));
                auto [r_ec, r_n] = w_ec ? tern::io_result<std::size_t>{w_ec, 0}
                                        : co_await tern::with_timeout(s.read_exact(tern::mutable_buffer(&byte, 1)), 5s);
                if (!r_ec && byte == 'y') {
                  ++ok;
                } else if (r_ec == tern::error::wrong_loop) {
                  ++refused;
                } else {
                  ADD_FAILURE() << describe(r_ec);
                  ++other;
                }
                (void)w_n, (void)r_n;
                done.count_down();
              },
              std::move(mine), move_first, std::ref(ok), std::ref(refused), std::ref(other), std::ref(done))
            .detach();
      }
      // The peers answer every byte from worker 0; a task refused before writing closes its socket on the way out,
      // which the peer sees as eof.
      for (auto& peer : peers) {
        char byte = 0;
        auto [ec, n] = co_await tern::with_timeout(peer.read_exact(tern::mutable_buffer(&byte, 1)), 10s);
        if (!ec) EXPECT_OK((co_await peer.write_all(tern::const_buffer("y"))).ec);
        else EXPECT_EC(ec, tern::error::eof);
        (void)n;
      }
      EXPECT_OK(co_await tern::with_timeout(done.wait(), 10s));
    }(rt, move_first, ok, refused, other));
    EXPECT_EQ(ok + refused, connections) << (move_first ? "moved first" : "used where they were made");
    EXPECT_EQ(other.load(), 0);
    if (move_first) {
      EXPECT_EQ(ok.load(), connections) << "a socket moved to the task's own loop always works";
    }
  }
}

TEST_P(wrong_loop_test, close_and_cancel_from_another_thread_reach_the_pending_read) {
  tern::runtime rt(options());
  run_within(rt, [](tern::runtime& rt) -> tern::task<void> {
    auto [client, server] = adopted_pair(rt.worker(0));
    char buf[4];
    // cancel() from worker 1: the read on worker 0 completes with operation_canceled, the socket stays usable.
    auto read = tern::spawn(rt.worker(0), server.read_some(buf));
    co_await tern::sleep_for(5ms);
    co_await rt.spawn_on(1, [](tcp_socket& s) -> tern::task<void> {
      s.cancel();
      co_return;
    }, std::ref(server));
    auto [c_ec, c_n] = co_await std::move(read);
    EXPECT_EC(c_ec, tern::error::operation_canceled);
    CO_ASSERT(server.is_open());
    CO_ASSERT_OK((co_await client.write_all(tern::const_buffer("ab"))).ec);
    auto [r_ec, r_n] = co_await tern::with_timeout(server.read_exact(tern::mutable_buffer(buf, 2)), 10s);
    EXPECT_OK(r_ec);
    EXPECT_EQ(std::string_view(buf, r_n), "ab");

    // close() from a plain thread: the pending read completes with operation_canceled and the fd is closed (the
    // peer reads eof).
    auto pending = tern::spawn(rt.worker(0), server.read_some(buf));
    co_await tern::sleep_for(5ms);
    std::thread([&server] { server.close(); }).join();
    EXPECT_FALSE(server.is_open());
    auto [x_ec, x_n] = co_await std::move(pending);
    EXPECT_EC(x_ec, tern::error::operation_canceled);
    auto [e_ec, e_n] = co_await tern::with_timeout(client.read_some(buf), 10s);
    EXPECT_EC(e_ec, tern::error::eof);
    (void)c_n, (void)x_n, (void)e_n;
  }(rt));
}

TEST_P(wrong_loop_test, a_socket_destroyed_on_another_worker_is_closed_on_its_own) {
  tern::runtime rt(options());
  run_within(rt, [](tern::runtime& rt) -> tern::task<void> {
    for (int round = 0; round < 50; ++round) {
      auto [mine, peer] = adopted_pair(rt.worker(0));
      const int fd = mine.native_handle();
      co_await rt.spawn_on(1, [](tcp_socket s) -> tern::task<void> {
        // A coroutine's parameters are destroyed with its frame, which a join frees on the joiner's thread: move
        // the socket into a local to destroy it here, on worker 1.
        { tcp_socket local = std::move(s); }
        co_return;
      }, std::move(mine));
      char byte;
      auto [ec, n] = co_await tern::with_timeout(peer.read_some(tern::mutable_buffer(&byte, 1)), 10s);
      EXPECT_EC(ec, tern::error::eof);
      // The descriptor went back to worker 0 whole: the loop reuses it for the next socket it opens.
      EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "the fd was closed";
      (void)n;
    }
  }(rt));
}

TEST_P(wrong_loop_test, accept_onto_another_loop) {
  tern::runtime rt(options());
  run_within(rt, [](tern::runtime& rt) -> tern::task<void> {
    tcp_acceptor acceptor(rt.worker(0));
    tern::net::endpoint ep = listen_loopback(acceptor);
    tcp_socket client(rt.worker(0));
    CO_ASSERT_OK(co_await client.connect(ep));
    auto [a_ec, accepted] = co_await acceptor.accept(rt.worker(1));
    CO_ASSERT_OK(a_ec);
    EXPECT_EQ(&accepted.context(), &rt.worker(1));
    auto echo = rt.spawn_on(1, [](tcp_socket s) -> tern::task<std::size_t> {
      char buf[5];
      auto [ec, n] = co_await s.read_exact(buf);
      EXPECT_OK(ec);
      auto [wec, w] = co_await s.write_all(tern::const_buffer(buf, n));
      EXPECT_OK(wec);
      co_return w;
    }, std::move(accepted));
    CO_ASSERT_OK((co_await client.write_all(tern::const_buffer("hello"))).ec);
    char back[5];
    auto [r_ec, r_n] = co_await tern::with_timeout(client.read_exact(back), 10s);
    EXPECT_OK(r_ec);
    EXPECT_EQ(std::string_view(back, r_n), "hello");
    EXPECT_EQ(co_await std::move(echo), 5u);
  }(rt));
}

TEST_P(wrong_loop_test, release_hands_over_the_fd_and_refuses_while_busy) {
  tern::runtime rt(options());
  run_within(rt, [](tern::runtime& rt) -> tern::task<void> {
    auto [a, b] = adopted_pair(rt.worker(0));
    char buf[4];
    auto pending = tern::spawn(rt.worker(0), a.read_some(buf));
    co_await tern::yield();
    auto [busy_ec, busy_fd] = a.release();
    EXPECT_EC(busy_ec, tern::error::operation_in_progress);
    EXPECT_FALSE(busy_fd);
    EXPECT_TRUE(a.is_open()) << "a refused release leaves the socket as it was";
    CO_ASSERT_OK((co_await b.write_all(tern::const_buffer("1"))).ec);
    auto [p_ec, p_n] = co_await std::move(pending);
    EXPECT_OK(p_ec);

    auto [ec, fd] = a.release();
    CO_ASSERT_OK(ec);
    EXPECT_FALSE(a.is_open());
    EXPECT_GE(::fcntl(fd.get(), F_GETFD), 0) << "release does not close the fd";
    auto [again_ec, again_fd] = a.release();
    EXPECT_EC(again_ec, std::errc::bad_file_descriptor);
    EXPECT_FALSE(again_fd);

    // Adopted by worker 1's loop (from this thread, worker 0's), the fd works there.
    auto [adopt_ec, moved] = tcp_socket::adopt(rt.worker(1), std::move(fd));
    CO_ASSERT_OK(adopt_ec);
    auto done = rt.spawn_on(1, [](tcp_socket s) -> tern::task<std::error_code> {
      auto [ec, n] = co_await s.write_all(tern::const_buffer("2"));
      (void)n;
      co_return ec;
    }, std::move(moved));
    EXPECT_OK(co_await std::move(done));
    auto [r_ec, r_n] = co_await tern::with_timeout(b.read_exact(tern::mutable_buffer(buf, 1)), 10s);
    EXPECT_OK(r_ec);
    EXPECT_EQ(buf[0], '2');
    (void)p_n, (void)r_n;
  }(rt));
}

}  // namespace
