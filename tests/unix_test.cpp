// Unix domain sockets on both backends: stream sockets over a path and over an abstract name, the stale socket
// file at bind (an error, or removed when asked; a live socket or a plain file never removed), socket pairs,
// datagram sockets with their senders' names, passing descriptors (and more of them than the receiver has room
// for), peer credentials, and endpoint limits.
#include "fs_support.hpp"
#include "net_support.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

using namespace tern_test;
using tern::net::unix_acceptor;
using tern::net::unix_datagram_socket;
using tern::net::unix_endpoint;
using tern::net::unix_stream_socket;

class unix_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(unix_test);

// A unique abstract name per test run (abstract names are global to the network namespace).
std::string abstract_name(std::string_view what) {
  static std::atomic<int> counter{0};
  return "tern-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + std::string(what);
}

tern::task<void> echo_through(unix_acceptor& acceptor, const unix_endpoint& ep) {
  tern::io_context& ctx = acceptor.context();
  unix_stream_socket client(ctx);
  CO_ASSERT_OK(co_await client.connect(ep));
  auto [aec, server] = co_await acceptor.accept();
  CO_ASSERT_OK(aec);
  CO_ASSERT_OK((co_await client.write_all(tern::const_buffer("over unix"))).ec);
  char buf[9];
  auto [rec, n] = co_await tern::with_timeout(server.read_exact(buf), 10s);
  CO_ASSERT_OK(rec);
  EXPECT_EQ(std::string_view(buf, n), "over unix");
  auto [lec, local] = server.local_endpoint();
  EXPECT_OK(lec);
  EXPECT_EQ(local, ep);
  auto [pec, peer] = client.remote_endpoint();
  EXPECT_OK(pec);
  EXPECT_EQ(peer, ep);
  client.close();
  auto [eec, en] = co_await tern::with_timeout(server.read_some(buf), 10s);
  EXPECT_EC(eec, tern::error::eof);
  (void)en;
}

TEST_P(unix_test, stream_over_a_path_and_over_an_abstract_name) {
  temp_dir dir;
  run_bounded(ctx, [](tern::io_context& ctx, const temp_dir& dir) -> tern::task<void> {
    const auto file = unix_endpoint::path(dir.path("server.sock"));
    CO_ASSERT(file.has_value());
    unix_acceptor by_path(ctx);
    CO_ASSERT_OK(by_path.listen(*file));
    co_await echo_through(by_path, *file);

    const auto name = unix_endpoint::abstract(abstract_name("stream"));
    CO_ASSERT(name.has_value() && name->is_abstract());
    unix_acceptor by_name(ctx);
    CO_ASSERT_OK(by_name.listen(*name));
    co_await echo_through(by_name, *name);
    EXPECT_EQ(name->to_string().front(), '@');
  }(ctx, dir));
}

TEST_P(unix_test, a_stale_socket_file_is_an_error_or_is_removed_when_asked) {
  temp_dir dir;
  run_bounded(ctx, [](tern::io_context& ctx, const temp_dir& dir) -> tern::task<void> {
    const auto ep = unix_endpoint::path(dir.path("stale.sock"));
    CO_ASSERT(ep.has_value());
    {
      unix_acceptor first(ctx);
      CO_ASSERT_OK(first.listen(*ep));
    }  // closed: the file stays behind
    struct stat st {};
    CO_ASSERT(::lstat(std::string(ep->name()).c_str(), &st) == 0 && S_ISSOCK(st.st_mode));

    unix_acceptor second(ctx);
    auto ec = second.listen(*ep);
    EXPECT_EC(ec, tern::error::stale_socket_file);
    EXPECT_TRUE(ec == std::errc::address_in_use);
    EXPECT_FALSE(second.is_open());
    CO_ASSERT_OK(second.listen(*ep, {.remove_stale = true}));
    co_await echo_through(second, *ep);

    // A live listener is never removed, even when asked.
    unix_acceptor third(ctx);
    EXPECT_EC(third.listen(*ep, {.remove_stale = true}), std::errc::address_in_use);
    EXPECT_TRUE(second.is_open());

    // Nor is anything that is not a socket.
    const std::string plain = dir.path("plain-file");
    const int fd = ::open(plain.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    CO_ASSERT(fd >= 0);
    ::close(fd);
    unix_acceptor fourth(ctx);
    EXPECT_EC(fourth.listen(*unix_endpoint::path(plain), {.remove_stale = true}), std::errc::address_in_use);
    EXPECT_EQ(::access(plain.c_str(), F_OK), 0) << "a plain file was removed";
  }(ctx, dir));
}

TEST_P(unix_test, socket_pairs_carry_streams_and_datagrams) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [sec, streams] = unix_stream_socket::pair(ctx);
    CO_ASSERT_OK(sec);
    auto& [a, b] = streams;
    CO_ASSERT_OK((co_await a.write_all(tern::const_buffer("stream"))).ec);
    char buf[16];
    auto [rec, n] = co_await tern::with_timeout(b.read_exact(tern::mutable_buffer(buf, 6)), 10s);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(std::string_view(buf, n), "stream");
    auto [cec, creds] = b.peer_credentials();
    CO_ASSERT_OK(cec);
    EXPECT_EQ(creds.pid, ::getpid());
    EXPECT_EQ(creds.uid, ::getuid());

    auto [dec, datagrams] = unix_datagram_socket::pair(ctx);
    CO_ASSERT_OK(dec);
    auto& [x, y] = datagrams;
    CO_ASSERT_OK((co_await x.send(tern::const_buffer("one"))).ec);
    CO_ASSERT_OK((co_await x.send(tern::const_buffer("two"))).ec);
    auto [r1, n1] = co_await tern::with_timeout(y.receive(buf), 10s);
    CO_ASSERT_OK(r1);
    EXPECT_EQ(std::string_view(buf, n1), "one") << "datagram boundaries are kept";
    auto [r2, n2] = co_await tern::with_timeout(y.receive(buf), 10s);
    CO_ASSERT_OK(r2);
    EXPECT_EQ(std::string_view(buf, n2), "two");
  }(ctx));
}

TEST_P(unix_test, datagram_sockets_know_their_senders) {
  temp_dir dir;
  run_bounded(ctx, [](tern::io_context& ctx, const temp_dir& dir) -> tern::task<void> {
    const auto server_ep = unix_endpoint::path(dir.path("dgram-server"));
    const auto client_ep = unix_endpoint::path(dir.path("dgram-client"));
    unix_datagram_socket server(ctx), client(ctx), anonymous(ctx);
    CO_ASSERT_OK(server.bind(*server_ep));
    CO_ASSERT_OK(client.bind(*client_ep));
    CO_ASSERT_OK(anonymous.open());
    CO_ASSERT_OK((co_await client.send_to(tern::const_buffer("named"), *server_ep)).ec);
    CO_ASSERT_OK((co_await anonymous.send_to(tern::const_buffer("unnamed"), *server_ep)).ec);
    char buf[16];
    auto [ec1, got1] = co_await tern::with_timeout(server.receive_from(buf), 10s);
    CO_ASSERT_OK(ec1);
    EXPECT_EQ(std::string_view(buf, got1.size), "named");
    EXPECT_EQ(got1.from, *client_ep);
    auto [ec2, got2] = co_await tern::with_timeout(server.receive_from(buf), 10s);
    CO_ASSERT_OK(ec2);
    EXPECT_EQ(std::string_view(buf, got2.size), "unnamed");
    EXPECT_TRUE(got2.from.is_unnamed());
    // The answer goes back to the named sender.
    CO_ASSERT_OK((co_await server.send_to(tern::const_buffer("back"), got1.from)).ec);
    auto [ec3, got3] = co_await tern::with_timeout(client.receive_from(buf), 10s);
    CO_ASSERT_OK(ec3);
    EXPECT_EQ(std::string_view(buf, got3.size), "back");
    // Truncation is reported as for UDP.
    CO_ASSERT_OK((co_await client.send_to(tern::const_buffer("0123456789"), *server_ep)).ec);
    char small[4];
    auto [ec4, got4] = co_await tern::with_timeout(server.receive_from(small), 10s);
    EXPECT_EC(ec4, tern::error::message_truncated);
    EXPECT_EQ(got4.size, 4u);
  }(ctx, dir));
}

TEST_P(unix_test, descriptors_pass_between_sockets) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [sec, streams] = unix_stream_socket::pair(ctx);
    CO_ASSERT_OK(sec);
    auto& [a, b] = streams;
    int pipe_fds[2];
    CO_ASSERT(::pipe2(pipe_fds, O_CLOEXEC) == 0);
    tern::unique_fd read_end(pipe_fds[0]), write_end(pipe_fds[1]);

    // Send the pipe's write end; the receiver writes through its copy, and we read it from our read end.
    const int to_send[] = {write_end.get()};
    auto [wec, wn] = co_await a.send_fds(tern::const_buffer("f"), to_send);
    CO_ASSERT_OK(wec);
    EXPECT_EQ(wn, 1u);
    write_end.reset();  // ours is closed; the receiver's copy keeps the pipe open
    std::array<tern::unique_fd, 4> received;
    char byte = 0;
    auto [rec, msg] = co_await tern::with_timeout(b.receive_fds(tern::mutable_buffer(&byte, 1), received), 10s);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(msg.size, 1u);
    EXPECT_EQ(byte, 'f');
    CO_ASSERT(msg.fds == 1u);
    EXPECT_EQ(::fcntl(received[0].get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC) << "received descriptors are cloexec";
    CO_ASSERT(::write(received[0].get(), "via fd", 6) == 6);
    char out[6];
    CO_ASSERT(::read(read_end.get(), out, 6) == 6);
    EXPECT_EQ(std::string_view(out, 6), "via fd");

    // Three descriptors, room for one: the first arrives, the result says the rest were dropped.
    const int three[] = {read_end.get(), read_end.get(), read_end.get()};
    CO_ASSERT_OK((co_await a.send_fds(tern::const_buffer("3"), three)).ec);
    std::array<tern::unique_fd, 1> one;
    auto [tec, tmsg] = co_await tern::with_timeout(b.receive_fds(tern::mutable_buffer(&byte, 1), one), 10s);
    EXPECT_EC(tec, tern::error::message_truncated);
    EXPECT_EQ(tmsg.size, 1u);
    EXPECT_EQ(tmsg.fds, 1u);
    EXPECT_TRUE(static_cast<bool>(one[0]));

    // A receiver with no room at all is told, too.
    const int again[] = {read_end.get()};
    CO_ASSERT_OK((co_await a.send_fds(tern::const_buffer("1"), again)).ec);
    auto [nec, nmsg] = co_await tern::with_timeout(b.receive_fds(tern::mutable_buffer(&byte, 1), {}), 10s);
    EXPECT_EC(nec, tern::error::message_truncated);
    EXPECT_EQ(nmsg.fds, 0u);

    // The peer closes: eof.
    a.close();
    for (;;) {
      auto [eec, emsg] = co_await tern::with_timeout(b.receive_fds(tern::mutable_buffer(&byte, 1), received), 10s);
      if (eec == tern::error::eof) break;
      CO_ASSERT_OK(eec);  // data still queued before the close
      (void)emsg;
    }
  }(ctx));
}

TEST_P(unix_test, too_many_descriptors_are_refused_before_sending) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [sec, streams] = unix_stream_socket::pair(ctx);
    CO_ASSERT_OK(sec);
    std::vector<int> many(tern::net::max_passed_fds + 1, 0);
    auto [ec, n] = co_await streams.first.send_fds(tern::const_buffer("x"), many);
    EXPECT_EC(ec, std::errc::invalid_argument);
    EXPECT_EQ(n, 0u);
  }(ctx));
}

TEST(unix_endpoint, limits_and_forms) {
  EXPECT_FALSE(unix_endpoint::path("").has_value());
  EXPECT_FALSE(unix_endpoint::path(std::string(200, 'a')).has_value());
  EXPECT_FALSE(unix_endpoint::path(std::string_view("a\0b", 3)).has_value());
  EXPECT_TRUE(unix_endpoint::path(std::string(107, 'a')).has_value());
  EXPECT_FALSE(unix_endpoint::path(std::string(108, 'a')).has_value());
  const auto p = unix_endpoint::path("/run/app.sock");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->name(), "/run/app.sock");
  EXPECT_FALSE(p->is_abstract());
  EXPECT_EQ(p->to_string(), "/run/app.sock");
  const auto a = unix_endpoint::abstract("app");
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->is_abstract());
  EXPECT_EQ(a->name(), "app");
  EXPECT_EQ(a->to_string(), "@app");
  EXPECT_FALSE(*a == *unix_endpoint::path("app"));
  EXPECT_TRUE(unix_endpoint().is_unnamed());
  EXPECT_EQ(unix_endpoint().to_string(), "(unnamed)");
}

}  // namespace
