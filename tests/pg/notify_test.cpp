// LISTEN/NOTIFY on both backends: 1000 notifications from another connection received in order with their
// payloads, while the listening connection also serves queries; notifications that came while nobody waited are
// queued; a wait is cancellable.
#include "pg_support.hpp"

namespace {

using namespace tern_test;
using namespace tern_test::pg;

class pg_notify_test : public pg_test {};
TERN_INSTANTIATE_BACKENDS(pg_notify_test);

TEST_P(pg_notify_test, a_thousand_notifications_arrive_in_order) {
  run_bounded(ctx, [](pg_notify_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection listener = co_await connect_to(ctx, t.db().socket_conninfo());
    pgl::connection sender = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::string channel = t.table("ch");
    CO_ASSERT_OK(co_await listener.listen(channel));
    constexpr int count = 1000;
    auto sending = tern::spawn(ctx, [](pgl::connection& s, std::string channel) -> tern::task<void> {
      pgl::batch b(s);
      for (int i = 0; i < count; ++i) b.add("SELECT pg_notify($1, $2)", channel, "payload " + std::to_string(i));
      EXPECT_OK(co_await b.run());
    }(sender, channel));
    for (int i = 0; i < count; ++i) {
      auto [ec, n] = co_await tern::with_timeout(listener.next_notification(), 10s);
      CO_ASSERT_OK(ec);
      EXPECT_EQ(n.channel(), channel);
      EXPECT_EQ(n.payload(), "payload " + std::to_string(i));
      EXPECT_EQ(n.sender_pid(), sender.backend_pid());
      // The listening connection serves queries between notifications too.
      if (i % 250 == 0) {
        EXPECT_EQ(co_await scalar<int>(listener, "SELECT $1::int", i), i);
      }
    }
    co_await std::move(sending);
  }(*this, ctx), 60s);
}

TEST_P(pg_notify_test, notifications_wait_in_a_queue_and_a_wait_can_be_cancelled) {
  run_bounded(ctx, [](pg_notify_test& t, tern::io_context& ctx) -> tern::task<void> {
    pgl::connection listener = co_await connect_to(ctx, t.db().socket_conninfo());
    pgl::connection sender = co_await connect_to(ctx, t.db().socket_conninfo());
    const std::string channel = t.table("ch");
    CO_ASSERT_OK(co_await listener.listen(channel));
    auto [tec, tn] = co_await tern::with_timeout(listener.next_notification(), 20ms);
    EXPECT_EC(tec, tern::error::timed_out);
    for (int i = 0; i < 3; ++i) {
      auto [ec, r] = co_await sender.query("SELECT pg_notify($1, $2)", channel, std::to_string(i));
      PG_ASSERT_OK(ec, r);
    }
    co_await tern::sleep_for(50ms);  // they arrive while nobody waits
    for (int i = 0; i < 3; ++i) {
      auto [ec, n] = co_await tern::with_timeout(listener.next_notification(), 10s);
      CO_ASSERT_OK(ec);
      EXPECT_EQ(n.payload(), std::to_string(i));
    }
    CO_ASSERT_OK(co_await listener.unlisten(channel));
    auto [ec, r] = co_await sender.query("SELECT pg_notify($1, 'late')", channel);
    PG_ASSERT_OK(ec, r);
    auto [lec, ln] = co_await tern::with_timeout(listener.next_notification(), 100ms);
    EXPECT_EC(lec, tern::error::timed_out) << "no longer listening";
  }(*this, ctx));
}

}  // namespace
