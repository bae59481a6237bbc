// services/start_stop, services/start and services/events: tern::services (registry and event_bus).
//
// start_stop: one registry on one io_context; a provider of dependency_iface runs; the dependent (required
// dependency_iface) is started with registry::start(id) and stopped with registry::stop(id), over and over. Each
// start constructs the dependent anew (stop destroys it) and runs its start(), each stop its stop(); every start
// must report running, and the lifecycle counts are compared with the iterations at the end.
// start: n services in 64 levels, level d providing level_iface<d> and requiring the interfaces of the three
// levels below it; added in a scrambled order, then one registry::start() timed; every service must be running,
// constructed after its dependencies ran, and stopped by the registry::stop() that follows.
// events: four event types, one subscription each (events_common.hpp), on the publisher's io_context (threads=1)
// or on worker 1 of a 2-worker runtime whose worker 0 publishes (threads=2).
#include "../tern_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"
#include "../thread_rate.hpp"
#include "events_common.hpp"

#include <tern/services/services.hpp>

#include <array>
#include <optional>
#include <string>
#include <utility>

namespace tern_bench::tern_impl {

namespace svc = tern::services;

namespace ev = services_events;

namespace services_tern {  // this file's own (see bench/CMakeLists.txt)
namespace {

// ---- start_stop ----

struct dependency_iface {
    virtual ~dependency_iface() = default;
    virtual bool running() const = 0;
};

class dependency final : public dependency_iface {
public:
    using interfaces = svc::provides<dependency_iface>;

    tern::task<> start() {
        running_ = true;
        co_return;
    }
    tern::task<> stop() {
        running_ = false;
        co_return;
    }
    bool running() const override { return running_; }

private:
    bool running_ = false;
};

// What the dependents went through; each count must match the number of starts at the end.
struct lifecycle_counts {
    std::uint64_t constructed = 0;
    std::uint64_t too_early = 0;  // constructed while its dependency was not running: a registry bug
    std::uint64_t started = 0;
    std::uint64_t stopped = 0;
    std::uint64_t destroyed = 0;
};

class dependent {
public:
    using dependencies = svc::depends<svc::required<dependency_iface>>;

    dependent(dependency_iface& dep, lifecycle_counts* counts) : counts_(counts) {
        if (!dep.running()) ++counts_->too_early;
        ++counts_->constructed;
    }
    ~dependent() { ++counts_->destroyed; }
    dependent(const dependent&) = delete;
    dependent& operator=(const dependent&) = delete;

    tern::task<> start() {
        ++counts_->started;
        co_return;
    }
    tern::task<> stop() {
        ++counts_->stopped;
        co_return;
    }

private:
    lifecycle_counts* counts_;
};

tern::task<void> start_stop_loop(svc::registry& reg, svc::service_id id, ops_meter& meter, std::uint64_t& cycles) {
    svc::registry_report first = co_await reg.start();
    if (!first.all_running()) throw bench_failure("the registry did not start both services: " + first.to_string());
    co_await reg.stop(id);  // the measured cycles start from a stopped dependent
    meter.start();
    do {
        svc::service_status st = co_await reg.start(id);
        if (st.state != svc::service_state::running)
            throw bench_failure(std::string("start(id) left the dependent ") + svc::to_string(st.state) + ": " +
                                st.reason);
        co_await reg.stop(id);
        ++cycles;
    } while (meter.tick());
    co_await reg.stop();
}

// ---- start ----

// The graph's interfaces: one per level. C++ interfaces are types, so a graph of thousands of services is built from
// a fixed set of them, each provided by many services.
constexpr int levels = 64;

template <int L>
struct level_iface {
    virtual ~level_iface() = default;
    virtual bool running() const = 0;
};

struct graph_counts {
    std::uint64_t constructed = 0;
    std::uint64_t too_early = 0;
    std::uint64_t started = 0;
    std::uint64_t stopped = 0;
};

template <int L, class... Required>
class graph_node final : public level_iface<L> {
public:
    using dependencies = svc::depends<svc::required<Required>...>;
    using interfaces = svc::provides<level_iface<L>>;

    explicit graph_node(Required&... deps, graph_counts* counts) : counts_(counts) {
        if (!(deps.running() && ...)) ++counts_->too_early;
        ++counts_->constructed;
    }

    tern::task<> start() {
        running_ = true;
        ++counts_->started;
        co_return;
    }
    tern::task<> stop() {
        running_ = false;
        ++counts_->stopped;
        co_return;
    }
    bool running() const override { return running_; }

private:
    graph_counts* counts_;
    bool running_ = false;
};

// Level L requires the interfaces of levels L-1, L-2 and L-3 (those that exist).
template <int L>
struct node_of {
    using type = graph_node<L, level_iface<L - 1>, level_iface<L - 2>, level_iface<L - 3>>;
};
template <>
struct node_of<0> {
    using type = graph_node<0>;
};
template <>
struct node_of<1> {
    using type = graph_node<1, level_iface<0>>;
};
template <>
struct node_of<2> {
    using type = graph_node<2, level_iface<1>, level_iface<0>>;
};

using add_fn = void (*)(svc::registry&, std::size_t, graph_counts*);

template <int L>
void add_node(svc::registry& reg, std::size_t index, graph_counts* counts) {
    // Names must be unique within a registry; the type's name is shared by the whole level.
    reg.add<typename node_of<L>::type>(svc::named{"node" + std::to_string(index)}, counts);
}

template <std::size_t... L>
constexpr std::array<add_fn, sizeof...(L)> make_adders(std::index_sequence<L...>) {
    return {&add_node<static_cast<int>(L)>...};
}
constexpr auto adders = make_adders(std::make_index_sequence<levels>{});

// The add order visits index (i * stride) % n: a permutation when n is not a multiple of the prime stride, which
// scatters every level over the whole order, so the registry cannot profit from services added after their
// dependencies.
constexpr std::size_t stride = 7919;

tern::task<metric_values> start_graph(const session& s, tern::io_context& ctx, std::size_t n) {
    graph_counts counts;
    svc::registry reg(ctx);
    for (std::size_t i = 0; i < n; ++i) {
        std::size_t index = (i * stride) % n;
        adders[index * levels / n](reg, index, &counts);
    }
    allocation_window allocs(s.scenario());
    auto t0 = bench_clock::now();
    svc::registry_report report = co_await reg.start();
    auto t1 = bench_clock::now();
    auto per_service = allocs.per_op(n);  // before the checks allocate
    if (!report.all_running()) {
        std::size_t running = 0;
        for (auto& st : report.services) running += st.state == svc::service_state::running;
        throw bench_failure(std::to_string(running) + " of " + std::to_string(n) + " services running after start()");
    }
    if (counts.constructed != n || counts.started != n || counts.too_early != 0)
        throw bench_failure("start(): " + std::to_string(counts.constructed) + " constructed, " +
                            std::to_string(counts.started) + " started, " + std::to_string(counts.too_early) +
                            " constructed before their dependencies ran, of " + std::to_string(n));
    co_await reg.stop();
    if (counts.stopped != n)
        throw bench_failure("stop(): " + std::to_string(counts.stopped) + " services stopped of " + std::to_string(n));
    metric_values values{{"start_ms", static_cast<double>(elapsed_ns(t0, t1)) / 1e6}};
    if (per_service) values.emplace_back(allocs_per_op_name, *per_service);
    co_return values;
}

// ---- events ----

// Publishes rounds [first, first + rounds) of the four types, keeping at most ev::window events in flight, and
// returns the seconds from its start until every one of them was handled.
tern::task<double> publish_rounds(svc::event_bus& bus, const ev::sinks& sinks, std::uint64_t first,
                                  std::uint64_t rounds) {
    auto t0 = bench_clock::now();
    std::uint64_t published = first * ev::event_types;
    for (std::uint64_t r = first; r < first + rounds; ++r) {
        while (published - sinks.done.handled() >= ev::window) co_await tern::yield();
        bus.publish(ev::make_event<0>(r));
        bus.publish(ev::make_event<1>(r));
        bus.publish(ev::make_event<2>(r));
        bus.publish(ev::make_event<3>(r));
        published += ev::event_types;
    }
    while (sinks.done.handled() != published) co_await tern::yield();
    co_return static_cast<double>(elapsed_ns(t0, bench_clock::now())) / 1e9;
}

// One subscription per event type, on loop.
std::array<svc::subscription, ev::event_types> subscribe_all(svc::event_bus& bus, tern::io_context& loop,
                                                             ev::sinks& sinks) {
    return {bus.subscribe<ev::event<0>>(loop, [&sinks](const ev::event<0>& e) { sinks.s0(e); }),
            bus.subscribe<ev::event<1>>(loop, [&sinks](const ev::event<1>& e) { sinks.s1(e); }),
            bus.subscribe<ev::event<2>>(loop, [&sinks](const ev::event<2>& e) { sinks.s2(e); }),
            bus.subscribe<ev::event<3>>(loop, [&sinks](const ev::event<3>& e) { sinks.s3(e); })};
}

// The phases of services/events: run(first, rounds) publishes and returns the seconds it took.
template <class Run>
void event_phases(session& s, const ev::sinks& sinks, Run run) {
    const std::uint64_t rounds = ev::rounds_per_phase(s);
    std::uint64_t first = 0;
    s.for_each_phase([&](const phase&) {
        double secs = run(first, rounds);
        first += rounds;
        sinks.verify(first);
        return metric_values{{"events_per_s", static_cast<double>(rounds * ev::event_types) / secs}};
    });
}

}  // namespace
}  // namespace services_tern

void services_start_stop(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    services_tern::lifecycle_counts counts;
    std::uint64_t cycles = 0;
    {
        svc::registry reg(ctx);
        reg.add<services_tern::dependency>();
        svc::service_id id = reg.add<services_tern::dependent>(&counts);
        ops_meter meter(s, "start_stop_per_s");
        ctx.block_on(services_tern::start_stop_loop(reg, id, meter, cycles));
        if (!meter.done()) throw bench_failure("the loop ended before the last phase");
    }
    // The first start by registry::start(), then one per measured cycle.
    const std::uint64_t starts = cycles + 1;
    if (counts.constructed != starts || counts.started != starts || counts.stopped != starts ||
        counts.destroyed != starts || counts.too_early != 0)
        throw bench_failure("dependent: " + std::to_string(counts.constructed) + " constructed, " +
                            std::to_string(counts.started) + " started, " + std::to_string(counts.stopped) +
                            " stopped, " + std::to_string(counts.destroyed) + " destroyed, " +
                            std::to_string(counts.too_early) + " before its dependency ran, for " +
                            std::to_string(starts) + " starts");
}

void services_start(session& s) {
    auto n = static_cast<std::size_t>(s.param_int("n"));
    if (n < static_cast<std::size_t>(services_tern::levels) || n % services_tern::stride == 0)
        throw bench_failure("n must be at least " + std::to_string(services_tern::levels) + " and not a multiple of " +
                            std::to_string(services_tern::stride));
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    for (const phase& p : s.phases()) s.report(p, ctx.block_on(services_tern::start_graph(s, ctx, n)));
}

void services_events(session& s) {
    auto threads = s.param_int("threads");
    // Declared before the loops, so that it outlives them (event_bus.hpp: lifetimes).
    svc::event_bus bus;
    ev::sinks sinks;
    if (threads == 1) {
        pin_thread_index(0);
        tern::io_context ctx(options_for(s));
        announce(s, ctx);
        auto subs = services_tern::subscribe_all(bus, ctx, sinks);
        services_tern::event_phases(s, sinks, [&](std::uint64_t first, std::uint64_t rounds) {
            return ctx.block_on(services_tern::publish_rounds(bus, sinks, first, rounds));
        });
        for (auto& sub : subs) sub.reset();
    } else if (threads == 2) {
        tern::runtime_options o;
        o.threads = 2;
        o.backend = requested_backend(s);
        tern::runtime rt(o);
        announce(s, rt.worker(0));
        for (std::size_t i = 0; i < 2; ++i) rt.post_to(i, [i] { pin_thread_index(i); });
        // Handlers on worker 1; the publisher is the task block_on runs on worker 0.
        auto subs = services_tern::subscribe_all(bus, rt.worker(1), sinks);
        services_tern::event_phases(s, sinks, [&](std::uint64_t first, std::uint64_t rounds) {
            return rt.block_on(services_tern::publish_rounds(bus, sinks, first, rounds));
        });
        // Every event was handled: nothing is being delivered while the subscriptions go.
        for (auto& sub : subs) sub.reset();
        if (!rt.shutdown(std::chrono::seconds(10))) throw bench_failure("the runtime did not shut down");
    } else {
        throw bench_failure("threads must be 1 or 2");
    }
}

}  // namespace tern_bench::tern_impl
