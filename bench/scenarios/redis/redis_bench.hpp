// What every redis/* implementation shares: the redis-server it runs against, the values it writes and checks, and
// the meter that cuts its commands into phases.
//
// The worker (pinned to CPU 0 by the orchestrator: the scenarios are single-threaded on the client side) starts its
// own redis-server pinned to CPU 1, on a free port of 127.0.0.1, nothing persisted, no output buffer limit for
// pub/sub clients (a subscriber that falls behind is held back by the publisher's window, not disconnected), and
// kills it at the end. Every implementation talks to it over TCP.
//
// redis/pipeline: `tasks` loops on one connection, each a SET of its own key to a 32-byte value that encodes the
// task and the iteration, then a GET of it whose reply must be that value. commands_per_s counts both;
// client_cpu_us_per_command is the worker process's CPU time (getrusage RUSAGE_SELF: user + system, the client's
// only, the server being another process) over the phase, per command.
// redis/pubsub: one publisher connection with `publishers` loops of PUBLISH of 32-byte payloads carrying a sequence
// number, and `subscribers` connections subscribed to the channel, each checking that it receives every number in
// order; the publishers stay at most `window` messages ahead of the slowest subscriber. messages_per_s counts the
// messages received by all subscribers.
#pragma once

#include "../../harness/traffic.hpp"
#include "../../harness/worker.hpp"

#include <sys/resource.h>
#include <sys/types.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tern_bench::redis_bench {

constexpr int client_cpu = 0;
constexpr int server_cpu = 1;
constexpr std::size_t value_size = 32;

// A redis-server of this worker, pinned to CPU 1; killed by the destructor.
class server {
public:
    server();
    ~server();
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    std::uint16_t port() const noexcept { return port_; }
    // The server's CPU time so far (user + system), from /proc.
    double cpu_seconds() const;
    // The server's CPU time (ns, /proc/<pid>/schedstat) and read() calls (/proc/<pid>/io's syscr) so far: over a
    // phase, what each command cost the server and how many commands one of its reads took in.
    struct usage {
        double cpu_ns = 0;
        double reads = 0;
    };
    usage sample() const {
        // Plain reads into stack buffers: a phase's allocation count stays the client's.
        usage u;
        char text[1024];
        if (read_proc("schedstat", text, sizeof text)) u.cpu_ns = std::strtod(text, nullptr);  // time on a CPU
        if (read_proc("io", text, sizeof text)) {
            if (const char* at = std::strstr(text, "syscr:")) u.reads = std::strtod(at + 6, nullptr);
        }
        return u;
    }

private:
    bool read_proc(const char* name, char* out, std::size_t cap) const {
        char path[64];
        std::snprintf(path, sizeof path, "/proc/%d/%s", static_cast<int>(pid_), name);
        const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return false;
        const ssize_t n = ::read(fd, out, cap - 1);
        ::close(fd);
        if (n <= 0) return false;
        out[n] = '\0';
        return true;
    }

    pid_t pid_ = -1;
    std::uint16_t port_ = 0;
    std::string dir_;
};

// Reports which redis-server the run used and where everything is pinned.
void announce(session& s, const server& srv);

// The 32-byte value task `task` writes in iteration `seq`: the two numbers in decimal, padded.
inline void make_value(char (&out)[value_size], std::uint64_t task, std::uint64_t seq) {
    std::memset(out, '.', value_size);
    char digits[24];
    int n = 0;
    for (std::uint64_t v = seq;; v /= 10) {
        digits[n++] = static_cast<char>('0' + v % 10);
        if (v < 10) break;
    }
    std::size_t at = 0;
    while (n > 0) out[at++] = digits[--n];
    out[at++] = ':';
    for (std::uint64_t v = task;; v /= 10) {
        out[at++] = static_cast<char>('0' + v % 10);
        if (v < 10) break;
    }
}

inline std::string key_of(std::uint64_t task) { return "bench:key:" + std::to_string(task); }

inline double process_cpu_seconds() {
    rusage r{};
    ::getrusage(RUSAGE_SELF, &r);
    auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
    return s(r.ru_utime) + s(r.ru_stime);
}

// server_cpu_us_per_command and server_commands_per_read between two samples of the server, over n commands.
inline void append_server_metrics(metric_values& values, const server::usage& from, const server::usage& to,
                                  double n) {
    values.emplace_back("server_cpu_us_per_command", (to.cpu_ns - from.cpu_ns) / 1e3 / n);
    if (to.reads > from.reads) values.emplace_back("server_commands_per_read", n / (to.reads - from.reads));
}

// Operations through the phases: the rate (`rate_metric`) and this process's CPU time per operation
// (`cpu_metric`). tick() is called once per completed operation; the clock is read every few. In instruction
// mode (tern-bench --instructions) the process is the client alone: redis-server runs natively, outside
// callgrind (it is exec'd, and callgrind does not follow exec), so the window holds the client's instructions.
class op_meter {
public:
    // With srv, the server's figures too (append_server_metrics).
    op_meter(session& s, std::string rate_metric, std::string cpu_metric, const server* srv = nullptr)
        : clock_(s), rate_metric_(std::move(rate_metric)), cpu_metric_(std::move(cpu_metric)), srv_(srv) {}

    void start() {
        clock_.start();
        cpu0_ = process_cpu_seconds();
        if (srv_ != nullptr) srv0_ = srv_->sample();
    }
    bool done() const { return clock_.done(); }

    // One operation done. False once every phase is over: the caller starts no new operation. In instruction
    // mode a phase ends after its count of operations, and the measured one closes the window at its last (the
    // point between two completions, with the same commands in flight as when it opened).
    bool tick() {
        if (clock_.done()) return false;
        ++ops_;
        if (clock_.counted()) {
            if (ops_ < clock_.target()) return true;
            clock_.close_window(static_cast<double>(ops_));
        } else if (ops_ % 16 != 0) {
            return true;
        }
        const auto now = bench_clock::now();
        if (!clock_.counted() && !clock_.over(now)) return true;
        const double secs = clock_.seconds(now);
        const double cpu = process_cpu_seconds();
        const double n = static_cast<double>(ops_);
        metric_values values{{rate_metric_, n / secs}, {cpu_metric_, (cpu - cpu0_) * 1e6 / n}};
        if (srv_ != nullptr && !clock_.counted()) {
            const server::usage u = srv_->sample();
            append_server_metrics(values, srv0_, u, n);
            srv0_ = u;
        }
        const bool more = clock_.next(now, std::move(values), ops_);
        ops_ = 0;
        cpu0_ = cpu;
        return more;
    }

private:
    phase_clock clock_;
    std::string rate_metric_;
    std::string cpu_metric_;
    std::uint64_t ops_ = 0;
    double cpu0_ = 0;
    const server* srv_;
    server::usage srv0_;
};

// A program run to its end, pinned to a CPU, its output captured; its own CPU time and memory in usage.
struct program_run {
    int status = 0;
    std::string output;
    rusage usage{};
};
program_run run_pinned(const std::string& exe, const std::vector<std::string>& args, int cpu, double time_limit_s);

// The pub/sub window: how many messages the publishers may be ahead of the slowest subscriber.
inline std::uint64_t window_of(const session& s) { return static_cast<std::uint64_t>(s.param_int("window")); }

}  // namespace tern_bench::redis_bench
