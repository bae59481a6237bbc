// tern-op-probe: one core operation of tern, repeated n times on one loop and nothing else, for callgrind.
//
//   tern-op-probe OP N [epoll|io_uring]
//
// OP is what the cost targets of the core are stated in:
//   post        io_context::post of a handler from the loop's own thread, and its run (a chain: each handler posts
//               the next)
//   yield       co_await tern::yield(): a suspension, a trip through the run queue, a resumption
//   spawn       tern::spawn of an empty task from a running task, and co_await of its join handle (n spawned,
//               then n joined, as coro/spawn does, after an uncounted round of n that warms the frame pool)
//   channel     a send and a receive on a sync::channel<int> of capacity 1024, producer and consumer tasks on
//               one loop
//   timer       a wait on a timer armed 1 h ahead, cancelled by a posted handler, and the cancelled completion
//               resumed (timers/schedule_cancel's operation: a post, an arm, a cancel, a resumption)
//   timer_live  the same with 1,000,000 other waits armed 30..90 min ahead
//   timer_shell, timer_shell_live
//               the timer probe's operation without the timer: the same post, suspension and resumption, the
//               awaiter one that keeps its handle and the posted handler queueing the resumption itself, as the
//               wait's cancel() does. timer minus timer_shell is the timer's own part (arm and cancel: the
//               deadline, the wheel, the wait's awaiter and its result); the rest is the loop's.
//   event       services::event_bus::publish of a 16-byte event from the subscriber's own loop, delivered to its
//               one handler (bursts of 64 publishes, then a yield that lets the delivery pass run)
// Callgrind counts only the operations' phase: the program starts callgrind's instrumentation right before it and
// stops it right after (run it with --instr-atstart=no). bench/probes/op_profile.py runs it with n and 2n and
// divides the difference by n, per function, so that whatever the phase holds once cancels out. Every operation
// is checked (the counts, the values received, the error codes), so a probe that skipped work would fail.
#include <tern/services/event_bus.hpp>
#include <tern/sync/channel.hpp>
#include <tern/tern.hpp>

#include <valgrind/callgrind.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace std::chrono_literals;

void check(bool ok, const char* what) {
    if (!ok) throw std::runtime_error(what);
}

// ---- post ----

struct chain {
    tern::io_context* ctx;
    std::uint64_t* left;
    void operator()() const {
        if (--*left != 0) ctx->post(*this);
    }
};

void post(tern::io_context& ctx, std::uint64_t n) {
    std::uint64_t left = n;
    ctx.post(chain{&ctx, &left});
    CALLGRIND_START_INSTRUMENTATION;
    ctx.run();
    CALLGRIND_STOP_INSTRUMENTATION;
    check(left == 0, "post: the chain stopped early");
}

// ---- yield ----

tern::task<std::uint64_t> yield_n(std::uint64_t n) {
    std::uint64_t done = 0;
    CALLGRIND_START_INSTRUMENTATION;
    for (std::uint64_t i = 0; i < n; ++i) {
        co_await tern::yield();
        ++done;
    }
    CALLGRIND_STOP_INSTRUMENTATION;
    co_return done;
}

// ---- spawn ----

tern::task<void> empty() { co_return; }

tern::task<void> spawn_round(std::vector<tern::join_handle<void>>& handles, std::uint64_t n) {
    handles.clear();
    for (std::uint64_t i = 0; i < n; ++i) handles.push_back(tern::spawn(empty()));
    for (auto& h : handles) co_await std::move(h);
}

tern::task<std::uint64_t> spawn_n(std::uint64_t n) {
    std::vector<tern::join_handle<void>> handles;
    handles.reserve(n);
    co_await spawn_round(handles, n);  // the frame pool grows to n tasks here, not in the counted round
    CALLGRIND_START_INSTRUMENTATION;
    co_await spawn_round(handles, n);
    CALLGRIND_STOP_INSTRUMENTATION;
    co_return handles.size();
}

// ---- channel ----

tern::task<void> produce(tern::sync::channel<int>& ch, std::uint64_t n) {
    for (std::uint64_t i = 1; i <= n; ++i) check(!co_await ch.send(static_cast<int>(i & 0xffff)), "channel: send");
}

tern::task<std::uint64_t> consume(tern::sync::channel<int>& ch, std::uint64_t n) {
    std::uint64_t sum = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        auto r = co_await ch.receive();
        check(!r.ec, "channel: receive");
        sum += static_cast<std::uint64_t>(*r.value);
    }
    co_return sum;
}

tern::task<void> channel(std::uint64_t n) {
    tern::sync::channel<int> ch(1024);
    CALLGRIND_START_INSTRUMENTATION;
    auto consumer = tern::spawn(consume(ch, n));
    auto producer = tern::spawn(produce(ch, n));
    co_await std::move(producer);
    std::uint64_t sum = co_await std::move(consumer);
    CALLGRIND_STOP_INSTRUMENTATION;
    std::uint64_t expected = 0;
    for (std::uint64_t i = 1; i <= n; ++i) expected += i & 0xffff;
    check(sum == expected, "channel: the sum received");
}

// ---- timer ----

tern::task<void> background_wait(tern::timer& t, std::uint64_t& armed) {
    ++armed;
    check(co_await t.wait() == tern::error::operation_canceled, "timer: a background wait");
}

// The shell's awaiter: suspends, and keeps the handle for the posted handler to queue.
struct parked {
    std::coroutine_handle<> handle;
    bool resumed = false;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) noexcept { handle = h; }
    bool await_resume() const noexcept { return resumed; }
};

tern::task<void> timer_ops(tern::io_context& ctx, std::uint64_t n, std::size_t live, bool with_timer) {
    std::deque<tern::timer> background;
    std::uint64_t armed = 0;
    std::mt19937_64 rng(20240601);
    std::uniform_int_distribution<std::int64_t> minutes(30 * 60, 90 * 60);
    for (std::size_t i = 0; i < live; ++i) {
        background.emplace_back(ctx);
        background.back().expires_after(std::chrono::seconds(minutes(rng)));
        tern::spawn(ctx, background_wait(background.back(), armed)).detach();
    }
    while (armed != live) co_await tern::yield();
    if (with_timer) {
        tern::timer t(ctx);
        CALLGRIND_START_INSTRUMENTATION;
        for (std::uint64_t i = 0; i < n; ++i) {
            t.expires_after(1h);
            ctx.post([&t] { t.cancel(); });
            check(co_await t.wait() == tern::error::operation_canceled, "timer: the cancelled wait");
        }
        CALLGRIND_STOP_INSTRUMENTATION;
    } else {
        parked p;
        CALLGRIND_START_INSTRUMENTATION;
        for (std::uint64_t i = 0; i < n; ++i) {
            p.resumed = false;
            ctx.post([&ctx, &p] {
                p.resumed = true;
                ctx.schedule_handle(p.handle);
            });
            check(co_await p, "timer_shell: the resumption");
        }
        CALLGRIND_STOP_INSTRUMENTATION;
    }
    for (auto& b : background) b.cancel();
    co_await tern::yield();
}

// ---- event ----

struct tick {
    std::uint64_t sequence;
    std::uint64_t tag;
};

tern::task<void> events(tern::io_context& ctx, std::uint64_t n) {
    namespace svc = tern::services;
    svc::event_bus bus;
    std::uint64_t handled = 0;
    std::uint64_t next = 0;
    bool in_order = true;
    svc::subscription sub = bus.subscribe<tick>(ctx, [&](const tick& t) {
        in_order = in_order && t.sequence == next && t.tag == (t.sequence ^ 0x5a5a);
        ++next;
        ++handled;
    });
    constexpr std::uint64_t burst = 64;
    CALLGRIND_START_INSTRUMENTATION;
    for (std::uint64_t i = 0; i < n;) {
        for (std::uint64_t k = 0; k < burst && i < n; ++k, ++i) bus.publish(tick{i, i ^ 0x5a5a});
        co_await tern::yield();
    }
    while (handled != n) co_await tern::yield();
    CALLGRIND_STOP_INSTRUMENTATION;
    check(in_order, "event: the handler saw events out of order");
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc < 3) throw std::runtime_error("usage: tern-op-probe post|yield|spawn|channel|timer|timer_live|"
                                               "timer_shell|timer_shell_live|event N [epoll|io_uring]");
        const std::string_view op = argv[1];
        const std::uint64_t n = std::strtoull(argv[2], nullptr, 10);
        check(n > 0, "N must be positive");
        tern::io_context_options o;
        o.backend = argc > 3 && std::string_view(argv[3]) == "io_uring" ? tern::backend_kind::io_uring
                                                                         : tern::backend_kind::epoll;
        tern::io_context ctx(o);
        check(ctx.backend() == o.backend, "the loop is not on the backend asked for");
        if (op == "post")
            post(ctx, n);
        else if (op == "yield")
            check(ctx.block_on(yield_n(n)) == n, "yield: the count");
        else if (op == "spawn")
            check(ctx.block_on(spawn_n(n)) == n, "spawn: the count");
        else if (op == "channel")
            ctx.block_on(channel(n));
        else if (op == "timer")
            ctx.block_on(timer_ops(ctx, n, 0, true));
        else if (op == "timer_live")
            ctx.block_on(timer_ops(ctx, n, 1000000, true));
        else if (op == "timer_shell")
            ctx.block_on(timer_ops(ctx, n, 0, false));
        else if (op == "timer_shell_live")
            ctx.block_on(timer_ops(ctx, n, 1000000, false));
        else if (op == "event")
            ctx.block_on(events(ctx, n));
        else
            throw std::runtime_error("unknown operation " + std::string(op));
        std::printf("%s x %llu on %s\n", std::string(op).c_str(), static_cast<unsigned long long>(n),
                    tern::to_string(ctx.backend()));
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tern-op-probe: %s\n", e.what());
        return 1;
    }
}
