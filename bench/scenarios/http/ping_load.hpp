// The harness of http/ping_json, shared by every stack: the worker process is the server, and for each phase it
// runs wrk against it with a Lua script that checks every answer. A stack provides one function that starts its
// /ping server (ping_service.hpp does the work behind HTTP) on `threads` threads; run_ping_json does the rest:
//
//   1. raises the descriptor limit for `conns` connections, pins the process to CPU 0 (the server's threads
//      inherit it), writes the Lua script to a temporary file;
//   2. per phase (the warm-up, then each repetition): reads the server's CPU time (getrusage) and its answer
//      count, runs wrk pinned to CPU 1 (-t1 at conns=2, -t2 above, -c conns, --latency, whole seconds), reads
//      them again 200 ms after wrk has exited (time for the server to close wrk's connections: their setup and
//      teardown both count);
//   3. fails the phase on any socket error, timeout, non-2xx status or wrong answer wrk saw, on an answer the
//      server refused, or on a failure a server thread reported; else reports req_per_s (wrk's count), p50_us and
//      p99_us (wrk's latency histogram) and server_cpu_us_per_req;
//   4. reports the server's own peak RSS (getrusage RUSAGE_SELF: wrk, a child, is not in it).
// In instruction mode (tern-bench --instructions) the server, on one thread, is driven over one connection by
// tern-bench-client instead (../served.hpp); a server on io_uring must then run on the worker's own thread, which
// tern's implementation does itself.
// Each phase also prints wrk's own CPU use (info wrk_cpu_pct): checking every answer in Lua is most of wrk's work,
// and near 100% wrk, not the server, sets req_per_s; server_cpu_us_per_req does not depend on it.
//
// tern's implementation, once tern's HTTP server exists, is a start function that runs its server on an
// io_context per thread (options_for(s) and announce(s, ctx), so that the backend is checked) and answers through
// ping::service, plus
//   void http_ping_json(session& s) { ping::run_ping_json(s, start_tern_ping_server); }
// listed for tern/io_uring and tern/epoll in workers/tern_worker.cpp and in the scenario's impls (catalogue.cpp);
// tern-bench-tern already links this harness.
#pragma once

#include "../../harness/worker.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace tern_bench::ping {

struct server_stats {
    std::uint64_t answered = 0;  // requests answered 200, over every thread
    std::uint64_t refused = 0;   // requests the service answered with an error status
    std::string failure;         // the first unexpected error a server thread met, or ""
};

// A running /ping server on 127.0.0.1. The destructor stops it if stop() was not called.
class server {
public:
    virtual ~server() = default;
    virtual std::uint16_t port() const = 0;
    // Callable from the harness's thread while the server runs.
    virtual server_stats stats() const = 0;
    // Stops every server thread and joins them.
    virtual void stop() = 0;
};

// Starts a server on an ephemeral port of 127.0.0.1 with `threads` threads, listening when it returns.
using server_start = std::unique_ptr<server> (*)(session& s, int threads);

void run_ping_json(session& s, server_start start);
// The same phases at the concurrency given rather than the point's `conns` and `threads` (http2/ping_json's
// HTTP/1.1 comparator: as many connections as the HTTP/2 point has requests in flight).
void run_ping_json(session& s, server_start start, std::int64_t conns, std::int64_t threads);

// Raises the soft descriptor limit to the hard one when `needed` calls for it; fails when even that is too low.
void raise_fd_limit(std::int64_t needed);

// The first failure of any server thread, kept for stats(): threads report into it, the harness reads it.
class failure_slot {
public:
    void set(const std::string& what) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (first_.empty()) first_ = what;
    }
    std::string get() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return first_;
    }

private:
    mutable std::mutex mutex_;
    std::string first_;
};

}  // namespace tern_bench::ping
