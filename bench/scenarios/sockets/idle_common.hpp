// sockets/idle_connections: the memory a server spends on connections that wait for data.
//
// Each phase runs in two fresh processes forked by the worker, so that no allocator cache of an earlier phase
// hides what the connections cost:
//   - the server (the implementation's own code, `serve`) listens on a loopback port, samples its RSS (the
//     baseline, with its loop made), accepts `conns` connections and starts one pending read on each; once every
//     read is pending it samples its RSS again and lets the client go. Then every read must complete with the
//     one byte the client sends ('i'), after which the server closes the connection.
//   - the client connects `conns` times with plain blocking sockets, waits for the go, writes one byte on each
//     connection and reads each one's end of stream.
// bytes_per_conn is (RSS with every connection waiting - baseline) / conns, with the RSS counted page by page
// (current_rss_bytes); the server's peak RSS (wait4) is reported as the point's peak RSS. The client is a process
// of its own because the machine allows 20000 fds per process: 9000 connections take 9000 on each side.
#pragma once

#include "../../harness/worker.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace tern_bench::idle {

// What the server reports to the worker through a pipe.
struct server_figures {
    std::int64_t baseline_rss = 0;
    std::int64_t waiting_rss = 0;
    std::int64_t failures = 0;  // reads that did not get their byte
};

// The resident set, counted page by page. Not /proc/self/statm: since Linux 6.2 its counters are per-CPU and it
// reads only their shared sum, which lags each CPU's recent faults by up to a batch (32 pages and more); a server
// just forked from the worker showed a baseline 38 pages (152 KiB) under its true size, which added 152 B to every
// connection's figure at 1000 connections and changed from run to run. smaps_rollup walks the page tables, so it
// is exact on any kernel; statm is the fallback where it is missing.
inline std::int64_t current_rss_bytes() {
    if (FILE* f = std::fopen("/proc/self/smaps_rollup", "r")) {
        char line[256];
        long kib = -1;
        while (std::fgets(line, sizeof line, f) != nullptr) {
            if (std::sscanf(line, "Rss: %ld kB", &kib) == 1) break;
        }
        std::fclose(f);
        if (kib >= 0) return static_cast<std::int64_t>(kib) * 1024;
    }
    FILE* f = std::fopen("/proc/self/statm", "r");
    if (f == nullptr) return -1;
    long size = 0, resident = 0;
    const int got = std::fscanf(f, "%ld %ld", &size, &resident);
    std::fclose(f);
    return got == 2 ? static_cast<std::int64_t>(resident) * sysconf(_SC_PAGESIZE) : -1;
}

// The server side's hooks, given to `serve`.
class probe {
public:
    probe(int port_fd, int go_fd) : port_fd_(port_fd), go_fd_(go_fd) {}
    // The server listens on `port` and its loop exists: samples the baseline and tells the worker the port.
    void listening(std::uint16_t port) {
        // Twice: the first call faults in the pages of the sampling code itself (fopen, scanf), which would
        // otherwise be counted as the connections' growth; the second one is the baseline.
        (void)current_rss_bytes();
        figures_.baseline_rss = current_rss_bytes();
        (void)!::write(port_fd_, &port, sizeof port);
    }
    // Every connection has a read pending: samples the RSS and lets the client send.
    void all_waiting() {
        figures_.waiting_rss = current_rss_bytes();
        const char go = 'g';
        (void)!::write(go_fd_, &go, 1);
    }
    // A read completed with something other than the one byte 'i'.
    void failed() { ++figures_.failures; }
    const server_figures& figures() const { return figures_; }

private:
    int port_fd_;
    int go_fd_;
    server_figures figures_;
};

namespace detail {

inline bool read_full(int fd, void* p, std::size_t n, int timeout_ms) {
    auto* out = static_cast<char*>(p);
    while (n > 0) {
        pollfd pfd{fd, POLLIN, 0};
        if (::poll(&pfd, 1, timeout_ms) <= 0) return false;
        const ssize_t r = ::read(fd, out, n);
        if (r <= 0) return false;
        out += r;
        n -= static_cast<std::size_t>(r);
    }
    return true;
}

// The client process: connects, waits for the go, writes one byte per connection, reads each end of stream.
[[noreturn]] inline void run_client(std::uint16_t port, std::int64_t conns, int go_fd) {
    std::vector<int> fds;
    fds.reserve(static_cast<std::size_t>(conns));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (std::int64_t i = 0; i < conns; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
            std::fprintf(stderr, "idle client: connection %lld: %s\n", static_cast<long long>(i), std::strerror(errno));
            ::_exit(2);
        }
        fds.push_back(fd);
    }
    char go = 0;
    if (!read_full(go_fd, &go, 1, 120'000)) ::_exit(3);
    for (int fd : fds) {
        if (::write(fd, "i", 1) != 1) ::_exit(4);
    }
    for (int fd : fds) {
        char b;
        if (::read(fd, &b, 1) != 0) ::_exit(5);  // the server closes after the byte
        ::close(fd);
    }
    ::_exit(0);
}

}  // namespace detail

// One measurement: forks the server (running serve(conns, probe), which returns once every connection has got
// its byte and been closed) and the client; returns {bytes_per_conn} and reports the server's peak RSS.
template <class Serve>
metric_values measure(session& s, std::int64_t conns, Serve serve) {
    int port_pipe[2], go_pipe[2], result_pipe[2];
    if (::pipe2(port_pipe, O_CLOEXEC) != 0 || ::pipe2(go_pipe, O_CLOEXEC) != 0 || ::pipe2(result_pipe, O_CLOEXEC) != 0)
        throw bench_failure("pipe: " + std::string(std::strerror(errno)));
    std::fflush(nullptr);
    const pid_t server = ::fork();
    if (server < 0) throw bench_failure("fork: " + std::string(std::strerror(errno)));
    if (server == 0) {
        probe p(port_pipe[1], go_pipe[1]);
        int code = 0;
        try {
            serve(conns, p);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "idle server: %s\n", e.what());
            code = 6;
        }
        const server_figures f = p.figures();
        (void)!::write(result_pipe[1], &f, sizeof f);
        std::fflush(nullptr);
        ::_exit(code);
    }
    std::uint16_t port = 0;
    if (!detail::read_full(port_pipe[0], &port, sizeof port, 30'000)) {
        ::kill(server, SIGKILL);
        ::waitpid(server, nullptr, 0);
        throw bench_failure("the idle server did not start listening");
    }
    const pid_t client = ::fork();
    if (client < 0) throw bench_failure("fork: " + std::string(std::strerror(errno)));
    if (client == 0) detail::run_client(port, conns, go_pipe[0]);
    server_figures f;
    const bool got = detail::read_full(result_pipe[0], &f, sizeof f, 300'000);
    int server_status = 0, client_status = 0;
    rusage ru{};
    if (!got) ::kill(server, SIGKILL);
    ::wait4(server, &server_status, 0, &ru);
    if (!got) ::kill(client, SIGKILL);
    ::waitpid(client, &client_status, 0);
    for (int fd : {port_pipe[0], port_pipe[1], go_pipe[0], go_pipe[1], result_pipe[0], result_pipe[1]}) ::close(fd);
    if (!got) throw bench_failure("the idle server did not finish");
    if (!WIFEXITED(server_status) || WEXITSTATUS(server_status) != 0)
        throw bench_failure("the idle server failed (status " + std::to_string(server_status) + ")");
    if (!WIFEXITED(client_status) || WEXITSTATUS(client_status) != 0)
        throw bench_failure("the idle client failed (status " + std::to_string(client_status) + ")");
    if (f.failures != 0) throw bench_failure(std::to_string(f.failures) + " reads did not get their byte");
    if (f.baseline_rss <= 0 || f.waiting_rss <= 0) throw bench_failure("could not read the server's RSS");
    s.info("peak_rss_bytes", std::to_string(ru.ru_maxrss * 1024L));
    const double per_conn = static_cast<double>(f.waiting_rss - f.baseline_rss) / static_cast<double>(conns);
    return {{"bytes_per_conn", per_conn}};
}

}  // namespace tern_bench::idle
