// What the multi-thread dispatch scenarios of both Asio families share: the two threading models of Asio and the
// cross-thread run.
//
// model=shared: one io_context (concurrency hint = threads) run by `threads` std::threads; a posted handler may
// run on any of them. model=per_thread: one io_context (hint 1) per thread, the work spread over them
// round-robin, each handler posting to its own context. Thread i is pinned to CPU i % 2 (thread_rate.hpp).
#pragma once

#include "../asio_setup.hpp"
#include "../thread_rate.hpp"

#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace tern_bench::asio_impl {

// Contexts and the threads that run them; work is queued before start() and stop_and_join() waits for every
// context to run out of it (the handlers stop re-posting once the counters say so).
class context_pool {
public:
    context_pool(int threads, bool shared) : threads_(threads) {
        int n = shared ? 1 : threads;
        for (int i = 0; i < n; ++i) ctxs_.push_back(std::make_unique<asio::io_context>(shared ? threads : 1));
    }
    ~context_pool() { stop_and_join(); }

    std::size_t size() const { return ctxs_.size(); }
    asio::io_context& context(std::size_t i) { return *ctxs_[i % ctxs_.size()]; }

    void start() {
        for (int i = 0; i < threads_; ++i)
            threads_v_.emplace_back([this, i] {
                pin_thread_index(static_cast<std::size_t>(i));
                context(static_cast<std::size_t>(i)).run();
            });
    }
    void stop_and_join() {
        for (auto& t : threads_v_) t.join();
        threads_v_.clear();
    }

private:
    int threads_;
    std::vector<std::unique_ptr<asio::io_context>> ctxs_;
    std::vector<std::thread> threads_v_;
};

inline bool shared_model(const session& s) { return s.request().params.at("model") == "shared"; }

// dispatch/cross_thread: one io_context (hint 1) run by a thread pinned to CPU 0; `producers` threads (thread p+1
// pinned to CPU (p+1) % 2) each call produce(ctx, per_producer, on_run), which posts per_producer increments to
// ctx, each calling on_run() on the loop. Times from releasing the producers to the last increment.
template <class Produce>
void cross_thread_run(session& s, Produce produce) {
    announce(s);
    auto producers = static_cast<int>(s.param_int("producers"));
    auto per_producer = static_cast<std::uint64_t>(s.param_int("per_producer"));
    const std::uint64_t total = per_producer * static_cast<std::uint64_t>(producers);
    s.for_each_phase([&](const phase&) {
        asio::io_context ctx(concurrency_hint);
        std::uint64_t count = 0;
        std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard(ctx.get_executor());
        auto on_run = [&] {
            if (++count == total) guard.reset();
        };
        std::atomic<int> ready{0};
        std::atomic<bool> go{false};
        std::thread consumer([&] {
            pin_thread_index(0);
            ctx.run();
        });
        std::vector<std::thread> threads;
        for (int p = 0; p < producers; ++p)
            threads.emplace_back([&, p] {
                pin_thread_index(static_cast<std::size_t>(p) + 1);
                ready.fetch_add(1);
                while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
                produce(ctx, per_producer, on_run);
            });
        while (ready.load() < producers) std::this_thread::yield();
        auto t0 = bench_clock::now();
        go.store(true, std::memory_order_release);
        for (auto& t : threads) t.join();
        consumer.join();
        auto t1 = bench_clock::now();
        if (count != total)
            throw bench_failure("ran " + std::to_string(count) + " increments of " + std::to_string(total));
        double secs = std::chrono::duration<double>(t1 - t0).count();
        return metric_values{{"seconds", secs}, {"ops_per_s", static_cast<double>(total) / secs}};
    });
}

}  // namespace tern_bench::asio_impl
