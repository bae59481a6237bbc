// The server scenarios' instruction counts (http/minimal, http/ping_json, ws/echo, http2/ping_json under
// tern-bench --instructions): the worker is the server, counted under callgrind, and tern-bench-client drives it
// from a process of its own, which callgrind does not follow (it runs natively, on CPU 1). A scenario's instruction
// mode:
//   1. starts its server (one thread, listening on an ephemeral port of 127.0.0.1), whose handler calls
//      instructions::request_handled() once per request or message;
//   2. makes a `client`, which arms the request window (the warm-up's count, then the measured one) and starts
//      the client process for exactly that many requests;
//   3. runs its server until it winds down by itself: the client ends the connection (ws/echo's close handshake,
//      the end of stream), or the `last` action given to the client, which runs on the server's thread when the
//      last request arrives, starts a graceful shutdown;
//   4. calls client::finish(), which waits for the client, checks that it succeeded and that the server counted
//      every request, and reports the window.
// The window thus opens at the warm-up's last request and closes n requests later: n whole request cycles of the
// server (read, parse, handle, answer, wait), whatever the client does meanwhile.
//
// Why no thread waits for the client while the server runs: valgrind 3.19 (Debian 12's) keeps its big lock while a
// thread waits in io_uring_enter, so no other thread of the process runs until that ring has a completion (seen
// as the ring's thread in io_cqring_wait and the others waiting for valgrind's lock, for ever). A server on
// io_uring must therefore end by itself, driven by the client's own traffic, and the client is waited for only
// afterwards. A client that fails sends SIGTERM to the server process (its parent), so that a server waiting for
// a request that will never come cannot hang the run; its message goes to the worker's stderr, where the
// orchestrator reads it.
//
// Also the program runner that http/ping_json's wrk goes through: fork/exec pinned to a CPU, output captured,
// a time limit.
#pragma once

#include "../harness/worker.hpp"

#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tern_bench::served {

enum class protocol {
    http_get,   // http/minimal's GET /
    http_ping,  // http/ping_json's POST /ping
    ws,         // a WebSocket echo, after the opening handshake
    ws_raw,     // the same frames without the handshake (the raw/epoll floor has none)
    h2_ping,    // http2/ping_json's POST /ping over h2c with prior knowledge, `streams` in flight
    h2_upload,  // its POST /upload of `size` bytes (http2/h2_upload.hpp)
};

// tern-bench-client driving the server on 127.0.0.1:port through the session's instruction window. `size` is a
// WebSocket message's size or an upload's; `streams` the HTTP/2 requests kept in flight; `last` (may be empty)
// runs on the server's thread, inside the handler of the last request, after the window has closed.
class client {
public:
    client(session& s, std::uint16_t port, protocol p, std::size_t size = 0, std::function<void()> last = {},
           std::uint64_t streams = 1);
    // A client not finished (the server failed) is killed.
    ~client();
    client(const client&) = delete;
    client& operator=(const client&) = delete;

    // Once the server has wound down: waits for the client and checks it and the count; reports the window.
    // Throws bench_failure when the client failed or the server did not count every request.
    void finish();

private:
    session& s_;
    std::uint64_t total_ = 0;
    std::uint64_t n_ = 0;
    pid_t pid_ = -1;
};

struct program_result {
    int status = 0;      // as waitpid returns it
    std::string output;  // stdout and stderr, interleaved
    rusage usage{};      // the program's own CPU time and memory
};

// Runs exe with args on CPU `cpu`, its stdout and stderr captured; kills it after time_limit_s and throws. Between
// fork and exec the child calls only async-signal-safe functions (the parent has threads), and it closes every
// descriptor but the standard ones: the server's sockets must not live on in the client.
program_result run_program(const std::string& exe, const std::vector<std::string>& args, int cpu, double time_limit_s);

// A program's output on one line, for a failure message: the orchestrator shows a worker's last line of stderr.
std::string one_line(const std::string& text);

}  // namespace tern_bench::served
