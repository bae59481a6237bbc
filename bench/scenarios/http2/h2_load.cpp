// http2/*'s load: h2load on CPU 1 and its output read back, nghttp's checked pass, and the phases (h2_load.hpp).
#include "h2_load.hpp"

#include "../http/ping_service.hpp"
#include "../served.hpp"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tern_bench::h2 {

namespace {

using served::one_line;
using served::program_result;
using served::run_program;

constexpr int server_cpu = 0;
constexpr int load_cpu = 1;
constexpr std::int64_t checked_streams = 16;

// A temporary file, removed with this object.
class temp_file {
public:
    explicit temp_file(const std::string& suffix) {
        const char* dir = std::getenv("TMPDIR");
        path_ = std::string(dir && *dir ? dir : "/tmp") + "/tern-bench-h2-XXXXXX" + suffix;
        const int fd = ::mkstemps(path_.data(), static_cast<int>(suffix.size()));
        if (fd < 0) throw bench_failure("cannot create " + path_ + ": " + std::strerror(errno));
        ::close(fd);
    }
    ~temp_file() { ::unlink(path_.c_str()); }
    temp_file(const temp_file&) = delete;
    temp_file& operator=(const temp_file&) = delete;

    const std::string& path() const { return path_; }
    void write(std::string_view text) const {
        std::ofstream out(path_, std::ios::binary | std::ios::trunc);
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        if (!out) throw bench_failure("cannot write " + path_);
    }
    std::string read() const {
        std::ifstream in(path_, std::ios::binary);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    }

private:
    std::string path_;
};

double cpu_seconds() {
    rusage r{};
    ::getrusage(RUSAGE_SELF, &r);
    auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
    return s(r.ru_utime) + s(r.ru_stime);
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

void check_exit(const program_result& r, const std::string& what) {
    if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
        throw bench_failure(what + " failed (status " + std::to_string(r.status) + "): " + one_line(r.output));
}

// The line of h2load's output that starts with `label`, from the label on.
std::string line_of(const std::string& output, const std::string& label) {
    const auto at = output.find(label);
    if (at == std::string::npos) throw bench_failure("h2load printed no '" + label + "': " + one_line(output));
    const auto eol = output.find('\n', at);
    return output.substr(at, eol == std::string::npos ? eol : eol - at);
}

struct h2load_result {
    double requests = 0;    // succeeded
    double duration_s = 0;  // "finished in"
    std::vector<double> latencies_us;
};

// One h2load run: fails on any request that did not succeed or was not answered 2xx.
h2load_result run_h2load(session& s, const std::string& h2load, std::vector<std::string> args, double seconds,
                         const phase& p) {
    temp_file log(".log");
    args.insert(args.begin(), {"--log-file=" + log.path(), "-D", std::to_string(std::max(1L, std::lround(seconds)))});
    if (p.index == 0) {
        std::string command = "h2load";
        for (auto& a : args) command += " " + a;
        s.info("h2load_command", command);
    }
    const program_result r = run_program(h2load, args, load_cpu, seconds + 60);
    check_exit(r, "h2load");
    const std::string where = p.warmup ? "warm-up: " : "repetition " + std::to_string(p.index) + ": ";
    double req[7] = {}, codes[4] = {}, fin = 0;
    const bool read =
        std::sscanf(line_of(r.output, "requests: ").c_str(),
                    "requests: %lf total, %lf started, %lf done, %lf succeeded, %lf failed, %lf errored, %lf timeout",
                    &req[0], &req[1], &req[2], &req[3], &req[4], &req[5], &req[6]) == 7 &&
        std::sscanf(line_of(r.output, "status codes: ").c_str(), "status codes: %lf 2xx, %lf 3xx, %lf 4xx, %lf 5xx",
                    &codes[0], &codes[1], &codes[2], &codes[3]) == 4 &&
        std::sscanf(line_of(r.output, "finished in ").c_str(), "finished in %lfs", &fin) == 1;
    if (!read || fin <= 0) throw bench_failure(where + "cannot read h2load's summary: " + one_line(r.output));
    if (req[4] != 0 || req[5] != 0 || req[6] != 0)
        throw bench_failure(where + "h2load counted failed, errored or timed-out requests: " + one_line(r.output));
    // A status is counted when its headers arrive: a stream cut by the end of the run may have one without being
    // done, so the 2xx count lies between the succeeded and the started.
    if (req[3] <= 0 || codes[0] < req[3] || codes[0] > req[1] || codes[1] + codes[2] + codes[3] != 0)
        throw bench_failure(where + "h2load saw answers other than 2xx: " + one_line(r.output));
    // h2load -D prints "finished in" as the whole run's time, which includes the connections' setup.
    h2load_result out{req[3], fin, {}};
    // --log-file: start time (us since the epoch), status, microseconds to the end of the response.
    std::ifstream in(log.path());
    std::string line;
    while (std::getline(in, line)) {
        const auto t1 = line.find('\t');
        const auto t2 = line.find('\t', t1 + 1);
        if (t1 == std::string::npos || t2 == std::string::npos) continue;
        out.latencies_us.push_back(std::strtod(line.c_str() + t2 + 1, nullptr));
    }
    if (out.latencies_us.empty()) throw bench_failure(where + "h2load's log holds no request");
    return out;
}

double percentile(std::vector<double>& v, double q) {
    const auto k = static_cast<std::size_t>(std::min<double>(static_cast<double>(v.size()) - 1,
                                                             std::floor(q / 100 * static_cast<double>(v.size()))));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
}

std::string find_tool(const char* name) {
    for (const char* dir : {"/usr/bin/", "/usr/local/bin/", "/bin/"}) {
        std::string exe = std::string(dir) + name;
        if (::access(exe.c_str(), X_OK) == 0) return exe;
    }
    throw bench_failure(std::string(name) + " is not installed (Debian: apt-get install nghttp2-client)");
}

void check_server(const ping::server& srv, const ping::server_stats& before, const std::string& where) {
    const ping::server_stats st = srv.stats();
    if (!st.failure.empty()) throw bench_failure(where + "the server failed: " + st.failure);
    if (st.refused != before.refused)
        throw bench_failure(where + "the server refused " + std::to_string(st.refused - before.refused) +
                            " requests");
}

struct setup {
    std::string h2load = find_tool("h2load");
    std::string nghttp = find_tool("nghttp");
};

setup start_load(session& s, std::int64_t conns) {
    ping::raise_fd_limit(conns + 64);
    pin_to_cpu(server_cpu);  // before the server exists: its threads inherit it
    s.info("pinning",
           "server threads on CPU " + std::to_string(server_cpu) + ", h2load on CPU " + std::to_string(load_cpu));
    setup t;
    s.info("h2load", first_line(run_program(t.h2load, {"--version"}, load_cpu, 10).output));
    return t;
}

}  // namespace

const char* body_bytes() {
    static const std::string bytes = [] {
        std::string b(max_body_size, '\0');
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = body_byte(i);
        return b;
    }();
    return bytes.data();
}

long long bytes_size(std::string_view target) {
    if (target.substr(0, bytes_prefix.size()) != bytes_prefix) return -1;
    target.remove_prefix(bytes_prefix.size());
    unsigned long long n = 0;
    auto [p, ec] = std::from_chars(target.data(), target.data() + target.size(), n);
    if (ec != std::errc() || p != target.data() + target.size() || n > max_body_size) return -1;
    return static_cast<long long>(n);
}

// Instruction mode: the server on its own thread, driven over one connection by tern-bench-client (../served.hpp)
// while this thread waits for the client, which an epoll server allows (an io_uring one does not).
void count_ping(session& s, ping::server_start start) {
    if (s.param_int("conns") != 1 || s.param_int("streams") < 1)
        throw bench_failure("http2/ping_json's instructions are counted with conns=1");
    const std::int64_t body = s.request().params.count("body") ? s.param_int("body") : 0;
    pin_to_cpu(server_cpu);
    std::unique_ptr<ping::server> srv = start(s, 1);
    served::client client(s, srv->port(), body > 0 ? served::protocol::h2_upload : served::protocol::h2_ping,
                          static_cast<std::size_t>(body), {}, static_cast<std::uint64_t>(s.param_int("streams")));
    client.finish();
    srv->stop();
    const ping::server_stats st = srv->stats();
    if (!st.failure.empty()) throw bench_failure("the server failed: " + st.failure);
    if (st.refused != 0) throw bench_failure("the server refused " + std::to_string(st.refused) + " requests");
}

void run_ping(session& s, ping::server_start start) {
    if (s.instructions()) return count_ping(s, start);
    const std::int64_t conns = s.param_int("conns");
    const std::int64_t streams = s.param_int("streams");
    if (conns < 1 || streams < 1) throw bench_failure("http2/ping_json needs conns >= 1 and streams >= 1");
    const setup tools = start_load(s, conns);
    std::unique_ptr<ping::server> srv = start(s, 1);
    const std::string url = "http://127.0.0.1:" + std::to_string(srv->port()) + std::string(ping::path);
    temp_file body(".json");
    std::mt19937_64 rng(7919);

    for (const phase& p : s.phases()) {
        const std::string where = p.warmup ? "warm-up: " : "repetition " + std::to_string(p.index) + ": ";
        const std::uint64_t load_seq = rng() >> 1;
        body.write("{\"sequence\": " + std::to_string(load_seq) + "}");
        const ping::server_stats before = srv->stats();
        const double cpu0 = cpu_seconds();
        h2load_result h = run_h2load(s, tools.h2load,
                                     {"-c", std::to_string(conns), "-m", std::to_string(streams), "-t", "1", "-d",
                                      body.path(), "-H", "content-type: application/json", url},
                                     p.seconds, p);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the server closes h2load's connections
        const double cpu1 = cpu_seconds();
        const ping::server_stats after = srv->stats();
        check_server(*srv, before, where);
        const double answered = static_cast<double>(after.answered - before.answered);
        if (answered < h.requests)
            throw bench_failure(where + "h2load counted " + std::to_string(h.requests) + " answers, the server gave " +
                                std::to_string(answered));

        // The checked pass: a fresh sequence on concurrent streams of one connection, every body compared.
        const std::uint64_t seq = rng() >> 1;
        body.write("{\"sequence\": " + std::to_string(seq) + "}");
        const std::int64_t k = std::min(streams, checked_streams);
        std::vector<std::string> args = {"-d", body.path(), "-H", "content-type: application/json"};
        // Distinct targets (nghttp requests a URI once), the same path: the query is not the route's.
        for (std::int64_t i = 0; i < k; ++i) args.push_back(url + "?stream=" + std::to_string(i));
        const program_result c = run_program(tools.nghttp, args, load_cpu, 30);
        check_exit(c, "nghttp's checked pass");
        std::string expected;
        for (std::int64_t i = 0; i < k; ++i) expected += "{\"sequence\":" + std::to_string(seq) + "}";
        if (c.output != expected)
            throw bench_failure(where + "wrong answers to the checked pass: expected " + std::to_string(k) +
                                " times {\"sequence\":" + std::to_string(seq) + "}, got '" + one_line(c.output) + "'");
        check_server(*srv, before, where);

        s.report(p, {{"req_per_s", h.requests / h.duration_s},
                     {"p50_us", percentile(h.latencies_us, 50)},
                     {"p99_us", percentile(h.latencies_us, 99)},
                     {"server_cpu_us_per_req", (cpu1 - cpu0) * 1e6 / answered}});
    }
    srv->stop();
    if (auto f = srv->stats().failure; !f.empty()) throw bench_failure("the server failed: " + f);
    rusage self{};
    ::getrusage(RUSAGE_SELF, &self);
    s.info("peak_rss_bytes", std::to_string(static_cast<long long>(self.ru_maxrss) * 1024));
}

void run_streams(session& s, ping::server_start start) {
    const std::int64_t streams = s.param_int("streams");
    const std::int64_t size = s.param_int("size");
    if (streams < 1 || size < 0 || static_cast<std::size_t>(size) > max_body_size)
        throw bench_failure("http2/streams needs streams >= 1 and 0 <= size <= " + std::to_string(max_body_size));
    const setup tools = start_load(s, 1);
    std::unique_ptr<ping::server> srv = start(s, 1);
    const std::string url = "http://127.0.0.1:" + std::to_string(srv->port()) + std::string(bytes_prefix) +
                            std::to_string(size);
    const std::string_view expected(body_bytes(), static_cast<std::size_t>(size));

    for (const phase& p : s.phases()) {
        const std::string where = p.warmup ? "warm-up: " : "repetition " + std::to_string(p.index) + ": ";
        const ping::server_stats before = srv->stats();
        const double cpu0 = cpu_seconds();
        h2load_result h =
            run_h2load(s, tools.h2load, {"-c", "1", "-m", std::to_string(streams), "-t", "1", url}, p.seconds, p);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const double cpu1 = cpu_seconds();
        check_server(*srv, before, where);

        const program_result c = run_program(tools.nghttp, {url}, load_cpu, 30);
        check_exit(c, "nghttp's checked pass");
        if (c.output != expected)
            throw bench_failure(where + "the checked download of " + std::to_string(size) + " bytes got " +
                                std::to_string(c.output.size()) + " bytes, not the pattern");

        s.report(p, {{"mb_per_s", h.requests * static_cast<double>(size) / h.duration_s / 1e6},
                     {"req_per_s", h.requests / h.duration_s},
                     {"server_cpu_us_per_req", (cpu1 - cpu0) * 1e6 / h.requests}});
    }
    srv->stop();
    if (auto f = srv->stats().failure; !f.empty()) throw bench_failure("the server failed: " + f);
}

}  // namespace tern_bench::h2
