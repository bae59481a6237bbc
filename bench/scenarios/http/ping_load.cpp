// http/ping_json's load: the Lua script wrk runs, wrk started on CPU 1 and read back, and the phases of
// run_ping_json (see ping_load.hpp).
#include "ping_load.hpp"

#include "../served.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

namespace tern_bench::ping {

namespace {

using served::one_line;
using served::program_result;
using served::run_program;

constexpr int server_cpu = 0;
constexpr int load_cpu = 1;

// Every wrk thread runs its own copy of the script (its own Lua state); setup() and done() run in the main one,
// which reads the threads' counters through thread:get. wrk's response() is not told which connection or request
// it answers, and a thread has many connections, so each thread keeps the set of sequence numbers it sent and has
// not seen answered: an answer must be 200, JSON, and echo one of them, which it then takes out of the set. A
// number never sent, answered twice or garbled fails the check. Each number is a counter times 1024 plus a random
// part, so a number off by a little (a stale or neighbouring answer) is almost never one in flight; what the check
// cannot see is two answers exchanged between two connections of one wrk thread.
constexpr const char* lua_text = R"lua(-- tern-bench http/ping_json: POST {"sequence": N} to /ping; check every answer.
local threads = {}

function setup(thread)
   thread:set("id", #threads)
   table.insert(threads, thread)
end

checked = 0
bad = 0
first_bad = ""
local sent = 0
local base = 0
local in_flight = {}
-- The request is built by hand rather than with wrk.format, which walks a header table on every call: wrk runs
-- this for each request on its one CPU, and its cost bounds the load it can offer.
local head = "POST /ping HTTP/1.1\r\nHost: " .. wrk.host .. "\r\nContent-Type: application/json\r\nContent-Length: "

function init(args)
   base = id * 2^40  -- the threads' numbers never meet; below 2^53, so Lua's doubles hold them exactly
   math.randomseed(7919 * (id + 1))
end

function request()
   sent = sent + 1
   local n = base + sent * 1024 + math.random(0, 1023)
   in_flight[n] = true
   local body = string.format('{"sequence": %.0f}', n)
   return head .. #body .. "\r\n\r\n" .. body
end

-- Field names are case-insensitive: the usual spelling first, then a search.
local function content_type(headers)
   local value = headers["Content-Type"]
   if value ~= nil then return value end
   for name, v in pairs(headers) do
      if string.lower(name) == "content-type" then return v end
   end
   return nil
end

function response(status, headers, body)
   checked = checked + 1
   local n = tonumber(string.match(body, '^{"sequence":(%d+)}$'))
   local ct = content_type(headers)
   if status == 200 and n ~= nil and in_flight[n] and ct ~= nil and string.lower(ct) == "application/json" then
      in_flight[n] = nil
   else
      bad = bad + 1
      if first_bad == "" then
         first_bad = "status " .. status .. ", Content-Type " .. tostring(ct) .. ", body '" .. body .. "'"
      end
   end
end

function done(summary, latency, requests)
   local all_checked, all_bad, example = 0, 0, ""
   for _, t in ipairs(threads) do
      all_checked = all_checked + t:get("checked")
      all_bad = all_bad + t:get("bad")
      if example == "" then example = t:get("first_bad") end
   end
   local e = summary.errors
   io.write(string.format("tern-bench-wrk requests=%d duration_us=%d p50_us=%.3f p99_us=%.3f connect=%d read=%d " ..
                          "write=%d status=%d timeout=%d checked=%d bad=%d\n",
                          summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
                          e.connect, e.read, e.write, e.status, e.timeout, all_checked, all_bad))
   if example ~= "" then io.write("tern-bench-wrk first_bad " .. example .. "\n") end
end
)lua";

// The script in a temporary file for wrk -s, removed with this object.
class script_file {
public:
    script_file() {
        const char* dir = std::getenv("TMPDIR");
        path_ = std::string(dir && *dir ? dir : "/tmp") + "/tern-bench-ping-XXXXXX.lua";
        int fd = mkstemps(path_.data(), 4);
        if (fd < 0) throw bench_failure("cannot create the wrk script in " + path_ + ": " + std::strerror(errno));
        std::string_view text = lua_text;
        bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
        ::close(fd);
        if (!ok) throw bench_failure("cannot write the wrk script " + path_);
    }
    ~script_file() { ::unlink(path_.c_str()); }
    script_file(const script_file&) = delete;
    script_file& operator=(const script_file&) = delete;

    const std::string& path() const { return path_; }

private:
    std::string path_;
};

std::string find_in_path(const char* name) {
    const char* path = std::getenv("PATH");
    std::string_view rest = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
    while (!rest.empty()) {
        auto colon = rest.find(':');
        std::string dir(rest.substr(0, colon));
        rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
        std::string exe = (dir.empty() ? "." : dir) + "/" + name;
        if (::access(exe.c_str(), X_OK) == 0) return exe;
    }
    return {};
}

// The key=value pairs of the script's summary line, and its example of a wrong answer.
struct wrk_summary {
    std::map<std::string, double> values;
    std::string first_bad;

    double get(const std::string& key, const std::string& output) const {
        auto it = values.find(key);
        if (it == values.end()) throw bench_failure("wrk's summary has no " + key + "; wrk printed: " + output);
        return it->second;
    }
};

wrk_summary parse_summary(const std::string& output) {
    wrk_summary s;
    std::size_t pos = 0;
    while (pos < output.size()) {
        std::size_t eol = output.find('\n', pos);
        std::string_view line(output.data() + pos, (eol == std::string::npos ? output.size() : eol) - pos);
        pos = eol == std::string::npos ? output.size() : eol + 1;
        constexpr std::string_view tag = "tern-bench-wrk ";
        if (line.substr(0, tag.size()) != tag) continue;
        line.remove_prefix(tag.size());
        constexpr std::string_view bad = "first_bad ";
        if (line.substr(0, bad.size()) == bad) {
            s.first_bad = std::string(line.substr(bad.size()));
            continue;
        }
        while (!line.empty()) {
            std::size_t sp = line.find(' ');
            std::string_view kv = line.substr(0, sp);
            line = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
            std::size_t eq = kv.find('=');
            if (eq == std::string_view::npos) continue;
            s.values[std::string(kv.substr(0, eq))] = std::strtod(std::string(kv.substr(eq + 1)).c_str(), nullptr);
        }
    }
    return s;
}

double cpu_seconds(const rusage& r) {
    auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
    return s(r.ru_utime) + s(r.ru_stime);
}

std::string first_line(const std::string& text) {
    std::string line = text.substr(0, text.find('\n'));
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    return line;
}

}  // namespace

// Raises the soft descriptor limit to the hard one when `needed` calls for it; fails when even that is too low.
void raise_fd_limit(std::int64_t needed) {
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) throw bench_failure(std::string("getrlimit: ") + std::strerror(errno));
    if (lim.rlim_cur != RLIM_INFINITY && static_cast<rlim_t>(needed) > lim.rlim_cur) {
        lim.rlim_cur = lim.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &lim) != 0)
            throw bench_failure(std::string("setrlimit: ") + std::strerror(errno));
    }
    if (lim.rlim_cur != RLIM_INFINITY && static_cast<rlim_t>(needed) > lim.rlim_cur)
        throw bench_failure("needs " + std::to_string(needed) + " file descriptors, RLIMIT_NOFILE allows " +
                            std::to_string(lim.rlim_cur));
}

// Instruction mode: the server on one thread, driven over one connection by tern-bench-client (served.hpp). This
// thread waits for the client meanwhile, which an epoll server allows (an io_uring one does not: served.hpp).
void count_ping_json(session& s, server_start start) {
    if (s.param_int("conns") != 1 || s.param_int("threads") != 1)
        throw bench_failure("http/ping_json's instructions are counted with conns=1 and threads=1");
    pin_to_cpu(server_cpu);
    std::unique_ptr<server> srv = start(s, 1);
    served::client client(s, srv->port(), served::protocol::http_ping);
    client.finish();
    srv->stop();
    const server_stats st = srv->stats();
    if (!st.failure.empty()) throw bench_failure("the server failed: " + st.failure);
    if (st.refused != 0) throw bench_failure("the server refused " + std::to_string(st.refused) + " requests");
}

void run_ping_json(session& s, server_start start) {
    if (s.instructions()) return count_ping_json(s, start);
    run_ping_json(s, start, s.param_int("conns"), s.param_int("threads"));
}

void run_ping_json(session& s, server_start start, std::int64_t conns, std::int64_t threads) {
    if (conns < 1 || threads < 1) throw bench_failure("http/ping_json needs conns >= 1 and threads >= 1");
    // wrk needs a connection per thread; Ichor ran one wrk thread for 2 connections and two above.
    const std::int64_t wrk_threads = conns <= 2 ? 1 : 2;

    raise_fd_limit(conns + 64);  // the server's end of every connection (wrk inherits the limit for its own)
    pin_to_cpu(server_cpu);      // before the server exists: its threads inherit it
    s.info("pinning",
           "server threads on CPU " + std::to_string(server_cpu) + ", wrk on CPU " + std::to_string(load_cpu));

    const std::string wrk = find_in_path("wrk");
    if (wrk.empty()) throw bench_failure("wrk is not on PATH (Debian: apt-get install wrk)");
    s.info("wrk", first_line(run_program(wrk, {"-v"}, load_cpu, 10).output));
    script_file script;

    std::unique_ptr<server> srv = start(s, static_cast<int>(threads));
    const std::string url = "http://127.0.0.1:" + std::to_string(srv->port()) + "/ping";

    for (const phase& p : s.phases()) {
        const long seconds = std::max(1L, std::lround(p.seconds));
        const std::vector<std::string> args = {"-t", std::to_string(wrk_threads), "-c", std::to_string(conns),
                                               "-d", std::to_string(seconds) + "s", "--timeout", "2s", "--latency",
                                               "-s", script.path(), url};
        if (p.index == 0) {
            std::string command = "wrk";
            for (auto& a : args) command += " " + a;
            s.info("wrk_command", command);
        }
        const server_stats before = srv->stats();
        rusage r0{};
        ::getrusage(RUSAGE_SELF, &r0);
        program_result w = run_program(wrk, args, load_cpu, static_cast<double>(seconds) + 60);
        // The server closes the connections wrk left: that belongs to this phase's cost, like their setup.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        rusage r1{};
        ::getrusage(RUSAGE_SELF, &r1);
        const server_stats after = srv->stats();

        const std::string where = std::string(p.warmup ? "warm-up" : "repetition " + std::to_string(p.index)) + ": ";
        if (!after.failure.empty()) throw bench_failure(where + "the server failed: " + after.failure);
        if (!WIFEXITED(w.status) || WEXITSTATUS(w.status) != 0)
            throw bench_failure(where + "wrk ended with status " + std::to_string(w.status) + ": " +
                                one_line(w.output));
        wrk_summary sum = parse_summary(w.output);
        auto v = [&](const char* key) { return sum.get(key, one_line(w.output)); };
        const double requests = v("requests");
        for (const char* e : {"connect", "read", "write", "status", "timeout"})
            if (v(e) != 0)
                throw bench_failure(where + "wrk counted " + std::to_string(static_cast<long long>(v(e))) + " " + e +
                                    " errors; it printed: " + one_line(w.output));
        if (v("bad") != 0)
            throw bench_failure(where + std::to_string(static_cast<long long>(v("bad"))) +
                                " wrong answers, the first: " + sum.first_bad);
        if (v("checked") != requests)
            throw bench_failure(where + "the script checked " + std::to_string(v("checked")) + " answers of " +
                                std::to_string(requests));
        if (requests <= 0) throw bench_failure(where + "wrk completed no request: " + one_line(w.output));
        if (after.refused != before.refused)
            throw bench_failure(where + "the server refused " + std::to_string(after.refused - before.refused) +
                                " requests");
        const double answered = static_cast<double>(after.answered - before.answered);
        if (answered < requests)
            throw bench_failure(where + "wrk counted " + std::to_string(requests) + " answers, the server gave " +
                                std::to_string(answered));
        const double duration_s = v("duration_us") / 1e6;
        // Whether wrk, on its own CPU, had time to spare: near 100% it, not the server, may set the pace.
        s.info("wrk_cpu_pct", std::to_string(static_cast<int>(std::lround(cpu_seconds(w.usage) * 100 / duration_s))));
        s.report(p, {{"req_per_s", requests / duration_s},
                     {"p50_us", v("p50_us")},
                     {"p99_us", v("p99_us")},
                     {"server_cpu_us_per_req", (cpu_seconds(r1) - cpu_seconds(r0)) * 1e6 / answered}});
    }
    srv->stop();
    if (auto f = srv->stats().failure; !f.empty()) throw bench_failure("the server failed: " + f);

    rusage self{};
    ::getrusage(RUSAGE_SELF, &self);
    s.info("peak_rss_bytes", std::to_string(static_cast<long long>(self.ru_maxrss) * 1024));
}

}  // namespace tern_bench::ping
