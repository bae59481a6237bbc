// main() of tern_pg_tests: the PostgreSQL cluster every test of the process uses.
//
// Under ctest a fixture makes one cluster for all the test processes (tern_pg_tests --start-cluster=DIR before
// them, --stop-cluster=DIR after, and TERN_PG_TEST_CLUSTER=DIR in their environment); run by hand, the process makes
// its own in a temporary directory and removes it at the end.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>

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
}  // namespace

cluster& shared_cluster() { return the_cluster; }

}  // namespace tern_test::pg

int main(int argc, char** argv) {
  using tern_test::pg::cluster;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg.starts_with("--start-cluster=")) {
        const std::string dir = arg.substr(std::strlen("--start-cluster="));
        cluster old;
        if (cluster::load(dir, old)) old.destroy();
        std::filesystem::remove_all(dir);
        cluster::create(dir);
        return 0;
      }
      if (arg.starts_with("--stop-cluster=")) {
        cluster c;
        if (cluster::load(arg.substr(std::strlen("--stop-cluster=")), c)) c.destroy();
        return 0;
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "tern_pg_tests: " << e.what() << "\n";
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new tern_test::pg::cluster_environment);
  return RUN_ALL_TESTS();
}
