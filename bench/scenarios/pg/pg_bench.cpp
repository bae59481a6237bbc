// The PostgreSQL cluster of a pg/* run (see pg_bench.hpp).
#include "pg_bench.hpp"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace tern_bench::pg_bench {

namespace {

std::string server_bin_dir() {
    std::string best;
    int best_version = -1;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
        const int version = std::atoi(e.path().filename().c_str());
        if (std::filesystem::exists(e.path() / "bin" / "pg_ctl") && version > best_version) {
            best_version = version;
            best = (e.path() / "bin").string();
        }
    }
    if (best.empty()) throw bench_failure("no PostgreSQL server under /usr/lib/postgresql (Debian: postgresql)");
    return best;
}

std::string as_server_user() { return ::geteuid() == 0 ? "setpriv --reuid=postgres --regid=postgres --clear-groups " : ""; }

// Runs a shell command pinned to cpu; its exit status.
int run_pinned_shell(const std::string& command, int cpu) {
    const pid_t pid = ::fork();
    if (pid < 0) throw bench_failure(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (::sched_setaffinity(0, sizeof set, &set) != 0) ::_exit(126);
        ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void run(const std::string& command, const std::string& log) {
    if (run_pinned_shell(command, server_cpu) != 0) throw bench_failure("failed: " + command + " (see " + log + ")");
}

}  // namespace

cluster::cluster() : bin_(server_bin_dir()) {
    char dir[] = "/tmp/tern-bench-pg-XXXXXX";
    if (::mkdtemp(dir) == nullptr) throw bench_failure(std::string("mkdtemp: ") + std::strerror(errno));
    dir_ = dir;
    if (::geteuid() == 0) run("chown postgres:postgres " + dir_, dir_);
    const std::string data = dir_ + "/data";
    const std::string log = dir_ + "/initdb.log";
    run("cd " + dir_ + " && " + as_server_user() + bin_ + "/initdb -D " + data +
            " -U bench --auth=trust --no-sync -E UTF8 --locale=C > " + log + " 2>&1",
        log);
    {
        std::ofstream conf(data + "/postgresql.conf", std::ios::app);
        conf << "listen_addresses = ''\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
             << "max_connections = 50\nshared_buffers = 128MB\nmax_wal_size = 1GB\n";
    }
    const std::string server_log = dir_ + "/server.log";
    run(as_server_user() + bin_ + "/pg_ctl -D " + data + " -l " + server_log + " -w -t 60 -o \"-p " +
            std::to_string(port_) + " -k " + dir_ + "\" start > /dev/null",
        server_log);
    started_ = true;
}

cluster::~cluster() {
    if (started_)
        (void)run_pinned_shell(as_server_user() + bin_ + "/pg_ctl -D " + dir_ + "/data -m immediate -w -t 60 stop > /dev/null 2>&1",
                               server_cpu);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

void append_copy_rows(std::string& out, int& next, int n, std::size_t chunk) {
    char line[64];
    while (next < n && out.size() < chunk) {
        char* at = std::to_chars(line, line + 16, next).ptr;
        *at++ = '\t';
        char name[16];
        const std::size_t len = row_name(name, next);
        std::memcpy(at, name, len);
        at += len;
        *at++ = '\t';
        at = std::to_chars(at, line + sizeof line - 1, row_value(next)).ptr;
        *at++ = '\n';
        out.append(line, static_cast<std::size_t>(at - line));
        ++next;
    }
}

int rows_of(const session& s) {
    const std::int64_t n = s.param_int("n");
    if (n < 1 || n > 10'000'000) throw bench_failure("n must be from 1 to 10^7");
    return static_cast<int>(n);
}

bool copy_mode(const session& s) {
    const auto& mode = s.request().params.at("mode");
    if (mode != "insert" && mode != "copy") throw bench_failure("mode must be insert or copy, not " + mode);
    return mode == "copy";
}

void check_checksum(std::string_view got, std::int64_t n) {
    const std::string want = expected_checksum(n);
    if (got != want)
        throw bench_failure("bench_rows after the round: count, sum(id), sum(4 value), named = " + std::string(got) +
                            ", expected " + want);
}

void announce(session& s, const cluster& c) {
    (void)c;
    s.info("postgresql", server_bin_dir());
    s.info("pinning", "client on CPU " + std::to_string(client_cpu) + ", postgres (postmaster and backends) on CPU " +
                          std::to_string(server_cpu) + " (Unix socket)");
}

}  // namespace tern_bench::pg_bench
