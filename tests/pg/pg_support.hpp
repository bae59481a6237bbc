// Shared by the tern::pg tests: the fixture (a loop on each backend, the shared cluster), connecting to it, names
// of tables that are the test's own, and holding a server's process still (to catch an exchange part way).
#pragma once

#include <tern/pg/batch.hpp>
#include <tern/pg/connection.hpp>

#include <libpq-fe.h>
#include <signal.h>

#include <cctype>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

#include "../support.hpp"
#include "pg_cluster.hpp"

namespace tern_test::pg {

namespace pgl = ::tern::pg;

class pg_test : public backend_test {
 public:
  const cluster& db() const { return shared_cluster(); }

  // A table name of this test's own (from the test's and the backend's names), so that tests never share data,
  // also when ctest runs them at once.
  std::string table(const std::string& base = "t") const {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string full = std::string(info->test_suite_name()) + "." + info->name();
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string>{}(full));
    std::string name = base + "_" + info->name();
    for (char& c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    return name.substr(0, 40) + "_" + hash;
  }
};

// Connects to the shared cluster over its Unix socket (or with the connection string given); fails the test if it
// cannot.
inline tern::task<pgl::connection> connect_to(tern::io_context& ctx, std::string conninfo,
                                              pgl::connect_options opts = {}) {
  auto [ec, c] = co_await pgl::connection::connect(ctx, std::move(conninfo), opts);
  EXPECT_OK(ec) << c.error_message();
  co_return std::move(c);
}

// The first field of the first row as T (fails the test if the query fails).
template <class T, class... A>
tern::task<T> scalar(pgl::connection& c, const char* sql, const A&... args) {
  auto [ec, r] = co_await c.query(sql, args...);
  EXPECT_OK(ec) << sql << ": " << r.error_message();
  if (ec || r.empty()) co_return T{};
  co_return r[0][0].template as<T>();
}

// Holds a server process still (SIGSTOP) until released or destroyed: what is sent to it stays in the socket's
// buffers once they are full, and it answers nothing.
struct held_still {
  int pid;
  explicit held_still(int p) : pid(p) { EXPECT_EQ(::kill(pid, SIGSTOP), 0); }
  held_still(const held_still&) = delete;
  held_still& operator=(const held_still&) = delete;
  ~held_still() { release(); }
  void release() {
    if (pid != 0) ::kill(std::exchange(pid, 0), SIGCONT);
  }
};

// Whether libpq still holds a part of what c sent, the socket taking no more (PQflush writes what it can).
inline bool still_sending(const pgl::connection& c) { return PQflush(c.native_handle()) == 1; }

}  // namespace tern_test::pg

// In a coroutine: fails and returns when ec is set, printing the server's report from the result r.
#define PG_ASSERT_OK(ec, r)                                                                      \
  if (ec) {                                                                                      \
    ADD_FAILURE() << #ec << ": " << ::tern_test::describe(ec) << ": " << (r).error_message(); \
    co_return;                                                                                   \
  } else                                                                                         \
    (void)0

namespace tern_test::pg {

// A query of another task on the same connection: it gets its own result, i.
inline tern::task<void> expect_own_result(pgl::connection& c, int i) {
  auto [ec, r] = co_await c.query("SELECT $1::int", i);
  PG_ASSERT_OK(ec, r);
  EXPECT_EQ(r[0][0].as<int>(), i);
}

// After an exchange on c was given up while server was held still with other tasks' queries (others) behind it:
// three more queries join them, the server goes on, and every one gets its own result long before a minute's
// sleep would have ended (what was given up was cancelled); the connection stays open.
inline tern::task<void> release_and_expect_own_results(tern::io_context& ctx, pgl::connection& c, held_still& server,
                                                       std::vector<tern::join_handle<void>>& others) {
  for (int i = 4; i <= 6; ++i) others.push_back(tern::spawn(ctx, expect_own_result(c, i)));
  const auto start = clock_type::now();
  server.release();
  for (auto& h : others) co_await std::move(h);
  EXPECT_LT(clock_type::now() - start, 20s) << "the sleep of what was given up ran to its end";
  EXPECT_TRUE(c.is_open()) << c.error_message();
}

}  // namespace tern_test::pg
