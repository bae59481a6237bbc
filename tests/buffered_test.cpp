// buffered_reader and buffered_writer over TCP sockets: lines and delimiters split at every byte, a line over the
// limit (an error, a fixed amount of memory, and the next line read whole), read_exact and read_some through the
// buffer, coalesced writes that wait for flush(), and the writer's kept error.
#include "net_support.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace tern_test;
using tern::net::tcp_socket;

static_assert(tern::read_stream<tcp_socket> && tern::write_stream<tcp_socket>);
static_assert(tern::read_stream<tern::buffered_reader<tcp_socket>>, "a reader is itself a stream");

class buffered_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(buffered_test);

// Sends text one byte per write, with a pause after each, so the reader receives it a byte at a time.
tern::task<void> send_bytewise(tcp_socket& s, std::string text) {
  for (char c : text) {
    auto [ec, n] = co_await s.write_all(tern::const_buffer(&c, 1));
    EXPECT_OK(ec);
    (void)n;
    co_await tern::sleep_for(50us);
  }
}

TEST_P(buffered_test, lines_split_at_every_byte_and_a_last_line_without_newline) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT_OK(client.set_no_delay(true));
    auto sender = tern::spawn(ctx, [](tcp_socket& s) -> tern::task<void> {
      co_await send_bytewise(s, "hello\r\nworld\n\nlast");
      s.close();
    }, std::ref(client));
    tern::buffered_reader reader(server, 64);
    std::vector<std::string> lines;
    for (;;) {
      auto [ec, line] = co_await tern::with_timeout(reader.read_line(), 10s);
      if (ec) {
        EXPECT_EC(ec, tern::error::eof);
        EXPECT_EQ(line, "last") << "the bytes after the last newline come with eof";
        break;
      }
      lines.emplace_back(line);
    }
    EXPECT_EQ(lines, (std::vector<std::string>{"hello", "world", ""}));
    auto [again, rest] = co_await reader.read_line();
    EXPECT_EC(again, tern::error::eof);
    EXPECT_TRUE(rest.empty());
    co_await std::move(sender);
  }(ctx));
}

TEST_P(buffered_test, multi_byte_delimiter_split_across_reads) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT_OK(client.set_no_delay(true));
    auto sender = tern::spawn(ctx, send_bytewise, std::ref(client),
                              std::string("GET / HTTP/1.1\r\nHost: a\r\n\r\nbody\r\n\r\n"));
    tern::buffered_reader reader(server, 128);
    auto [ec1, head] = co_await tern::with_timeout(reader.read_until("\r\n\r\n"), 10s);
    CO_ASSERT_OK(ec1);
    EXPECT_EQ(head, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    auto [ec2, second] = co_await tern::with_timeout(reader.read_until("\r\n\r\n"), 10s);
    CO_ASSERT_OK(ec2);
    EXPECT_EQ(second, "body\r\n\r\n");
    co_await std::move(sender);
  }(ctx));
}

TEST_P(buffered_test, a_line_over_the_limit_is_an_error_and_the_next_line_is_read_whole) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    // 10 KB without a newline (far more than the reader's 64 bytes), then a short line.
    std::string flood(10000, 'a');
    auto sender = tern::spawn(ctx, [](tcp_socket& s, std::string flood) -> tern::task<void> {
      for (std::string_view part : {std::string_view(flood), std::string_view("\nnext line\nshort\n")}) {
        auto [ec, n] = co_await s.write_all(part);
        EXPECT_OK(ec);
        (void)n;
      }
    }, std::ref(client), std::move(flood));
    tern::buffered_reader reader(server, 64);
    auto [ec, line] = co_await tern::with_timeout(reader.read_line(), 10s);
    EXPECT_EC(ec, tern::error::line_too_long);
    EXPECT_TRUE(ec == std::errc::message_size);
    EXPECT_LE(reader.buffered().size(), reader.capacity());
    auto [ec2, next] = co_await tern::with_timeout(reader.read_line(), 10s);
    CO_ASSERT_OK(ec2);
    EXPECT_EQ(next, "next line") << "the rest of the long line was skipped";
    // A limit below the capacity: a 5-byte line passes a limit of 5, a 9-byte one does not.
    auto [ec3, shortline] = co_await tern::with_timeout(reader.read_line(5), 10s);
    CO_ASSERT_OK(ec3);
    EXPECT_EQ(shortline, "short");
    co_await std::move(sender);
    (void)line;
  }(ctx));
}

TEST_P(buffered_test, a_complete_line_just_over_max_length_is_refused_alone) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT_OK((co_await client.write_all(tern::const_buffer("123456\nok\n"))).ec);
    tern::buffered_reader reader(server, 64);
    auto [ec, line] = co_await tern::with_timeout(reader.read_line(5), 10s);
    EXPECT_EC(ec, tern::error::line_too_long);
    auto [ec2, next] = co_await tern::with_timeout(reader.read_line(5), 10s);
    CO_ASSERT_OK(ec2);
    EXPECT_EQ(next, "ok");
    (void)line;
  }(ctx));
}

TEST_P(buffered_test, read_exact_and_read_some_go_through_the_buffer) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    const std::vector<char> big = make_pattern(300000);
    const std::vector<char> small = make_pattern(100, 7);
    auto sender = tern::spawn(ctx, [](tcp_socket& s, const std::vector<char>& big,
                                      const std::vector<char>& small) -> tern::task<void> {
      std::string header = "SIZE " + std::to_string(big.size()) + "\n";
      EXPECT_OK((co_await s.write_all(header)).ec);
      EXPECT_OK((co_await s.write_all(big)).ec);
      EXPECT_OK((co_await s.write_all(small)).ec);
      EXPECT_OK((co_await s.write_all(tern::const_buffer("xyz"))).ec);
      s.close();
    }, std::ref(client), std::cref(big), std::cref(small));
    tern::buffered_reader reader(server, 1024);
    auto [hec, header] = co_await reader.read_line();
    CO_ASSERT_OK(hec);
    EXPECT_EQ(header, "SIZE 300000");
    std::vector<char> got(big.size());
    auto [bec, bn] = co_await tern::with_timeout(reader.read_exact(got), 10s);  // larger than the buffer
    CO_ASSERT_OK(bec);
    EXPECT_EQ(bn, big.size());
    EXPECT_TRUE(got == big);
    std::vector<char> got_small(small.size());
    auto [sec, sn] = co_await tern::with_timeout(reader.read_exact(got_small), 10s);  // smaller: via the buffer
    CO_ASSERT_OK(sec);
    EXPECT_TRUE(got_small == small);
    char tail[8];
    std::string rest;
    for (;;) {
      auto [ec, n] = co_await tern::with_timeout(reader.read_some(tail), 10s);
      if (ec) {
        EXPECT_EC(ec, tern::error::eof);
        break;
      }
      rest.append(tail, n);
    }
    EXPECT_EQ(rest, "xyz");
    std::vector<char> more(4);
    auto [eec, en] = co_await reader.read_exact(more);
    EXPECT_EC(eec, tern::error::eof);
    EXPECT_EQ(en, 0u);
    co_await std::move(sender);
    (void)bn, (void)sn;
  }(ctx));
}

TEST_P(buffered_test, writer_coalesces_until_flush_and_writes_large_pieces_directly) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    tern::buffered_writer writer(client, 256);
    for (int i = 0; i < 10; ++i) {
      auto [ec, n] = co_await writer.write(tern::const_buffer("line\n"));
      CO_ASSERT_OK(ec);
      EXPECT_EQ(n, 5u);
    }
    EXPECT_EQ(writer.buffered(), 50u);
    char buf[1024];
    // Nothing was sent yet.
    auto [none_ec, none] = co_await tern::with_timeout(server.read_some(buf), 20ms);
    EXPECT_EC(none_ec, std::errc::timed_out);
    CO_ASSERT_OK(co_await writer.flush());
    EXPECT_EQ(writer.buffered(), 0u);
    auto [ec, n] = co_await tern::with_timeout(server.read_exact(tern::mutable_buffer(buf, 50)), 10s);
    CO_ASSERT_OK(ec);
    std::string expected;
    for (int i = 0; i < 10; ++i) expected += "line\n";
    EXPECT_EQ(std::string_view(buf, n), expected);

    // A piece larger than the buffer goes out after what is buffered, in order.
    const std::vector<char> big = make_pattern(100000);
    CO_ASSERT_OK((co_await writer.write(tern::const_buffer("head"))).ec);
    auto reader = tern::spawn(ctx, [](tcp_socket& s, std::size_t n) -> tern::task<std::vector<char>> {
      std::vector<char> got(n);
      auto [ec, m] = co_await s.read_exact(got);
      EXPECT_OK(ec);
      got.resize(m);
      co_return got;
    }, std::ref(server), big.size() + 4);
    auto [bec, bn] = co_await writer.write(big);
    CO_ASSERT_OK(bec);
    EXPECT_EQ(bn, big.size());
    EXPECT_EQ(writer.buffered(), 0u) << "the large piece was written, not buffered";
    std::vector<char> got = co_await std::move(reader);
    CO_ASSERT(got.size() == big.size() + 4);
    EXPECT_EQ(std::string_view(got.data(), 4), "head");
    EXPECT_TRUE(std::equal(big.begin(), big.end(), got.begin() + 4));
  }(ctx));
}

TEST_P(buffered_test, writer_keeps_the_first_error) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    set_linger_reset(server.native_handle());
    server.close();  // the peer resets the connection
    co_await tern::sleep_for(5ms);
    tern::buffered_writer writer(client, 64);
    std::vector<char> chunk(1 << 20, 'x');
    std::error_code first;
    for (int i = 0; i < 64 && !first; ++i) first = (co_await writer.write(chunk)).ec;
    CO_ASSERT(static_cast<bool>(first));
    EXPECT_TRUE(first == std::errc::broken_pipe || first == std::errc::connection_reset) << describe(first);
    EXPECT_EQ(writer.error(), first);
    auto [again, n] = co_await writer.write(tern::const_buffer("x"));
    EXPECT_EQ(again, first) << "later writes report the kept error without writing";
    EXPECT_EQ(n, 0u);
    EXPECT_EQ(co_await writer.flush(), first);
  }(ctx));
}

}  // namespace
