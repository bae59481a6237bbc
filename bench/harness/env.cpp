#include "env.hpp"

#include "build_info.hpp"

#include <asio/version.hpp>  // only the ASIO_VERSION macro: no Asio code enters this binary

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <fstream>

namespace tern_bench {

namespace {

std::string trim(std::string s) {
    auto b = s.find_first_not_of(" \t\n\r");
    auto e = s.find_last_not_of(" \t\n\r");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string read_first_line(const char* path) {
    std::ifstream f(path);
    std::string line;
    std::getline(f, line);
    return trim(line);
}

// "model name (family F model M stepping S)" from the first processor of /proc/cpuinfo: a VM often shows only a
// generic name, and the family and model still identify the microarchitecture.
std::string cpu_model() {
    std::ifstream f("/proc/cpuinfo");
    std::string line, name = "unknown", family, model, stepping;
    auto value = [&] { return trim(line.substr(line.find(':') + 1)); };
    while (std::getline(f, line) && !line.empty()) {
        if (line.rfind("model name", 0) == 0)
            name = value();
        else if (line.rfind("cpu family", 0) == 0)
            family = value();
        else if (line.rfind("model", 0) == 0)
            model = value();
        else if (line.rfind("stepping", 0) == 0)
            stepping = value();
    }
    if (family.empty()) return name;
    return name + " (family " + family + " model " + model + " stepping " + stepping + ")";
}

// Output of a shell command, trimmed; empty on failure.
std::string command_output(const std::string& cmd) {
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return {};
    std::string out;
    std::array<char, 256> buf;
    while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
    pclose(p);
    return trim(out);
}

std::string git_commit() {
    std::string dir = TERN_BENCH_SOURCE_DIR;
    std::string head = command_output("git -C '" + dir + "' rev-parse HEAD 2>/dev/null");
    if (head.empty()) return "none (no commit yet in " + dir + ")";
    std::string dirty = command_output("git -C '" + dir + "' status --porcelain 2>/dev/null | head -1");
    return head + (dirty.empty() ? "" : " (working tree has uncommitted changes)");
}

std::string utc_now() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return buf;
}

std::string asio_version() {
    return std::to_string(ASIO_VERSION / 100000) + "." + std::to_string(ASIO_VERSION / 100 % 1000) + "." +
           std::to_string(ASIO_VERSION % 100) + " (standalone, header-only)";
}

}  // namespace

std::string load_average() { return read_first_line("/proc/loadavg"); }

environment collect_environment(const std::string& pinning) {
    environment env;
    auto add = [&](std::string k, std::string v) { env.fields.emplace_back(std::move(k), std::move(v)); };
    utsname u{};
    uname(&u);
    add("date", utc_now());
    add("cpu", cpu_model());
    add("cpus", std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " online (" +
                    read_first_line("/sys/devices/system/cpu/online") + ")");
    add("kernel", std::string(u.sysname) + " " + u.release + " " + u.version + " " + u.machine);
    add("compiler", TERN_BENCH_COMPILER);
    add("build", std::string(TERN_BENCH_BUILD_TYPE) + ", flags: " + TERN_BENCH_CXX_FLAGS);
    add("liburing", TERN_BENCH_LIBURING_VERSION);
    add("asio", asio_version());
    add("asio configs", std::string("epoll: ") + TERN_BENCH_ASIO_EPOLL_DEFINES + "; io_uring: " +
                            TERN_BENCH_ASIO_URING_DEFINES + "; io_context concurrency_hint 1");
#ifdef TERN_BENCH_OPENSSL_VERSION
    add("openssl", std::string(TERN_BENCH_OPENSSL_VERSION) +
                       " (tls/*: tern::tls and asio::ssl link the same library; TLS 1.3, TLS_AES_128_GCM_SHA256, P-256)");
#endif
    std::string wrk = command_output("wrk -v 2>&1 | head -1");
    add("http comparators", std::string(TERN_BENCH_HTTP_VERSIONS) + "; " + (wrk.empty() ? "wrk not found" : wrk));
    add("tern", TERN_BENCH_TERN_VERSION);
    add("commit", git_commit());
    add("io_uring_disabled", read_first_line("/proc/sys/kernel/io_uring_disabled"));
    add("pinning", pinning);
    const char* data_file = std::getenv("TERN_BENCH_FILE");
    add("files", std::string("data file ") + (data_file && *data_file ? data_file : "/var/tmp/tern-bench/data-<MiB>M") +
                     " (made once, reused); the page cache is never dropped: a buffered point reads the whole file "
                     "once before its phases, direct points bypass the cache; workers report file_resident_pct");
    add("load average at start", load_average());
    return env;
}

std::string format_text(const environment& env) {
    std::size_t w = 0;
    for (auto& [k, v] : env.fields) w = std::max(w, k.size());
    std::string out;
    for (auto& [k, v] : env.fields) out += k + std::string(w - k.size(), ' ') + " : " + v + "\n";
    return out;
}

std::string format_markdown(const environment& env) {
    std::string out;
    for (auto& [k, v] : env.fields) out += "- **" + k + "**: " + v + "\n";
    return out;
}

}  // namespace tern_bench
