// net::connect with Happy Eyeballs on both backends: the order of the attempts, a refused endpoint followed at once
// by the next, a silent endpoint (a listener whose accept queue is full drops SYNs) followed after the attempt
// delay, the loser closed, every endpoint refused, a deadline over the whole race, and connecting by name through
// a resolver asking the tests' DNS server.
#include "dns_server.hpp"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tern/net/connect.hpp"

namespace {

using namespace tern_test;
using tern::net::connect_options;
using tern::net::endpoint;
using tern::net::tcp_acceptor;
using tern::net::tcp_socket;

class connect_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(connect_test);

// A loopback endpoint that never answers a connect: a listener with a backlog of 0 whose one queued connection is
// never accepted, so the kernel drops every further SYN (the connect then waits for its retransmissions).
class silent_endpoint {
 public:
  silent_endpoint() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listener_, 0), 0);
    socklen_t len = sizeof a;
    EXPECT_EQ(::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    ep_ = endpoint(reinterpret_cast<sockaddr*>(&a), len);
    filler_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::connect(filler_, reinterpret_cast<sockaddr*>(&a), len), 0);
  }
  ~silent_endpoint() {
    ::close(filler_);
    ::close(listener_);
  }
  const endpoint& get() const { return ep_; }

 private:
  int listener_ = -1;
  int filler_ = -1;
  endpoint ep_;
};

// A loopback port with no listener (bound, then closed: connects are refused).
endpoint refused_endpoint(bool v6 = false) {
  const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  endpoint ep = v6 ? endpoint::loopback_v6(0) : endpoint::loopback_v4(0);
  EXPECT_EQ(::bind(fd, ep.data(), ep.size()), 0);
  sockaddr_storage s{};
  socklen_t len = sizeof s;
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&s), &len), 0);
  ::close(fd);
  return endpoint(reinterpret_cast<sockaddr*>(&s), len);
}

TEST(happy_eyeballs_order, alternates_families_starting_with_the_first) {
  const endpoint a4 = *endpoint::parse("192.0.2.1:1"), b4 = *endpoint::parse("192.0.2.2:1"),
                 c4 = *endpoint::parse("192.0.2.3:1");
  const endpoint a6 = *endpoint::parse("[2001:db8::1]:1"), b6 = *endpoint::parse("[2001:db8::2]:1");
  EXPECT_EQ(tern::net::happy_eyeballs_order({a6, b6, a4, b4, c4}), (std::vector<endpoint>{a6, a4, b6, b4, c4}));
  EXPECT_EQ(tern::net::happy_eyeballs_order({a4, b4, c4, a6}), (std::vector<endpoint>{a4, a6, b4, c4}));
  EXPECT_EQ(tern::net::happy_eyeballs_order({a4, b4}), (std::vector<endpoint>{a4, b4}));
  EXPECT_EQ(tern::net::happy_eyeballs_order({}), std::vector<endpoint>{});
}

TEST_P(connect_test, a_refused_endpoint_is_followed_at_once_by_the_next) {
  // The attempt delay is far longer than the test's limit: only the failure can start the second attempt.
  run_bounded(
      ctx,
      [](tern::io_context& ctx) -> tern::task<void> {
        tcp_acceptor acceptor(ctx);
        const endpoint good = listen_loopback(acceptor);
        connect_options o;
        o.attempt_delay = 60s;
        std::vector<endpoint> endpoints{refused_endpoint(), good};  // named: g++ 12 rejects a braced list in co_await
        auto [ec, s] = co_await tern::net::connect(ctx, std::move(endpoints), o);
        CO_ASSERT_OK(ec);
        auto [rec, peer] = s.remote_endpoint();
        EXPECT_OK(rec);
        EXPECT_EQ(peer, good);
        auto [aec, accepted] = co_await acceptor.accept();
        CO_ASSERT_OK(aec);
        CO_ASSERT_OK((co_await s.write_all(tern::const_buffer("hi"))).ec);
        char buf[2];
        auto [r, n] = co_await accepted.read_exact(buf);
        CO_ASSERT_OK(r);
        EXPECT_EQ(std::string(buf, 2), "hi");
      }(ctx),
      20s);
}

TEST_P(connect_test, a_silent_endpoint_is_followed_after_the_delay_and_the_loser_is_closed) {
  silent_endpoint silent;
  run_bounded(ctx, [](tern::io_context& ctx, endpoint silent) -> tern::task<void> {
    tcp_acceptor acceptor(ctx);
    const endpoint good = listen_loopback(acceptor);
    const int before = open_fd_count();
    connect_options o;
    o.attempt_delay = 100ms;
    const auto start = std::chrono::steady_clock::now();
    std::vector<endpoint> endpoints{silent, good};
    auto [ec, s] = co_await tern::net::connect(ctx, std::move(endpoints), o);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    CO_ASSERT_OK(ec);
    EXPECT_GE(elapsed, 100ms) << "the second attempt started before the attempt delay";
    auto [rec, peer] = s.remote_endpoint();
    EXPECT_OK(rec);
    EXPECT_EQ(peer, good);
    auto [aec, accepted] = co_await acceptor.accept();
    CO_ASSERT_OK(aec);
    // The winner and the accepted socket are open; the attempt at the silent endpoint is not.
    EXPECT_EQ(open_fd_count(), before + 2);
  }(ctx, silent.get()));
}

TEST_P(connect_test, every_endpoint_refused_reports_the_refusal) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    const int before = open_fd_count();
    connect_options o;
    o.attempt_delay = 60s;
    std::vector<endpoint> endpoints{refused_endpoint(), refused_endpoint(true), refused_endpoint()};
    auto [ec, s] = co_await tern::net::connect(ctx, std::move(endpoints), o);
    EXPECT_EC(ec, std::errc::connection_refused);
    EXPECT_FALSE(s.is_open());
    EXPECT_EQ(open_fd_count(), before);
  }(ctx));
}

TEST_P(connect_test, a_deadline_cancels_every_attempt) {
  silent_endpoint first, second;
  run_bounded(ctx, [](tern::io_context& ctx, endpoint a, endpoint b) -> tern::task<void> {
    const int before = open_fd_count();
    connect_options o;
    o.attempt_delay = 20ms;
    std::vector<endpoint> endpoints{a, b};
    auto [ec, s] = co_await tern::with_timeout(tern::net::connect(ctx, std::move(endpoints), o), 150ms);
    EXPECT_EC(ec, tern::error::timed_out);
    EXPECT_FALSE(s.is_open());
    EXPECT_EQ(open_fd_count(), before);
  }(ctx, first.get(), second.get()));
}

TEST_P(connect_test, no_endpoints_is_an_invalid_argument) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [ec, s] = co_await tern::net::connect(ctx, std::vector<endpoint>{});
    EXPECT_EC(ec, std::errc::invalid_argument);
    EXPECT_FALSE(s.is_open());
  }(ctx));
}

TEST_P(connect_test, connects_by_name_to_the_address_that_accepts) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    dns_server server(ctx, dns_behaviour::answer);
    // Both loopback addresses; only IPv4 listens on the port, so the IPv6 attempt is refused.
    server.add("dual.test", {"::1", "127.0.0.1"});
    tcp_acceptor acceptor(ctx);
    const endpoint good = listen_loopback(acceptor);
    co_await tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<void> {
      g.spawn(server.serve());
      {
        tern::net::resolver_options ro;
        ro.servers = {server.endpoint()};
        ro.search_domains = false;
        tern::net::resolver r(ctx, ro);
        connect_options o;
        o.attempt_delay = 60s;
        auto [ec, s] = co_await tern::net::connect(r, "dual.test", std::to_string(good.port()), o);
        EXPECT_OK(ec);
        auto [rec, peer] = s.remote_endpoint();
        EXPECT_EQ(peer, good);
        auto [missing, none] = co_await tern::net::connect(r, "missing.test", "80", o);
        EXPECT_EC(missing, tern::net::dns::error::not_found);
        EXPECT_FALSE(none.is_open());
      }
      server.close();
    });
  }(ctx));
}

}  // namespace
