// tern::redis over TLS (tern::tls, <tern/redis/tls.hpp>) to Debian's redis-server, which is built with TLS: its
// tls-port with a certificate from the test CA. Commands, a large value, pub/sub, and a server the client does not
// trust.
#include "redis/redis_support.hpp"
#include "tls/tls_support.hpp"

#include <tern/redis/tls.hpp>

#include <string>

namespace {

using namespace tern_test;
using tern::task;
using namespace std::chrono_literals;

class redis_tls_test : public backend_test {
 protected:
  redis_server server{{},
                      {"--tls-cert-file", pki().server_cert, "--tls-key-file", pki().server_key, "--tls-ca-cert-file",
                       pki().ca, "--tls-auth-clients", "no"}};

  redis::config tls_config(tls::context client) const {
    redis::config c;
    c.host = "localhost";
    c.port = server.tls_port();
    c.tls = redis::tls_transport(std::move(client));
    return c;
  }
};
TERN_INSTANTIATE_BACKENDS(redis_tls_test);

TEST_P(redis_tls_test, commands_and_pub_sub_over_tls) {
  run_bounded(ctx, [](redis::config cfg, redis::config plain) -> task<void> {
    redis::connection conn(here(), cfg);
    CO_ASSERT_OK(co_await conn.connect());
    EXPECT_EQ(conn.protocol(), 3);
    const std::vector<char> pattern = make_pattern(1 << 20);
    const std::string_view value(pattern.data(), pattern.size());
    EXPECT_OK((co_await conn.command<redis::ignore_t>("SET", "secret", value)).ec);
    std::vector<tern::join_handle<redis::result<std::string>>> gets;
    for (int i = 0; i < 10; ++i) gets.push_back(tern::spawn(here(), conn.command<std::string>("GET", "secret")));
    for (auto& g : gets) {
      auto [ec, back] = co_await std::move(g);
      EXPECT_OK(ec);
      EXPECT_EQ(fnv1a(back), fnv1a(value));
    }
    CO_ASSERT_OK((co_await conn.subscribe("tls-news")).ec);
    redis::connection pub(here(), plain);
    CO_ASSERT_OK(co_await pub.connect());
    EXPECT_EQ((co_await pub.command<std::int64_t>("PUBLISH", "tls-news", "encrypted")).value, 1);
    auto [ec, m] = co_await tern::with_timeout(conn.receive(), 5s);
    CO_ASSERT_OK(ec);
    EXPECT_EQ(m->payload, "encrypted");
    conn.close();
    pub.close();
  }(tls_config(client_context()), server.unix_config()));
}

TEST_P(redis_tls_test, a_server_the_client_does_not_trust_is_refused) {
  run_bounded(ctx, [](redis::config cfg) -> task<void> {
    cfg.fail_fast = true;
    redis::connection conn(here(), cfg);
    const std::error_code ec = co_await conn.connect();
    EXPECT_TRUE(ec);
    EXPECT_NE(ec.message().find("certificate"), std::string::npos) << describe(ec);
    EXPECT_EC((co_await conn.command("PING")).ec, redis::error::not_connected);
    conn.close();
  }(tls_config(tls::context(tls::role::client))));  // the system's CAs: not the test CA
}

}  // namespace
