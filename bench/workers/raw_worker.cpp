// Worker for the raw baselines: hand-written loops without a runtime, the floor of what is possible.
#include "../harness/worker.hpp"
#include "../scenarios/registry.hpp"

#include <array>

namespace {

using namespace tern_bench;

constexpr std::array entries = {
    impl_entry{"sockets/pingpong", "raw/liburing", raw_impl::sockets_pingpong_liburing},
};

}  // namespace

int main(int argc, char** argv) { return worker_main(argc, argv, entries, "tern-bench-raw"); }
