// dispatch/scaling, dispatch/interleaved, dispatch/concurrent and dispatch/cross_thread for asio/callbacks.
//
// scaling: 1000 chains, each handler posting its successor to the context it runs on, in either of Asio's models
// (asio_threads.hpp). interleaved: one io_context with a work guard; post 100 handlers, poll() until they have
// run, repeat. concurrent: one io_context (hint 4) run by 4 threads; 4 drivers each post 100 handlers and then
// themselves behind them. cross_thread: producers asio::post a handler each.
#include "asio_threads.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

namespace tern_bench::asio_impl {

namespace dispatch_asio_callbacks_threads {  // this file's own (see bench/CMakeLists.txt)
namespace {

constexpr int chains = 1000;

struct chain {
    asio::io_context* ctx;
    thread_counters* c;
    void operator()() const {
        c->tick();
        if (!c->stopping()) asio::post(*ctx, *this);
    }
};

struct counted {
    ops_meter* meter;
    void operator()() const { meter->tick(); }
};

struct concurrent_driver {
    asio::io_context* ctx;
    thread_counters* c;
    void operator()() const {
        if (c->stopping()) return;
        thread_counters* counters = c;
        for (int i = 0; i < 100; ++i) asio::post(*ctx, [counters] { counters->tick(); });
        asio::post(*ctx, *this);
    }
};

}  // namespace
}  // namespace dispatch_asio_callbacks_threads

void dispatch_scaling_callbacks(session& s) {
    announce(s);
    bool shared = shared_model(s);
    launch_fn launch = [shared](int threads, thread_counters& c) {
        auto pool = std::make_shared<context_pool>(threads, shared);
        for (int i = 0; i < dispatch_asio_callbacks_threads::chains; ++i) {
            auto& ctx = pool->context(static_cast<std::size_t>(i));
            asio::post(ctx, dispatch_asio_callbacks_threads::chain{&ctx, &c});
        }
        pool->start();
        return std::function<void()>([pool] { pool->stop_and_join(); });
    };
    report_scaling(s, launch);
}

void dispatch_interleaved_callbacks(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    auto guard = asio::make_work_guard(ctx);
    ops_meter meter(s, "ops_per_s");
    constexpr int batch = 100;
    meter.start();
    while (!meter.done()) {
        for (int i = 0; i < batch; ++i) asio::post(ctx, dispatch_asio_callbacks_threads::counted{&meter});
        ctx.poll();
    }
}

void dispatch_concurrent_callbacks(session& s) {
    announce(s);
    constexpr int threads = 4;
    launch_fn launch = [](int n, thread_counters& c) {
        auto pool = std::make_shared<context_pool>(n, true);
        for (int i = 0; i < n; ++i) asio::post(pool->context(0),
            dispatch_asio_callbacks_threads::concurrent_driver{&pool->context(0), &c});
        pool->start();
        return std::function<void()>([pool] { pool->stop_and_join(); });
    };
    report_rates(s, threads, launch, "ops_per_s");
}

void dispatch_cross_thread_callbacks(session& s) {
    cross_thread_run(s, [](asio::io_context& loop, std::uint64_t count, auto& on_run) {
        for (std::uint64_t i = 0; i < count; ++i) asio::post(loop, [&on_run] { on_run(); });
    });
}

}  // namespace tern_bench::asio_impl
