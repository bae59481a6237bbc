// tern_pg_test_cluster --start DIR | --stop DIR: the cluster that ctest's fixture shares among the tern_pg_tests
// processes of one run (tests/CMakeLists.txt). --start replaces whatever an interrupted run left in DIR.
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>

#include "pg_cluster.hpp"

int main(int argc, char** argv) {
  using tern_test::pg::cluster;
  if (argc != 3 || (std::strcmp(argv[1], "--start") != 0 && std::strcmp(argv[1], "--stop") != 0)) {
    std::cerr << "usage: tern_pg_test_cluster --start|--stop DIR\n";
    return 2;
  }
  const std::string dir = argv[2];
  try {
    cluster old;
    if (cluster::load(dir, old)) old.destroy();
    std::filesystem::remove_all(dir);
    if (std::strcmp(argv[1], "--start") == 0) cluster::create(dir);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tern_pg_test_cluster: " << e.what() << "\n";
    return 1;
  }
}
