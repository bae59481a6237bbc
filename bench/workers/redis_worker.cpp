// Worker for the Redis comparators: hiredis/libevent (redis/pipeline, redis/pubsub) and raw/redis-benchmark
// (redis/pipeline). Its own executable because it brings hiredis and libevent, which no other worker needs.
#include "../harness/worker.hpp"
#include "../scenarios/registry.hpp"

#include <array>

namespace {

using namespace tern_bench;

constexpr std::array entries = {
    impl_entry{"redis/pipeline", "hiredis/libevent", hiredis_impl::redis_pipeline},
    impl_entry{"redis/pubsub", "hiredis/libevent", hiredis_impl::redis_pubsub},
    impl_entry{"redis/pipeline", "raw/redis-benchmark", raw_impl::redis_pipeline_benchmark},
    impl_entry{"redis/pipeline", "raw/redis-benchmark-keys", raw_impl::redis_pipeline_benchmark_keys},
};

}  // namespace

int main(int argc, char** argv) { return worker_main(argc, argv, entries, "tern-bench-redis"); }
