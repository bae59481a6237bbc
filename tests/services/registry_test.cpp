// tern::services::registry on one loop, on both backends: dependency order, concurrency of independent starts,
// reverse stop order, failures and what they block, cycles, missing providers, optional dependencies, and services
// added, stopped and removed while the registry runs.
#include "services/services_support.hpp"

#include <tern/sync/event.hpp>

#include <functional>
#include <memory>
#include <stdexcept>

namespace {

using namespace tern_test;
using namespace services_test;

class registry_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(registry_test);

TEST_P(registry_test, a_chain_starts_in_dependency_order_and_stops_in_reverse) {
  journal j;
  run_bounded(ctx, [](tern::io_context& ctx, journal& j) -> tern::task<> {
    svc::registry reg(ctx);
    // Added dependents first, so that add order cannot pass for dependency order.
    add_node<c_service<b_if>>(reg, j, "c");
    add_node<b_service<a_if>>(reg, j, "b");
    add_node<a_service>(reg, j, "a");
    svc::registry_report r = co_await reg.start();
    EXPECT_TRUE(r.all_running()) << r.to_string();
    EXPECT_TRUE(j.before("started a", "constructed b"));
    EXPECT_TRUE(j.before("started b", "constructed c"));
    EXPECT_FALSE(j.has("constructed too early b"));
    EXPECT_FALSE(j.has("constructed too early c"));
    co_await reg.stop();
    EXPECT_TRUE(j.before("stopped c", "stop b"));
    EXPECT_TRUE(j.before("stopped b", "stop a"));
    svc::registry_report after = reg.report();
    for (const auto& s : after.services) EXPECT_EQ(s.state, svc::service_state::stopped) << s.name;
  }(ctx, j));
}

TEST_P(registry_test, a_diamond_starts_the_top_last_and_stops_it_first) {
  journal j;
  run_bounded(ctx, [](tern::io_context& ctx, journal& j) -> tern::task<> {
    svc::registry reg(ctx);
    add_node<d_service<b_if, c_if>>(reg, j, "d");
    add_node<b_service<a_if>>(reg, j, "b");
    add_node<c_service<a_if>>(reg, j, "c");
    add_node<a_service>(reg, j, "a");
    svc::registry_report r = co_await reg.start();
    EXPECT_TRUE(r.all_running()) << r.to_string();
    EXPECT_TRUE(j.before("started a", "constructed b"));
    EXPECT_TRUE(j.before("started a", "constructed c"));
    EXPECT_TRUE(j.before("started b", "constructed d"));
    EXPECT_TRUE(j.before("started c", "constructed d"));
    // b and c started side by side: both were constructed before either had finished starting.
    EXPECT_TRUE(j.before("constructed c", "started b"));
    EXPECT_TRUE(j.before("constructed b", "started c"));
    co_await reg.stop();
    EXPECT_TRUE(j.before("stopped d", "stop b"));
    EXPECT_TRUE(j.before("stopped d", "stop c"));
    EXPECT_TRUE(j.before("stopped b", "stop a"));
    EXPECT_TRUE(j.before("stopped c", "stop a"));
  }(ctx, j));
}

// Two services whose start() each waits for the other's: run one after the other, the first would time out.
struct meeting {
  tern::sync::manual_reset_event left_arrived;
  tern::sync::manual_reset_event right_arrived;
};
template <bool Left>
class rendezvous {
 public:
  explicit rendezvous(meeting& m) : m_(m) {}
  tern::task<std::error_code> start() {
    (Left ? m_.left_arrived : m_.right_arrived).set();
    std::error_code ec = co_await tern::with_timeout((Left ? m_.right_arrived : m_.left_arrived).wait(), 5s);
    co_return ec;
  }

 private:
  meeting& m_;
};

TEST_P(registry_test, independent_starts_run_concurrently) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<> {
    meeting m;
    svc::registry reg(ctx);
    reg.add<rendezvous<true>>(svc::named{"left"}, std::ref(m));
    reg.add<rendezvous<false>>(svc::named{"right"}, std::ref(m));
    svc::registry_report r = co_await reg.start();
    EXPECT_TRUE(r.all_running()) << r.to_string();
    co_await reg.stop();
  }(ctx));
}

TEST_P(registry_test, stops_of_independent_services_run_concurrently) {
  // The stop-side twin: each stop() waits for the other's arrival.
  struct stopper {
    meeting& m;
    bool left;
    tern::task<> stop() {
      (left ? m.left_arrived : m.right_arrived).set();
      std::error_code ec = co_await tern::with_timeout((left ? m.right_arrived : m.left_arrived).wait(), 5s);
      if (ec) throw std::system_error(ec);
    }
  };
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<> {
    meeting m;
    svc::registry reg(ctx);
    auto l = reg.add<stopper>(svc::named{"left"}, std::ref(m), true);
    auto r = reg.add<stopper>(svc::named{"right"}, std::ref(m), false);
    (void)co_await reg.start();
    co_await reg.stop();
    EXPECT_FALSE(reg.status(l).stop_error);
    EXPECT_FALSE(reg.status(r).stop_error);
  }(ctx));
}

TEST_P(registry_test, a_failed_start_blocks_its_dependents_and_nothing_else) {
  journal j;
  run_bounded(ctx, [](tern::io_context& ctx, journal& j) -> tern::task<> {
    svc::registry reg(ctx);
    auto a = add_node<a_service>(reg, j, "a", behaviour{.throw_in_start = true});
    auto b = add_node<b_service<a_if>>(reg, j, "b");
    auto c = add_node<c_service<b_if>>(reg, j, "c");    // through b
    auto d = add_node<d_service<>>(reg, j, "d");        // independent
    svc::registry_report r = co_await reg.start();
    svc::service_status sa = reg.status(a);
    EXPECT_EQ(sa.state, svc::service_state::failed) << r.to_string();
    EXPECT_NE(sa.reason.find("no disk for a"), std::string::npos) << sa.reason;
    EXPECT_TRUE(sa.error);
    svc::service_status sb = reg.status(b);
    EXPECT_EQ(sb.state, svc::service_state::blocked) << r.to_string();
    EXPECT_EQ(sb.failed_dependency, "a");
    svc::service_status sc = reg.status(c);
    EXPECT_EQ(sc.state, svc::service_state::blocked) << r.to_string();
    EXPECT_EQ(sc.failed_dependency, "a");
    EXPECT_NE(sc.reason.find("'a' failed"), std::string::npos) << sc.reason;
    EXPECT_EQ(reg.status(d).state, svc::service_state::running);
    EXPECT_FALSE(j.has("constructed b"));
    EXPECT_FALSE(j.has("constructed c"));
    co_await reg.stop();
  }(ctx, j));
}

TEST_P(registry_test, a_start_that_returns_an_error_or_a_constructor_that_throws_fails) {
  journal j;
  run_bounded(ctx, [](tern::io_context& ctx, journal& j) -> tern::task<> {
    svc::registry reg(ctx);
    auto a = add_node<a_service>(reg, j, "a", behaviour{.error_in_start = true});
    auto b = add_node<b_service<>>(reg, j, "b", behaviour{.throw_in_constructor = true});
    auto c = add_node<c_service<b_if>>(reg, j, "c");
    (void)co_await reg.start();
    svc::service_status sa = reg.status(a);
    EXPECT_EQ(sa.state, svc::service_state::failed);
    EXPECT_EQ(sa.error_code, std::errc::address_in_use);
    EXPECT_FALSE(sa.error);
    svc::service_status sb = reg.status(b);
    EXPECT_EQ(sb.state, svc::service_state::failed);
    EXPECT_NE(sb.reason.find("constructor of b failed"), std::string::npos) << sb.reason;
    EXPECT_EQ(reg.status(c).state, svc::service_state::blocked);
    EXPECT_EQ(reg.status(c).failed_dependency, "b");
    co_await reg.stop();
  }(ctx, j));
}

TEST_P(registry_test, a_failed_service_started_again_unblocks_its_dependents) {
  struct flaky : a_if {
    int& attempts;
    explicit flaky(int& n) : attempts(n) {}
    tern::task<> start() {
      if (++attempts == 1) throw std::runtime_error("first attempt fails");
      co_return;
    }
    bool started() const override { return true; }
  };
  journal j;
  run_bounded(ctx, [](tern::io_context& ctx, journal& j) -> tern::task<> {
    int attempts = 0;
    svc::registry reg(ctx);
    auto a = reg.add<flaky>(svc::provides<a_if>{}, std::ref(attempts));
    auto b = add_node<b_service<a_if>>(reg, j, "b");
    (void)co_await reg.start();
    EXPECT_EQ(reg.status(a).state, svc::service_state::failed);
    EXPECT_EQ(reg.status(b).state, svc::service_state::blocked);
    svc::service_status again = co_await reg.start(a);
    EXPECT_EQ(again.state, svc::service_state::running);
    EXPECT_EQ(reg.status(b).state, svc::service_state::running);
    EXPECT_EQ(attempts, 2);
    co_await reg.stop();
  }(ctx, j));
}

TEST_P(registry_test, a_cycle_is_reported_by_name_and_nothing_in_it_starts) {
  journal j;
  run_bounded(ctx, [](tern::io_context& ctx, journal& j) -> tern::task<> {
    svc::registry reg2(ctx);  // a three-service cycle: a -> b -> c -> a (each requires the next)
    reg2.add<node_service<a_if, b_if>>(svc::named{"a"}, std::ref(j), "a");
    reg2.add<node_service<b_if, c_if>>(svc::named{"b"}, std::ref(j), "b");
    reg2.add<node_service<c_if, a_if>>(svc::named{"c"}, std::ref(j), "c");
    reg2.add<node_service<d_if, a_if>>(svc::named{"d"}, std::ref(j), "d");  // behind the cycle
    reg2.add<node_service<none>>(svc::named{"e"}, std::ref(j), "e");         // unrelated
    svc::registry_report r = co_await reg2.start();
    for (const char* name : {"a", "b", "c"}) {
      const svc::service_status* s = r.find(name);
      EXPECT_EQ(s->state, svc::service_state::cycle) << r.to_string();
      EXPECT_NE(s->reason.find("dependency cycle: a -> b -> c -> a"), std::string::npos) << s->reason;
      EXPECT_EQ(s->cycle, (std::vector<std::string>{"a", "b", "c", "a"}));
    }
    EXPECT_EQ(r.find("d")->state, svc::service_state::cycle);
    EXPECT_NE(r.find("d")->reason.find("requires a dependency cycle: a -> b -> c -> a"), std::string::npos)
        << r.find("d")->reason;
    EXPECT_EQ(r.find("e")->state, svc::service_state::running);
    EXPECT_FALSE(j.has("constructed b"));
    EXPECT_FALSE(j.has("constructed d"));
    co_await reg2.stop();
  }(ctx, j));
}

TEST_P(registry_test, a_service_requiring_itself_is_a_cycle_of_one) {
  journal j;
  run_bounded(ctx, [](tern::io_context& ctx, journal& j) -> tern::task<> {
    svc::registry reg(ctx);
    auto a = reg.add<node_service<a_if, a_if>>(svc::named{"selfish"}, std::ref(j), "selfish");
    (void)co_await reg.start();
    svc::service_status s = reg.status(a);
    EXPECT_EQ(s.state, svc::service_state::cycle);
    EXPECT_NE(s.reason.find("selfish -> selfish"), std::string::npos) << s.reason;
    co_await reg.stop();
  }(ctx, j));
}

struct config_iface {
  virtual ~config_iface() = default;
  virtual int port() const = 0;
};
struct config_service : config_iface {
  int port() const override { return 8080; }
};
struct user_of_config {
  using dependencies = svc::depends<svc::required<config_iface>>;
  explicit user_of_config(config_iface& c, int& seen) { seen = c.port(); }
};

TEST_P(registry_test, a_missing_provider_is_waited_for_and_the_report_says_which) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<> {
    int seen = 0;
    svc::registry reg(ctx);
    auto u = reg.add<user_of_config>(std::ref(seen));
    svc::registry_report r = co_await reg.start();
    svc::service_status s = reg.status(u);
    EXPECT_EQ(s.name, "user_of_config");
    EXPECT_EQ(s.state, svc::service_state::waiting) << r.to_string();
    EXPECT_EQ(s.waiting_for, "config_iface");
    EXPECT_NE(s.reason.find("no service provides it"), std::string::npos) << s.reason;
    EXPECT_EQ(seen, 0);
    reg.add<config_service>(svc::provides<config_iface>{});
    r = co_await reg.settled();
    EXPECT_TRUE(r.all_running()) << r.to_string();
    EXPECT_EQ(seen, 8080);
    co_await reg.stop();
  }(ctx));
}

struct logger_iface {
  virtual ~logger_iface() = default;
};
struct logger_service : logger_iface {
  using interfaces = svc::provides<logger_iface>;
};
struct maybe_logging {
  using dependencies = svc::depends<svc::required<config_iface>, svc::optional<logger_iface>>;
  maybe_logging(config_iface&, logger_iface* log, std::vector<logger_iface*>& given) { given.push_back(log); }
};

TEST_P(registry_test, an_optional_dependency_is_injected_only_if_its_provider_runs) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<> {
    std::vector<logger_iface*> given;
    {
      svc::registry reg(ctx);
      reg.add<config_service>(svc::provides<config_iface>{});
      reg.add<maybe_logging>(std::ref(given));
      EXPECT_TRUE((co_await reg.start()).all_running());
      CO_ASSERT(given.size() == 1);
      EXPECT_EQ(given[0], nullptr);
      // A logger arriving later is not injected: the running service is not reconstructed for it.
      reg.add<logger_service>();
      EXPECT_TRUE((co_await reg.settled()).all_running());
      EXPECT_EQ(given.size(), 1u);
      co_await reg.stop();
    }
    given.clear();
    {
      svc::registry reg(ctx);
      reg.add<config_service>(svc::provides<config_iface>{});
      auto l = reg.add<logger_service>();
      reg.add<maybe_logging>(std::ref(given));
      EXPECT_TRUE((co_await reg.start()).all_running());
      CO_ASSERT(given.size() == 1);
      EXPECT_NE(given[0], nullptr);
      // Stopping the logger stops its user first, which then starts again without it.
      co_await reg.stop(l);
      CO_ASSERT(given.size() == 2);
      EXPECT_EQ(given[1], nullptr);
      co_await reg.stop();
    }
  }(ctx));
}

// Tells where it was injected from, and where it is.
struct taker {
  using dependencies = svc::depends<svc::required<a_if>>;
  taker(a_if& a, a_if*& out) { out = &a; }
};
struct finder : a_if {
  explicit finder(a_if*& me) { me = this; }
  bool started() const override { return true; }
};

TEST_P(registry_test, the_injected_reference_is_the_providers_own_object) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<> {
    a_if* provided = nullptr;
    a_if* injected = nullptr;
    svc::registry reg(ctx);
    reg.add<finder>(svc::provides<a_if>{}, std::ref(provided));
    reg.add<taker>(std::ref(injected));
    (void)co_await reg.start();
    EXPECT_NE(provided, nullptr);
    EXPECT_EQ(injected, provided);
    co_await reg.stop();
  }(ctx));
}

TEST_P(registry_test, removing_a_provider_stops_its_dependents_first_and_they_wait_for_another) {
  journal j;
  run_bounded(ctx, [](tern::io_context& ctx, journal& j) -> tern::task<> {
    svc::registry reg(ctx);
    auto a = add_node<a_service>(reg, j, "a");
    auto b = add_node<b_service<a_if>>(reg, j, "b");
    auto c = add_node<c_service<b_if>>(reg, j, "c");
    auto d = add_node<d_service<>>(reg, j, "d");
    EXPECT_TRUE((co_await reg.start()).all_running());
    co_await reg.remove(a);
    EXPECT_TRUE(j.before("stopped c", "stop b"));
    EXPECT_TRUE(j.before("stopped b", "stop a"));
    EXPECT_FALSE(j.has("stop d"));
    EXPECT_THROW((void)reg.status(a), std::out_of_range);
    svc::service_status sb = reg.status(b);
    EXPECT_EQ(sb.state, svc::service_state::waiting);
    EXPECT_EQ(sb.waiting_for, "a_if");
    EXPECT_EQ(reg.status(c).state, svc::service_state::waiting);
    EXPECT_EQ(reg.status(c).waiting_for, "b_if");
    EXPECT_EQ(reg.status(d).state, svc::service_state::running);
    // A new provider: the dependents start again, on it.
    j.lines.clear();
    reg.add<a_service>(svc::named{"a2"}, std::ref(j), "a2");
    EXPECT_TRUE((co_await reg.settled()).all_running());
    EXPECT_TRUE(j.before("started a2", "constructed b"));
    EXPECT_TRUE(j.before("started b", "constructed c"));
    co_await reg.stop();
  }(ctx, j));
}

TEST_P(registry_test, stop_and_start_of_one_service_take_its_dependents_along) {
  journal j;
  run_bounded(ctx, [](tern::io_context& ctx, journal& j) -> tern::task<> {
    svc::registry reg(ctx);
    auto a = add_node<a_service>(reg, j, "a");
    auto b = add_node<b_service<a_if>>(reg, j, "b");
    EXPECT_TRUE((co_await reg.start()).all_running());
    co_await reg.stop(a);
    EXPECT_TRUE(j.before("stopped b", "stop a"));
    EXPECT_EQ(reg.status(a).state, svc::service_state::stopped);
    EXPECT_EQ(reg.status(b).state, svc::service_state::waiting);
    EXPECT_NE(reg.status(b).reason.find("its providers are stopped"), std::string::npos) << reg.status(b).reason;
    j.lines.clear();
    svc::service_status sa = co_await reg.start(a);
    EXPECT_EQ(sa.state, svc::service_state::running);
    EXPECT_EQ(reg.status(b).state, svc::service_state::running);
    EXPECT_TRUE(j.before("started a", "constructed b"));
    co_await reg.stop();
  }(ctx, j));
}

TEST_P(registry_test, a_stop_that_throws_is_recorded_and_the_service_still_counts_as_stopped) {
  journal j;
  run_bounded(ctx, [](tern::io_context& ctx, journal& j) -> tern::task<> {
    svc::registry reg(ctx);
    auto a = add_node<a_service>(reg, j, "a", behaviour{.throw_in_stop = true});
    auto b = add_node<b_service<a_if>>(reg, j, "b");
    EXPECT_TRUE((co_await reg.start()).all_running());
    co_await reg.stop();
    EXPECT_EQ(reg.status(a).state, svc::service_state::stopped);
    EXPECT_TRUE(reg.status(a).stop_error);
    EXPECT_FALSE(reg.status(b).stop_error);
  }(ctx, j));
}

TEST_P(registry_test, services_added_while_stopped_start_with_the_next_start) {
  journal j;
  run_bounded(ctx, [](tern::io_context& ctx, journal& j) -> tern::task<> {
    svc::registry reg(ctx);
    auto a = add_node<a_service>(reg, j, "a");
    EXPECT_EQ(reg.status(a).state, svc::service_state::stopped);
    EXPECT_NE(reg.status(a).reason.find("not running"), std::string::npos);
    co_await tern::yield();
    EXPECT_FALSE(j.has("constructed a"));
    EXPECT_TRUE((co_await reg.start()).all_running());
    co_await reg.stop();
    // Started again after a stop: constructed afresh.
    j.lines.clear();
    EXPECT_TRUE((co_await reg.start()).all_running());
    EXPECT_TRUE(j.has("constructed a"));
    co_await reg.stop();
  }(ctx, j));
}

TEST_P(registry_test, a_duplicate_name_is_refused) {
  svc::registry reg(ctx);
  journal j;
  // The default name is the type's, without namespaces (template arguments included).
  reg.add<a_service>(std::ref(j), "a");
  EXPECT_THROW(reg.add<a_service>(std::ref(j), "a"), std::invalid_argument);
  (void)reg.add<a_service>(svc::named{"another"}, std::ref(j), "a");
  EXPECT_EQ(reg.report().services.size(), 2u);
  EXPECT_EQ(reg.report().services[0].name, "node_service<a_if>");
  EXPECT_EQ(reg.report().services[1].name, "another");
}

// A service whose start() (or stop()) awaits an operation of its own registry. Every such operation waits until no
// start() or stop() runs, this one included: awaited here it could never finish, so it is refused at once.
enum class reentry { settled, start_one, stop_one, start_all };
struct reentrant {
  svc::registry& reg;
  reentry what;
  svc::service_id other;
  bool in_stop;
  tern::task<> call() {
    switch (what) {
      case reentry::settled: (void)co_await reg.settled(); break;
      case reentry::start_one: (void)co_await reg.start(other); break;
      case reentry::stop_one: co_await reg.stop(other); break;
      case reentry::start_all: (void)co_await reg.start(); break;
    }
  }
  tern::task<> start() {
    if (!in_stop) co_await call();
  }
  tern::task<> stop() {
    if (in_stop) co_await call();
  }
};

// The exception a failed start() or stop() left, as the registry keeps it: a deadlock refused, or not.
bool refused_as_deadlock(const std::exception_ptr& e) {
  if (!e) return false;
  try {
    std::rethrow_exception(e);
  } catch (const std::system_error& x) {
    return x.code() == std::errc::resource_deadlock_would_occur &&
           std::string(x.what()).find("spawn") != std::string::npos;
  } catch (...) {
  }
  return false;
}

TEST_P(registry_test, an_operation_awaited_from_a_start_or_stop_is_refused_instead_of_deadlocking) {
  for (reentry what : {reentry::settled, reentry::start_one, reentry::stop_one, reentry::start_all}) {
    SCOPED_TRACE(static_cast<int>(what));
    journal j;
    run_bounded(ctx, [](tern::io_context& ctx, journal& j, reentry what) -> tern::task<> {
      svc::registry reg(ctx);
      auto other = add_node<a_service>(reg, j, "other");
      auto in_start = reg.add<reentrant>(svc::named{"in_start"}, std::ref(reg), what, other, false);
      svc::registry_report r = co_await reg.start();
      svc::service_status s = reg.status(in_start);
      EXPECT_EQ(s.state, svc::service_state::failed) << r.to_string();
      EXPECT_TRUE(refused_as_deadlock(s.error)) << s.reason;
      auto in_stop = reg.add<reentrant>(svc::named{"in_stop"}, std::ref(reg), what, other, true);
      EXPECT_EQ((co_await reg.settled()).find("in_stop")->state, svc::service_state::running);
      co_await reg.stop();
      svc::service_status t = reg.status(in_stop);
      EXPECT_EQ(t.state, svc::service_state::stopped);
      EXPECT_TRUE(refused_as_deadlock(t.stop_error));
    }(ctx, j, what));
  }
}

// The way to do what the refused calls wanted: spawn the operation; it runs once the current one is over.
struct spawns_an_operation {
  svc::registry& reg;
  bool& all_running_after;
  tern::task<> start() {
    tern::spawn(reg.home(), [](svc::registry& r, bool& out) -> tern::task<> {
      out = (co_await r.settled()).all_running();
    }, std::ref(reg), std::ref(all_running_after)).detach();
    co_return;
  }
};

TEST_P(registry_test, an_operation_spawned_from_a_start_runs_after_it) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<> {
    bool all_running_after = false;
    svc::registry reg(ctx);
    reg.add<spawns_an_operation>(std::ref(reg), std::ref(all_running_after));
    EXPECT_TRUE((co_await reg.start()).all_running());
    (void)co_await reg.settled();  // taken after the spawned one, which was waiting for its turn first
    EXPECT_TRUE(all_running_after);
    co_await reg.stop();
  }(ctx));
}

TEST_P(registry_test, destroying_a_registry_with_an_operation_waiting_for_its_turn_terminates_with_a_message) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const tern::io_context_options opts = options();
  EXPECT_DEATH(
      {
        tern::io_context loop(opts);
        journal j;
        auto reg = std::make_unique<svc::registry>(loop);
        add_node<a_service>(*reg, j, "a");  // its start() suspends once: start() holds the turn meanwhile
        auto first = [](std::unique_ptr<svc::registry>& r) -> tern::task<> {
          (void)co_await r->start();
          r.reset();  // settled() below has just been handed the turn, and not resumed yet
        };
        auto ran = tern::spawn(loop, first(reg));
        auto second = tern::spawn(loop, reg->settled());
        loop.run();
      },
      "registry destroyed while an operation");
}

struct link_if {
  virtual ~link_if() = default;
};
struct first_link : link_if {};
struct next_link : link_if {
  using dependencies = svc::depends<svc::required<link_if>>;
  explicit next_link(link_if&) {}
};

TEST_P(registry_test, twenty_thousand_services_start_and_stop) {
  // Services without start() or stop() complete inline: the engine queues them rather than recursing, and a
  // quadratic step would show as a test that takes minutes.
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<> {
    svc::registry reg(ctx);
    // Every link provides link_if and requires it: one provider of it runs first, then the others all bind to it.
    reg.add<first_link>(svc::provides<link_if>{});
    for (int i = 0; i < 20000; ++i) {
      reg.add<next_link>(svc::named{"n" + std::to_string(i)}, svc::provides<link_if>{});
    }
    svc::registry_report r = co_await reg.start();
    EXPECT_TRUE(r.all_running());
    co_await reg.stop();
  }(ctx));
}

}  // namespace
