// coro/channel and coro/event for tern.
//
// channel: a runtime of 2 workers (worker i pinned to CPU i % 2); `pairs` producer/consumer task pairs, each pair
// with its own tern::sync::channel<int> of capacity 1024 and both its tasks spawned with runtime::spawn_on on
// worker k % 2, the placement the Asio side uses (its channel is not thread-safe, so a pair must share a thread);
// producer k sends the values 1..m (m = n / pairs), its consumer receives m values and checks their count and
// their sum.
// event: Ichor's loop on one io_context: the coroutine posts a handler (io_context::post) that sets a
// tern::sync::auto_reset_event, then awaits the event; n times.
#include "../tern_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"
#include "../thread_rate.hpp"

#include <tern/sync/channel.hpp>
#include <tern/sync/event.hpp>

#include <memory>
#include <vector>

namespace tern_bench::tern_impl {

namespace coro_tern_sync {  // this file's own (see bench/CMakeLists.txt)
namespace {

constexpr std::size_t channel_capacity = 1024;

tern::task<void> produce(tern::sync::channel<int>& ch, int m) {
    for (int v = 1; v <= m; ++v) {
        auto ec = co_await ch.send(v);
        expect_ok(ec, "channel send");
    }
}

tern::task<void> consume(tern::sync::channel<int>& ch, int m) {
    std::uint64_t sum = 0;
    for (int i = 0; i < m; ++i) {
        auto r = co_await ch.receive();
        expect_ok(r.ec, "channel receive");
        sum += static_cast<std::uint64_t>(*r.value);
    }
    std::uint64_t expected = static_cast<std::uint64_t>(m) * static_cast<std::uint64_t>(m + 1) / 2;
    if (sum != expected) throw bench_failure("a consumer received a sum of " + std::to_string(sum) + ", expected " +
                                             std::to_string(expected));
    if (ch.try_receive()) throw bench_failure("a channel still holds a value after its consumer finished");
}

tern::task<double> run_pairs(tern::runtime& rt, int pairs, int m) {
    std::vector<std::unique_ptr<tern::sync::channel<int>>> chans;
    for (int p = 0; p < pairs; ++p) chans.push_back(std::make_unique<tern::sync::channel<int>>(channel_capacity));
    std::vector<tern::join_handle<void>> handles;
    auto t0 = bench_clock::now();
    for (int p = 0; p < pairs; ++p) {
        auto& ch = *chans[static_cast<std::size_t>(p)];
        auto worker = static_cast<std::size_t>(p) % rt.size();
        handles.push_back(rt.spawn_on(worker, consume(ch, m)));
        handles.push_back(rt.spawn_on(worker, produce(ch, m)));
    }
    for (auto& h : handles) co_await std::move(h);
    auto t1 = bench_clock::now();
    co_return static_cast<double>(elapsed_ns(t0, t1)) / 1e6;
}

tern::task<void> event_loop(tern::io_context& ctx, std::uint64_t n, std::uint64_t& woken) {
    tern::sync::auto_reset_event ev;
    for (std::uint64_t i = 0; i < n; ++i) {
        ctx.post([&ev] { ev.set(); });
        auto ec = co_await ev.wait();
        expect_ok(ec, "event wait");
        ++woken;
    }
}

}  // namespace
}  // namespace coro_tern_sync

void coro_channel(session& s) {
    auto pairs = static_cast<int>(s.param_int("pairs"));
    auto n = s.param_int("n");
    int m = static_cast<int>(n / pairs);
    if (static_cast<std::int64_t>(m) * pairs != n) throw bench_failure("n must be a multiple of pairs");
    constexpr int threads = 2;
    tern::runtime_options o;
    o.threads = threads;
    o.backend = requested_backend(s);
    // Counting instructions: an idle worker parks at once, since what a spin polls depends on time, not on work.
    if (s.instructions()) o.spin_before_park = std::chrono::nanoseconds(0);
    tern::runtime rt(o);
    announce(s, rt.worker(0));
    for (int i = 0; i < threads; ++i) rt.post_to(static_cast<std::size_t>(i), [i] { pin_thread_index(i); });
    s.for_each_phase([&](const phase&) { return metric_values{{"ms", rt.block_on(coro_tern_sync::run_pairs(rt, pairs,
        m))}}; });
    rt.shutdown();
}

void coro_event(session& s) {
    auto n = static_cast<std::uint64_t>(s.param_int("n"));
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    s.for_each_phase([&](const phase&) {
        std::uint64_t woken = 0;
        auto t0 = bench_clock::now();
        ctx.block_on(coro_tern_sync::event_loop(ctx, n, woken));
        auto t1 = bench_clock::now();
        if (woken != n) throw bench_failure("woke " + std::to_string(woken) + " times of " + std::to_string(n));
        return metric_values{{"iter_per_s", static_cast<double>(n) / std::chrono::duration<double>(t1 - t0).count()}};
    });
}

}  // namespace tern_bench::tern_impl
