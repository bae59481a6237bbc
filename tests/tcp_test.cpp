// TCP sockets and acceptors: echo with payload checks, large concurrent transfers, error reporting (reset,
// refused, eof, closed socket, fd exhaustion, broken pipe), close and cancel semantics under pending operations,
// IPv6, socket options, endpoints, half-close, and isolation of a failing connection from the others.
#include "net_support.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace tern_test;
using tern::net::endpoint;
using tern::net::tcp_acceptor;
using tern::net::tcp_socket;

class tcp_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(tcp_test);

// Echoes everything it reads until the peer closes or an error occurs; returns the error that ended it.
tern::task<std::error_code> echo_until_error(tcp_socket& s) {
  char buf[4096];
  for (;;) {
    auto [ec, n] = co_await s.read_some(tern::mutable_buffer(buf, sizeof(buf)));
    if (ec) co_return ec;
    auto [wec, wn] = co_await s.write_all(tern::const_buffer(buf, n));
    if (wec) co_return wec;
    EXPECT_EQ(wn, n);
  }
}

// Sends text and checks that exactly the same bytes come back.
tern::task<void> expect_echo(tcp_socket& s, std::string_view text) {
  auto [wec, wn] = co_await s.write_all(tern::const_buffer(text));
  EXPECT_OK(wec);
  EXPECT_EQ(wn, text.size());
  std::string back(text.size(), '\0');
  auto [rec, rn] = co_await s.read_exact(tern::mutable_buffer(back));
  EXPECT_OK(rec);
  EXPECT_EQ(rn, text.size());
  EXPECT_EQ(back, text);
}

TEST_P(tcp_test, connect_accept_echo) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tcp_acceptor acceptor(ctx);
    endpoint ep = listen_loopback(acceptor);
    std::error_code server_end;
    auto server = tern::spawn(ctx, [](tcp_acceptor& acceptor, std::error_code& end) -> tern::task<void> {
      auto [ec, s] = co_await acceptor.accept();
      CO_ASSERT_OK(ec);
      end = co_await echo_until_error(s);
    }(acceptor, server_end));

    tcp_socket client(ctx);
    EXPECT_FALSE(client.is_open());
    auto cec = co_await client.connect(ep);
    CO_ASSERT_OK(cec);
    EXPECT_TRUE(client.is_open());
    co_await expect_echo(client, "hello");
    co_await expect_echo(client, std::string(1000, 'x'));
    auto pattern = make_pattern(100'000);
    co_await expect_echo(client, std::string_view(pattern.data(), pattern.size()));
    co_await expect_echo(client, "bye");

    EXPECT_OK(client.shutdown(tern::net::shutdown_how::send));
    char c;
    auto [rec, rn] = co_await tern::with_timeout(client.read_some(tern::mutable_buffer(&c, 1)), 10s);
    EXPECT_EC(rec, tern::net::error::eof) << "the server closes after seeing our eof";
    EXPECT_EQ(rn, 0u);
    co_await std::move(server);
    EXPECT_EC(server_end, tern::net::error::eof);
  }(ctx));
}

TEST_P(tcp_test, convenience_connect) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tcp_acceptor acceptor(ctx);
    endpoint ep = listen_loopback(acceptor);
    auto [ec, client] = co_await tern::net::connect(ctx, ep);
    CO_ASSERT_OK(ec);
    EXPECT_TRUE(client.is_open());
    auto [aec, server] = co_await tern::with_timeout(acceptor.accept(), 10s);
    CO_ASSERT_OK(aec);
    auto echo = tern::spawn(ctx, echo_until_error(server));
    co_await expect_echo(client, "via tern::net::connect");
    client.close();
    EXPECT_EC(co_await std::move(echo), tern::net::error::eof);
  }(ctx));
}

// 8 MiB each way at once: on each socket a read and a write are pending concurrently.
TEST_P(tcp_test, large_bidirectional_transfer) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    constexpr std::size_t size = 8u << 20;
    const auto up = make_pattern(size, 1);
    const auto down = make_pattern(size, 2);

    auto reader = [](tcp_socket& s, const std::vector<char>& expected) -> tern::task<void> {
      std::vector<char> got(expected.size());
      auto [ec, n] = co_await s.read_exact(tern::mutable_buffer(got));
      EXPECT_OK(ec);
      EXPECT_EQ(n, expected.size());
      EXPECT_TRUE(got == expected) << "payload corrupted";
    };
    // The writes are operations spawned as tasks of their own (no wrapping coroutine of ours).
    auto w1 = tern::spawn(ctx, client.write_all(tern::const_buffer(up)));
    auto r1 = tern::spawn(ctx, reader(server, up));
    auto w2 = tern::spawn(ctx, server.write_all(tern::const_buffer(down)));
    auto r2 = tern::spawn(ctx, reader(client, down));
    auto [ec1, n1] = co_await std::move(w1);
    EXPECT_OK(ec1);
    EXPECT_EQ(n1, size);
    co_await std::move(r1);
    auto [ec2, n2] = co_await std::move(w2);
    EXPECT_OK(ec2);
    EXPECT_EQ(n2, size);
    co_await std::move(r2);
  }(ctx), 100s);
}

// Drops the first n bytes of parts (what a gather write took), keeping the rest in order.
void advance(std::vector<tern::const_buffer>& parts, std::size_t n) {
  std::size_t i = 0;
  while (i < parts.size() && n >= parts[i].size()) n -= parts[i++].size();
  parts.erase(parts.begin(), parts.begin() + static_cast<std::ptrdiff_t>(i));
  if (!parts.empty()) parts.front() = parts.front() + n;
}

// Gather writes (sendmsg): the parts arrive in order and whole however the kernel cuts the writes, an empty part
// included; small socket buffers make the writes stop part-way.
TEST_P(tcp_test, gather_writes_send_the_parts_in_order) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    EXPECT_OK(client.set_send_buffer_size(16 * 1024));
    EXPECT_OK(server.set_receive_buffer_size(16 * 1024));
    const std::string head = "head:";
    const auto body = make_pattern(3u << 20, 7);
    const auto more = make_pattern(1u << 20, 8);
    const std::string tail = ":tail";
    std::vector<char> expected(head.begin(), head.end());
    expected.insert(expected.end(), body.begin(), body.end());
    expected.insert(expected.end(), more.begin(), more.end());
    expected.insert(expected.end(), tail.begin(), tail.end());
    auto reader = [](tcp_socket& s, const std::vector<char>& expected) -> tern::task<void> {
      std::vector<char> got(expected.size());
      auto [ec, n] = co_await s.read_exact(tern::mutable_buffer(got));
      EXPECT_OK(ec);
      EXPECT_EQ(n, expected.size());
      EXPECT_TRUE(got == expected) << "the gathered parts arrived out of order or changed";
    };
    auto reading = tern::spawn(ctx, reader(server, expected));
    std::vector<tern::const_buffer> parts = {tern::const_buffer(head), tern::const_buffer(), tern::const_buffer(body),
                                             tern::const_buffer(more), tern::const_buffer(tail)};
    std::size_t total = 0;
    int writes = 0;
    while (!parts.empty()) {
      auto [ec, n] = co_await client.write_some(std::span<const tern::const_buffer>(parts));
      CO_ASSERT_OK(ec);
      CO_ASSERT(n > 0);
      total += n;
      ++writes;
      advance(parts, n);
    }
    EXPECT_EQ(total, expected.size());
    EXPECT_GT(writes, 1);  // 4 MiB cannot go at once through 16 KiB buffers
    co_await std::move(reading);
  }(ctx), 60s);
}

// A gather write takes the first eight buffers (the rest is the next write's); an error is reported as by
// write_some(b); a write waiting on a full socket is cancelled by a timeout.
TEST_P(tcp_test, gather_write_limits_errors_and_cancellation) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    std::string text;
    std::vector<tern::const_buffer> parts;
    std::array<std::string, 10> pieces;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      pieces[i] = std::string(10, static_cast<char>('a' + i));
      text += pieces[i];
    }
    for (const std::string& p : pieces) parts.emplace_back(p);
    auto [ec, n] = co_await client.write_some(std::span<const tern::const_buffer>(parts));
    CO_ASSERT_OK(ec);
    EXPECT_EQ(n, 80u);  // eight of the ten, whole: an empty socket takes them at once
    advance(parts, n);
    auto [ec2, n2] = co_await client.write_some(std::span<const tern::const_buffer>(parts));
    CO_ASSERT_OK(ec2);
    EXPECT_EQ(n2, 20u);
    std::string got(text.size(), '\0');
    CO_ASSERT_OK((co_await server.read_exact(tern::mutable_buffer(got))).ec);
    EXPECT_EQ(got, text);

    // Nobody reads: gather writes fill both buffers, then one waits, and its deadline cancels it.
    EXPECT_OK(client.set_send_buffer_size(16 * 1024));
    EXPECT_OK(server.set_receive_buffer_size(16 * 1024));
    const std::vector<char> chunk(64 * 1024, 'f');
    const tern::const_buffer two[] = {tern::const_buffer(chunk), tern::const_buffer(chunk)};
    std::error_code stuck;
    for (int i = 0; i < 1000 && !stuck; ++i) {
      stuck = (co_await tern::with_timeout(client.write_some(std::span<const tern::const_buffer>(two)), 50ms)).ec;
    }
    EXPECT_EC(stuck, std::errc::timed_out);

    // A reset peer: broken pipe or reset, never SIGPIPE.
    set_linger_reset(server.native_handle());
    server.close();
    (void)co_await tern::sleep_for(10ms);
    std::error_code failed;
    for (int i = 0; i < 1000 && !failed; ++i) {
      failed = (co_await client.write_some(std::span<const tern::const_buffer>(two))).ec;
    }
    EXPECT_TRUE(failed == std::errc::broken_pipe || failed == std::errc::connection_reset) << describe(failed);
  }(ctx));
}

// Many small reads reassemble a stream exactly (reads return what is there, never more than asked).
TEST_P(tcp_test, chunked_reads_reassemble_stream) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    const auto data = make_pattern(1u << 20, 3);
    auto writer = tern::spawn(ctx, [](tcp_socket& s, const std::vector<char>& data) -> tern::task<void> {
      auto [ec, n] = co_await s.write_all(tern::const_buffer(data));
      EXPECT_OK(ec);
      s.close();
    }(client, data));
    std::vector<char> got;
    char buf[777];
    for (;;) {
      auto [ec, n] = co_await server.read_some(tern::mutable_buffer(buf, sizeof(buf)));
      if (ec) {
        EXPECT_EC(ec, tern::net::error::eof);
        EXPECT_EQ(n, 0u);
        break;
      }
      EXPECT_GT(n, 0u);
      EXPECT_LE(n, sizeof(buf));
      got.insert(got.end(), buf, buf + n);
    }
    co_await std::move(writer);
    EXPECT_TRUE(got == data) << "got " << got.size() << " bytes of " << data.size();
  }(ctx), 60s);
}

// Data written just before close() is delivered in full: close is graceful unless linger says otherwise.
TEST_P(tcp_test, close_after_write_delivers_everything) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    const auto data = make_pattern(256u << 10, 4);
    auto [wec, wn] = co_await client.write_all(tern::const_buffer(data));
    CO_ASSERT_OK(wec);
    client.close();
    std::vector<char> got(data.size());
    auto [rec, rn] = co_await server.read_exact(tern::mutable_buffer(got));
    EXPECT_OK(rec);
    EXPECT_EQ(rn, data.size());
    EXPECT_TRUE(got == data);
    char c;
    auto [eec, en] = co_await server.read_some(tern::mutable_buffer(&c, 1));
    EXPECT_EC(eec, tern::net::error::eof);
  }(ctx));
}

TEST_P(tcp_test, peer_reset_mid_read_gives_connection_reset) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    // Some traffic first, both ways.
    auto [w1, n1] = co_await client.write_all(tern::const_buffer(std::string_view("ping")));
    CO_ASSERT_OK(w1);
    char four[4];
    auto [r1, m1] = co_await server.read_exact(tern::mutable_buffer(four, 4));
    CO_ASSERT_OK(r1);
    EXPECT_EQ(std::string_view(four, 4), "ping");
    auto [w2, n2] = co_await server.write_all(tern::const_buffer(std::string_view("pong")));
    CO_ASSERT_OK(w2);
    auto [r2, m2] = co_await client.read_exact(tern::mutable_buffer(four, 4));
    CO_ASSERT_OK(r2);
    EXPECT_EQ(std::string_view(four, 4), "pong");

    auto resetter = tern::spawn(ctx, [](tcp_socket& s) -> tern::task<void> {
      (void)co_await tern::sleep_for(20ms);  // the server's read is pending by now
      set_linger_reset(s.native_handle());
      s.close();
    }(client));
    char buf[16];
    auto [ec, n] = co_await tern::with_timeout(server.read_some(tern::mutable_buffer(buf, sizeof(buf))), 10s);
    EXPECT_EC(ec, std::errc::connection_reset);
    EXPECT_EQ(n, 0u);
    co_await std::move(resetter);
  }(ctx));
}

TEST_P(tcp_test, write_to_reset_peer_fails_without_sigpipe) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    set_linger_reset(server.native_handle());
    server.close();
    (void)co_await tern::sleep_for(10ms);
    std::vector<char> chunk(4096, 'z');
    std::error_code ec;
    for (int i = 0; i < 1000 && !ec; ++i) {
      auto r = co_await client.write_some(tern::const_buffer(chunk));
      ec = r.ec;
    }
    // Reaching this line at all means no SIGPIPE killed the process.
    EXPECT_TRUE(ec == std::errc::broken_pipe || ec == std::errc::connection_reset) << describe(ec);
  }(ctx));
}

TEST_P(tcp_test, refused_connect_gives_connection_refused) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    endpoint ep;
    {
      tcp_acceptor acceptor(ctx);
      ep = listen_loopback(acceptor);
      acceptor.close();
      EXPECT_FALSE(acceptor.is_open());
    }
    tcp_socket client(ctx);
    auto ec = co_await tern::with_timeout(client.connect(ep), 10s);
    EXPECT_EC(ec, std::errc::connection_refused);
    EXPECT_FALSE(client.is_open()) << "a failed connect closes the socket";

    auto [cec, s] = co_await tern::net::connect(ctx, ep);
    EXPECT_EC(cec, std::errc::connection_refused);
    EXPECT_FALSE(s.is_open());

    // The same socket object connects again once there is a listener: connect() opens a fresh socket.
    tcp_acceptor acceptor(ctx);
    CO_ASSERT_OK(acceptor.listen(ep));
    CO_ASSERT_OK(co_await tern::with_timeout(client.connect(ep), 10s));
    EXPECT_TRUE(client.is_open());
    auto [aec, server] = co_await acceptor.accept();
    CO_ASSERT_OK(aec);
    auto [wec, n] = co_await client.write_all(tern::const_buffer("ok"));
    EXPECT_OK(wec);
    char buf[2];
    auto [rec, m] = co_await server.read_exact(buf);
    EXPECT_OK(rec);
    EXPECT_EQ(std::string_view(buf, m), "ok");
    (void)n;
  }(ctx));
}

TEST_P(tcp_test, connect_that_times_out_or_is_cancelled_closes_the_socket) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    // A listener whose backlog is full leaves further connects pending (SYNs dropped), so they can be timed out.
    tcp_acceptor acceptor(ctx);
    tern::net::acceptor_options opts;
    opts.backlog = 0;
    CO_ASSERT_OK(acceptor.listen(endpoint::loopback_v4(0), opts));
    auto [lec, ep] = acceptor.local_endpoint();
    CO_ASSERT_OK(lec);
    std::vector<tcp_socket> fillers;
    bool saw_timeout = false;
    for (int i = 0; i < 8 && !saw_timeout; ++i) {
      tcp_socket s(ctx);
      auto ec = co_await tern::with_timeout(s.connect(ep), 50ms);
      if (ec == std::errc::timed_out) {
        EXPECT_TRUE(ec == tern::error::timed_out);
        EXPECT_FALSE(s.is_open()) << "a timed-out connect closes the socket";
        saw_timeout = true;
      } else {
        CO_ASSERT_OK(ec);
        fillers.push_back(std::move(s));
      }
    }
    EXPECT_TRUE(saw_timeout) << "the backlog never filled up";
  }(ctx));
}

TEST_P(tcp_test, read_after_peer_close_gives_eof) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    server.close();
    char buf[8];
    auto [ec, n] = co_await tern::with_timeout(client.read_some(tern::mutable_buffer(buf, sizeof(buf))), 10s);
    EXPECT_EC(ec, tern::net::error::eof);
    EXPECT_EQ(n, 0u);
    // eof is sticky: reading again reports it again.
    auto [ec2, n2] = co_await tern::with_timeout(client.read_some(tern::mutable_buffer(buf, sizeof(buf))), 10s);
    EXPECT_EC(ec2, tern::net::error::eof);
    EXPECT_EQ(n2, 0u);
  }(ctx));
}

// After a receive that drained the socket and a send since, the io_uring backend arms the next receive's poll
// before trying the socket (the answer is usually not there yet). When it is there already, or the peer has
// closed, that receive must still complete at once with the data, then with eof.
TEST_P(tcp_test, receive_after_an_answer_finds_data_and_eof_already_there) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    char buf[16] = {};
    for (int round = 0; round < 3; ++round) {
      auto [w1, n1] = co_await client.write_all(std::string_view("ask"));
      CO_ASSERT_OK(w1);
      auto [r1, m1] = co_await tern::with_timeout(server.read_exact(tern::mutable_buffer(buf, 3)), 10s);
      CO_ASSERT_OK(r1);
      auto [w2, n2] = co_await server.write_all(std::string_view("answer"));
      CO_ASSERT_OK(w2);
      auto [r2, m2] = co_await tern::with_timeout(client.read_exact(tern::mutable_buffer(buf, 6)), 10s);
      CO_ASSERT_OK(r2);
      EXPECT_EQ(std::string_view(buf, 6), "answer");
    }
    // The next request is in the server's socket before its receive starts.
    auto [w3, n3] = co_await client.write_all(std::string_view("early"));
    CO_ASSERT_OK(w3);
    (void)co_await tern::sleep_for(5ms);
    auto [r3, m3] = co_await tern::with_timeout(server.read_some(tern::mutable_buffer(buf, sizeof(buf))), 10s);
    CO_ASSERT_OK(r3);
    EXPECT_EQ(std::string_view(buf, m3), "early");
    auto [w4, n4] = co_await server.write_all(std::string_view("ok"));
    CO_ASSERT_OK(w4);
    // And the peer's close, before the receive starts.
    CO_ASSERT_OK(client.shutdown(tern::net::shutdown_how::send));
    (void)co_await tern::sleep_for(5ms);
    auto [r4, m4] = co_await tern::with_timeout(server.read_some(tern::mutable_buffer(buf, sizeof(buf))), 10s);
    EXPECT_EC(r4, tern::net::error::eof);
    EXPECT_EQ(m4, 0u);
  }(ctx));
}

TEST_P(tcp_test, read_exact_reports_eof_after_partial_data) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    auto [wec, wn] = co_await server.write_all(tern::const_buffer(std::string_view("abc")));
    CO_ASSERT_OK(wec);
    server.close();
    char buf[10] = {};
    auto [ec, n] = co_await client.read_exact(tern::mutable_buffer(buf, sizeof(buf)));
    EXPECT_EC(ec, tern::net::error::eof);
    EXPECT_EQ(n, 3u) << "the bytes that did arrive are counted";
    EXPECT_EQ(std::string_view(buf, 3), "abc");
  }(ctx));
}

TEST_P(tcp_test, read_on_closed_socket_gives_error) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    client.close();
    EXPECT_FALSE(client.is_open());
    EXPECT_EQ(client.native_handle(), -1);
    char buf[8];
    auto [ec, n] = co_await tern::with_timeout(client.read_some(tern::mutable_buffer(buf, sizeof(buf))), 10s);
    EXPECT_TRUE(static_cast<bool>(ec)) << "reading a closed socket must fail";
    EXPECT_FALSE(ec == std::errc::timed_out) << "it must fail at once, not hang";
    EXPECT_EQ(n, 0u);
    auto [wec, wn] = co_await tern::with_timeout(client.write_some(tern::const_buffer(std::string_view("x"))), 10s);
    EXPECT_TRUE(static_cast<bool>(wec)) << "writing a closed socket must fail";
    EXPECT_FALSE(wec == std::errc::timed_out);
    EXPECT_EQ(wn, 0u);
    // The composed operations fail the same way.
    auto [xec, xn] = co_await tern::with_timeout(client.read_exact(tern::mutable_buffer(buf, sizeof(buf))), 10s);
    EXPECT_EC(xec, std::errc::bad_file_descriptor);
    EXPECT_EQ(xn, 0u);
    auto [aec, an] = co_await tern::with_timeout(client.write_all(tern::const_buffer(std::string_view("x"))), 10s);
    EXPECT_EC(aec, std::errc::bad_file_descriptor);
    EXPECT_EQ(an, 0u);
  }(ctx));
}

TEST_P(tcp_test, read_on_never_opened_socket_gives_error) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tcp_socket s(ctx);
    EXPECT_FALSE(s.is_open());
    char buf[8];
    auto [ec, n] = co_await tern::with_timeout(s.read_some(tern::mutable_buffer(buf, sizeof(buf))), 10s);
    EXPECT_TRUE(static_cast<bool>(ec));
    EXPECT_FALSE(ec == std::errc::timed_out);
    EXPECT_EQ(n, 0u);
  }(ctx));
}

TEST_P(tcp_test, close_during_pending_read_gives_operation_canceled) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    auto closer = tern::spawn(ctx, [](tcp_socket& s) -> tern::task<void> {
      (void)co_await tern::sleep_for(10ms);
      s.close();
    }(client));
    char buf[8];
    auto [ec, n] = co_await client.read_some(tern::mutable_buffer(buf, sizeof(buf)));
    EXPECT_EC(ec, std::errc::operation_canceled);
    EXPECT_EQ(n, 0u);
    co_await std::move(closer);
    EXPECT_FALSE(client.is_open());
    // The peer sees an orderly close.
    auto [sec, sn] = co_await tern::with_timeout(server.read_some(tern::mutable_buffer(buf, sizeof(buf))), 10s);
    EXPECT_EC(sec, tern::net::error::eof);
  }(ctx));
}

TEST_P(tcp_test, close_during_pending_write_gives_operation_canceled) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    // Nobody reads on the server: the write fills both socket buffers and stays pending.
    EXPECT_OK(client.set_send_buffer_size(16 * 1024));
    EXPECT_OK(server.set_receive_buffer_size(16 * 1024));
    const std::vector<char> big(32u << 20, 'w');
    std::error_code write_ec;
    std::size_t written = 0;
    auto writer = tern::spawn(ctx, [](tcp_socket& s, const std::vector<char>& big, std::error_code& ec,
                                      std::size_t& written) -> tern::task<void> {
      auto r = co_await s.write_all(tern::const_buffer(big));
      ec = r.ec;
      written = r.value;
    }(client, big, write_ec, written));
    (void)co_await tern::sleep_for(50ms);
    EXPECT_FALSE(writer.done()) << "the write should be blocked on a full buffer";
    client.close();
    co_await std::move(writer);
    EXPECT_EC(write_ec, std::errc::operation_canceled);
    EXPECT_LT(written, big.size());
  }(ctx));
}

TEST_P(tcp_test, close_during_pending_accept_gives_operation_canceled) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tcp_acceptor acceptor(ctx);
    listen_loopback(acceptor);
    auto closer = tern::spawn(ctx, [](tcp_acceptor& a) -> tern::task<void> {
      (void)co_await tern::sleep_for(10ms);
      a.close();
    }(acceptor));
    auto [ec, s] = co_await acceptor.accept();
    EXPECT_EC(ec, std::errc::operation_canceled);
    EXPECT_FALSE(s.is_open());
    co_await std::move(closer);
    EXPECT_FALSE(acceptor.is_open());
  }(ctx));
}

TEST_P(tcp_test, accept_at_fd_limit_gives_emfile_then_recovers) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tcp_acceptor acceptor(ctx);
    endpoint ep = listen_loopback(acceptor);
    // The client's fd exists before the table is filled; the handshake completes in the kernel's accept queue.
    tcp_socket client(ctx);
    auto cec = co_await client.connect(ep);
    CO_ASSERT_OK(cec);

    fd_table_filler filler;
    CO_ASSERT(filler.full());
    auto [ec, s] = co_await tern::with_timeout(acceptor.accept(), 10s);
    const bool accepted_open = s.is_open();
    // Free the table before inspecting the result: comparing error codes makes virtual calls that the
    // sanitizers' runtime checks with a pipe, which needs a free fd.
    filler.release();
    EXPECT_EC(ec, std::errc::too_many_files_open);
    EXPECT_FALSE(accepted_open);

    // The same acceptor accepts the connection that waited in the queue.
    auto [ec2, s2] = co_await tern::with_timeout(acceptor.accept(), 10s);
    CO_ASSERT_OK(ec2);
    CO_ASSERT(s2.is_open());
    auto echo = tern::spawn(ctx, echo_until_error(s2));
    co_await expect_echo(client, "after EMFILE");
    client.close();
    EXPECT_EC(co_await std::move(echo), tern::net::error::eof);
  }(ctx));
}

TEST_P(tcp_test, ipv6_loopback_connect) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tcp_acceptor acceptor(ctx);
    auto lec = acceptor.listen(endpoint::loopback_v6(0));
    CO_ASSERT_OK(lec);
    auto [eec, ep] = acceptor.local_endpoint();
    CO_ASSERT_OK(eec);
    EXPECT_TRUE(ep.is_v6());
    EXPECT_EQ(ep.to_string(), "[::1]:" + std::to_string(ep.port()));

    tcp_socket client(ctx);
    auto cec = co_await client.connect(ep);
    CO_ASSERT_OK(cec);
    auto [aec, server] = co_await tern::with_timeout(acceptor.accept(), 10s);
    CO_ASSERT_OK(aec);
    auto [rec, remote] = server.remote_endpoint();
    EXPECT_OK(rec);
    EXPECT_TRUE(remote.is_v6());
    auto echo = tern::spawn(ctx, echo_until_error(server));
    co_await expect_echo(client, "over IPv6");
    client.close();
    EXPECT_EC(co_await std::move(echo), tern::net::error::eof);
  }(ctx));
}

TEST_P(tcp_test, socket_options_take_effect) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    const int fd = client.native_handle();
    CO_ASSERT(fd >= 0);

    EXPECT_OK(client.set_no_delay(true));
    EXPECT_EQ(get_int_option(fd, IPPROTO_TCP, TCP_NODELAY), 1);
    EXPECT_OK(client.set_no_delay(false));
    EXPECT_EQ(get_int_option(fd, IPPROTO_TCP, TCP_NODELAY), 0);

    EXPECT_OK(client.set_keep_alive(true));
    EXPECT_EQ(get_int_option(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
    EXPECT_OK(client.set_keep_alive(false));
    EXPECT_EQ(get_int_option(fd, SOL_SOCKET, SO_KEEPALIVE), 0);

    // Linux doubles the requested size for bookkeeping; it is at least what was asked for.
    EXPECT_OK(client.set_send_buffer_size(64 * 1024));
    EXPECT_GE(get_int_option(fd, SOL_SOCKET, SO_SNDBUF), 64 * 1024);
    EXPECT_LT(get_int_option(fd, SOL_SOCKET, SO_SNDBUF), 1024 * 1024);
    EXPECT_OK(client.set_receive_buffer_size(96 * 1024));
    EXPECT_GE(get_int_option(fd, SOL_SOCKET, SO_RCVBUF), 96 * 1024);
    EXPECT_LT(get_int_option(fd, SOL_SOCKET, SO_RCVBUF), 1024 * 1024);

    // Options on a closed socket report an error instead of touching a stale fd.
    server.close();
    EXPECT_TRUE(static_cast<bool>(server.set_no_delay(true)));
  }(ctx));
}

// open() creates the socket early so options can be set before connecting; connect() then keeps that socket.
TEST_P(tcp_test, open_before_connect_keeps_options) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tcp_acceptor acceptor(ctx);
    endpoint ep = listen_loopback(acceptor);
    tcp_socket client(ctx);
    EXPECT_OK(client.open(AF_INET));
    CO_ASSERT(client.is_open());
    const int fd = client.native_handle();
    EXPECT_OK(client.set_no_delay(true));
    auto cec = co_await client.connect(ep);
    CO_ASSERT_OK(cec);
    EXPECT_EQ(client.native_handle(), fd);
    EXPECT_EQ(get_int_option(fd, IPPROTO_TCP, TCP_NODELAY), 1);
    auto [aec, server] = co_await tern::with_timeout(acceptor.accept(), 10s);
    CO_ASSERT_OK(aec);
    auto echo = tern::spawn(ctx, echo_until_error(server));
    co_await expect_echo(client, "opened early");
    client.close();
    EXPECT_EC(co_await std::move(echo), tern::net::error::eof);
  }(ctx));
}

TEST_P(tcp_test, reuse_port_lets_two_acceptors_share_a_port) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tern::net::acceptor_options opts;
    opts.reuse_port = true;
    tcp_acceptor first(ctx);
    auto ec = first.listen(endpoint::loopback_v4(0), opts);
    CO_ASSERT_OK(ec);
    auto [lec, ep] = first.local_endpoint();
    CO_ASSERT_OK(lec);
    tcp_acceptor second(ctx);
    EXPECT_OK(second.listen(ep, opts));
    EXPECT_EQ(get_int_option(first.native_handle(), SOL_SOCKET, SO_REUSEPORT), 1);
    auto [sec, sep] = second.local_endpoint();
    EXPECT_OK(sec);
    EXPECT_EQ(sep.port(), ep.port());
    co_return;
  }(ctx));
}

TEST_P(tcp_test, local_and_remote_endpoints_agree) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tcp_acceptor acceptor(ctx);
    endpoint ep = listen_loopback(acceptor);
    tcp_socket client(ctx);
    auto cec = co_await client.connect(ep);
    CO_ASSERT_OK(cec);
    auto [aec, server] = co_await tern::with_timeout(acceptor.accept(), 10s);
    CO_ASSERT_OK(aec);

    auto [e1, client_local] = client.local_endpoint();
    auto [e2, client_remote] = client.remote_endpoint();
    auto [e3, server_local] = server.local_endpoint();
    auto [e4, server_remote] = server.remote_endpoint();
    EXPECT_OK(e1);
    EXPECT_OK(e2);
    EXPECT_OK(e3);
    EXPECT_OK(e4);
    EXPECT_EQ(client_local.to_string(), server_remote.to_string());
    EXPECT_EQ(client_remote.to_string(), server_local.to_string());
    EXPECT_EQ(client_remote.to_string(), ep.to_string());
    EXPECT_TRUE(client_remote == ep);
    EXPECT_EQ(client_remote.to_string(), "127.0.0.1:" + std::to_string(ep.port()));
    EXPECT_NE(client_local.port(), 0);
    EXPECT_NE(client_local.port(), ep.port());

    client.close();
    auto [e5, gone] = client.remote_endpoint();
    EXPECT_TRUE(static_cast<bool>(e5)) << "a closed socket has no remote endpoint";
  }(ctx));
}

TEST_P(tcp_test, shutdown_send_makes_peer_read_eof_and_half_close_still_receives) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    auto [w0, n0] = co_await client.write_all(tern::const_buffer(std::string_view("last words")));
    CO_ASSERT_OK(w0);
    EXPECT_OK(client.shutdown());  // default: send

    std::string got(10, '\0');
    auto [r1, n1] = co_await server.read_exact(tern::mutable_buffer(got));
    EXPECT_OK(r1);
    EXPECT_EQ(got, "last words");
    char c;
    auto [r2, n2] = co_await tern::with_timeout(server.read_some(tern::mutable_buffer(&c, 1)), 10s);
    EXPECT_EC(r2, tern::net::error::eof);

    // The other direction is still open.
    auto [w3, n3] = co_await server.write_all(tern::const_buffer(std::string_view("reply")));
    EXPECT_OK(w3);
    std::string reply(5, '\0');
    auto [r4, n4] = co_await client.read_exact(tern::mutable_buffer(reply));
    EXPECT_OK(r4);
    EXPECT_EQ(reply, "reply");

    // Writing after shutdown(send) fails.
    auto [w5, n5] = co_await client.write_some(tern::const_buffer(std::string_view("late")));
    EXPECT_EC(w5, std::errc::broken_pipe);
  }(ctx));
}

// available(): what the kernel's receive queue holds, before and after a read takes part of it; closed: an error.
TEST_P(tcp_test, available_counts_the_bytes_a_read_would_take_now) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    auto [e0, none] = server.available();
    EXPECT_OK(e0);
    EXPECT_EQ(none, 0u);
    const std::string sent(100, 'x');
    auto [w, nw] = co_await client.write_all(tern::const_buffer(sent.data(), sent.size()));
    CO_ASSERT_OK(w);
    // Loopback delivers at once, but wait for it rather than assume it.
    std::size_t queued = 0;
    for (int i = 0; i < 1000 && queued < sent.size(); ++i) {
      queued = server.available().value;
      if (queued < sent.size()) co_await tern::sleep_for(1ms);
    }
    EXPECT_EQ(queued, 100u);
    char part[40];
    auto [r, nr] = co_await server.read_exact(tern::mutable_buffer(part, sizeof part));
    CO_ASSERT_OK(r);
    auto [e1, left] = server.available();
    EXPECT_OK(e1);
    EXPECT_EQ(left, 60u);
    server.close();
    auto [e2, gone] = server.available();
    EXPECT_EC(e2, std::errc::bad_file_descriptor);
  }(ctx));
}

// One connection resets; the server keeps accepting and echoing on the others.
TEST_P(tcp_test, error_in_one_connection_does_not_affect_others) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    constexpr int connections = 4;
    tcp_acceptor acceptor(ctx);
    endpoint ep = listen_loopback(acceptor);
    std::vector<std::error_code> ends(connections);

    auto handler = [](tcp_socket s, std::error_code& end) -> tern::task<void> { end = co_await echo_until_error(s); };
    auto server = tern::spawn(ctx, [](tcp_acceptor& acceptor, std::vector<std::error_code>& ends,
                                      decltype(handler) handler) -> tern::task<void> {
      std::vector<tern::join_handle<void>> handlers;
      for (std::size_t i = 0; i < ends.size(); ++i) {
        auto [ec, s] = co_await tern::with_timeout(acceptor.accept(), 10s);
        CO_ASSERT_OK(ec);
        handlers.push_back(tern::spawn(handler(std::move(s), ends[i])));
      }
      for (auto& h : handlers) co_await std::move(h);
    }(acceptor, ends, handler));

    std::vector<tcp_socket> clients;
    for (int i = 0; i < connections; ++i) {
      clients.emplace_back(ctx);
      auto cec = co_await clients.back().connect(ep);
      CO_ASSERT_OK(cec);
      co_await expect_echo(clients.back(), "hello " + std::to_string(i));  // also fixes the accept order
    }

    set_linger_reset(clients[0].native_handle());
    clients[0].close();
    (void)co_await tern::sleep_for(20ms);

    for (int round = 0; round < 10; ++round) {
      for (int i = 1; i < connections; ++i) co_await expect_echo(clients[i], "round " + std::to_string(round));
    }
    for (int i = 1; i < connections; ++i) clients[i].close();
    co_await std::move(server);
    EXPECT_EC(ends[0], std::errc::connection_reset);
    for (int i = 1; i < connections; ++i) EXPECT_EC(ends[i], tern::net::error::eof) << "connection " << i;
  }(ctx));
}

// `connections` clients at once, each echoing `messages` payloads of assorted sizes through one server that runs
// a task per connection.
tern::task<void> concurrent_echo(tern::io_context& ctx, int connections, int messages) {
  tcp_acceptor acceptor(ctx);
  endpoint ep = listen_loopback(acceptor);
  int served = 0;
  auto server = tern::spawn(ctx, [](tcp_acceptor& acceptor, int connections, int& served) -> tern::task<void> {
    std::vector<tern::join_handle<std::error_code>> handlers;
    auto serve = [](tcp_socket s) -> tern::task<std::error_code> { co_return co_await echo_until_error(s); };
    for (int i = 0; i < connections; ++i) {
      auto [ec, s] = co_await tern::with_timeout(acceptor.accept(), 10s);
      CO_ASSERT_OK(ec);
      handlers.push_back(tern::spawn(serve(std::move(s))));
    }
    for (auto& h : handlers) {
      auto end = co_await std::move(h);
      EXPECT_EC(end, tern::net::error::eof);
      ++served;
    }
  }(acceptor, connections, served));

  auto client = [](tern::io_context& ctx, endpoint ep, int id, int messages) -> tern::task<void> {
    auto [ec, s] = co_await tern::net::connect(ctx, ep);
    CO_ASSERT_OK(ec);
    for (int m = 0; m < messages; ++m) {
      auto payload = make_pattern(1 + (id * 37 + m * 101) % 3000, static_cast<std::uint64_t>(id * 1000 + m));
      co_await expect_echo(s, std::string_view(payload.data(), payload.size()));
    }
    s.close();
  };
  std::vector<tern::join_handle<void>> clients;
  for (int i = 0; i < connections; ++i) clients.push_back(tern::spawn(ctx, client(ctx, ep, i, messages)));
  for (auto& c : clients) co_await std::move(c);
  co_await std::move(server);
  EXPECT_EQ(served, connections);
}

TEST_P(tcp_test, many_concurrent_connections_echo) { run_bounded(ctx, concurrent_echo(ctx, 64, 20), 60s); }

// An io_uring submission queue of 4 entries under 64 concurrent connections: operations that do not fit in the
// ring must wait for room, not be lost. (The epoll backend ignores ring_entries; it runs the same load.)
class small_ring_test : public ::testing::TestWithParam<tern::backend_kind> {
 protected:
  static tern::io_context_options small_ring(tern::backend_kind kind) {
    tern::io_context_options o = options_for(kind);
    o.ring_entries = 4;
    return o;
  }
  tern::io_context ctx{small_ring(GetParam())};
};
TERN_INSTANTIATE_BACKENDS(small_ring_test);

TEST_P(small_ring_test, many_connections_through_a_tiny_ring) { run_bounded(ctx, concurrent_echo(ctx, 64, 10), 60s); }

TEST_P(tcp_test, moved_socket_keeps_connection) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    const int fd = client.native_handle();
    tcp_socket moved(std::move(client));
    EXPECT_FALSE(client.is_open());
    EXPECT_TRUE(moved.is_open());
    EXPECT_EQ(moved.native_handle(), fd);
    tcp_socket assigned(ctx);
    assigned = std::move(moved);
    EXPECT_EQ(assigned.native_handle(), fd);
    auto echo = tern::spawn(ctx, echo_until_error(server));
    co_await expect_echo(assigned, "moved twice");
    assigned.close();
    EXPECT_EC(co_await std::move(echo), tern::net::error::eof);
  }(ctx));
}

TEST_P(tcp_test, listen_on_port_in_use_fails) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tcp_acceptor first(ctx);
    endpoint ep = listen_loopback(first);
    tcp_acceptor second(ctx);
    auto ec = second.listen(ep);
    EXPECT_EC(ec, std::errc::address_in_use);
    co_return;
  }(ctx));
}

}  // namespace

namespace {

class tcp_adopt_test : public tern_test::backend_test {};
TERN_INSTANTIATE_BACKENDS(tcp_adopt_test);

// A socketpair made outside tern works as a tern socket on either backend, whatever its blocking mode was.
TEST_P(tcp_adopt_test, adopted_socketpair_carries_data_both_ways) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  tern_test::run_bounded(ctx, [](tern::io_context& ctx, int a, int b) -> tern::task<void> {
    auto [aec, left] = tern::net::tcp_socket::adopt(ctx, a);
    auto [bec, right] = tern::net::tcp_socket::adopt(ctx, b);
    CO_ASSERT(!aec && !bec);
    const int flags = ::fcntl(left.native_handle(), F_GETFL);
    EXPECT_EQ((flags & O_NONBLOCK) != 0, ctx.backend() == tern::backend_kind::epoll);
    auto w = co_await left.write_all(std::string_view("ping"));
    EXPECT_OK(w.ec);
    char buf[4];
    auto r = co_await right.read_exact(buf);
    EXPECT_OK(r.ec);
    EXPECT_EQ(std::string_view(buf, 4), "ping");
    right.close();
    auto eof = co_await left.read_some(buf);
    EXPECT_EC(eof.ec, tern::net::error::eof);
  }(ctx, fds[0], fds[1]));
}

// Connections whose data arrives in a given order, each needing the same few reads, finish in that order: every
// one that becomes ready is served for its whole stretch in its turn. A per-turn allowance of inline completions
// (epoll) once broke this: the first connections of a turn used it up, and each later one was sent to the back of
// the queue after a single read, so it fell behind connections that became ready after it.
TEST_P(tcp_adopt_test, ready_connections_finish_in_arrival_order) {
  constexpr int pairs = 24;
  constexpr int reads = 6;
  constexpr std::size_t chunk = 8;
  std::vector<int> readers, writers;
  for (int i = 0; i < pairs; ++i) {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    readers.push_back(fds[0]);
    writers.push_back(fds[1]);
  }
  std::vector<int> finished;
  tern_test::run_bounded(ctx, [](tern::io_context& ctx, const std::vector<int>& readers,
                                 const std::vector<int>& writers, std::vector<int>& finished) -> tern::task<void> {
    std::vector<tern::net::tcp_socket> socks;
    for (int fd : readers) {
      auto [ec, s] = tern::net::tcp_socket::adopt(ctx, fd);
      CO_ASSERT_OK(ec);
      socks.push_back(std::move(s));
    }
    auto reader = [](tern::net::tcp_socket& s, int id, std::vector<int>& finished) -> tern::task<void> {
      for (int r = 0; r < reads; ++r) {
        char buf[chunk];
        auto [ec, n] = co_await s.read_some(tern::mutable_buffer(buf, chunk));
        CO_ASSERT_OK(ec);
        CO_ASSERT(n == chunk);
        for (char c : buf) EXPECT_EQ(c, static_cast<char>('A' + id));
      }
      finished.push_back(id);
    };
    std::vector<tern::join_handle<void>> tasks;
    for (int i = 0; i < pairs; ++i) tasks.push_back(tern::spawn(ctx, reader(socks[i], i, finished)));
    // The data goes in pair by pair before any reader runs (spawn queues them), so arrival order is pair order.
    for (int i = 0; i < pairs; ++i) {
      std::string data(reads * chunk, static_cast<char>('A' + i));
      EXPECT_EQ(::write(writers[i], data.data(), data.size()), static_cast<ssize_t>(data.size()));
    }
    for (auto& t : tasks) co_await std::move(t);
  }(ctx, readers, writers, finished));
  for (int fd : writers) ::close(fd);
  std::vector<int> arrival(pairs);
  for (int i = 0; i < pairs; ++i) arrival[i] = i;
  EXPECT_EQ(finished, arrival);
}

TEST_P(tcp_adopt_test, adopting_a_bad_fd_reports_an_error) {
  auto [ec, s] = tern::net::tcp_socket::adopt(ctx, -1);
  EXPECT_EC(ec, std::errc::bad_file_descriptor);
  EXPECT_FALSE(s.is_open());
}

}  // namespace
