// Pub/sub against a real redis-server: SUBSCRIBE, PSUBSCRIBE and their opposites confirmed, messages as a stream
// on the same connection as commands (RESP3 pushes), ten subscribers with channels and patterns, a full message
// queue that holds the connection back without losing anything, receivers on another worker.
#include "redis/redis_support.hpp"

#include <string>
#include <vector>

namespace {

using namespace tern_test;
using tern::task;
using namespace std::chrono_literals;

class redis_pubsub_test : public redis_test {};
TERN_INSTANTIATE_BACKENDS(redis_pubsub_test);

// The next message (fails the test, returning an empty one, on an error or after 5 s).
task<redis::message> next_message(redis::connection& conn) {
  auto [ec, m] = co_await tern::with_timeout(conn.receive(), 5s);
  EXPECT_OK(ec);
  co_return m ? std::move(*m) : redis::message{};
}

TEST_P(redis_pubsub_test, subscribe_publish_receive_and_unsubscribe) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::connection sub(here(), server.unix_config());
    redis::connection pub(here(), server.unix_config());
    CO_ASSERT_OK(co_await sub.connect());
    CO_ASSERT_OK(co_await pub.connect());
    CO_ASSERT_OK((co_await sub.subscribe("news", "weather")).ec);
    CO_ASSERT_OK((co_await sub.psubscribe("sport.*")).ec);
    EXPECT_EQ(sub.subscriptions(), 3u);
    auto [ec, receivers] = co_await pub.command<std::int64_t>("PUBLISH", "news", "hello");
    EXPECT_OK(ec);
    EXPECT_EQ(receivers, 1);
    redis::message m = co_await next_message(sub);
    EXPECT_EQ(m.type, redis::message::kind::message);
    EXPECT_EQ(m.channel, "news");
    EXPECT_EQ(m.payload, "hello");
    EXPECT_EQ((co_await pub.command<std::int64_t>("PUBLISH", "sport.tennis", "6-4")).value, 1);
    m = co_await next_message(sub);
    EXPECT_EQ(m.type, redis::message::kind::pattern_message);
    EXPECT_EQ(m.pattern, "sport.*");
    EXPECT_EQ(m.channel, "sport.tennis");
    EXPECT_EQ(m.payload, "6-4");
    // Commands share the subscribed connection (RESP3).
    auto [pec, pong] = co_await sub.command<std::string>("PING");
    EXPECT_OK(pec);
    EXPECT_EQ(pong, "PONG");
    CO_ASSERT_OK((co_await sub.unsubscribe("news")).ec);
    CO_ASSERT_OK((co_await sub.punsubscribe("sport.*")).ec);
    EXPECT_EQ(sub.subscriptions(), 1u);
    EXPECT_EQ((co_await pub.command<std::int64_t>("PUBLISH", "news", "unheard")).value, 0);
    EXPECT_EQ((co_await pub.command<std::int64_t>("PUBLISH", "weather", "rain")).value, 1);
    m = co_await next_message(sub);
    EXPECT_EQ(m.channel, "weather");
    EXPECT_EQ(m.payload, "rain");
    EXPECT_EC((co_await sub.subscribe()).ec, std::errc::invalid_argument);
    sub.close();
    pub.close();
  }(server));
}

task<int> subscriber(redis::connection& conn, int messages) {
  int wrong = 0;
  int on_channel = 0;
  int on_pattern = 0;
  for (int i = 0; i < messages * 2; ++i) {
    redis::message m = co_await next_message(conn);
    if (m.type == redis::message::kind::message) {
      if (m.channel != "feed" || m.payload != std::to_string(on_channel++)) ++wrong;
    } else {
      if (m.pattern != "fe*" || m.channel != "feed" || m.payload != std::to_string(on_pattern++)) ++wrong;
    }
  }
  co_return wrong;
}

TEST_P(redis_pubsub_test, ten_subscribers_with_channels_and_patterns_get_every_message_in_order) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    constexpr int subscribers = 10;
    constexpr int messages = 200;
    std::vector<std::unique_ptr<redis::connection>> subs;
    std::vector<tern::join_handle<int>> readers;
    for (int i = 0; i < subscribers; ++i) {
      subs.push_back(std::make_unique<redis::connection>(here(), server.unix_config()));
      CO_ASSERT_OK(co_await subs.back()->connect());
      CO_ASSERT_OK((co_await subs.back()->subscribe("feed")).ec);
      CO_ASSERT_OK((co_await subs.back()->psubscribe("fe*")).ec);
      readers.push_back(tern::spawn(here(), subscriber(*subs.back(), messages)));
    }
    redis::connection pub(here(), server.tcp_config());
    CO_ASSERT_OK(co_await pub.connect());
    for (int i = 0; i < messages; ++i) {
      auto [ec, n] = co_await pub.command<std::int64_t>("PUBLISH", "feed", i);
      EXPECT_OK(ec);
      EXPECT_EQ(n, subscribers * 2);  // each subscriber counts twice: its channel and its pattern
    }
    for (auto& r : readers) EXPECT_EQ(co_await std::move(r), 0);
    for (auto& s : subs) s->close();
    pub.close();
  }(server));
}

TEST_P(redis_pubsub_test, a_full_message_queue_holds_the_connection_back_and_loses_nothing) {
  run_bounded(ctx, [](redis_server& server) -> task<void> {
    redis::config cfg = server.unix_config();
    cfg.message_queue = 4;
    redis::connection sub(here(), cfg);
    redis::connection pub(here(), server.unix_config());
    CO_ASSERT_OK(co_await sub.connect());
    CO_ASSERT_OK(co_await pub.connect());
    CO_ASSERT_OK((co_await sub.subscribe("burst")).ec);
    for (int i = 0; i < 300; ++i) EXPECT_OK((co_await pub.command<redis::ignore_t>("PUBLISH", "burst", i)).ec);
    // The subscriber's PING waits behind the messages the queue cannot take yet.
    auto ping = tern::spawn(here(), sub.command<std::string>("PING"));
    co_await tern::sleep_for(20ms);
    EXPECT_FALSE(ping.done());
    for (int i = 0; i < 300; ++i) {
      redis::message m = co_await next_message(sub);
      EXPECT_EQ(m.payload, std::to_string(i));
    }
    EXPECT_EQ((co_await std::move(ping)).value, "PONG");
    sub.close();
    pub.close();
  }(server));
}

TEST_P(redis_pubsub_test, messages_received_on_another_worker) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  const redis::config cfg = server.unix_config();
  rt.block_on([](tern::runtime& rt, redis::config cfg) -> task<void> {
    redis::connection sub(here(), cfg);
    redis::connection pub(here(), cfg);
    EXPECT_OK(co_await sub.connect());
    EXPECT_OK(co_await pub.connect());
    auto far = [](redis::connection& sub) -> task<int> {
      EXPECT_OK((co_await sub.subscribe("remote")).ec);  // from worker 1 too
      int got = 0;
      for (int i = 0; i < 50; ++i) {
        redis::message m = co_await next_message(sub);
        if (m.payload == std::to_string(i)) ++got;
      }
      co_return got;
    };
    auto receiver = rt.spawn_on(1, far(sub));
    while (sub.subscriptions() == 0) co_await tern::sleep_for(1ms);
    for (int i = 0; i < 50; ++i) EXPECT_OK((co_await pub.command<redis::ignore_t>("PUBLISH", "remote", i)).ec);
    EXPECT_EQ(co_await std::move(receiver), 50);
    sub.close();
    pub.close();
  }(rt, cfg));
}

}  // namespace
