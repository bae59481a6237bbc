// pg_demo: tern::pg end to end against a PostgreSQL server.
//
//   pg_demo CONNINFO          (a libpq connection string or URI: "host=/tmp port=5432 dbname=postgres")
//
// It creates a table, inserts 10000 rows in one pipelined batch (a prepared INSERT, one sync point) and 10000
// more through COPY FROM STDIN, streams them all back row by row and checks them, then LISTENs on a channel and
// receives a NOTIFY sent by a second connection. Each step prints one line; any failure prints the server's (or
// libpq's) message and exits with 1. The table is dropped at the end.
#include <tern/pg/batch.hpp>
#include <tern/pg/connection.hpp>
#include <tern/tern.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

namespace pg = tern::pg;

namespace {

int fail(const char* step, std::error_code ec, std::string_view detail) {
  std::fprintf(stderr, "pg_demo: %s: %s: %.*s\n", step, ec.message().c_str(), static_cast<int>(detail.size()),
               detail.data());
  return 1;
}

constexpr int rows_each = 10000;

tern::task<int> demo(tern::io_context& ctx, std::string conninfo) {
  auto [ec, conn] = co_await pg::connection::connect(ctx, conninfo);
  if (ec) co_return fail("connect", ec, conn.error_message());
  std::printf("connected: server %d, backend pid %d%s\n", conn.server_version(), conn.backend_pid(),
              conn.uses_tls() ? ", TLS" : "");

  pg::result report;
  if (auto sec = co_await conn.execute("DROP TABLE IF EXISTS pg_demo_items;"
                                       "CREATE TABLE pg_demo_items (id int8 PRIMARY KEY, name text NOT NULL)",
                                       &report)) {
    co_return fail("create table", sec, report.error_message());
  }
  std::printf("table pg_demo_items created\n");

  // 10000 INSERTs of a prepared statement, sent back to back with one sync point: one round trip in all.
  static const pg::statement insert("INSERT INTO pg_demo_items (id, name) VALUES ($1, $2)");
  pg::batch b(conn);
  for (std::int64_t id = 1; id <= rows_each; ++id) b.add(insert, id, "item " + std::to_string(id));
  if (auto bec = co_await b.run()) co_return fail("pipelined inserts", bec, "");
  std::printf("inserted %d rows in one pipelined batch\n", rows_each);

  // 10000 more through COPY, written in pieces of about 64 KiB.
  auto [cec, copy] = co_await conn.copy_in("COPY pg_demo_items (id, name) FROM STDIN");
  if (cec) co_return fail("copy", cec, "");
  std::string chunk;
  for (std::int64_t id = rows_each + 1; id <= 2 * rows_each; ++id) {
    chunk += std::to_string(id) + "\titem " + std::to_string(id) + "\n";
    if (chunk.size() >= 64 * 1024 || id == 2 * rows_each) {
      if (auto wec = co_await copy.write(chunk)) co_return fail("copy", wec, "");
      chunk.clear();
    }
  }
  auto [fec, copied] = co_await copy.finish();
  if (fec) co_return fail("copy", fec, copy.final_result().error_message());
  std::printf("copied %llu rows\n", static_cast<unsigned long long>(copied));

  // Every row back, one at a time: memory stays the same whatever the table's size.
  auto [sec, rows] = co_await conn.stream("SELECT id, name FROM pg_demo_items ORDER BY id");
  if (sec) co_return fail("stream", sec, rows.final_result().error_message());
  std::int64_t expected = 1;
  for (;;) {
    auto [rec, row] = co_await rows.next();
    if (rec == tern::error::eof) break;
    if (rec) co_return fail("stream", rec, rows.final_result().error_message());
    const auto [id, name] = row.as<std::int64_t, std::string_view>();
    if (id != expected || name != "item " + std::to_string(id)) co_return fail("stream", pg::error::bad_value, name);
    ++expected;
  }
  std::printf("streamed %lld rows, every one checked\n", static_cast<long long>(expected - 1));

  // LISTEN here, NOTIFY from a second connection.
  if (auto lec = co_await conn.listen("pg_demo")) co_return fail("listen", lec, "");
  auto [nec, other] = co_await pg::connection::connect(ctx, conninfo);
  if (nec) co_return fail("connect", nec, other.error_message());
  const std::string payload = "hello from pid " + std::to_string(other.backend_pid());
  auto [qec, qr] = co_await other.query("SELECT pg_notify('pg_demo', $1)", payload);
  if (qec) co_return fail("notify", qec, qr.error_message());
  auto [wec, note] = co_await tern::with_timeout(conn.next_notification(), std::chrono::seconds(10));
  if (wec) co_return fail("notification", wec, "");
  std::printf("notification on %.*s: %.*s\n", static_cast<int>(note.channel().size()), note.channel().data(),
              static_cast<int>(note.payload().size()), note.payload().data());

  if (auto dec = co_await conn.execute("DROP TABLE pg_demo_items")) co_return fail("drop table", dec, "");
  std::printf("done\n");
  co_return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pg_demo CONNINFO\n");
    return 2;
  }
  tern::io_context ctx;
  return ctx.block_on(demo(ctx, argv[1]));
}
