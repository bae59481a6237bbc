// send_file on both backends (io_uring splices through a pipe; epoll calls sendfile): whole files and ranges
// verified byte by byte over TCP and Unix sockets, a range past the end of the file (eof, with what existed sent),
// a peer that went away (an error, not a SIGPIPE), and the loop's kept pipes (io_uring): reused from call to call,
// and never handed on with bytes that a failed or cancelled transfer left in them.
#include <dirent.h>

#include "fs_support.hpp"
#include "net_support.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

using namespace tern_test;
namespace fs = tern::fs;

class send_file_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(send_file_test);

template <class Socket>
tern::task<void> send_and_check(tern::io_context& ctx, Socket& from, Socket& to, fs::file& f,
                                const std::vector<char>& data, std::uint64_t offset, std::uint64_t count) {
  auto receiver = tern::spawn(ctx, [](Socket& s, std::uint64_t n) -> tern::task<std::vector<char>> {
    std::vector<char> got(n);
    auto [ec, m] = co_await tern::with_timeout(s.read_exact(got), 20s);
    EXPECT_OK(ec);
    got.resize(m);
    co_return got;
  }, std::ref(to), count);
  auto [ec, sent] = co_await tern::net::send_file(from, f, offset, count);
  EXPECT_OK(ec);
  EXPECT_EQ(sent, count);
  std::vector<char> got = co_await std::move(receiver);
  CO_ASSERT(got.size() == count);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin() + static_cast<std::ptrdiff_t>(offset)));
}

TEST_P(send_file_test, whole_files_and_ranges_arrive_intact) {
  const std::vector<char> data = make_pattern(5 * 1024 * 1024 + 333);
  temp_file file(data);
  run_bounded(ctx, [](tern::io_context& ctx, std::string path, const std::vector<char>& data) -> tern::task<void> {
    auto [oec, f] = co_await fs::file::open(ctx, path);
    CO_ASSERT_OK(oec);
    auto [client, server] = co_await connected_pair(ctx);
    co_await send_and_check(ctx, server, client, f, data, 0, data.size());
    co_await send_and_check(ctx, server, client, f, data, 1'234'567, 2'000'001);
    co_await send_and_check(ctx, server, client, f, data, data.size() - 10, 10);

    auto [pec, pair] = tern::net::unix_stream_socket::pair(ctx);
    CO_ASSERT_OK(pec);
    co_await send_and_check(ctx, pair.first, pair.second, f, data, 4096, 3 * 1024 * 1024);
  }(ctx, file.path(), data));
}

TEST_P(send_file_test, a_range_past_the_end_of_the_file_is_eof_after_what_exists) {
  const std::vector<char> data = make_pattern(100'000);
  temp_file file(data);
  run_bounded(ctx, [](tern::io_context& ctx, std::string path, const std::vector<char>& data) -> tern::task<void> {
    auto [oec, f] = co_await fs::file::open(ctx, path);
    CO_ASSERT_OK(oec);
    auto [client, server] = co_await connected_pair(ctx);
    auto [ec, sent] = co_await tern::net::send_file(server, f, 90'000, 50'000);
    EXPECT_EC(ec, tern::error::eof);
    EXPECT_EQ(sent, 10'000u);
    std::vector<char> got(10'000);
    auto [rec, n] = co_await tern::with_timeout(client.read_exact(got), 10s);
    CO_ASSERT_OK(rec);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin() + 90'000));
    (void)n;
  }(ctx, file.path(), data));
}

TEST_P(send_file_test, a_peer_that_went_away_is_an_error_not_a_signal) {
  const std::vector<char> data = make_pattern(8 * 1024 * 1024);
  temp_file file(data);
  run_bounded(ctx, [](tern::io_context& ctx, std::string path) -> tern::task<void> {
    auto [oec, f] = co_await fs::file::open(ctx, path);
    CO_ASSERT_OK(oec);
    auto [client, server] = co_await connected_pair(ctx);
    set_linger_reset(client.native_handle());
    client.close();
    co_await tern::sleep_for(5ms);
    auto [ec, sent] = co_await tern::with_timeout(tern::net::send_file(server, f, 0, 8 * 1024 * 1024), 20s);
    EXPECT_TRUE(ec == std::errc::broken_pipe || ec == std::errc::connection_reset) << describe(ec);
    EXPECT_LT(sent, 8u * 1024 * 1024);
    sigset_t pending;
    sigpending(&pending);
    EXPECT_FALSE(sigismember(&pending, SIGPIPE)) << "no SIGPIPE is left pending";
  }(ctx, file.path()));
}

TEST_P(send_file_test, sequential_transfers_reuse_one_pipe) {
  const std::vector<char> data = make_pattern(300'000);
  temp_file file(data);
  run_bounded(ctx, [](tern::io_context& ctx, std::string path, const std::vector<char>& data,
                      bool uring) -> tern::task<void> {
    auto [oec, f] = co_await fs::file::open(ctx, path);
    CO_ASSERT_OK(oec);
    auto [client, server] = co_await connected_pair(ctx);
    const int before = open_fd_count();
    for (int i = 0; i < 10; ++i) {
      co_await send_and_check(ctx, server, client, f, data, static_cast<std::uint64_t>(i) * 1000, 200'000);
      EXPECT_EQ(open_fd_count(), before + (uring ? 2 : 0)) << "one kept pipe, made by the first transfer";
    }
  }(ctx, file.path(), data, GetParam() == tern::backend_kind::io_uring));
}

// A transfer that fails (the peer resets the connection) or is cancelled (the peer stops reading) partway leaves
// bytes in the pipe; the next transfer on the loop must send only its own.
TEST_P(send_file_test, a_failed_or_cancelled_transfer_does_not_poison_the_next) {
  const std::vector<char> data = make_pattern(8 * 1024 * 1024);
  temp_file file(data);
  run_bounded(ctx, [](tern::io_context& ctx, std::string path, const std::vector<char>& data) -> tern::task<void> {
    auto [oec, f] = co_await fs::file::open(ctx, path);
    CO_ASSERT_OK(oec);
    {
      // Reset partway: the peer reads a little, then goes away with an RST.
      auto [client, server] = co_await connected_pair(ctx);
      auto transfer = tern::spawn(ctx, tern::with_timeout(tern::net::send_file(server, f, 0, data.size()), 20s));
      std::vector<char> some(100'000);
      CO_ASSERT_OK((co_await tern::with_timeout(client.read_exact(some), 10s)).ec);
      set_linger_reset(client.native_handle());
      client.close();
      auto [ec, sent] = co_await std::move(transfer);
      EXPECT_TRUE(ec == std::errc::broken_pipe || ec == std::errc::connection_reset) << describe(ec);
      EXPECT_LT(sent, data.size());
    }
    {
      // Cancelled partway: the peer reads nothing, the socket's buffers fill, and the splice out waits.
      auto [client, server] = co_await connected_pair(ctx);
      auto [ec, sent] = co_await tern::with_timeout(tern::net::send_file(server, f, 0, data.size()), 100ms);
      EXPECT_EC(ec, tern::error::timed_out);
      EXPECT_LT(sent, data.size());
    }
    // The next transfers carry their own bytes only, from the first byte on.
    for (int i = 0; i < 3; ++i) {
      auto [client, server] = co_await connected_pair(ctx);
      co_await send_and_check(ctx, server, client, f, data, 4096 * static_cast<std::uint64_t>(i), 1'000'000);
    }
  }(ctx, file.path(), data));
}

}  // namespace
