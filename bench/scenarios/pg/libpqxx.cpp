// pg/select's libpqxx comparator (libpqxx/blocking, Debian libpqxx-dev 6.4), what C++ users pick: one
// pqxx::nontransaction per connection (autocommit, as tern's and libpq's queries run) and exec_params one query
// at a time; like raw/libpq_blocking, the queries go round the `conns` connections in turn (see pg_bench.hpp).
//
// pg/insert_batch, the way libpqxx's documentation shows: mode=insert, the INSERT prepared on the connection
// (connection::prepare) and run by exec_prepared0 for every row in one pqxx::work, committed at the end of the
// round (in the timing); mode=copy, a pqxx::stream_to on the table in one pqxx::work, a tuple per row, complete()
// and commit().
#include "../registry.hpp"
#include "pg_bench.hpp"

#include <pqxx/pqxx>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace tern_bench::libpqxx_impl {

void pg_select(session& s) {
    pg_bench::cluster c;
    pg_bench::announce(s, c);
    s.info("libpqxx", PQXX_VERSION);
    const auto conns = static_cast<std::size_t>(s.param_int("conns"));
    std::vector<std::unique_ptr<pqxx::connection>> cs;
    std::vector<std::unique_ptr<pqxx::nontransaction>> txs;
    for (std::size_t i = 0; i < conns; ++i) {
        cs.push_back(std::make_unique<pqxx::connection>(c.conninfo()));
        txs.push_back(std::make_unique<pqxx::nontransaction>(*cs.back()));
    }
    pg_bench::op_meter meter(s, "queries_per_s", "client_cpu_us_per_query");
    meter.start();
    for (std::uint64_t seq = 0;; ++seq) {
        const int sent = pg_bench::value_of(0, seq);
        const pqxx::result r = txs[seq % conns]->exec_params(pg_bench::select_sql, sent);
        if (r.size() != 1 || r[0][0].as<int>() != sent)
            throw bench_failure("SELECT " + std::to_string(sent) + " answered something else");
        if (!meter.tick()) break;
    }
}

void pg_insert_batch(session& s) {
    pg_bench::cluster c;
    pg_bench::announce(s, c);
    s.info("libpqxx", PQXX_VERSION);
    const int n = pg_bench::rows_of(s);
    const bool copy = pg_bench::copy_mode(s);
    pqxx::connection conn(c.conninfo());
    {
        pqxx::nontransaction tx(conn);
        tx.exec0(pg_bench::create_sql);
    }
    conn.prepare("bench_insert", pg_bench::insert_sql);
    const std::vector<std::string> columns = {"id", "name", "value"};
    char name[16];
    for (const phase& p : s.phases()) {
        {
            pqxx::nontransaction tx(conn);
            tx.exec0(pg_bench::truncate_sql);
        }
        pg_bench::round_meter meter(n);
        meter.start();
        {
            pqxx::work tx(conn);
            if (copy) {
                pqxx::stream_to stream(tx, "bench_rows", columns);
                for (int id = 0; id < n; ++id) {
                    pg_bench::row_name(name, id);
                    stream << std::make_tuple(id, static_cast<const char*>(name), pg_bench::row_value(id));
                }
                stream.complete();
            } else {
                for (int id = 0; id < n; ++id) {
                    pg_bench::row_name(name, id);
                    const pqxx::result r =
                        tx.exec_prepared0("bench_insert", id, static_cast<const char*>(name), pg_bench::row_value(id));
                    if (r.affected_rows() != 1) throw bench_failure("INSERT " + std::to_string(id) + " inserted no row");
                }
            }
            tx.commit();
        }
        metric_values values = meter.stop();
        {
            pqxx::nontransaction tx(conn);
            pg_bench::check_checksum(tx.exec1(pg_bench::checksum_sql)[0].c_str(), n);
        }
        s.report(p, values);
    }
}

}  // namespace tern_bench::libpqxx_impl
