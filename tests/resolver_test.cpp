// net::resolver on both backends, against a DNS server that each test starts on a loopback UDP port
// (dns_server.hpp): A and AAAA answers, one family only, CNAME chains, NXDOMAIN and NODATA, a server that never
// answers, one that answers a malformed packet, one that answers noise, SERVFAIL, a truncated answer asked again
// over TCP, a second server after a silent first one, numeric hosts and /etc/hosts without a query, service
// names, many resolves at once, and cancellation (with_timeout, resolver::cancel, destroying the resolver) with the
// loop running out of work afterwards.
#include "dns_server.hpp"

#include <ares.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tern/net/resolver.hpp"

namespace {

using namespace tern_test;
using tern::net::address_family;
using tern::net::endpoint;
using tern::net::resolve_results;
using tern::net::resolver;
namespace dns = tern::net::dns;
using tern::net::resolver_options;

class resolver_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(resolver_test);

// Options that ask only the given servers, quickly, and do not append search domains.
resolver_options only(std::vector<endpoint> servers, std::chrono::milliseconds timeout = 2000ms, int tries = 2) {
  resolver_options o;
  o.servers = std::move(servers);
  o.timeout = timeout;
  o.tries = tries;
  o.search_domains = false;
  return o;
}

std::set<std::string> texts(const resolve_results& r) {
  std::set<std::string> out;
  for (const endpoint& ep : r.endpoints) out.insert(ep.to_string());
  return out;
}

// Runs body(resolver, server) with a server of the given behaviour serving for the duration of body; the server
// is closed afterwards, so the loop must run out of work by itself.
template <class Body>
void with_server(tern::io_context& ctx, dns_behaviour behaviour, Body body, std::chrono::milliseconds timeout = 2000ms,
                 int tries = 2) {
  run_bounded(ctx, [](tern::io_context& ctx, dns_behaviour behaviour, Body body, std::chrono::milliseconds timeout,
                      int tries) -> tern::task<void> {
    dns_server server(ctx, behaviour);
    server.add("host.test", {"192.0.2.1", "192.0.2.2", "2001:db8::1"});
    server.add("v4only.test", {"198.51.100.7"});
    server.add("host2.test", {"203.0.113.5"});
    server.add_cname("alias.test", "host.test");
    co_await tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<void> {
      g.spawn(server.serve());
      {
        resolver r(ctx, only({server.endpoint()}, timeout, tries));
        co_await body(r, server);
      }
      server.close();
    });
  }(ctx, behaviour, std::move(body), timeout, tries));
}

TEST_P(resolver_test, resolves_a_and_aaaa_with_the_services_port) {
  with_server(ctx, dns_behaviour::answer, [](resolver& r, dns_server& server) -> tern::task<void> {
    auto [ec, found] = co_await r.resolve("host.test", "8080");
    CO_ASSERT_OK(ec);
    EXPECT_EQ(texts(found), (std::set<std::string>{"192.0.2.1:8080", "192.0.2.2:8080", "[2001:db8::1]:8080"}));
    EXPECT_EQ(found.endpoints.size(), 3u) << "no duplicates";
    EXPECT_EQ(found.canonical_name, "host.test");
    EXPECT_GE(server.questions(dns_server::type_a), 1);
    EXPECT_GE(server.questions(dns_server::type_aaaa), 1);
  });
}

TEST_P(resolver_test, one_family_asks_only_for_it) {
  with_server(ctx, dns_behaviour::answer, [](resolver& r, dns_server& server) -> tern::task<void> {
    auto [ec4, four] = co_await r.resolve("host.test", "1", address_family::v4);
    CO_ASSERT_OK(ec4);
    EXPECT_EQ(texts(four), (std::set<std::string>{"192.0.2.1:1", "192.0.2.2:1"}));
    EXPECT_EQ(server.questions(dns_server::type_aaaa), 0);
    auto [ec6, six] = co_await r.resolve("host.test", "2", address_family::v6);
    CO_ASSERT_OK(ec6);
    EXPECT_EQ(texts(six), (std::set<std::string>{"[2001:db8::1]:2"}));
  });
}

TEST_P(resolver_test, follows_a_cname_and_reports_the_canonical_name) {
  with_server(ctx, dns_behaviour::answer, [](resolver& r, dns_server&) -> tern::task<void> {
    auto [ec, found] = co_await r.resolve("alias.test", "443", address_family::v4);
    CO_ASSERT_OK(ec);
    EXPECT_EQ(texts(found), (std::set<std::string>{"192.0.2.1:443", "192.0.2.2:443"}));
    EXPECT_EQ(found.canonical_name, "host.test");
  });
}

TEST_P(resolver_test, a_name_that_does_not_exist_is_not_found_with_the_resolvers_message) {
  with_server(ctx, dns_behaviour::answer, [](resolver& r, dns_server& server) -> tern::task<void> {
    auto [ec, found] = co_await r.resolve("nowhere.test", "80");
    EXPECT_EC(ec, dns::error::not_found);
    EXPECT_STREQ(ec.category().name(), "tern.resolver");
    EXPECT_EQ(ec.message(), ares_strerror(ARES_ENOTFOUND));
    EXPECT_TRUE(found.endpoints.empty());
    EXPECT_GE(server.questions(), 1);
    // The resolver goes on.
    auto [ok, again] = co_await r.resolve("host2.test", "80");
    CO_ASSERT_OK(ok);
    EXPECT_EQ(texts(again), (std::set<std::string>{"203.0.113.5:80"}));
  });
}

TEST_P(resolver_test, a_name_without_addresses_of_the_family_has_no_data) {
  with_server(ctx, dns_behaviour::answer, [](resolver& r, dns_server&) -> tern::task<void> {
    auto [ec, found] = co_await r.resolve("v4only.test", "80", address_family::v6);
    EXPECT_EC(ec, dns::error::no_data);
    EXPECT_TRUE(found.endpoints.empty());
    // Asked for either family, the name's one address comes back.
    auto [ok, any] = co_await r.resolve("v4only.test", "80");
    CO_ASSERT_OK(ok);
    EXPECT_EQ(texts(any), (std::set<std::string>{"198.51.100.7:80"}));
  });
}

TEST_P(resolver_test, a_server_that_never_answers_times_out_after_its_tries) {
  with_server(
      ctx, dns_behaviour::silent,
      [](resolver& r, dns_server& server) -> tern::task<void> {
        auto [ec, found] = co_await r.resolve("host.test", "80", address_family::v4);
        EXPECT_EC(ec, tern::error::timed_out);  // as every deadline tern reports
        EXPECT_EC(ec, std::errc::timed_out);
        EXPECT_TRUE(found.endpoints.empty());
        EXPECT_EQ(server.questions(dns_server::type_a), 3) << "one question per try";
      },
      50ms, 3);
}

TEST_P(resolver_test, a_malformed_answer_is_a_bad_response) {
  with_server(ctx, dns_behaviour::malformed, [](resolver& r, dns_server&) -> tern::task<void> {
    auto [ec, found] = co_await r.resolve("host.test", "80", address_family::v4);
    EXPECT_EC(ec, dns::error::bad_response);
    EXPECT_TRUE(found.endpoints.empty());
  });
}

TEST_P(resolver_test, noise_is_ignored_until_the_tries_run_out) {
  with_server(
      ctx, dns_behaviour::noise,
      [](resolver& r, dns_server& server) -> tern::task<void> {
        auto [ec, found] = co_await r.resolve("host.test", "80", address_family::v4);
        EXPECT_EC(ec, tern::error::timed_out);
        EXPECT_TRUE(found.endpoints.empty());
        EXPECT_EQ(server.questions(), 2);
      },
      50ms, 2);
}

TEST_P(resolver_test, a_failing_server_is_a_server_failure) {
  with_server(ctx, dns_behaviour::server_failure, [](resolver& r, dns_server&) -> tern::task<void> {
    // c-ares 1.18 treats SERVFAIL as an unusable server and, with no other server left, reports that none could
    // be contacted; later versions report the failure itself.
    auto [ec, found] = co_await r.resolve("host.test", "80", address_family::v4);
    EXPECT_TRUE(ec == dns::error::server_failure || ec == dns::error::connection_refused) << describe(ec);
    EXPECT_TRUE(found.endpoints.empty());
  });
}

TEST_P(resolver_test, a_truncated_answer_is_asked_again_over_tcp) {
  with_server(ctx, dns_behaviour::truncating, [](resolver& r, dns_server& server) -> tern::task<void> {
    auto [ec, found] = co_await r.resolve("host.test", "80");
    CO_ASSERT_OK(ec);
    EXPECT_EQ(texts(found), (std::set<std::string>{"192.0.2.1:80", "192.0.2.2:80", "[2001:db8::1]:80"}));
    EXPECT_GE(server.tcp_questions(), 2) << "A and AAAA over TCP";
  });
}

TEST_P(resolver_test, a_silent_first_server_is_followed_by_the_next) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    dns_server silent(ctx, dns_behaviour::silent);
    dns_server good(ctx, dns_behaviour::answer, /*v6=*/true);
    good.add("host.test", {"192.0.2.1"});
    co_await tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<void> {
      g.spawn(silent.serve());
      g.spawn(good.serve());
      {
        resolver r(ctx, only({silent.endpoint(), good.endpoint()}, 50ms, 2));
        auto [ec, found] = co_await r.resolve("host.test", "53", address_family::v4);
        EXPECT_OK(ec);
        EXPECT_EQ(texts(found), (std::set<std::string>{"192.0.2.1:53"}));
        EXPECT_GE(silent.questions(), 1);
        EXPECT_GE(good.questions(), 1) << "the server on ::1 answered";
      }
      silent.close();
      good.close();
    });
  }(ctx));
}

TEST_P(resolver_test, numeric_hosts_need_no_query) {
  with_server(ctx, dns_behaviour::silent, [](resolver& r, dns_server& server) -> tern::task<void> {
    auto [ec4, four] = co_await r.resolve("192.0.2.77", "25");
    CO_ASSERT_OK(ec4);
    EXPECT_EQ(texts(four), (std::set<std::string>{"192.0.2.77:25"}));
    auto [ec6, six] = co_await r.resolve("2001:db8::5", "25");
    CO_ASSERT_OK(ec6);
    EXPECT_EQ(texts(six), (std::set<std::string>{"[2001:db8::5]:25"}));
    auto [mixed, none] = co_await r.resolve("2001:db8::5", "25", address_family::v4);
    EXPECT_TRUE(mixed) << "an IPv6 literal has no IPv4 address";
    EXPECT_TRUE(none.endpoints.empty());
    EXPECT_EQ(server.questions(), 0);
  });
}

TEST_P(resolver_test, the_hosts_file_answers_before_dns) {
  // localhost is in /etc/hosts on every Debian system.
  with_server(ctx, dns_behaviour::silent, [](resolver& r, dns_server& server) -> tern::task<void> {
    auto [ec, found] = co_await r.resolve("localhost", "7", address_family::v4);
    CO_ASSERT_OK(ec);
    EXPECT_EQ(texts(found), (std::set<std::string>{"127.0.0.1:7"}));
    EXPECT_EQ(server.questions(), 0);
  });
}

TEST_P(resolver_test, service_names_come_from_etc_services) {
  with_server(ctx, dns_behaviour::answer, [](resolver& r, dns_server&) -> tern::task<void> {
    auto [ec, found] = co_await r.resolve("host2.test", "http");
    CO_ASSERT_OK(ec);
    EXPECT_EQ(texts(found), (std::set<std::string>{"203.0.113.5:80"}));
    auto [bad, none] = co_await r.resolve("host2.test", "no-such-service-here");
    EXPECT_EC(bad, dns::error::service_not_found);
    EXPECT_TRUE(none.endpoints.empty());
    auto [empty, zero] = co_await r.resolve("host2.test");
    CO_ASSERT_OK(empty);
    EXPECT_EQ(texts(zero), (std::set<std::string>{"203.0.113.5:0"}));
  });
}

TEST_P(resolver_test, many_resolves_at_once_each_get_their_answer) {
  with_server(ctx, dns_behaviour::answer, [](resolver& r, dns_server&) -> tern::task<void> {
    constexpr int n = 24;
    std::vector<tern::task<tern::io_result<resolve_results>>> all;
    for (int i = 0; i < n; ++i) {
      const char* name = i % 3 == 0 ? "host.test" : i % 3 == 1 ? "host2.test" : "nowhere.test";
      all.push_back(r.resolve(name, std::to_string(1000 + i), address_family::v4));
    }
    auto results = co_await tern::when_all(std::move(all));
    for (int i = 0; i < n; ++i) {
      auto& [ec, found] = results[static_cast<std::size_t>(i)];
      const std::string port = std::to_string(1000 + i);
      if (i % 3 == 0) {
        EXPECT_OK(ec);
        EXPECT_EQ(texts(found), (std::set<std::string>{"192.0.2.1:" + port, "192.0.2.2:" + port}));
      } else if (i % 3 == 1) {
        EXPECT_OK(ec);
        EXPECT_EQ(texts(found), (std::set<std::string>{"203.0.113.5:" + port}));
      } else {
        EXPECT_EC(ec, dns::error::not_found);
      }
    }
  });
}

// The resolver's errors are dns::error, as every library's are its error, in c-ares's words; the old names still
// name them (deprecated).
TEST(resolver_errors, dns_error_keeps_c_ares_words_and_the_old_names_still_work) {
  const std::error_code ec = dns::error::not_found;
  EXPECT_STREQ(ec.category().name(), "tern.resolver");
  EXPECT_EQ(&ec.category(), &dns::category());
  EXPECT_EQ(ec.message(), ares_strerror(ARES_ENOTFOUND));
  EXPECT_TRUE(std::error_code(dns::error::connection_refused) == std::errc::connection_refused);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  EXPECT_TRUE(ec == tern::net::resolver_error::not_found);
  EXPECT_EQ(&tern::net::resolver_category(), &dns::category());
#pragma GCC diagnostic pop
}

TEST_P(resolver_test, with_timeout_cancels_a_pending_resolve) {
  with_server(
      ctx, dns_behaviour::silent,
      [](resolver& r, dns_server&) -> tern::task<void> {
        auto [ec, found] = co_await tern::with_timeout(r.resolve("host.test", "80"), 50ms);
        EXPECT_EC(ec, tern::error::timed_out);
        EXPECT_TRUE(found.endpoints.empty());
        // The abandoned query does not go on retrying for 10 s x 5 (run_bounded's limit would catch it).
      },
      10000ms, 5);
}

TEST_P(resolver_test, cancel_completes_every_pending_resolve) {
  with_server(
      ctx, dns_behaviour::silent,
      [](resolver& r, dns_server& server) -> tern::task<void> {
        int canceled = 0;
        co_await tern::task_group::run([&](tern::task_group& g) -> tern::task<void> {
          for (int i = 0; i < 3; ++i) {
            g.spawn([](resolver& r, int& canceled) -> tern::task<void> {
              auto [ec, found] = co_await r.resolve("host.test", "80");
              EXPECT_EC(ec, tern::error::operation_canceled);
              EXPECT_TRUE(found.endpoints.empty());
              canceled += ec == tern::error::operation_canceled;
            }(r, canceled));
          }
          while (server.questions() < 3) co_await tern::yield();
          r.cancel();
        });
        EXPECT_EQ(canceled, 3);
      },
      10000ms, 5);
}

TEST_P(resolver_test, destroying_the_resolver_cancels_its_resolves) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    dns_server server(ctx, dns_behaviour::silent);
    co_await tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<void> {
      g.spawn(server.serve());
      auto r = std::make_unique<resolver>(ctx, only({server.endpoint()}, 10000ms, 5));
      std::error_code seen;
      bool finished = false;
      g.spawn([](resolver& r, std::error_code& seen, bool& finished) -> tern::task<void> {
        auto [ec, found] = co_await r.resolve("host.test", "80");
        seen = ec;
        finished = true;
      }(*r, seen, finished));
      while (server.questions() == 0) co_await tern::yield();
      EXPECT_FALSE(finished);
      r.reset();
      co_await tern::yield();
      EXPECT_TRUE(finished);
      EXPECT_EC(seen, tern::error::operation_canceled);
      server.close();
    });
  }(ctx));
}

TEST_P(resolver_test, a_resolve_on_another_loops_thread_is_refused) {
  tern::io_context other(options_for(GetParam()));
  run_bounded(ctx, [](tern::io_context& other) -> tern::task<void> {
    resolver r(other, only({endpoint::loopback_v4(9)}));
    auto [ec, found] = co_await r.resolve("192.0.2.1", "80");
    EXPECT_EC(ec, tern::error::wrong_loop);
    EXPECT_TRUE(found.endpoints.empty());
  }(other));
}

}  // namespace
