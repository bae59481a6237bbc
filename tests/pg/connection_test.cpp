// Connecting on both backends: over the Unix socket and TCP, with a SCRAM password, with TLS (a self-signed
// certificate verified by name), refused connections and wrong passwords as errors with libpq's message, the
// connect timeout against a server that never answers, and a connection used from the wrong thread.
#include "pg_support.hpp"

#include <thread>

namespace {

using namespace tern_test;
using namespace tern_test::pg;

class pg_connection_test : public pg_test {};
TERN_INSTANTIATE_BACKENDS(pg_connection_test);

TEST_P(pg_connection_test, connects_over_the_unix_socket_and_tcp) {
  run_bounded(ctx, [](pg_connection_test& t, tern::io_context& ctx) -> tern::task<void> {
    for (const std::string& info : {t.db().socket_conninfo(), t.db().tcp_conninfo()}) {
      pgl::connection c = co_await connect_to(ctx, info);
      CO_ASSERT(c.is_open());
      EXPECT_GT(c.backend_pid(), 0);
      EXPECT_GE(c.server_version(), 150000);
      EXPECT_FALSE(c.uses_tls());
      EXPECT_EQ(co_await scalar<int>(c, "SELECT 41 + 1"), 42);
    }
  }(*this, ctx));
}

TEST_P(pg_connection_test, a_password_is_checked_with_scram) {
  run_bounded(ctx, [](pg_connection_test& t, tern::io_context& ctx) -> tern::task<void> {
    auto [ec, c] = co_await pgl::connection::connect(ctx, t.db().tcp_conninfo("user=tern_pw password=secret"));
    CO_ASSERT_OK(ec);
    EXPECT_EQ(co_await scalar<std::string>(c, "SELECT current_user"), "tern_pw");
    auto [bec, bad] = co_await pgl::connection::connect(ctx, t.db().tcp_conninfo("user=tern_pw password=wrong"));
    EXPECT_EC(bec, pgl::error::connection_failed);
    EXPECT_FALSE(bad.is_open());
    EXPECT_NE(bad.error_message().find("password authentication failed"), std::string::npos) << bad.error_message();
  }(*this, ctx));
}

TEST_P(pg_connection_test, tls_with_a_self_signed_certificate_verified_by_name) {
  run_bounded(ctx, [](pg_connection_test& t, tern::io_context& ctx) -> tern::task<void> {
    const std::string tls = "host=localhost hostaddr=127.0.0.1 port=" + std::to_string(t.db().port) +
                            " dbname=postgres user=tern_tls sslmode=verify-full sslrootcert=" + t.db().root_cert();
    auto [ec, c] = co_await pgl::connection::connect(ctx, tls);
    EXPECT_OK(ec) << c.error_message();
    CO_ASSERT(c.is_open());
    EXPECT_TRUE(c.uses_tls());
    EXPECT_TRUE(co_await scalar<bool>(c, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"));
    // The same role without TLS is refused by the server's rules.
    auto [pec, plain] = co_await pgl::connection::connect(ctx, t.db().tcp_conninfo("user=tern_tls"));
    EXPECT_EC(pec, pgl::error::connection_failed);
    EXPECT_NE(plain.error_message().find("rejects connection"), std::string::npos) << plain.error_message();
    // A certificate checked against another name fails the handshake.
    const std::string wrong_name = "host=127.0.0.2 hostaddr=127.0.0.1 port=" + std::to_string(t.db().port) +
                                   " dbname=postgres user=tern_tls sslmode=verify-full sslrootcert=" +
                                   t.db().root_cert();
    auto [wec, w] = co_await pgl::connection::connect(ctx, wrong_name);
    EXPECT_EC(wec, pgl::error::connection_failed);
    EXPECT_NE(w.error_message().find("127.0.0.2"), std::string::npos) << w.error_message();
  }(*this, ctx));
}

TEST_P(pg_connection_test, a_refused_connection_is_an_error_with_libpqs_message) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    const int port = free_tcp_port();  // nobody listens there
    auto [ec, c] = co_await pgl::connection::connect(
        ctx, "host=127.0.0.1 port=" + std::to_string(port) + " dbname=postgres user=tern sslmode=disable");
    EXPECT_EC(ec, pgl::error::connection_failed);
    EXPECT_TRUE(ec == std::errc::connection_refused);
    EXPECT_NE(c.error_message().find("refused"), std::string::npos) << c.error_message();
    auto [qec, r] = co_await c.query("SELECT 1");
    EXPECT_EC(qec, pgl::error::connection_closed);
  }(ctx));
}

TEST_P(pg_connection_test, the_connect_timeout_ends_a_connect_to_a_server_that_never_answers) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    // A listener that never accepts: the TCP connect succeeds, the server's answer never comes.
    tern::net::tcp_acceptor silent(ctx);
    CO_ASSERT_OK(silent.listen(tern::net::endpoint::loopback_v4(0)));
    auto [lec, ep] = silent.local_endpoint();
    const auto start = clock_type::now();
    auto [ec, c] = co_await pgl::connection::connect(
        ctx, "host=127.0.0.1 port=" + std::to_string(ep.port()) + " dbname=x user=x sslmode=disable",
        {.connect_timeout = std::chrono::milliseconds(200)});
    EXPECT_EC(ec, tern::error::timed_out);
    EXPECT_LT(clock_type::now() - start, 20s);
  }(ctx));
}

TEST_P(pg_connection_test, a_connection_used_from_another_thread_reports_wrong_loop) {
  pgl::connection c;
  run_bounded(ctx, [](pg_connection_test& t, tern::io_context& ctx, pgl::connection& c) -> tern::task<void> {
    c = co_await connect_to(ctx, t.db().socket_conninfo());
  }(*this, ctx, c));
  std::error_code from_elsewhere;
  std::thread other([&] {
    tern::io_context elsewhere(options());
    elsewhere.block_on([](pgl::connection& c, std::error_code& out) -> tern::task<void> {
      auto [ec, r] = co_await c.query("SELECT 1");
      out = ec;
    }(c, from_elsewhere));
  });
  other.join();
  EXPECT_EC(from_elsewhere, tern::error::wrong_loop);
}

bool is_loss(std::error_code ec) {
  return ec == pgl::error::connection_lost || ec == pgl::sqlstate::admin_shutdown;
}

TEST_P(pg_connection_test, a_lost_connection_ends_every_pending_operation_and_the_loop_goes_on) {
  run_bounded(ctx, [](pg_connection_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection admin = co_await connect_to(ctx, t.db().socket_conninfo());
    // Pipelined queries (one running, the others queued behind it on the server) and a notification wait.
    {
      pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
      CO_ASSERT_OK(co_await c.listen("lost_channel"));
      int ended = 0;
      tern::task_group group(ctx);
      group.spawn([](pgl::connection& c, int& ended) -> tern::task<void> {
        auto [ec, n] = co_await c.next_notification();
        EXPECT_EC(ec, pgl::error::connection_lost);
        ++ended;
      }(c, ended));
      for (int i = 0; i < 4; ++i) {
        group.spawn([](pgl::connection& c, int& ended) -> tern::task<void> {
          auto [ec, r] = co_await c.query("SELECT pg_sleep(60)");
          EXPECT_TRUE(is_loss(ec)) << describe(ec);
          ++ended;
        }(c, ended));
      }
      co_await tern::sleep_for(100ms);
      EXPECT_EQ(ended, 0);
      EXPECT_TRUE(co_await scalar<bool>(admin, "SELECT pg_terminate_backend($1)", c.backend_pid()));
      co_await group.wait();
      EXPECT_EQ(ended, 5);
      EXPECT_FALSE(c.is_open());
      EXPECT_FALSE(c.error_message().empty());
      auto [ec, r] = co_await c.query("SELECT 1");
      EXPECT_EC(ec, pgl::error::connection_lost);
    }
    // A transaction's running query and another task's query waiting for the transaction to end.
    {
      pgl::connection c = co_await connect_to(ctx, t.db().socket_conninfo());
      const int pid = c.backend_pid();
      std::error_code in_tx, after_tx, begin_ec;
      tern::task_group group(ctx);
      group.spawn([](pgl::connection& c, std::error_code& begin_ec, std::error_code& in_tx) -> tern::task<void> {
        auto [ec, tx] = co_await c.begin();
        begin_ec = ec;
        if (ec) co_return;
        auto [qec, r] = co_await tx.query("SELECT pg_sleep(60)");
        in_tx = qec;
        // The transaction is destroyed on a broken connection: its rollback has nowhere to go, and no error.
      }(c, begin_ec, in_tx));
      co_await tern::sleep_for(50ms);
      group.spawn([](pgl::connection& c, std::error_code& after_tx) -> tern::task<void> {
        auto [ec, r] = co_await c.query("SELECT 2");
        after_tx = ec;
      }(c, after_tx));
      co_await tern::sleep_for(50ms);
      EXPECT_TRUE(co_await scalar<bool>(admin, "SELECT pg_terminate_backend($1)", pid));
      co_await group.wait();
      EXPECT_OK(begin_ec);
      EXPECT_TRUE(is_loss(in_tx)) << describe(in_tx);
      EXPECT_EC(after_tx, pgl::error::connection_lost);
    }
    // The loop and the other connection are unaffected.
    EXPECT_EQ(co_await scalar<int>(admin, "SELECT 7"), 7);
  }(*this, ctx), 60s);
}

}  // namespace
