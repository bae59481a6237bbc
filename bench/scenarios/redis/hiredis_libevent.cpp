// redis/pipeline and redis/pubsub for hiredis/libevent: hiredis 0.14's asynchronous API on one libevent loop, the
// way a C program uses it (see redis_bench.hpp for the scenarios).
//
// Each task of redis/pipeline is a chain of callbacks: SET's callback checks +OK and sends the GET, GET's checks
// the value and sends the next SET. Commands go through redisAsyncCommandArgv (binary-safe arguments, as tern's);
// hiredis appends each to its output buffer and the libevent adapter writes them when the loop next turns, so the
// commands of all the chains that ran in one turn leave together. redis/pubsub: SUBSCRIBE's callback is called for
// each message; the publishers' chains park while they are `window` messages ahead of the slowest subscriber and
// are restarted by a subscriber's progress.
#include "../registry.hpp"
#include "redis_bench.hpp"

#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace tern_bench::hiredis_impl {

using redis_bench::op_meter;

namespace redis_hiredis_libevent {  // this file's own (see bench/CMakeLists.txt)
namespace {

struct loop {
    event_base* base = event_base_new();
    std::string failure;  // the first failed check: the loop stops at it
    ~loop() { event_base_free(base); }
    void fail(const std::string& why) {
        if (failure.empty()) failure = why;
        event_base_loopbreak(base);
    }
};

// A context attached to the loop and connected (the connect callback has run).
struct context {
    redisAsyncContext* ac = nullptr;
    bool connected = false;
};

void on_connect(const redisAsyncContext* ac, int status) {
    auto* c = static_cast<context*>(ac->data);
    c->connected = status == REDIS_OK;
}

std::unique_ptr<context> open(loop& l, std::uint16_t port) {
    auto c = std::make_unique<context>();
    c->ac = redisAsyncConnect("127.0.0.1", port);
    if (c->ac == nullptr || c->ac->err) throw bench_failure("redisAsyncConnect failed");
    c->ac->data = c.get();
    redisLibeventAttach(c->ac, l.base);
    redisAsyncSetConnectCallback(c->ac, on_connect);
    while (!c->connected && l.failure.empty()) {
        if (c->ac->err) throw bench_failure(std::string("connect: ") + c->ac->errstr);
        event_base_loop(l.base, EVLOOP_ONCE);
    }
    return c;
}

// ---- redis/pipeline ----

struct chain {
    loop* l;
    redisAsyncContext* ac;
    op_meter* meter;
    std::string key;
    char value[redis_bench::value_size];
    std::uint64_t id = 0;
    std::uint64_t seq = 0;
    int* running;
};

void send_set(chain& c);

void on_get(redisAsyncContext*, void* reply, void* data) {
    auto& c = *static_cast<chain*>(data);
    auto* r = static_cast<redisReply*>(reply);
    if (r == nullptr || r->type != REDIS_REPLY_STRING || r->len != static_cast<long>(sizeof c.value) ||
        std::memcmp(r->str, c.value, sizeof c.value) != 0) {
        c.l->fail("GET " + c.key + ": a wrong reply");
        return;
    }
    if (!c.meter->tick()) {
        if (--*c.running == 0) event_base_loopbreak(c.l->base);
        return;
    }
    ++c.seq;
    send_set(c);
}

void on_set(redisAsyncContext* ac, void* reply, void* data) {
    auto& c = *static_cast<chain*>(data);
    auto* r = static_cast<redisReply*>(reply);
    if (r == nullptr || r->type != REDIS_REPLY_STATUS || std::string_view(r->str, r->len) != "OK") {
        c.l->fail("SET " + c.key + ": a wrong reply");
        return;
    }
    if (!c.meter->tick()) {
        if (--*c.running == 0) event_base_loopbreak(c.l->base);
        return;
    }
    const char* argv[] = {"GET", c.key.c_str()};
    const std::size_t lens[] = {3, c.key.size()};
    if (redisAsyncCommandArgv(ac, on_get, &c, 2, argv, lens) != REDIS_OK) c.l->fail("GET could not be sent");
}

void send_set(chain& c) {
    redis_bench::make_value(c.value, c.id, c.seq);
    const char* argv[] = {"SET", c.key.c_str(), c.value};
    const std::size_t lens[] = {3, c.key.size(), sizeof c.value};
    if (redisAsyncCommandArgv(c.ac, on_set, &c, 3, argv, lens) != REDIS_OK) c.l->fail("SET could not be sent");
}

// ---- redis/pubsub ----

struct pubsub_state {
    loop* l;
    op_meter* meter;
    std::vector<std::uint64_t> received;
    std::uint64_t published = 0;
    std::uint64_t window = 0;
    redisAsyncContext* publisher = nullptr;
    int parked = 0;  // publisher chains waiting for room
    std::uint64_t slowest() const { return *std::min_element(received.begin(), received.end()); }
};

struct subscriber {
    pubsub_state* st;
    std::size_t index;
    bool subscribed = false;
};

void publish(pubsub_state& st);

void on_published(redisAsyncContext*, void* reply, void* data) {
    auto& st = *static_cast<pubsub_state*>(data);
    auto* r = static_cast<redisReply*>(reply);
    if (r == nullptr || r->type != REDIS_REPLY_INTEGER) {
        st.l->fail("PUBLISH: a wrong reply");
        return;
    }
    publish(st);
}

void publish(pubsub_state& st) {
    if (st.meter->done()) return;
    if (st.published - st.slowest() >= st.window) {
        ++st.parked;
        return;
    }
    char payload[redis_bench::value_size];
    redis_bench::make_value(payload, 0, st.published++);
    const char* argv[] = {"PUBLISH", "bench", payload};
    const std::size_t lens[] = {7, 5, sizeof payload};
    if (redisAsyncCommandArgv(st.publisher, on_published, &st, 3, argv, lens) != REDIS_OK)
        st.l->fail("PUBLISH could not be sent");
}

void on_message(redisAsyncContext*, void* reply, void* data) {
    auto& sub = *static_cast<subscriber*>(data);
    pubsub_state& st = *sub.st;
    auto* r = static_cast<redisReply*>(reply);
    if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 3) {
        if (!st.meter->done()) st.l->fail("subscriber: a wrong reply");
        return;
    }
    const std::string_view kind(r->element[0]->str, r->element[0]->len);
    if (kind == "subscribe") {
        sub.subscribed = true;
        return;
    }
    const redisReply* payload = r->element[2];
    const std::uint64_t expected = st.received[sub.index];
    if (kind != "message" || payload->len != static_cast<long>(redis_bench::value_size) ||
        std::strtoull(payload->str, nullptr, 10) != expected) {
        st.l->fail("subscriber " + std::to_string(sub.index) + " expected message " + std::to_string(expected));
        return;
    }
    ++st.received[sub.index];
    if (!st.meter->tick()) {
        event_base_loopbreak(st.l->base);
        return;
    }
    while (st.parked > 0 && st.published - st.slowest() < st.window) {
        --st.parked;
        publish(st);
    }
}

}  // namespace
}  // namespace redis_hiredis_libevent

void redis_pipeline(session& s) {
    redis_bench::server srv;
    redis_bench::announce(s, srv);
    s.info("hiredis", std::to_string(HIREDIS_MAJOR) + "." + std::to_string(HIREDIS_MINOR) + "." +
                          std::to_string(HIREDIS_PATCH) + ", libevent " + event_get_version());
    redis_hiredis_libevent::loop l;
    auto c = open(l, srv.port());
    const auto tasks = static_cast<std::uint64_t>(s.param_int("tasks"));
    op_meter meter(s, "commands_per_s", "client_cpu_us_per_command", &srv);
    int running = static_cast<int>(tasks);
    std::vector<redis_hiredis_libevent::chain> chains(tasks);
    meter.start();
    for (std::uint64_t t = 0; t < tasks; ++t) {
        chains[t] = redis_hiredis_libevent::chain{&l, c->ac, &meter, redis_bench::key_of(t), {}, t, 0, &running};
        send_set(chains[t]);
    }
    event_base_dispatch(l.base);
    if (!l.failure.empty()) throw bench_failure(l.failure);
    if (!meter.done()) throw bench_failure("the loop ended before the last phase");
    redisAsyncFree(c->ac);
}

void redis_pubsub(session& s) {
    redis_bench::server srv;
    redis_bench::announce(s, srv);
    redis_hiredis_libevent::loop l;
    const auto subscribers = static_cast<std::size_t>(s.param_int("subscribers"));
    op_meter meter(s, "messages_per_s", "client_cpu_us_per_message");
    redis_hiredis_libevent::pubsub_state st{&l, &meter, std::vector<std::uint64_t>(subscribers, 0), 0,
        redis_bench::window_of(s)};
    std::vector<std::unique_ptr<redis_hiredis_libevent::context>> subs;
    std::vector<redis_hiredis_libevent::subscriber> sub_state(subscribers);
    for (std::size_t i = 0; i < subscribers; ++i) {
        subs.push_back(open(l, srv.port()));
        sub_state[i] = redis_hiredis_libevent::subscriber{&st, i};
        const char* argv[] = {"SUBSCRIBE", "bench"};
        const std::size_t lens[] = {9, 5};
        if (redisAsyncCommandArgv(subs.back()->ac, redis_hiredis_libevent::on_message, &sub_state[i], 2, argv,
            lens) != REDIS_OK)
            throw bench_failure("SUBSCRIBE could not be sent");
        while (!sub_state[i].subscribed && l.failure.empty()) event_base_loop(l.base, EVLOOP_ONCE);
    }
    auto pub = open(l, srv.port());
    st.publisher = pub->ac;
    meter.start();
    for (std::int64_t i = 0; i < s.param_int("publishers"); ++i) publish(st);
    event_base_dispatch(l.base);
    if (!l.failure.empty()) throw bench_failure(l.failure);
    if (!meter.done()) throw bench_failure("the loop ended before the last phase");
    for (auto& c : subs) redisAsyncFree(c->ac);
    redisAsyncFree(pub->ac);
}

}  // namespace tern_bench::hiredis_impl
