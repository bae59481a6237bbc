// Instruction counting: the worker's side of tern-bench --instructions.
//
// The orchestrator runs the worker under `valgrind --tool=callgrind --instr-atstart=no`, so nothing is counted
// until the worker asks. The meters open a window where the measured phase starts and close it where it ends,
// with callgrind's client requests (<valgrind/callgrind.h>): CALLGRIND_START_INSTRUMENTATION and
// CALLGRIND_STOP_INSTRUMENTATION. Callgrind then counts every user-space instruction that any thread of the
// process executes inside the window, and nothing of the start-up, the set-up, the warm-up or the teardown. The
// worker prints the window's operations ({"type": "instr", "ops": ...}); the orchestrator divides callgrind's
// total by them.
//
// Why client requests rather than the difference of two work sizes or --toggle-collect on a function: the window
// is placed by the same meter code that cuts the timed phases, at a point that lies between two operations, so it
// holds exactly the operations it reports; it covers every thread (a request toggles the whole process), which a
// function toggle does not; and outside the window callgrind does not instrument at all, so a set-up of a million
// timers costs seconds, not minutes. What the window holds beyond the operations is a constant (the meter's own
// phase switch, a block_on around a fixed-work phase), tens to a few thousand instructions, a fraction of an
// instruction per operation at the sizes measured.
//
// Server scenarios (http/minimal, http/ping_json, ws/echo, http2/ping_json) count on the server's side: the worker is the server,
// a client process (tern-bench-client, not under callgrind) drives it, and the server's handler calls
// request_handled() once per request; the window opens at the warm-up's last request and closes `n` requests
// later, so it holds exactly n request cycles of the server.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

namespace tern_bench::instructions {

// True when the process runs under valgrind (whose callgrind tool the orchestrator chose).
bool under_callgrind();

// Starts and stops callgrind's counting (every thread).
void start_counting();
void stop_counting();

namespace detail {
extern std::atomic<bool> counting_requests;
void count_request();
}  // namespace detail

// Server scenarios: open the window at the `warmup`-th request a server handles (warmup >= 1) and close it at
// request warmup + n, then run `last` (if any) there, on the server's thread. Called before the server takes
// requests.
void arm_request_window(std::uint64_t warmup, std::uint64_t n, std::function<void()> last = {});

// Called by a server's handler once per request, on the server's thread. Outside instruction mode a relaxed load
// and a branch.
inline void request_handled() {
    if (detail::counting_requests.load(std::memory_order_relaxed)) detail::count_request();
}

// Requests counted since arm_request_window, and whether the window closed (warmup + n reached).
std::uint64_t requests_counted();
bool request_window_closed();

}  // namespace tern_bench::instructions
