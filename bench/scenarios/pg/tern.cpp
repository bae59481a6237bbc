// pg/select for tern: `tasks` tasks on one io_context over `conns` tern::pg connections (task i on connection
// i % conns), each awaiting connection::query(SELECT $1::int) in a loop; the connection pipelines the queries of
// every task by itself (see pg_bench.hpp).
#include "../registry.hpp"
#include "../tern_setup.hpp"
#include "pg_bench.hpp"

#include <tern/pg/connection.hpp>

#include <memory>
#include <string>
#include <vector>

namespace tern_bench::tern_impl {

namespace {

namespace pg = tern::pg;
using pg_bench::op_meter;

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

}  // namespace

void pg_select(session& s) {
    pg_bench::cluster c;
    pg_bench::announce(s, c);
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(run_select(ctx, s, c));
}

}  // namespace tern_bench::tern_impl
