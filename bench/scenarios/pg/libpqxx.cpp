// pg/select's libpqxx comparator (libpqxx/blocking, Debian libpqxx-dev 6.4), what C++ users pick: one
// pqxx::nontransaction per connection (autocommit, as tern's and libpq's queries run) and exec_params one query
// at a time; like raw/libpq_blocking, the queries go round the `conns` connections in turn (see pg_bench.hpp).
#include "../registry.hpp"
#include "pg_bench.hpp"

#include <pqxx/pqxx>

#include <memory>
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

}  // namespace tern_bench::libpqxx_impl
