#include "served.hpp"

#include "../harness/instructions.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

namespace tern_bench::served {

namespace {

constexpr int client_cpu = 1;

// The directory of this executable, where tern-bench-client is installed next to the workers.
std::string own_directory() {
    char buf[PATH_MAX];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) throw bench_failure(std::string("readlink /proc/self/exe: ") + std::strerror(errno));
    std::string path(buf, static_cast<std::size_t>(n));
    return path.substr(0, path.rfind('/'));
}

const char* protocol_name(protocol p) {
    switch (p) {
        case protocol::http_get: return "http_get";
        case protocol::http_ping: return "http_ping";
        case protocol::ws: return "ws";
        case protocol::ws_raw: return "ws_raw";
        case protocol::h2_ping: return "h2_ping";
        case protocol::h2_upload: return "h2_upload";
    }
    return "?";
}

}  // namespace

client::client(session& s, std::uint16_t port, protocol p, std::size_t size, std::function<void()> last,
               std::uint64_t streams)
    : s_(s) {
    const std::vector<phase> phases = s.phases();
    const std::uint64_t warmup = phases.front().ops;
    n_ = phases.back().ops;
    if (!s.instructions() || warmup < 1 || n_ < 1)
        throw bench_failure("a server is driven by tern-bench-client in instruction mode, with a warm-up of at "
                            "least one request");
    total_ = warmup + n_;
    instructions::arm_request_window(warmup, n_, std::move(last));

    const std::string exe = own_directory() + "/tern-bench-client";
    std::vector<std::string> args = {exe, "--port", std::to_string(port), "--protocol", protocol_name(p),
                                     "--requests", std::to_string(total_)};
    if (size != 0) args.insert(args.end(), {"--size", std::to_string(size)});
    if (streams != 1) args.insert(args.end(), {"--streams", std::to_string(streams)});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(client_cpu, &set);
    const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_fd < 0) throw bench_failure(std::string("/dev/null: ") + std::strerror(errno));
    pid_ = ::fork();
    if (pid_ < 0) {
        ::close(null_fd);
        throw bench_failure(std::string("fork: ") + std::strerror(errno));
    }
    if (pid_ == 0) {
        // Only async-signal-safe calls until exec. stdout is the worker's protocol channel: the client's goes to
        // /dev/null; its stderr is the worker's, so that its failure reaches the orchestrator.
        ::sched_setaffinity(0, sizeof set, &set);
        ::dup2(null_fd, 1);
        if (::syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
            for (int fd = 3; fd < 1024; ++fd) ::close(fd);
        ::execv(exe.c_str(), argv.data());
        ::_exit(127);
    }
    ::close(null_fd);
}

client::~client() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
}

void client::finish() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) throw bench_failure("cannot execute tern-bench-client");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw bench_failure("tern-bench-client failed (status " + std::to_string(status) + "; its message is above)");
    if (!instructions::request_window_closed() || instructions::requests_counted() != total_)
        throw bench_failure("the server's handler counted " + std::to_string(instructions::requests_counted()) +
                            " requests, the client made " + std::to_string(total_));
    s_.report_window(static_cast<double>(n_));
}

std::string one_line(const std::string& text) {
    std::string out;
    for (char c : text) {
        if (c == '\r') continue;
        if (c == '\n') {
            if (!out.empty() && out.back() != ' ') out += " | ";
            continue;
        }
        out += c;
    }
    while (!out.empty() && (out.back() == ' ' || out.back() == '|')) out.pop_back();
    return out;
}

program_result run_program(const std::string& exe, const std::vector<std::string>& args, int cpu, double time_limit_s) {
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    const int max_fd = lim.rlim_cur == RLIM_INFINITY ? 65536 : static_cast<int>(lim.rlim_cur);

    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw bench_failure(std::string("pipe: ") + std::strerror(errno));
    pid_t pid = ::fork();
    if (pid < 0) {
        ::close(out[0]);
        ::close(out[1]);
        throw bench_failure(std::string("fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
        if (::sched_setaffinity(0, sizeof set, &set) != 0) ::_exit(126);
        ::dup2(out[1], 1);
        ::dup2(out[1], 2);
        // The server's sockets (Asio does not open them close-on-exec) must not live on in the load generator.
        if (::syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
            for (int fd = 3; fd < max_fd; ++fd) ::close(fd);
        ::execv(exe.c_str(), argv.data());
        ::_exit(127);
    }
    ::close(out[1]);

    program_result r;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(time_limit_s);
    bool killed = false;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            ::kill(pid, SIGKILL);
            killed = true;
            break;
        }
        pollfd p{out[0], POLLIN, 0};
        int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) continue;
        char buf[4096];
        ssize_t got = ::read(out[0], buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        r.output.append(buf, static_cast<std::size_t>(got));
    }
    ::close(out[0]);
    while (::wait4(pid, &r.status, 0, &r.usage) < 0 && errno == EINTR) {
    }
    if (killed)
        throw bench_failure(exe + " did not finish within " + std::to_string(time_limit_s) +
                            " s; it printed: " + one_line(r.output));
    if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 126)
        throw bench_failure(exe + ": cannot pin it to CPU " + std::to_string(cpu));
    if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 127) throw bench_failure("cannot execute " + exe);
    return r;
}

}  // namespace tern_bench::served
