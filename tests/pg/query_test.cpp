// Queries on both backends: typed round trips of every supported type (text and binary results), NULLs, the
// server's errors with their SQLSTATE and message, prepared statements cached per connection, scripts, 100 MB of
// bytea checked by hash, and rows streamed with bounded memory.
#include "pg_support.hpp"

#include <openssl/evp.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <vector>

namespace {

using namespace tern_test;
using namespace tern_test::pg;
using namespace std::chrono;

class pg_query_test : public pg_test {};
TERN_INSTANTIATE_BACKENDS(pg_query_test);

std::vector<std::byte> all_bytes() {
  std::vector<std::byte> b(256);
  for (int i = 0; i < 256; ++i) b[static_cast<std::size_t>(i)] = static_cast<std::byte>(i);
  return b;
}

std::string md5_hex(const std::vector<std::byte>& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_md5(), nullptr);
  static const char hex[] = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s += hex[digest[i] >> 4];
    s += hex[digest[i] & 15];
  }
  return s;
}

// Every supported type sent and read back, in the result format of the statement.
tern::task<void> round_trip_every_type(pgl::connection& c, pgl::format fmt) {
  const pgl::statement st(
      "SELECT $1::bool, $2::int2, $3::int4, $4::int8, $5::float4, $6::float8, $7::text, $8::text, $9::bytea, "
      "$10::timestamptz, $11::date, $12::int4, $13::int8, $14::text",
      fmt);
  const std::string long_text(300, 'x');  // longer than the parameter block's room for short strings
  const std::string_view long_view(long_text);
  const auto when = sys_days(year(1969) / 7 / 20) + hours(20) + minutes(17) + microseconds(123456);
  const sys_days day = sys_days(year(1999) / 12 / 31);
  for (int round = 0; round < 2; ++round) {
    const bool b = round == 0;
    const std::int16_t i16 = round == 0 ? std::numeric_limits<std::int16_t>::min() : 32767;
    const std::int32_t i32 = round == 0 ? std::numeric_limits<std::int32_t>::min() : -7;
    const std::int64_t i64 = round == 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
    const float f = round == 0 ? 1.5f : -0.125f;
    const double d = round == 0 ? 3.141592653589793 : -1e300;
    const std::vector<std::byte> bytes = round == 0 ? all_bytes() : std::vector<std::byte>{};
    const std::uint16_t u16 = 65535;
    const std::uint32_t u32 = 4000000000u;
    auto [ec, r] = co_await c.query(st, b, i16, i32, i64, f, d, "plain 'text' with quotes", long_view, bytes, when,
                                    day, u16, u32, std::string("é ü"));
    PG_ASSERT_OK(ec, r);
    CO_ASSERT(r.size() == 1);
    pgl::row row = r[0];
    EXPECT_EQ(row[0].fmt(), fmt);
    EXPECT_EQ(row[0].as<bool>(), b);
    EXPECT_EQ(row[1].as<std::int16_t>(), i16);
    EXPECT_EQ(row[2].as<std::int32_t>(), i32);
    EXPECT_EQ(row[3].as<std::int64_t>(), i64);
    EXPECT_EQ(row[4].as<float>(), f);
    EXPECT_EQ(row[5].as<double>(), d);
    EXPECT_EQ(row[6].as<std::string>(), "plain 'text' with quotes");
    EXPECT_EQ(row[7].as<std::string_view>(), long_text);
    EXPECT_EQ(row[8].as<std::vector<std::byte>>(), bytes);
    EXPECT_EQ(row[9].as<system_clock::time_point>(), when);
    EXPECT_EQ(row[10].as<sys_days>(), day);
    EXPECT_EQ(row[11].as<std::uint16_t>(), u16);
    EXPECT_EQ(row[12].as<std::uint32_t>(), u32);
    EXPECT_EQ(row[13].as<std::string>(), "é ü");
    // Widening and narrowing reads, range-checked.
    EXPECT_EQ(row[2].as<std::int64_t>(), i32);
    std::int16_t narrow = 0;
    EXPECT_EC(row[3].to(narrow), pgl::error::bad_value);
    std::string_view not_bytes;
    if (fmt == pgl::format::binary) {
      EXPECT_EC(row[2].to(not_bytes), pgl::error::unsupported);
    }
  }
}

TEST_P(pg_query_test, every_supported_type_round_trips_in_text_and_in_binary) {
  run_bounded(ctx, [](pg_query_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    co_await round_trip_every_type(c, pgl::format::text);
    co_await round_trip_every_type(c, pgl::format::binary);
    // Special floats, and a timestamptz printed with the session's time zone offset.
    auto [ec, r] = co_await c.query(
        "SELECT 'NaN'::float8, 'Infinity'::float8, '-Infinity'::float4, "
        "'2024-02-29 23:59:59.5+05:30'::timestamptz, '1066-10-14'::date");
    CO_ASSERT_OK(ec);
    EXPECT_TRUE(std::isnan(r[0][0].as<double>()));
    EXPECT_EQ(r[0][1].as<double>(), std::numeric_limits<double>::infinity());
    EXPECT_EQ(r[0][2].as<float>(), -std::numeric_limits<float>::infinity());
    EXPECT_EQ(r[0][3].as<system_clock::time_point>(),
              sys_days(year(2024) / 2 / 29) + hours(18) + minutes(29) + seconds(59) + milliseconds(500));
    EXPECT_EQ(r[0][4].as<sys_days>(), sys_days(year(1066) / 10 / 14));
  }(*this, ctx));
}

TEST_P(pg_query_test, nulls_go_and_come_as_empty_optionals) {
  run_bounded(ctx, [](pg_query_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::optional<int> none;
    const std::optional<std::string> some = "x";
    auto [ec, r] = co_await c.query("SELECT $1::int4, $2::text, $3::text, $4::int8, NULL::bytea, ''::text", none, some,
                                    nullptr, std::nullopt);
    CO_ASSERT_OK(ec);
    pgl::row row = r[0];
    EXPECT_TRUE(row[0].is_null());
    EXPECT_EQ(row[0].as<std::optional<int>>(), std::nullopt);
    EXPECT_EQ(row[1].as<std::optional<std::string>>(), "x");
    EXPECT_TRUE(row[2].is_null());
    EXPECT_TRUE(row[3].is_null());
    EXPECT_EQ(row[4].as<std::optional<std::vector<std::byte>>>(), std::nullopt);
    EXPECT_FALSE(row[5].is_null()) << "an empty text is not NULL";
    EXPECT_EQ(row[5].as<std::optional<std::string>>(), "");
    int n = 7;
    EXPECT_EC(row[0].to(n), pgl::error::unexpected_null);
    EXPECT_EQ(n, 7) << "a failed read leaves its target alone";
    EXPECT_THROW((void)row[0].as<int>(), std::system_error);
    // Missing columns, by index and by name.
    EXPECT_EC(row[9].to(n), pgl::error::no_such_column);
    EXPECT_EC(row["nope"].to(n), pgl::error::no_such_column);
    const auto [a, b] = co_await [&]() -> tern::task<std::tuple<int, std::string>> {
      auto [tec, tr] = co_await c.query("SELECT 5 AS five, 'v' AS vee");
      EXPECT_OK(tec);
      co_return tr[0].as<int, std::string>();
    }();
    EXPECT_EQ(a, 5);
    EXPECT_EQ(b, "v");
  }(*this, ctx));
}

// A small result is copied out of libpq's PGresult and a large one keeps it: both read alike, columns' descriptions
// included, and rows taken from a result stay valid when it is moved.
TEST_P(pg_query_test, small_and_large_results_read_alike_with_their_columns_described) {
  run_bounded(ctx, [](pg_query_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::string tbl = t.table();
    auto [cec, cr] = co_await c.query("CREATE TABLE " + tbl + " (id int, name varchar(20), price numeric(10,2))");
    PG_ASSERT_OK(cec, cr);
    EXPECT_EQ(cr.command_tag(), "CREATE TABLE");
    EXPECT_EQ(cr.affected_rows(), 0u);
    auto [iec, ir] = co_await c.query("INSERT INTO " + tbl +
                                      " SELECT i, CASE WHEN i % 3 = 0 THEN NULL ELSE 'name ' || i END, i * 1.5 "
                                      "FROM generate_series(1, 2000) AS i");
    PG_ASSERT_OK(iec, ir);
    EXPECT_EQ(ir.command_tag(), "INSERT 0 2000");
    EXPECT_EQ(ir.affected_rows(), 2000u);
    const auto table_oid = co_await scalar<std::int64_t>(c, ("SELECT '" + tbl + "'::regclass::oid::int8").c_str());
    for (const pgl::format fmt : {pgl::format::text, pgl::format::binary}) {
      const pgl::statement st("SELECT id, name, price, id * 2 AS twice FROM " + tbl + " WHERE id <= $1 ORDER BY id",
                              fmt);
      for (const int n : {3, 2000}) {  // about 100 bytes, and some 60 KiB
        auto [ec, first] = co_await c.query(st, n);
        PG_ASSERT_OK(ec, first);
        const pgl::row last_row = first[static_cast<std::size_t>(n - 1)];
        const pgl::result r = std::move(first);
        EXPECT_TRUE(first.empty());
        EXPECT_EQ(r.size(), static_cast<std::size_t>(n));
        EXPECT_EQ(r.affected_rows(), static_cast<std::uint64_t>(n));
        EXPECT_EQ(r.command_tag(), "SELECT " + std::to_string(n));
        CO_ASSERT(r.columns() == 4);
        EXPECT_EQ(r.column_name(1), "name");
        EXPECT_EQ(r.column("twice"), 3);
        EXPECT_EQ(r.column("nope"), -1);
        EXPECT_EQ(r.column_type(0), pgl::oids::int4);
        EXPECT_EQ(r.column_type(1), pgl::oids::varchar);
        EXPECT_EQ(r.column_type_modifier(1), 20 + 4);                    // varchar(20): n + 4
        EXPECT_EQ(r.column_type_modifier(2), ((10 << 16) | 2) + 4);      // numeric(10,2)
        EXPECT_EQ(r.column_type_modifier(0), -1);
        EXPECT_EQ(r.column_table(0), static_cast<pgl::oid>(table_oid));
        EXPECT_EQ(r.column_table_column(2), 3);
        EXPECT_EQ(r.column_table(3), pgl::oids::unspecified);           // computed
        EXPECT_EQ(r.column_table_column(3), 0);
        EXPECT_EQ(r.column_format(0), fmt);
        EXPECT_EQ(r.column_name(4), "");
        EXPECT_EQ(r.column_type(-1), pgl::oids::unspecified);
        EXPECT_TRUE(r.error_message().empty());
        EXPECT_TRUE(r.sqlstate().empty());
        std::int64_t sum = 0;
        int nulls = 0;
        for (pgl::row row : r) {
          const int id = row["id"].as<int>();
          sum += row[3].as<std::int64_t>();
          if (row[1].is_null()) {
            ++nulls;
            EXPECT_EQ(id % 3, 0);
            EXPECT_TRUE(row[1].raw().empty());
          } else {
            EXPECT_EQ(row[1].as<std::string_view>(), "name " + std::to_string(id));
            EXPECT_EQ(row[1].fmt(), fmt);
            EXPECT_EQ(row[1].type(), pgl::oids::varchar);
          }
        }
        EXPECT_EQ(sum, std::int64_t{n} * (n + 1));
        EXPECT_EQ(nulls, n / 3);
        EXPECT_EQ(last_row["id"].as<int>(), n) << "a row outlives the move of its result";
        if (fmt == pgl::format::text) {
          EXPECT_EQ(r[0][2].raw(), "1.50");
        }
        int out = 0;
        EXPECT_EC(r[static_cast<std::size_t>(n)][0].to(out), pgl::error::unexpected_null);  // past the last row
        EXPECT_EC(r[0][7].to(out), pgl::error::no_such_column);
      }
    }
    co_await c.query("DROP TABLE " + tbl);
  }(*this, ctx));
}

TEST_P(pg_query_test, a_copied_results_short_strings_of_every_length_read_back_intact) {
  run_bounded(ctx, [](pg_query_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    // Values of 0 to 40 bytes and column names of 2 to 20: every width the copy into a block takes (result.cpp,
    // copy_short), each byte distinct from its neighbours so that a misplaced one shows.
    std::vector<std::string> values, names;
    std::string sql = "SELECT ";
    for (int n = 0; n <= 40; ++n) {
      std::string v;
      for (int i = 0; i < n; ++i) v += static_cast<char>('a' + (i * 7 + n) % 26);
      std::string name = "k" + std::string(static_cast<std::size_t>(1 + n % 19), static_cast<char>('a' + n % 26));
      name += std::to_string(n);
      if (n != 0) sql += ", ";
      sql += "'" + v + "'::text AS \"" + name + "\"";
      values.push_back(std::move(v));
      names.push_back(std::move(name));
    }
    for (int round = 0; round < 2; ++round) {  // the second from a block the first gave back
      auto [ec, r] = co_await c.query(sql.c_str());
      PG_ASSERT_OK(ec, r);
      CO_ASSERT(r.size() == 1 && r.columns() == 41);
      for (int i = 0; i <= 40; ++i) {
        EXPECT_EQ(r.column_name(i), names[static_cast<std::size_t>(i)]) << i;
        EXPECT_EQ(r[0][i].raw(), values[static_cast<std::size_t>(i)]) << i;
        EXPECT_FALSE(r[0][i].is_null()) << i;
      }
      EXPECT_EQ(r.command_tag(), "SELECT 1");
    }
  }(*this, ctx));
}

TEST_P(pg_query_test, server_errors_carry_their_sqlstate_and_message_and_the_connection_goes_on) {
  run_bounded(ctx, [](pg_query_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    auto [sec, sr] = co_await c.query("SELEC 1");
    EXPECT_EC(sec, pgl::sqlstate::syntax_error);
    EXPECT_EQ(sr.sqlstate(), "42601");
    EXPECT_NE(sr.error_message().find("syntax error"), std::string_view::npos) << sr.error_message();
    EXPECT_EQ(pgl::sqlstate_text(sec), "42601");
    EXPECT_NE(sec.message().find("42601"), std::string::npos);
    auto [tec, tr] = co_await c.query("SELECT * FROM no_such_table_anywhere");
    EXPECT_EC(tec, pgl::sqlstate::undefined_table);
    EXPECT_NE(tr.error_message().find("no_such_table_anywhere"), std::string_view::npos);
    auto [dec, dr] = co_await c.query("SELECT 1 / $1::int", 0);
    EXPECT_EC(dec, pgl::sqlstate::division_by_zero);
    EXPECT_TRUE(dec == std::errc::invalid_argument);
    const std::string tbl = t.table();
    auto [cec, cr] = co_await c.query("CREATE TABLE " + tbl + " (id int CONSTRAINT " + tbl + "_pk PRIMARY KEY)");
    PG_ASSERT_OK(cec, cr);
    auto [iec, ir] = co_await c.query("INSERT INTO " + tbl + " VALUES (1), (1)");
    EXPECT_EC(iec, pgl::sqlstate::unique_violation);
    EXPECT_EQ(ir.error_field('n'), tbl + "_pk");  // PG_DIAG_CONSTRAINT_NAME
    EXPECT_FALSE(ir.error_field('D').empty());    // PG_DIAG_MESSAGE_DETAIL: "Key (id)=(1) already exists."
    EXPECT_EQ(co_await scalar<int>(c, "SELECT 2"), 2);
    co_await c.query("DROP TABLE " + tbl);
  }(*this, ctx));
}

TEST_P(pg_query_test, the_servers_notices_go_to_the_connections_handler) {
  run_bounded(ctx, [](pg_query_test& t, tern::io_context& ctx) -> tern::task<void> {
    std::vector<std::string> notices;
    pgl::connect_options opts;
    opts.on_notice = [&notices](std::string_view severity, std::string_view message) {
      notices.push_back(std::string(severity) + ": " + std::string(message));
    };
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo(), opts);
    auto [ec, r] = co_await c.query("DROP TABLE IF EXISTS surely_not_there_at_all");
    PG_ASSERT_OK(ec, r);
    CO_ASSERT(notices.size() == 1);
    EXPECT_EQ(notices[0], "NOTICE: table \"surely_not_there_at_all\" does not exist, skipping");
  }(*this, ctx));
}

TEST_P(pg_query_test, a_statement_is_prepared_once_per_connection_and_per_parameter_types) {
  run_bounded(ctx, [](pg_query_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const pgl::statement add("SELECT $1::int8 + $2::int8");
    for (std::int64_t i = 0; i < 5; ++i) {
      auto [ec, r] = co_await c.query(add, i, std::int64_t{10});
      CO_ASSERT_OK(ec);
      EXPECT_EQ(r[0][0].as<std::int64_t>(), i + 10);
    }
    EXPECT_EQ(c.stats().prepared, 1u);
    // The same statement with other C++ types is prepared again, under a second name.
    auto [ec, r] = co_await c.query(add, 1, 2);
    PG_ASSERT_OK(ec, r);
    EXPECT_EQ(r[0][0].as<int>(), 3);
    EXPECT_EQ(c.stats().prepared, 2u);
    EXPECT_EQ(co_await scalar<std::int64_t>(c, "SELECT count(*) FROM pg_prepared_statements"), 2);
    // A statement the server refuses is not kept: each run reports the error.
    const pgl::statement bad("SELEC $1::int");
    for (int i = 0; i < 2; ++i) {
      auto [bec, br] = co_await c.query(bad, i);
      EXPECT_EC(bec, pgl::sqlstate::syntax_error);
      EXPECT_NE(br.error_message().find("syntax error"), std::string_view::npos);
    }
    EXPECT_EQ(c.stats().prepared, 2u);
    // Another connection prepares it for itself.
    pgl::connection other = co_await connect_to(ctx, t.db().socket_conninfo());
    auto [oec, or_] = co_await other.query(add, std::int64_t{1}, std::int64_t{1});
    CO_ASSERT_OK(oec);
    EXPECT_EQ(other.stats().prepared, 1u);
  }(*this, ctx));
}

TEST_P(pg_query_test, a_script_of_several_statements_runs_outside_the_pipeline) {
  run_bounded(ctx, [](pg_query_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::string tbl = t.table();
    pgl::result last;
    CO_ASSERT_OK(co_await c.execute("CREATE TABLE " + tbl + " (v int); INSERT INTO " + tbl +
                                        " VALUES (1), (2); SELECT sum(v) FROM " + tbl,
                                    &last));
    EXPECT_EQ(last[0][0].as<int>(), 3);
    pgl::result report;
    const std::error_code ec =
        co_await c.execute("INSERT INTO " + tbl + " VALUES (3); SELECT 1/0; INSERT INTO " + tbl + " VALUES (4)", &report);
    EXPECT_EC(ec, pgl::sqlstate::division_by_zero);
    EXPECT_EQ(report.sqlstate(), "22012");
    // The failed script was one transaction: nothing of it stayed.
    EXPECT_EQ(co_await scalar<std::int64_t>(c, ("SELECT count(*) FROM " + tbl).c_str()), 2);
    CO_ASSERT_OK(co_await c.execute("DROP TABLE " + tbl));
  }(*this, ctx));
}

TEST_P(pg_query_test, a_hundred_megabytes_of_bytea_round_trip_intact) {
  run_bounded(ctx, [](pg_query_test& t, tern::io_context& ctx) -> tern::task<void> {
    // Over TCP: libpq moves what a non-blocking send leaves in its buffer to the front after each partial send,
    // and loopback TCP takes far larger pieces than a Unix socket, so the 100 MB go in tens of sends, not hundreds.
    pgl::connection c = co_await connect_to(ctx, t.db().tcp_conninfo());
    std::vector<std::byte> data(100u << 20);
    std::mt19937_64 rng(41);
    for (std::size_t i = 0; i < data.size(); i += 8) {
      const std::uint64_t v = rng();
      std::memcpy(data.data() + i, &v, 8);
    }
    const pgl::statement echo("SELECT md5($1::bytea), $1::bytea", pgl::format::binary);
    auto [ec, r] = co_await c.query(echo, data);
    PG_ASSERT_OK(ec, r);
    const std::string sent = md5_hex(data);
    EXPECT_EQ(r[0][0].as<std::string_view>(), sent) << "the server got every byte";
    const std::vector<std::byte> back = r[0][1].as<std::vector<std::byte>>();
    EXPECT_EQ(back.size(), data.size());
    EXPECT_EQ(md5_hex(back), sent) << "and sent every byte back";
  }(*this, ctx), 60s);
}

// Under AddressSanitizer freed memory stays in its quarantine (256 MB by default), so the process's resident size
// says nothing about what the stream holds: the bound is checked in the other builds.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool memory_is_quarantined = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool memory_is_quarantined = true;
#else
constexpr bool memory_is_quarantined = false;
#endif
#else
constexpr bool memory_is_quarantined = false;
#endif

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

TEST_P(pg_query_test, a_large_result_is_streamed_row_by_row_in_bounded_memory) {
  run_bounded(ctx, [](pg_query_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
    // 1M rows of 200 bytes: 200 MB if it were held whole.
    const std::size_t before = resident_bytes();
    std::size_t peak = before;
    // generate_series in the select list, where the server makes its rows one at a time (in FROM it would make
    // them all first).
    auto [ec, rows] = co_await c.stream("SELECT generate_series(1, $1::int), repeat('x', 200)", 1000000);
    CO_ASSERT_OK(ec);
    std::int64_t count = 0, sum = 0;
    for (;;) {
      auto [rec, row] = co_await rows.next();
      if (rec == tern::error::eof) break;
      CO_ASSERT_OK(rec);
      ++count;
      sum += row[0].as<std::int64_t>();
      EXPECT_EQ(row[1].raw().size(), 200u);
      if (count % 65536 == 0) peak = std::max(peak, resident_bytes());
    }
    EXPECT_EQ(count, 1000000);
    EXPECT_EQ(sum, std::int64_t{1000000} * 1000001 / 2);
    EXPECT_EQ(rows.final_result().command_tag(), "SELECT 1000000");
    if (!memory_is_quarantined) {
      EXPECT_LT(peak - before, std::size_t{64} << 20) << "the whole result was held";
    }
    // An abandoned stream: the server is asked to cancel it, and the connection serves the next query.
    {
      auto [sec, big] = co_await c.stream("SELECT generate_series(1, 100000000)");
      CO_ASSERT_OK(sec);
      for (int i = 0; i < 10; ++i) {
        auto [rec, row] = co_await big.next();
        CO_ASSERT_OK(rec);
        EXPECT_EQ(row[0].as<int>(), i + 1);
      }
    }
    const auto start = steady_clock::now();
    EXPECT_EQ(co_await scalar<int>(c, "SELECT 7"), 7);
    EXPECT_LT(steady_clock::now() - start, 20s);
    // A stream that fails part way reports the error after the rows before it.
    auto [fec, failing] = co_await c.stream("SELECT 10 / (3 - generate_series(1, 5))");
    CO_ASSERT_OK(fec);
    int got = 0;
    std::error_code end;
    for (;;) {
      auto [rec, row] = co_await failing.next();
      if (rec) {
        end = rec;
        break;
      }
      ++got;
    }
    EXPECT_EQ(got, 2);
    EXPECT_EC(end, pgl::sqlstate::division_by_zero);
    EXPECT_EQ(failing.final_result().sqlstate(), "22012");
  }(*this, ctx), 60s);
}

// The text form of integers, read without a server: what PostgreSQL writes (an optional '-' and digits), the
// extremes of int64, leading zeros, and everything else refused as bad_value, as std::from_chars would.
TEST(pg_text_integers, read_exactly_as_from_chars_reads_them) {
  // Both ways in: the out-of-line reader, and field_traits with its inline path for short ones (which must agree).
  auto read = [](std::string_view text, std::int64_t& out) {
    pgl::detail::field_data f;
    f.data = text.data();
    f.length = static_cast<int>(text.size());
    f.null = false;
    std::int64_t inline_out = out;
    const std::error_code inline_ec = pgl::field_traits<std::int64_t>::decode(f, inline_out);
    const std::error_code ec = pgl::detail::decode_signed(f, std::numeric_limits<std::int64_t>::min(),
                                                          std::numeric_limits<std::int64_t>::max(), out);
    EXPECT_EQ(inline_ec, ec) << text;
    EXPECT_EQ(inline_out, out) << text;
    return ec;
  };
  const std::pair<std::string_view, std::int64_t> good[] = {
      {"0", 0}, {"-0", 0}, {"7", 7}, {"-12", -12}, {"000123", 123}, {"-0000000000000000000000042", -42},
      {"2147483648", 2147483648LL}, {"9223372036854775807", std::numeric_limits<std::int64_t>::max()},
      {"-9223372036854775808", std::numeric_limits<std::int64_t>::min()}, {"999999999999999999", 999999999999999999LL},
      {"12345678", 12345678}, {"-87654321", -87654321}, {"100000000", 100000000}, {"0012345678", 12345678},
      {"1234567890123456", 1234567890123456LL}, {"99999999", 99999999}};
  for (auto [text, want] : good) {
    std::int64_t got = 1;
    EXPECT_FALSE(read(text, got)) << text;
    EXPECT_EQ(got, want) << text;
  }
  const std::string_view bad[] = {"", "-", "+1", " 1", "1 ", "1x", "--1", "0x10", "1.0",
                                  "9223372036854775808", "-9223372036854775809", "18446744073709551616",
                                  "99999999999999999999", "123456789012345678901234", "12345:78", "1234567/",
                                  "/2345678", "1234567a9", "123456789012345a", "12345678-"};
  for (std::string_view text : bad) {
    std::int64_t got = 5;
    EXPECT_EC(read(text, got), pgl::error::bad_value) << text;
    EXPECT_EQ(got, 5) << text;
  }
  std::int32_t narrow = 0;
  pgl::detail::field_data f;
  f.data = "2147483648";
  f.length = 10;
  f.null = false;
  EXPECT_EC(pgl::field_traits<std::int32_t>::decode(f, narrow), pgl::error::bad_value);
  f.data = "-2147483649";
  f.length = 11;
  EXPECT_EC(pgl::field_traits<std::int32_t>::decode(f, narrow), pgl::error::bad_value);
  f.data = "-2147483648";
  EXPECT_FALSE(pgl::field_traits<std::int32_t>::decode(f, narrow));
  EXPECT_EQ(narrow, std::numeric_limits<std::int32_t>::min());
  std::uint32_t u = 7;
  f.data = "-1";
  f.length = 2;
  EXPECT_EC(pgl::field_traits<std::uint32_t>::decode(f, u), pgl::error::bad_value);
  EXPECT_EQ(u, 7u);
  f.data = "-0";
  EXPECT_FALSE(pgl::field_traits<std::uint32_t>::decode(f, u));
  EXPECT_EQ(u, 0u);
  f.data = "4294967296";
  f.length = 10;
  EXPECT_EC(pgl::field_traits<std::uint32_t>::decode(f, u), pgl::error::bad_value);
  f.data = "4294967295";
  EXPECT_FALSE(pgl::field_traits<std::uint32_t>::decode(f, u));
  EXPECT_EQ(u, 4294967295u);
}

// Dates and timestamps at the ends of what they are read into, without a server: PostgreSQL's own range goes
// past an int32 of days since 1970 (text years of up to seven digits) and past int64 microseconds since 1970
// (its last timestamp is near int64's end since 2000), and system_clock's nanoseconds end in 2262. Such a value is
// refused as bad_value; it was wrapped (or overflowed, undefined behaviour) before.
TEST(pg_dates_and_timestamps, values_past_what_they_are_read_into_are_refused) {
  auto text = [](std::string_view t) {
    pgl::detail::field_data f;
    f.data = t.data();
    f.length = static_cast<int>(t.size());
    f.null = false;
    f.fmt = pgl::format::text;
    return f;
  };
  auto binary = [](const char* bytes, int n, pgl::oid type) {
    pgl::detail::field_data f;
    f.data = bytes;
    f.length = n;
    f.null = false;
    f.fmt = pgl::format::binary;
    f.type = type;
    return f;
  };
  using namespace std::chrono;
  sys_days day{};
  EXPECT_FALSE(pgl::field_traits<sys_days>::decode(text("2024-05-06"), day));
  EXPECT_EQ(day, sys_days(year(2024) / 5 / 6));
  EXPECT_FALSE(pgl::field_traits<sys_days>::decode(text("5874897-12-31"), day));  // PostgreSQL's last date
  EXPECT_EQ(day.time_since_epoch().count(), 2'145'042'905);
  EXPECT_EC(pgl::field_traits<sys_days>::decode(text("9999999-01-01"), day), pgl::error::bad_value);
  const char zero_days[4] = {0, 0, 0, 0};
  EXPECT_FALSE(pgl::field_traits<sys_days>::decode(binary(zero_days, 4, pgl::oids::date), day));
  EXPECT_EQ(day, sys_days(year(2000) / 1 / 1));
  const char past_int32[4] = {0x7f, static_cast<char>(0xff), static_cast<char>(0xff), static_cast<char>(0xfe)};
  EXPECT_EC(pgl::field_traits<sys_days>::decode(binary(past_int32, 4, pgl::oids::date), day), pgl::error::bad_value);

  sys_time<microseconds> us{};
  EXPECT_FALSE(pgl::field_traits<sys_time<microseconds>>::decode(text("2263-01-01 00:00:00"), us));
  EXPECT_EQ(us, sys_days(year(2263) / 1 / 1));
  EXPECT_FALSE(pgl::field_traits<sys_time<microseconds>>::decode(text("30000-01-01 00:00:00.5"), us));
  EXPECT_EQ(us, sys_days(year(30000) / 1 / 1) + 500ms);  // (std::chrono::year ends at 32767)
  EXPECT_EC(pgl::field_traits<sys_time<microseconds>>::decode(text("9999999-01-01 00:00:00"), us),
            pgl::error::bad_value);
  const char near_int64_end[8] = {0x7f, static_cast<char>(0xff), static_cast<char>(0xff), static_cast<char>(0xff),
                                  static_cast<char>(0xff), static_cast<char>(0xff), static_cast<char>(0xff), 0};
  EXPECT_EC(pgl::field_traits<sys_time<microseconds>>::decode(binary(near_int64_end, 8, pgl::oids::timestamptz), us),
            pgl::error::bad_value);

  system_clock::time_point ns{};  // nanoseconds on libstdc++: they end in 2262
  EXPECT_FALSE(pgl::field_traits<system_clock::time_point>::decode(text("2262-01-01 00:00:00"), ns));
  EXPECT_EQ(ns, sys_days(year(2262) / 1 / 1));
  EXPECT_EC(pgl::field_traits<system_clock::time_point>::decode(text("2263-01-01 00:00:00"), ns),
            pgl::error::bad_value);
  EXPECT_EC(pgl::field_traits<system_clock::time_point>::decode(text("1677-01-01 00:00:00"), ns),
            pgl::error::bad_value);
}

}  // namespace
