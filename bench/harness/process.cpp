#include "process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

namespace tern_bench {

std::string child_result::describe() const {
    if (!started) return "could not start: " + error;
    if (timed_out) return "killed after exceeding its time limit";
    if (term_signal) return std::string("killed by signal ") + strsignal(term_signal);
    return "exit code " + std::to_string(exit_code);
}

std::string self_directory() {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return ".";
    std::string path(buf, static_cast<std::size_t>(n));
    auto slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

namespace {

// Reads what is available on fd into buf; returns false at EOF or error.
bool drain(int fd, std::string& buf) {
    char chunk[4096];
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n > 0) {
        buf.append(chunk, static_cast<std::size_t>(n));
        return true;
    }
    return n < 0 && (errno == EINTR || errno == EAGAIN);
}

}  // namespace

child_result run_child(const std::string& exe, const std::vector<std::string>& args,
                       const std::function<void(std::string_view)>& on_line, double time_limit_s) {
    child_result r;
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0) {
        r.error = std::strerror(errno);
        return r;
    }
    if (pipe2(err, O_CLOEXEC) != 0) {
        r.error = std::strerror(errno);
        close(out[0]);
        close(out[1]);
        return r;
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);

    auto t0 = std::chrono::steady_clock::now();
    pid_t pid = fork();
    if (pid < 0) {
        r.error = std::strerror(errno);
        for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
        return r;
    }
    if (pid == 0) {
        // Child: only async-signal-safe calls until exec.
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        execv(exe.c_str(), argv.data());
        const char msg[] = "exec failed\n";
        ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)ignored;
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    r.started = true;

    std::string out_buf, err_buf;
    bool out_open = true, err_open = true;
    auto deadline = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(time_limit_s));
    while (out_open || err_open) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            // Only this child, by its pid: a hung worker must not hang the whole suite.
            kill(pid, SIGKILL);
            r.timed_out = true;
            break;
        }
        pollfd fds[2] = {{out_open ? out[0] : -1, POLLIN, 0}, {err_open ? err[0] : -1, POLLIN, 0}};
        int n = poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 1000)));
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        if (fds[0].revents && !(out_open = drain(out[0], out_buf))) close(out[0]);
        if (fds[1].revents && !(err_open = drain(err[0], err_buf))) close(err[0]);
        std::size_t nl;
        while ((nl = out_buf.find('\n')) != std::string::npos) {
            on_line(std::string_view(out_buf).substr(0, nl));
            out_buf.erase(0, nl + 1);
        }
    }
    if (out_open) close(out[0]);
    if (err_open) close(err[0]);
    if (!out_buf.empty()) on_line(out_buf);

    int status = 0;
    rusage ru{};
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.peak_rss_bytes = ru.ru_maxrss * 1024L;  // Linux reports kilobytes
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
    r.stderr_text = std::move(err_buf);
    return r;
}

}  // namespace tern_bench
