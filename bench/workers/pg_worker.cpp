// Worker for the PostgreSQL comparators: libpq used directly (raw/libpq_blocking, raw/libpq_pipeline) and
// libpqxx (libpqxx/blocking). Its own executable because it brings libpqxx, which no other worker needs.
#include "../harness/worker.hpp"
#include "../scenarios/registry.hpp"

#include <array>

namespace {

using namespace tern_bench;

constexpr std::array entries = {
    impl_entry{"pg/select", "raw/libpq_blocking", raw_impl::pg_select_libpq_blocking},
    impl_entry{"pg/select", "raw/libpq_pipeline", raw_impl::pg_select_libpq_pipeline},
    impl_entry{"pg/select", "libpqxx/blocking", libpqxx_impl::pg_select},
    impl_entry{"pg/insert_batch", "raw/libpq_blocking", raw_impl::pg_insert_batch_libpq_blocking},
    impl_entry{"pg/insert_batch", "raw/libpq_pipeline", raw_impl::pg_insert_batch_libpq_pipeline},
    impl_entry{"pg/insert_batch", "libpqxx/blocking", libpqxx_impl::pg_insert_batch},
};

}  // namespace

int main(int argc, char** argv) { return worker_main(argc, argv, entries, "tern-bench-pg"); }
