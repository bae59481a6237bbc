// redis/pipeline and redis/pubsub for tern: tern::redis connections on one io_context (see redis_bench.hpp).
//
// redis/pipeline: `tasks` tasks share one redis::connection, which pipelines their commands by itself: each
// formats its SET straight into the connection's output buffer (the value built in a stack array), and reads its
// GET into a string of its own (command_into: no allocation per command).
// redis/pubsub: the subscriber connections' receive loops check each message's sequence number; `publishers`
// tasks PUBLISH on one connection, waiting on an event while they are `window` messages ahead of the slowest
// subscriber.
#include "../../harness/instructions.hpp"
#include "../registry.hpp"
#include "../tern_setup.hpp"
#include "redis_bench.hpp"

#include <tern/redis/connection.hpp>
#include <tern/sync/event.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace tern_bench::tern_impl {

namespace redis = tern::redis;
using redis_bench::op_meter;

namespace redis_tern {  // this file's own (see bench/CMakeLists.txt)
namespace {

redis::config config_for(const redis_bench::server& srv) {
    redis::config c;
    c.host = "127.0.0.1";
    c.port = srv.port();
    c.fail_fast = true;
    return c;
}

void check(const std::error_code& ec, const char* what, const std::string& message = {}) {
    if (ec) throw bench_failure(std::string(what) + ": " + ec.message() + (message.empty() ? "" : ": " + message));
}

tern::task<void> set_get_loop(redis::connection& conn, std::uint64_t id, op_meter& meter) {
    const std::string key = redis_bench::key_of(id);
    char value[redis_bench::value_size];
    std::string got;
    got.reserve(64);
    for (std::uint64_t seq = 0;; ++seq) {
        redis_bench::make_value(value, id, seq);
        const std::string_view v(value, sizeof value);
        auto set = co_await conn.command_into(got, "SET", key, v);
        check(set.ec, "SET", set.message);
        if (got != "OK") throw bench_failure("SET answered " + got);
        if (!meter.tick()) co_return;
        auto get = co_await conn.command_into(got, "GET", key);
        check(get.ec, "GET", get.message);
        if (got != v) throw bench_failure("GET " + key + " answered '" + got + "', not '" + std::string(v) + "'");
        if (!meter.tick()) co_return;
    }
}

tern::task<void> run_pipeline(tern::io_context& ctx, session& s, const redis_bench::server& srv) {
    const auto tasks = static_cast<std::uint64_t>(s.param_int("tasks"));
    redis::connection conn(ctx, config_for(srv));
    check(co_await conn.connect(), "connect");
    op_meter meter(s, "commands_per_s", "client_cpu_us_per_command", &srv);
    meter.start();
    std::vector<tern::join_handle<void>> loops;
    for (std::uint64_t t = 0; t < tasks; ++t) loops.push_back(tern::spawn(ctx, set_get_loop(conn, t, meter)));
    for (auto& l : loops) co_await std::move(l);
    const redis::connection_stats st = conn.stats();
    s.info("writes_per_command", std::to_string(static_cast<double>(st.writes) / static_cast<double>(st.commands_sent)));
    conn.close();
}

struct pubsub_state {
    std::vector<std::uint64_t> received;  // per subscriber
    std::uint64_t published = 0;
    tern::sync::auto_reset_event room;    // set by a subscriber's progress
    std::uint64_t slowest() const { return *std::min_element(received.begin(), received.end()); }
};

tern::task<void> subscriber_loop(redis::connection& conn, std::size_t index, pubsub_state& st, op_meter& meter) {
    // Counts until the meter is done, then keeps reading (and checking) until its connection is closed.
    for (;;) {
        auto [ec, m] = co_await conn.receive();
        if (ec && meter.done()) break;  // closed once the last phase was over
        check(ec, "receive");
        const std::uint64_t expected = st.received[index];
        if (m->channel != "bench" || m->payload.size() != redis_bench::value_size ||
            std::strtoull(m->payload.c_str(), nullptr, 10) != expected)
            throw bench_failure("subscriber " + std::to_string(index) + " expected message " +
                                std::to_string(expected) + ", got '" + m->payload + "'");
        ++st.received[index];
        st.room.set();
        (void)meter.tick();
    }
    st.room.set();
}

tern::task<void> publisher_loop(redis::connection& conn, pubsub_state& st, std::uint64_t window, const op_meter& meter) {
    char payload[redis_bench::value_size];
    while (!meter.done()) {
        if (st.published - st.slowest() >= window) {
            (void)co_await st.room.wait();
            continue;
        }
        redis_bench::make_value(payload, 0, st.published++);
        auto r = co_await conn.command<std::int64_t>("PUBLISH", "bench", std::string_view(payload, sizeof payload));
        check(r.ec, "PUBLISH", r.message);
    }
    st.room.set();  // another publisher may wait
}

tern::task<void> run_pubsub(tern::io_context& ctx, session& s, const redis_bench::server& srv) {
    const auto subscribers = static_cast<std::size_t>(s.param_int("subscribers"));
    const auto publishers = static_cast<std::size_t>(s.param_int("publishers"));
    pubsub_state st;
    st.received.assign(subscribers, 0);
    std::vector<std::unique_ptr<redis::connection>> subs;
    for (std::size_t i = 0; i < subscribers; ++i) {
        subs.push_back(std::make_unique<redis::connection>(ctx, config_for(srv)));
        check(co_await subs.back()->connect(), "connect (subscriber)");
        auto r = co_await subs.back()->subscribe("bench");
        check(r.ec, "SUBSCRIBE", r.message);
    }
    redis::connection pub(ctx, config_for(srv));
    check(co_await pub.connect(), "connect (publisher)");
    op_meter meter(s, "messages_per_s", "client_cpu_us_per_message");
    meter.start();
    std::vector<tern::join_handle<void>> readers;
    for (std::size_t i = 0; i < subscribers; ++i) readers.push_back(tern::spawn(ctx, subscriber_loop(*subs[i], i, st, meter)));
    std::vector<tern::join_handle<void>> writers;
    for (std::size_t i = 0; i < publishers; ++i) writers.push_back(tern::spawn(ctx, publisher_loop(pub, st, redis_bench::window_of(s), meter)));
    for (auto& w : writers) co_await std::move(w);
    // The last phase is over: the messages still on their way are not waited for.
    for (auto& c : subs) c->close();
    for (auto& r : readers) co_await std::move(r);
    pub.close();
}

}  // namespace
}  // namespace redis_tern

void redis_pipeline(session& s) {
    redis_bench::server srv;
    redis_bench::announce(s, srv);
    // The -latency implementations never park (busy polling, as a runtime's workers do in latency mode): at one
    // task every command waits for its round trip, and a parked loop pays the vCPU's wake-up on each reply. The
    // others spin 50 us before a park (a little above the ~22 us round trip), which backs off by itself where the
    // waits are longer (256 tasks: each batch's answer); TERN_BENCH_SPIN_US sets another spin, 0 parks at once.
    tern::io_context_options opts = options_for(s);
    // Not under callgrind: a count would hold the spin's polls, which follow the timing, not the work.
    const bool default_spin =
        std::getenv("TERN_BENCH_SPIN_US") == nullptr && !latency_mode(s) && !tern_bench::instructions::under_callgrind();
    if (default_spin) opts.spin_before_park = std::chrono::microseconds(50);
    if (latency_mode(s)) opts.spin_before_park = std::chrono::nanoseconds::max();
    tern::io_context ctx(opts);
    announce(s, ctx);
    if (default_spin) s.info("spin_before_park_us", "50");
    ctx.block_on(redis_tern::run_pipeline(ctx, s, srv));
}

void redis_pubsub(session& s) {
    redis_bench::server srv;
    redis_bench::announce(s, srv);
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(redis_tern::run_pubsub(ctx, s, srv));
}

}  // namespace tern_bench::tern_impl
