// Pipes on both backends: a large transfer verified byte by byte, eof when the writer closes, a write to a pipe
// without readers reported as broken_pipe (the process survives, and no SIGPIPE is left pending), cancellation,
// adopting descriptors made elsewhere, and lines read through a buffered_reader.
#include "net_support.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using namespace tern_test;
using tern::fs::pipe_reader;
using tern::fs::pipe_writer;

static_assert(tern::read_stream<pipe_reader> && tern::write_stream<pipe_writer>);

class pipe_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(pipe_test);

TEST_P(pipe_test, a_large_transfer_arrives_intact_then_eof) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [ec, ends] = tern::fs::make_pipe(ctx);
    CO_ASSERT_OK(ec);
    auto& [reader, writer] = ends;
    const std::vector<char> payload = make_pattern(1 << 20);  // far more than the pipe's 64 KiB buffer
    auto sender = tern::spawn(ctx, [](pipe_writer& w, const std::vector<char>& payload) -> tern::task<std::size_t> {
      auto [ec, n] = co_await w.write_all(payload);
      EXPECT_OK(ec);
      w.close();
      co_return n;
    }, std::ref(writer), std::cref(payload));
    std::vector<char> got(payload.size());
    auto [rec, n] = co_await tern::with_timeout(reader.read_exact(got), 10s);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(n, payload.size());
    EXPECT_TRUE(got == payload);
    EXPECT_EQ(co_await std::move(sender), payload.size());
    char byte;
    auto [eec, en] = co_await tern::with_timeout(reader.read_some(tern::mutable_buffer(&byte, 1)), 10s);
    EXPECT_EC(eec, tern::error::eof);
    EXPECT_EQ(en, 0u);
  }(ctx));
}

bool sigpipe_pending() {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, SIGPIPE) == 1;
}

TEST_P(pipe_test, writing_without_a_reader_is_broken_pipe_not_a_dead_process) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [ec, ends] = tern::fs::make_pipe(ctx);
    CO_ASSERT_OK(ec);
    auto& [reader, writer] = ends;
    reader.close();
    auto [wec, wn] = co_await writer.write_some(tern::const_buffer("anyone?"));
    EXPECT_EC(wec, std::errc::broken_pipe);
    EXPECT_EQ(wn, 0u);
    auto [aec, an] = co_await writer.write_all(tern::const_buffer("still nobody"));
    EXPECT_EC(aec, std::errc::broken_pipe);
    EXPECT_EQ(an, 0u);
    EXPECT_FALSE(sigpipe_pending()) << "the SIGPIPE the writes caused is discarded";
  }(ctx));
}

TEST_P(pipe_test, a_pending_read_is_cancelled_and_times_out) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [ec, ends] = tern::fs::make_pipe(ctx);
    CO_ASSERT_OK(ec);
    auto& [reader, writer] = ends;
    char buf[4];
    auto [tec, tn] = co_await tern::with_timeout(reader.read_some(buf), 5ms);
    EXPECT_EC(tec, tern::error::timed_out);
    auto pending = tern::spawn(ctx, reader.read_some(buf));
    co_await tern::sleep_for(2ms);
    reader.cancel();
    auto [cec, cn] = co_await std::move(pending);
    EXPECT_EC(cec, tern::error::operation_canceled);
    // The pipe still works afterwards.
    CO_ASSERT_OK((co_await writer.write_all(tern::const_buffer("ok"))).ec);
    auto [rec, rn] = co_await tern::with_timeout(reader.read_exact(tern::mutable_buffer(buf, 2)), 10s);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(std::string_view(buf, rn), "ok");
    (void)tn, (void)cn;
  }(ctx));
}

// close() while a write_all's next piece is queued, not pending (epoll: a piece that completed at once, queued
// behind the closer because the writer had used up its inline completions): the transfer ends as cancelled with
// the bytes moved so far, and never starts a piece on the closed descriptor (that answered bad_file_descriptor,
// or, had the descriptor been reused, would have written into another file).
TEST_P(pipe_test, closing_between_two_pieces_of_a_write_all_cancels_it) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [ec, ends] = tern::fs::make_pipe(ctx);
    CO_ASSERT_OK(ec);
    auto& [reader, writer] = ends;
    // Room for the whole payload, so that every piece completes without waiting for the reader.
    constexpr int room = 1 << 20;
    CO_ASSERT(::fcntl(writer.native_handle(), F_SETPIPE_SZ, room) >= room);
    const std::vector<char> payload = make_pattern(room / 2);
    auto sender = tern::spawn(ctx, [](pipe_writer& w, const std::vector<char>& payload)
                                       -> tern::task<std::pair<std::error_code, std::size_t>> {
      auto [ec, n] = co_await w.write_all(payload);
      co_return std::pair{ec, n};
    }(writer, payload));
    co_await tern::yield();  // the sender starts its first pieces
    writer.close();
    auto [wec, wn] = co_await std::move(sender);
    EXPECT_EC(wec, tern::error::operation_canceled);
    EXPECT_LT(wn, payload.size());
    // Exactly the bytes reported as written are in the pipe, then its end.
    std::vector<char> got(payload.size());
    std::size_t received = 0;
    for (;;) {
      auto [rec, n] = co_await tern::with_timeout(
          reader.read_some(tern::mutable_buffer(got.data() + received, got.size() - received)), 10s);
      if (rec) {
        EXPECT_EC(rec, tern::error::eof);
        break;
      }
      received += n;
    }
    EXPECT_EQ(received, wn);
    EXPECT_TRUE(std::equal(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(received), payload.begin()));
  }(ctx));
}

TEST_P(pipe_test, adopted_descriptors_and_lines_through_a_buffered_reader) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    int fds[2];
    CO_ASSERT(::pipe2(fds, O_CLOEXEC) == 0);  // blocking, as a child process's stdout would be
    auto [rec, reader] = pipe_reader::adopt(ctx, tern::unique_fd(fds[0]));
    CO_ASSERT_OK(rec);
    auto [wec, writer] = pipe_writer::adopt(ctx, tern::unique_fd(fds[1]));
    CO_ASSERT_OK(wec);
    auto sender = tern::spawn(ctx, [](pipe_writer w) -> tern::task<void> {
      for (std::string_view part : {"first li", "ne\nsecond", " line\nno newline"}) {
        EXPECT_OK((co_await w.write_all(part)).ec);
        co_await tern::sleep_for(1ms);
      }
    }, std::move(writer));
    tern::buffered_reader lines(reader, 64);
    std::vector<std::string> got;
    for (;;) {
      auto [ec, line] = co_await tern::with_timeout(lines.read_line(), 10s);
      if (ec) {
        EXPECT_EC(ec, tern::error::eof);
        got.emplace_back(line);
        break;
      }
      got.emplace_back(line);
    }
    EXPECT_EQ(got, (std::vector<std::string>{"first line", "second line", "no newline"}));
    co_await std::move(sender);
  }(ctx));
}

}  // namespace
