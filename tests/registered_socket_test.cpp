// Registered sockets (basic_descriptor::register_descriptor) on both backends. Under io_uring a registered
// socket's operations name its slot in the ring's table of files, not its fd: to show that they do, the tests put
// another socket (a decoy) on the fd number after registering, and the data must still flow on the connection,
// which only the slot names; nothing may reach the decoy. Also: a registered listener (multishot accept and one
// ACCEPT per call), a registered socket closed under pending operations (a read, a multishot receive, a write
// held back by a peer that does not read) with its slot given back and no fd left open, the wrong-loop errors,
// and move_to (the socket arrives unregistered and works). Under epoll registering is accepted and changes nothing.
#include "net_support.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include <sys/socket.h>
#include <unistd.h>

// A named namespace, not an anonymous one: the test sources are compiled in unity batches (tests/CMakeLists.txt),
// where this file's helpers would meet accept_test.cpp's of the same names.
namespace registered_socket_tests {

using namespace tern_test;
using namespace std::chrono_literals;
using tern::net::endpoint;
using tern::net::tcp_acceptor;
using tern::net::tcp_socket;

class registered_socket_test : public backend_test {
 protected:
  bool uring() const { return GetParam() == tern::backend_kind::io_uring; }
};
TERN_INSTANTIATE_BACKENDS(registered_socket_test);

// A connected pair of Unix stream sockets that stands in for a registered socket's fd number.
struct decoy {
  int fds[2] = {-1, -1};
  decoy() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0); }
  ~decoy() {
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
  }
  // Puts the decoy's first end on fd's number (the file fd named stays alive only through the ring's slot).
  bool cover(int fd) const { return ::dup2(fds[0], fd) == fd; }
  // Whether anything was written into the decoy through the covered fd number.
  bool reached() const {
    char c;
    return ::recv(fds[1], &c, 1, MSG_DONTWAIT) > 0;
  }
};

tern::task<std::error_code> write_then_shutdown(tcp_socket& c, const std::vector<char>& payload) {
  auto w = co_await c.write_all(tern::const_buffer(payload));
  if (w.ec) co_return w.ec;
  co_return c.shutdown();
}

// A 1 MiB stream to a registered server (read_exact for the first half, receive() for the rest) and an answer back,
// verified byte by byte; under io_uring with a decoy on the server's fd number.
TEST_P(registered_socket_test, a_registered_connection_carries_data_through_its_slot) {
  run_bounded(ctx, [](tern::io_context& ctx, bool uring) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    EXPECT_FALSE(server.is_registered());
    CO_ASSERT_OK(server.register_descriptor());
    CO_ASSERT_OK(server.register_descriptor());  // idempotent
    CO_ASSERT_OK(client.register_descriptor());
    EXPECT_EQ(server.is_registered(), uring);
    EXPECT_EQ(client.is_registered(), uring);
    decoy d;
    if (uring) {
      CO_ASSERT(d.cover(server.native_handle()));
    }

    const std::vector<char> payload = make_pattern(1 << 20);
    auto writer = tern::spawn(ctx, write_then_shutdown(client, payload));
    std::vector<char> got(payload.size() / 2);
    auto [rec, rn] = co_await server.read_exact(tern::mutable_buffer(got));
    CO_ASSERT_OK(rec);
    for (;;) {
      auto [ec, lease] = co_await server.receive();
      if (ec) {
        EXPECT_EQ(ec, tern::net::error::eof);
        break;
      }
      got.insert(got.end(), lease.data(), lease.data() + lease.size());
    }
    CO_ASSERT_OK(co_await std::move(writer));
    EXPECT_EQ(got.size(), payload.size());
    EXPECT_TRUE(got == payload) << "bytes lost, duplicated or reordered";

    const std::vector<char> answer = make_pattern(256 * 1024, 7);
    auto [wec, wn] = co_await server.write_all(tern::const_buffer(answer));
    CO_ASSERT_OK(wec);
    std::vector<char> back(answer.size());
    auto [bec, bn] = co_await client.read_exact(tern::mutable_buffer(back));
    CO_ASSERT_OK(bec);
    EXPECT_TRUE(back == answer);
    EXPECT_FALSE(d.reached()) << "an operation named the fd number instead of the slot";
  }(ctx, uring()));
}

// Connects n clients to ep; each sends its number (first + i) once connected.
tern::task<std::vector<tcp_socket>> connect_numbered(tern::io_context& ctx, endpoint ep, int n, std::uint32_t first) {
  std::vector<tcp_socket> clients;
  for (int i = 0; i < n; ++i) {
    tcp_socket c(ctx);
    EXPECT_OK(co_await c.connect(ep));
    const std::uint32_t number = first + static_cast<std::uint32_t>(i);
    auto [wec, wn] = co_await c.write_all(tern::const_buffer(&number, sizeof number));
    EXPECT_OK(wec);
    clients.push_back(std::move(c));
  }
  co_return clients;
}

// A registered listener accepts through its slot, with the multishot accept and with one ACCEPT per call: under
// io_uring its fd number names another listening socket, to which nobody connects (an accept that named it would
// wait until the timeout).
TEST_P(registered_socket_test, a_registered_listener_accepts_through_its_slot) {
  for (unsigned queue : {64u, 0u}) {
    tern::io_context_options o = options();
    o.accept_queue = queue;
    tern::io_context local(o);
    run_bounded(local, [](tern::io_context& ctx, bool uring) -> tern::task<void> {
      tcp_acceptor acceptor(ctx);
      const endpoint ep = listen_loopback(acceptor);
      CO_ASSERT_OK(acceptor.register_descriptor());
      EXPECT_EQ(acceptor.is_registered(), uring);
      tcp_acceptor other(ctx);
      listen_loopback(other);
      if (uring) {
        CO_ASSERT(::dup2(other.native_handle(), acceptor.native_handle()) == acceptor.native_handle());
      }
      constexpr int n = 5;
      std::vector<tcp_socket> clients = co_await connect_numbered(ctx, ep, n, 100);
      for (int i = 0; i < n; ++i) {
        auto [ec, s] = co_await tern::with_timeout(acceptor.accept(), 10s);
        CO_ASSERT_OK(ec);
        std::uint32_t number = 0;
        auto [rec, rn] = co_await s.read_exact(tern::mutable_buffer(&number, sizeof number));
        CO_ASSERT_OK(rec);
        EXPECT_EQ(number, 100u + static_cast<std::uint32_t>(i));
      }
    }(local, uring()));
  }
}

// One slot in the table. A registered socket closed while a read (then a multishot receive) and a write wait on
// it: both complete with operation_canceled, the write having sent less than asked (and the client gets exactly
// what it reported as sent, then eof); the slot is free again for another socket, and no fd is left open.
TEST_P(registered_socket_test, closing_a_registered_socket_cancels_what_is_pending_and_frees_its_slot) {
  tern::io_context_options o = options();
  o.registered_file_slots = 1;
  tern::io_context local(o);
  run_bounded(local, [](tern::io_context& ctx, bool uring) -> tern::task<void> {
    const int before = open_fd_count();
    for (bool multishot : {false, true}) {
      {
        auto [client, server] = co_await connected_pair(ctx);
        CO_ASSERT_OK(server.register_descriptor());
        if (uring) {
          EXPECT_EC(client.register_descriptor(), tern::error::table_full);
        } else {
          EXPECT_OK(client.register_descriptor());
        }
        EXPECT_FALSE(client.is_registered());
        auto reader = tern::spawn(ctx, [](tcp_socket& s, bool multishot) -> tern::task<std::error_code> {
          if (multishot) {
            auto [ec, lease] = co_await s.receive();
            co_return ec;
          }
          char b[16];
          auto [ec, n] = co_await s.read_some(tern::mutable_buffer(b, sizeof b));
          co_return ec;
        }(server, multishot));
        // The client never reads: 64 MiB fill both socket buffers and the write waits.
        const std::vector<char> big(64 << 20, 'x');
        auto writer = tern::spawn(ctx, [](tcp_socket& s, const std::vector<char>& big)
                                           -> tern::task<std::pair<std::error_code, std::size_t>> {
          auto [ec, n] = co_await s.write_all(tern::const_buffer(big));
          co_return std::pair{ec, n};
        }(server, big));
        co_await tern::sleep_for(ctx, 20ms);
        server.close();
        EXPECT_EQ(co_await std::move(reader), tern::error::operation_canceled);
        auto [wec, wn] = co_await std::move(writer);
        EXPECT_EQ(wec, tern::error::operation_canceled);
        EXPECT_LT(wn, big.size());
        // The slot went back with the close.
        CO_ASSERT_OK(client.register_descriptor());
        EXPECT_EQ(client.is_registered(), uring);
        // Every byte the write reported as sent reaches the client, and then the end of the stream.
        std::vector<char> chunk(1 << 16);
        std::size_t received = 0;
        std::error_code cec;
        for (;;) {
          auto [ec, n] = co_await tern::with_timeout(client.read_some(tern::mutable_buffer(chunk)), 10s);
          if (ec) {
            cec = ec;
            break;
          }
          EXPECT_EQ(std::count(chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(n), 'x'),
                    static_cast<std::ptrdiff_t>(n));
          received += n;
        }
        EXPECT_EQ(cec, tern::net::error::eof);
        EXPECT_EQ(received, wn);
      }
      co_await tern::sleep_for(ctx, 10ms);  // a multishot's last completion after the close
      EXPECT_EQ(open_fd_count(), before) << "no descriptor left open";
    }
  }(local, uring()));
}

// A peer reset under a registered socket's multishot receive ends the stream with connection_reset.
TEST_P(registered_socket_test, a_peer_reset_reaches_a_registered_receive) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT_OK(server.register_descriptor());
    auto w = co_await client.write_all(tern::const_buffer("abc", 3));
    CO_ASSERT_OK(w.ec);
    auto [ec, lease] = co_await server.receive();
    CO_ASSERT_OK(ec);
    EXPECT_EQ(lease.view(), "abc");
    lease.reset();
    set_linger_reset(client.native_handle());
    client.close();
    auto [rec, rlease] = co_await tern::with_timeout(server.receive(), 10s);
    EXPECT_EC(rec, std::errc::connection_reset);
  }(ctx));
}

// Registering from a thread that does not run the loop while the loop runs is refused with wrong_loop, and so is
// an operation awaited on another loop; the socket is unchanged by either.
TEST_P(registered_socket_test, a_registered_socket_refuses_other_loops) {
  tern::io_context other(options());
  run_bounded(ctx, [](tern::io_context& ctx, tern::io_context& other, bool uring) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    std::error_code from_thread;
    std::thread([&] { from_thread = server.register_descriptor(); }).join();
    EXPECT_EQ(from_thread, tern::error::wrong_loop);
    EXPECT_FALSE(server.is_registered());
    CO_ASSERT_OK(server.register_descriptor());
    std::error_code from_other_loop;
    std::thread([&] {
      other.block_on([](tcp_socket& s, std::error_code& out) -> tern::task<void> {
        char c;
        auto [ec, n] = co_await s.read_some(tern::mutable_buffer(&c, 1));
        out = ec;
      }(server, from_other_loop));
    }).join();
    EXPECT_EQ(from_other_loop, tern::error::wrong_loop);
    EXPECT_EQ(server.is_registered(), uring);
    // Still works on its own loop.
    auto w = co_await client.write_all(tern::const_buffer("ok", 2));
    CO_ASSERT_OK(w.ec);
    char b[2];
    auto [rec, rn] = co_await server.read_exact(tern::mutable_buffer(b, 2));
    CO_ASSERT_OK(rec);
    EXPECT_EQ(std::string_view(b, 2), "ok");
  }(ctx, other, uring()));
}

// move_to gives the slot back (the table holds one, and another socket takes it after the move); the socket
// arrives unregistered on the other loop, works there, and can be registered there.
TEST_P(registered_socket_test, a_moved_socket_leaves_its_slot_behind) {
  tern::io_context_options o = options();
  o.registered_file_slots = 1;
  tern::io_context local(o);
  tern::io_context target(options());
  tcp_socket moved(target);
  tcp_socket peer(local);
  run_bounded(local, [](tern::io_context& ctx, tern::io_context& target, tcp_socket& moved, tcp_socket& peer,
                        bool uring) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT_OK(server.register_descriptor());
    CO_ASSERT_OK(server.move_to(target));
    EXPECT_FALSE(server.is_registered());
    CO_ASSERT_OK(client.register_descriptor());  // the slot server held
    EXPECT_EQ(client.is_registered(), uring);
    moved = std::move(server);
    auto w = co_await client.write_all(tern::const_buffer("moved", 5));
    CO_ASSERT_OK(w.ec);
    peer = std::move(client);
  }(local, target, moved, peer, uring()));
  run_bounded(target, [](tcp_socket& s, bool uring) -> tern::task<void> {
    CO_ASSERT_OK(s.register_descriptor());
    EXPECT_EQ(s.is_registered(), uring);
    char b[5];
    auto [ec, n] = co_await s.read_exact(tern::mutable_buffer(b, 5));
    CO_ASSERT_OK(ec);
    EXPECT_EQ(std::string_view(b, 5), "moved");
  }(moved, uring()));
}

}  // namespace
