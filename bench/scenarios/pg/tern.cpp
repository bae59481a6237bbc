// pg/select for tern: `tasks` tasks on one io_context over `conns` tern::pg connections (task i on connection
// i % conns), each awaiting connection::query(SELECT $1::int) in a loop; the connection pipelines the queries of
// every task by itself (see pg_bench.hpp).
//
// pg/insert_batch for tern, one connection: mode=insert, `tasks` tasks each awaiting connection::query on a
// prepared pg::statement for its share of the rows (task t the ids t, t + tasks, ...), pipelined by the
// connection (the INSERTs between two of its sync points commit together); mode=copy, connection::copy_in and
// copy_writer::write of 64 KiB chunks of text lines, then finish(), whose count of rows is checked.
#include "../registry.hpp"
#include "../tern_setup.hpp"
#include "pg_bench.hpp"

#include <tern/pg/connection.hpp>

#include <memory>
#include <string>
#include <vector>

namespace tern_bench::tern_impl {

namespace pg = tern::pg;
using pg_bench::op_meter;

namespace pg_tern {  // this file's own (see bench/CMakeLists.txt)
namespace {

tern::task<void> select_loop(pg::connection& conn, std::uint64_t id, op_meter& meter) {
    for (std::uint64_t seq = 0;; ++seq) {
        const int sent = pg_bench::value_of(id, seq);
        auto [ec, r] = co_await conn.query(pg_bench::select_sql, sent);
        if (ec) throw bench_failure("query: " + ec.message() + ": " + conn.error_message());
        int got = 0;
        if (r.size() != 1 || r[0].to(got) || got != sent)
            throw bench_failure("SELECT " + std::to_string(sent) + " answered something else");
        if (!meter.tick()) co_return;
    }
}

tern::task<void> run_select(tern::io_context& ctx, session& s, const pg_bench::cluster& c) {
    const auto tasks = static_cast<std::uint64_t>(s.param_int("tasks"));
    const auto conns = static_cast<std::uint64_t>(s.param_int("conns"));
    std::vector<pg::connection> cs;
    for (std::uint64_t i = 0; i < conns; ++i) {
        auto [ec, conn] = co_await pg::connection::connect(ctx, c.conninfo());
        if (ec) throw bench_failure("connect: " + ec.message() + ": " + conn.error_message());
        cs.push_back(std::move(conn));
    }
    op_meter meter(s, "queries_per_s", "client_cpu_us_per_query");
    meter.start();
    std::vector<tern::join_handle<void>> loops;
    for (std::uint64_t t = 0; t < tasks; ++t) loops.push_back(tern::spawn(ctx, select_loop(cs[t % conns], t, meter)));
    for (auto& l : loops) co_await std::move(l);
    std::uint64_t queries = 0, syncs = 0;
    for (auto& conn : cs) {
        queries += conn.stats().queries;
        syncs += conn.stats().syncs;
    }
    s.info("queries_per_sync", std::to_string(static_cast<double>(queries) / static_cast<double>(syncs)));
    for (auto& conn : cs) conn.close();
}

const pg::statement insert_stmt(pg_bench::insert_sql);

tern::task<void> insert_loop(pg::connection& conn, int first, int step, int n) {
    char name[16];
    for (int id = first; id < n; id += step) {
        const std::string_view text(name, pg_bench::row_name(name, id));
        auto [ec, r] = co_await conn.query(insert_stmt, id, text, pg_bench::row_value(id));
        if (ec) throw bench_failure("INSERT: " + ec.message() + ": " + conn.error_message());
        if (r.affected_rows() != 1) throw bench_failure("INSERT " + std::to_string(id) + " inserted no row");
    }
}

tern::task<void> copy_rows(pg::connection& conn, int n, std::string& chunk) {
    auto [ec, w] = co_await conn.copy_in(pg_bench::copy_sql);
    if (ec) throw bench_failure("COPY: " + ec.message());
    for (int next = 0; next < n;) {
        chunk.clear();
        pg_bench::append_copy_rows(chunk, next, n, pg_bench::copy_chunk);
        if (auto wec = co_await w.write(std::string_view(chunk))) throw bench_failure("COPY write: " + wec.message());
    }
    auto [fec, rows] = co_await w.finish();
    if (fec) throw bench_failure("COPY finish: " + fec.message());
    if (rows != static_cast<std::uint64_t>(n)) throw bench_failure("COPY took " + std::to_string(rows) + " rows");
}

tern::task<void> checked(pg::connection& conn, const char* sql, std::int64_t n) {
    auto [ec, r] = co_await conn.query(sql);
    if (ec) throw bench_failure(std::string(sql) + ": " + ec.message());
    if (n >= 0) pg_bench::check_checksum(r.size() == 1 ? r[0][0].as<std::string_view>() : "no row", n);
}

tern::task<void> run_insert_batch(tern::io_context& ctx, session& s, const pg_bench::cluster& c) {
    const int n = pg_bench::rows_of(s);
    const bool copy = pg_bench::copy_mode(s);
    const int tasks = copy ? 1 : static_cast<int>(s.param_int("tasks"));
    auto [ec, conn] = co_await pg::connection::connect(ctx, c.conninfo());
    if (ec) throw bench_failure("connect: " + ec.message() + ": " + conn.error_message());
    if (auto eec = co_await conn.execute(pg_bench::create_sql)) throw bench_failure("CREATE TABLE: " + eec.message());
    std::string chunk;
    chunk.reserve(pg_bench::copy_chunk + 64);
    std::vector<tern::join_handle<void>> loops;
    loops.reserve(static_cast<std::size_t>(tasks));
    for (const phase& p : s.phases()) {
        co_await checked(conn, pg_bench::truncate_sql, -1);
        pg_bench::round_meter meter(n);
        meter.start();
        if (copy) {
            co_await copy_rows(conn, n, chunk);
        } else {
            for (int t = 0; t < tasks; ++t) loops.push_back(tern::spawn(ctx, insert_loop(conn, t, tasks, n)));
            for (auto& l : loops) co_await std::move(l);
            loops.clear();
        }
        metric_values values = meter.stop();
        co_await checked(conn, pg_bench::checksum_sql, n);
        s.report(p, values);
    }
    const auto st = conn.stats();
    if (!copy) s.info("queries_per_sync", std::to_string(static_cast<double>(st.queries) / static_cast<double>(st.syncs)));
    conn.close();
}

}  // namespace
}  // namespace pg_tern

void pg_insert_batch(session& s) {
    pg_bench::cluster c;
    pg_bench::announce(s, c);
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(pg_tern::run_insert_batch(ctx, s, c));
}

void pg_select(session& s) {
    pg_bench::cluster c;
    pg_bench::announce(s, c);
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(pg_tern::run_select(ctx, s, c));
}

}  // namespace tern_bench::tern_impl
