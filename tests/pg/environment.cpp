// The PostgreSQL cluster every test of a tern_pg_tests process uses.
//
// Under ctest a fixture makes one cluster for all the test processes (tern_pg_test_cluster --start DIR before them,
// --stop DIR after, and TERN_PG_TEST_CLUSTER=DIR in their environment); run by hand, the process makes its own in
// a temporary directory and removes it at the end. The environment is registered before main() (gtest_main's), which
// gtest allows: UnitTest::GetInstance() is built on first use.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cstdlib>
#include <stdexcept>

#include "pg_cluster.hpp"

namespace tern_test::pg {

namespace {
cluster the_cluster;
bool own_cluster = false;

class cluster_environment final : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* shared = std::getenv("TERN_PG_TEST_CLUSTER");
    if (shared != nullptr && cluster::load(shared, the_cluster)) return;
    char dir[] = "/tmp/tern-pg-XXXXXX";
    if (::mkdtemp(dir) == nullptr) throw std::runtime_error("mkdtemp failed");
    the_cluster = cluster::create(dir);
    own_cluster = true;
  }
  void TearDown() override {
    if (own_cluster) the_cluster.destroy();
  }
};

[[maybe_unused]] ::testing::Environment* const registered =
    ::testing::AddGlobalTestEnvironment(new cluster_environment);
}  // namespace

cluster& shared_cluster() { return the_cluster; }

}  // namespace tern_test::pg
