#include "instructions.hpp"

#include <valgrind/callgrind.h>

namespace tern_bench::instructions {

namespace detail {
std::atomic<bool> counting_requests{false};
}  // namespace detail

namespace {

std::uint64_t window_start = 0;
std::uint64_t window_end = 0;
std::atomic<std::uint64_t> counted{0};
std::atomic<bool> closed{false};
std::function<void()> on_last;

}  // namespace

bool under_callgrind() { return RUNNING_ON_VALGRIND != 0; }

void start_counting() { CALLGRIND_START_INSTRUMENTATION; }

void stop_counting() { CALLGRIND_STOP_INSTRUMENTATION; }

void arm_request_window(std::uint64_t warmup, std::uint64_t n, std::function<void()> last) {
    on_last = std::move(last);
    window_start = warmup;
    window_end = warmup + n;
    counted.store(0, std::memory_order_relaxed);
    closed.store(false, std::memory_order_relaxed);
    detail::counting_requests.store(true, std::memory_order_release);
}

void detail::count_request() {
    // One server thread calls this (the instruction points serve on one thread); the atomics let the harness's
    // thread read the count.
    const std::uint64_t n = counted.load(std::memory_order_relaxed) + 1;
    counted.store(n, std::memory_order_relaxed);
    if (n == window_start) {
        start_counting();
    } else if (n == window_end) {
        stop_counting();
        closed.store(true, std::memory_order_release);
        if (on_last) on_last();
    }
}

std::uint64_t requests_counted() { return counted.load(std::memory_order_acquire); }

bool request_window_closed() { return closed.load(std::memory_order_acquire); }

}  // namespace tern_bench::instructions
