// tern::error: the one category of tern's own errors, its table of std::errc equivalents, and that every way an
// operation can be cancelled or time out reports tern's codes (not a mix of generic and system ones).
#include "net_support.hpp"

#include <cerrno>
#include <optional>
#include <string>

namespace {

using namespace tern_test;

struct table_row {
  tern::error code;
  std::optional<std::errc> equals;  // the std::errc value it compares equal to, if any
  const char* message_part;         // a word the message must contain
};

// The table of tern/error.hpp and docs/guide.md ("Errors").
const table_row table[] = {
    {tern::error::operation_canceled, std::errc::operation_canceled, "canceled"},
    {tern::error::timed_out, std::errc::timed_out, "timed out"},
    {tern::error::wrong_loop, std::nullopt, "switch_to"},
    {tern::error::eof, std::nullopt, "end of stream"},
    {tern::error::closed, std::nullopt, "closed"},
    {tern::error::full, std::errc::resource_unavailable_try_again, "full"},
    {tern::error::line_too_long, std::errc::message_size, "too long"},
    {tern::error::operation_in_progress, std::errc::operation_in_progress, "pending"},
    {tern::error::message_truncated, std::errc::message_size, "truncated"},
    {tern::error::stale_socket_file, std::errc::address_in_use, "socket file"},
    {tern::error::misaligned, std::errc::invalid_argument, "aligned"},
    {tern::error::table_full, std::nullopt, "table"},
};

// Conditions that no tern error may match unless the table says so.
const std::errc unrelated[] = {std::errc::operation_canceled, std::errc::timed_out, std::errc::connection_reset,
                               std::errc::resource_unavailable_try_again, std::errc::message_size,
                               std::errc::operation_in_progress, std::errc::bad_file_descriptor,
                               std::errc::address_in_use, std::errc::invalid_argument};

TEST(error_category, every_code_has_its_message_and_its_equivalent) {
  for (const table_row& row : table) {
    std::error_code ec = row.code;
    SCOPED_TRACE(ec.message());
    EXPECT_TRUE(static_cast<bool>(ec));
    EXPECT_STREQ(ec.category().name(), "tern");
    EXPECT_EQ(&ec.category(), &tern::category());
    EXPECT_NE(ec.message().find(row.message_part), std::string::npos);
    EXPECT_TRUE(ec == row.code);
    for (std::errc cond : unrelated) {
      const bool expected = row.equals && *row.equals == cond;
      EXPECT_EQ(ec == cond, expected) << "against " << std::make_error_code(cond).message();
    }
    if (row.equals) {
      EXPECT_EQ(ec.default_error_condition(), std::make_error_condition(*row.equals));
    }
  }
}

TEST(error_category, codes_are_distinct_and_old_spellings_name_them) {
  for (const table_row& a : table) {
    for (const table_row& b : table) EXPECT_EQ(std::error_code(a.code) == b.code, a.code == b.code);
  }
  // Every code of the enum is in the table above (a new code must be added to it, and to the guide's table).
  EXPECT_EQ(std::size(table), static_cast<std::size_t>(tern::error::table_full));
  EXPECT_TRUE(std::error_code(tern::net::error::eof) == tern::error::eof);
  EXPECT_TRUE(std::error_code(tern::sync::error::closed) == tern::error::closed);
  // A kernel error is never mistaken for one of tern's own.
  EXPECT_FALSE(std::error_code(ECONNRESET, std::system_category()) == tern::error::eof);
  EXPECT_FALSE(std::error_code(ECANCELED, std::system_category()) == tern::error::operation_canceled);
  EXPECT_TRUE(std::error_code(ECANCELED, std::system_category()) == std::errc::operation_canceled);
}

TEST(error_condition, end_of_stream_is_eof_among_tern_codes_and_never_a_kernel_error) {
  const std::error_condition end = tern::condition::end_of_stream;
  EXPECT_STREQ(end.category().name(), "tern.condition");
  EXPECT_NE(end.message().find("end of stream"), std::string::npos);
  for (const table_row& row : table) {
    EXPECT_EQ(std::error_code(row.code) == end, row.code == tern::error::eof) << std::error_code(row.code).message();
  }
  EXPECT_TRUE(std::error_code(tern::net::error::eof) == tern::condition::end_of_stream);
  for (int e : {ECONNRESET, EPIPE, ECONNABORTED, 0}) {
    EXPECT_FALSE(std::error_code(e, std::system_category()) == end) << e;
  }
}

class error_sources_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(error_sources_test);

// ec is exactly tern's code (category included), not merely equivalent to a std::errc.
::testing::AssertionResult is_tern(const std::error_code& ec, tern::error expected) {
  if (&ec.category() == &tern::category() && ec.value() == static_cast<int>(expected)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "got " << describe(ec) << ", expected "
                                       << describe(tern::make_error_code(expected));
}

TEST_P(error_sources_test, a_read_after_the_peer_closed_is_an_end_of_stream) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    socket_pair p = co_await connected_pair(ctx);
    p.server.close();
    char buf[4];
    auto [ec, n] = co_await p.client.read_some(buf);
    EXPECT_TRUE(ec == tern::condition::end_of_stream) << describe(ec);
    (void)n;
  }(ctx));
}

TEST_P(error_sources_test, socket_cancel_close_and_timeout_report_tern_codes) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    char buf[16];

    auto read = tern::spawn(ctx, server.read_some(buf));
    co_await tern::sleep_for(2ms);
    server.cancel();
    auto [cancel_ec, n1] = co_await std::move(read);
    EXPECT_TRUE(is_tern(cancel_ec, tern::error::operation_canceled));

    auto [timeout_ec, n2] = co_await tern::with_timeout(server.read_some(buf), 2ms);
    EXPECT_TRUE(is_tern(timeout_ec, tern::error::timed_out));

    auto [exact_ec, n3] = co_await tern::with_timeout(server.read_exact(buf), 2ms);
    EXPECT_TRUE(is_tern(exact_ec, tern::error::timed_out));

    std::stop_source stop;
    auto stopped = tern::spawn(ctx, tern::with_stop(server.read_some(buf), stop.get_token()));
    co_await tern::sleep_for(2ms);
    stop.request_stop();
    auto [stop_ec, n4] = co_await std::move(stopped);
    EXPECT_TRUE(is_tern(stop_ec, tern::error::operation_canceled));

    auto closed = tern::spawn(ctx, server.read_some(buf));
    co_await tern::sleep_for(2ms);
    server.close();
    auto [close_ec, n5] = co_await std::move(closed);
    EXPECT_TRUE(is_tern(close_ec, tern::error::operation_canceled));

    client.close();
    EXPECT_EQ(n1 + n2 + n3 + n4 + n5, 0u);
  }(ctx));
}

TEST_P(error_sources_test, timer_and_sync_waits_report_tern_codes) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tern::timer t(ctx);
    t.expires_after(1h);
    auto wait = tern::spawn(ctx, t.wait());
    co_await tern::yield();
    t.cancel();
    EXPECT_TRUE(is_tern(co_await std::move(wait), tern::error::operation_canceled));
    EXPECT_TRUE(is_tern(co_await tern::with_timeout(tern::sleep_for(1h), 1ms), tern::error::timed_out));

    tern::sync::manual_reset_event event;
    EXPECT_TRUE(is_tern(co_await tern::with_timeout(event.wait(), 1ms), tern::error::timed_out));
    tern::sync::channel<int> ch(1);
    auto [recv_ec, value] = co_await tern::with_timeout(ch.receive(), 1ms);
    EXPECT_TRUE(is_tern(recv_ec, tern::error::timed_out));
    ch.close();
    auto [closed_ec, none] = co_await ch.receive();
    EXPECT_TRUE(is_tern(closed_ec, tern::error::closed));
    (void)value;
    (void)none;
  }(ctx));
}

TEST_P(error_sources_test, a_task_timeout_reports_tern_timed_out) {
  run_bounded(ctx, [](tern::io_context&) -> tern::task<void> {
    auto ec = co_await tern::with_timeout([]() -> tern::task<std::error_code> { co_return co_await tern::sleep_for(1h); }(),
                                          2ms);
    EXPECT_TRUE(is_tern(ec, tern::error::timed_out));
  }(ctx));
}

}  // namespace
