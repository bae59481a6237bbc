// The redis-server of a redis/* run, and the programs it runs beside it (see redis_bench.hpp).
#include "redis_bench.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace tern_bench::redis_bench {

namespace {

std::uint16_t free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
    if (fd >= 0) ::close(fd);
    if (!ok) throw bench_failure(std::string("no free port: ") + std::strerror(errno));
    return ntohs(a.sin_port);
}

// A blocking PING; true when the server answers +PONG.
bool answers(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    bool ok = false;
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
        const char ping[] = "PING\r\n";
        char got[8] = {};
        ok = ::write(fd, ping, sizeof ping - 1) == sizeof ping - 1 && ::read(fd, got, sizeof got) >= 5 &&
             std::string_view(got, 5) == "+PONG";
    }
    if (fd >= 0) ::close(fd);
    return ok;
}

void pin_child(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0) ::_exit(126);
}

void close_inherited() {
    if (::syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
        for (int fd = 3; fd < 65536; ++fd) ::close(fd);
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

server::server() : port_(free_port()) {
    char dir[] = "/tmp/tern-bench-redis-XXXXXX";
    if (::mkdtemp(dir) == nullptr) throw bench_failure(std::string("mkdtemp: ") + std::strerror(errno));
    dir_ = dir;
    const std::string port = std::to_string(port_);
    const std::string log = dir_ + "/redis.log";
    std::vector<std::string> args = {"redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
                                     "--appendonly", "no", "--dir", dir_, "--logfile", log, "--daemonize", "no",
                                     "--client-output-buffer-limit", "pubsub 0 0 0"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw bench_failure(std::string("fork: ") + std::strerror(errno));
    if (pid_ == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the server goes with the worker, however the worker ends
        pin_child(server_cpu);
        close_inherited();
        ::execvp("redis-server", argv.data());
        ::_exit(127);
    }
    for (int i = 0; i < 1000; ++i) {
        if (answers(port_)) return;
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            throw bench_failure(WIFEXITED(status) && WEXITSTATUS(status) == 127
                                    ? "redis-server is not on PATH (Debian: apt-get install redis-server)"
                                    : "redis-server exited at start; its log: " + log);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    throw bench_failure("redis-server did not answer within 5 s; its log: " + log);
}

server::~server() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
    }
    std::system(("rm -rf '" + dir_ + "'").c_str());
}

double server::cpu_seconds() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Fields 14 and 15 (utime, stime) in clock ticks, counted after the command name's closing parenthesis.
    std::istringstream rest(text.substr(text.rfind(')') + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14) utime = std::stoull(field);
        if (i == 15) stime = std::stoull(field);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

void announce(session& s, const server& srv) {
    s.info("redis_server", first_line(run_pinned("/usr/bin/env", {"redis-server", "--version"}, server_cpu, 10).output));
    s.info("pinning", "client on CPU " + std::to_string(client_cpu) + ", redis-server on CPU " +
                          std::to_string(server_cpu) + " (port " + std::to_string(srv.port()) + ")");
}

program_run run_pinned(const std::string& exe, const std::vector<std::string>& args, int cpu, double time_limit_s) {
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw bench_failure(std::string("pipe: ") + std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid < 0) throw bench_failure(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        pin_child(cpu);
        ::dup2(out[1], 1);
        ::dup2(out[1], 2);
        close_inherited();
        ::execv(exe.c_str(), argv.data());
        ::_exit(127);
    }
    ::close(out[1]);
    program_run r;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(time_limit_s);
    bool killed = false;
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            ::kill(pid, SIGKILL);
            killed = true;
            break;
        }
        pollfd p{out[0], POLLIN, 0};
        const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
        if (n <= 0) continue;
        char buf[4096];
        const ssize_t got = ::read(out[0], buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        r.output.append(buf, static_cast<std::size_t>(got));
    }
    ::close(out[0]);
    while (::wait4(pid, &r.status, 0, &r.usage) < 0 && errno == EINTR) {
    }
    if (killed) throw bench_failure(exe + " did not finish within " + std::to_string(time_limit_s) + " s");
    if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 126)
        throw bench_failure(exe + ": cannot pin it to CPU " + std::to_string(cpu));
    if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 127) throw bench_failure("cannot execute " + exe);
    return r;
}

}  // namespace tern_bench::redis_bench
