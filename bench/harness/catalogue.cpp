#include "catalogue.hpp"

#include "json.hpp"

#include <algorithm>
#include <stdexcept>

namespace tern_bench {

std::string to_string(const param_value& v) {
    if (auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
    return std::get<std::string>(v);
}

std::string to_json(const param_list& p) {
    json::object_writer w;
    for (auto& [k, v] : p) {
        if (auto* i = std::get_if<std::int64_t>(&v))
            w.field(k, *i);
        else
            w.field(k, std::get<std::string>(v));
    }
    return w.str();
}

std::string to_display(const param_list& p) {
    std::string out;
    for (auto& [k, v] : p) {
        if (!out.empty()) out += ' ';
        out += k + "=" + to_string(v);
    }
    return out.empty() ? "-" : out;
}

const param_value* find_param(const param_list& p, std::string_view key) {
    for (auto& [k, v] : p)
        if (k == key) return &v;
    return nullptr;
}

const metric_def* scenario_def::find_metric(std::string_view metric) const {
    for (auto& m : metrics)
        if (m.name == metric) return &m;
    return nullptr;
}

const metric_def* scenario_def::find_instr_metric(std::string_view metric) const {
    for (auto& m : instr_metrics)
        if (m.name == metric) return &m;
    return nullptr;
}

bool scenario_def::is_comparator(std::string_view impl) const {
    if (comparators.empty()) return impl.rfind("asio/", 0) == 0;
    for (auto& prefix : comparators) {
        // An entry that is itself one of the scenario's implementations names that one alone: raw/nghttp2, not
        // raw/nghttp2_uring beside it (http2/*); any other is a prefix (raw/libpq: raw/libpq_pipeline and
        // raw/libpq_blocking).
        if (std::find(impls.begin(), impls.end(), prefix) != impls.end()) {
            if (impl == prefix) return true;
        } else if (impl.rfind(prefix, 0) == 0) {
            return true;
        }
    }
    return false;
}

std::string scenario_def::comparator_name() const {
    if (comparators.empty()) return "asio";
    std::string out;
    for (auto& prefix : comparators) {
        if (!out.empty()) out += ", ";
        out += prefix.substr(0, prefix.find('/'));
    }
    return out;
}

namespace {

param_list one(std::string key, std::int64_t v) { return {{std::move(key), v}}; }

std::vector<param_list> sweep(const std::string& key, std::initializer_list<std::int64_t> values) {
    std::vector<param_list> out;
    for (auto v : values) out.push_back(one(key, v));
    return out;
}

constexpr std::int64_t K = 1024;
constexpr std::int64_t M = 1024 * 1024;

const std::vector<std::string> all_runtimes = {"tern/io_uring", "tern/epoll", "asio/callbacks", "asio/coroutines"};
const std::vector<std::string> coroutine_runtimes = {"tern/io_uring", "tern/epoll", "asio/coroutines"};

std::vector<metric_def> latency_metrics() {
    std::vector<metric_def> m;
    for (const char* name : {"mean_us", "p50_us", "p90_us", "p99_us", "p99_9_us", "max_us"})
        m.push_back({name, "us", better::lower});
    return m;
}

// ---- sockets and http: loopback TCP with TCP_NODELAY, every byte verified, setup never measured ----

param_list with_case(std::string name, param_list rest) {
    rest.insert(rest.begin(), {"case", std::move(name)});
    return rest;
}

std::int64_t int_param(const param_list& p, std::string_view key) {
    const param_value* v = find_param(p, key);
    return v ? std::get<std::int64_t>(*v) : 0;
}

// Two descriptors per connection (client and server end, or the two ends of a socketpair), plus a margin for the
// runtimes' own: stdio, rings, epoll and event fds, listeners, a second loop.
constexpr std::int64_t fd_margin = 64;
std::int64_t fds_per_pair(const param_list& p, std::string_view key) { return 2 * int_param(p, key) + fd_margin; }
std::int64_t echo_fds(const param_list& p) { return fds_per_pair(p, "sessions"); }
std::int64_t conns_fds(const param_list& p) { return fds_per_pair(p, "conns"); }
// sockets/idle_connections: server and client are separate processes, each holding one end of every connection.
std::int64_t idle_fds(const param_list& p) { return int_param(p, "conns") + fd_margin; }
std::int64_t io_event_fds(const param_list& p) { return fds_per_pair(p, "pairs"); }
// http/ping_json: the server holds one descriptor per connection (wrk, its child, holds the other end under its
// own limit, inherited).
std::int64_t ping_fds(const param_list& p) { return int_param(p, "conns") + fd_margin; }

// Short timed repetitions in the quick profile: every socket scenario reaches its steady state within
// milliseconds, and 0.3 s still holds tens of thousands of round trips.
constexpr double socket_quick_s = 0.3;

void add_socket_scenarios(std::vector<scenario_def>& s) {
    auto with_raw = [](const char* raw) {
        auto v = all_runtimes;
        v.push_back(raw);
        return v;
    };
    // echo and messages: the raw liburing floor (TERN_BENCH_RAW_FIXED=1 puts its connections in the ring's file
    // table; measured not to pay, so not a row of its own: bench/README.md).
    const auto with_floor = with_raw("raw/liburing");
    const std::vector<std::int64_t> sizes = {1 * K, 4 * K, 16 * K, 64 * K, 256 * K, 1 * M};

    scenario_def uni{"sockets/unidirectional", "sockets",
                     "one writer task writes `size`-byte buffers, one reader task reads into a `size`-byte buffer, "
                     "both on one thread over one loopback connection; the stream is a position-dependent pattern "
                     "and every received byte is checked at its offset; MB/s (10^6 bytes) received",
                     {{"mb_per_s", "MB/s", better::higher}},
                     sweep("size", {4 * K, 64 * K}),
                     {},
                     true, true, with_raw("raw/liburing")};
    for (auto v : sizes) uni.full_points.push_back(one("size", v));
    uni.quick_duration_s = socket_quick_s;
    s.push_back(uni);

    scenario_def bi = uni;
    bi.name = "sockets/bidirectional";
    bi.summary = "both directions at once on one loopback connection: a writer and a reader task on each end (four "
                 "tasks, one thread), `size`-byte buffers, every byte checked; combined MB/s received by both readers";
    bi.quick_points = sweep("size", {64 * K});
    s.push_back(bi);

    auto cross = with_raw("raw/blocking");
    cross.push_back("tern/io_uring-latency");
    cross.push_back("tern/epoll-latency");
    s.push_back({"sockets/pingpong_cross_thread", "sockets",
                 "sockets/pingpong with the client and the server on separate threads, each running its own loop "
                 "(tern: two io_contexts on two std::threads; Asio: two io_contexts), client pinned to CPU 0 and "
                 "server to CPU 1; every byte verified. Each hop wakes the other vCPU: on this VM that costs tens of "
                 "microseconds whenever the peer has gone idle, and that cost is part of the figure (raw/blocking "
                 "shows what the kernel alone charges for it). tern's loops poll for up to 200 us before they park "
                 "(io_context_options::spin_before_park), which is how they avoid most of those wake-ups; in latency "
                 "mode (the -latency implementations) they never park; Asio's loops have no such option and park "
                 "after every message",
                 latency_metrics(),
                 sweep("size", {64}),
                 sweep("size", {1, 64, 1024}),
                 true, false, cross, socket_quick_s});

    s.push_back({"sockets/concurrent_pairs", "sockets",
                 "`pairs` client/server pairs on one thread, each ping-ponging 64 B (write, read the echo, verify) "
                 "independently; round-trip latency over all pairs (it grows with the pairs that share the loop)",
                 latency_metrics(),
                 sweep("pairs", {4, 16}),
                 sweep("pairs", {1, 4, 16}),
                 true, true, all_runtimes, socket_quick_s});

    scenario_def echo{"sockets/echo", "sockets",
                      "asio client2/server2 (evpp's throughput method): no framing; each session sends one block of "
                      "`blocksize`, then client and server echo whatever arrives (read_some, write it all, read "
                      "again), so one block circulates per session; the client's loop runs on CPU 0 and the server's "
                      "on CPU 1 (threads=1 per side, as the single-thread runs pinned client and server to separate "
                      "CPUs); one buffer per session where client2 keeps up to 10 (tern allows one pending read and "
                      "one pending write per socket, so every stack does the same); every byte checked; MiB/s read "
                      "by the client",
                      {{"mib_per_s", "MiB/s", better::higher}},
                      {},
                      {},
                      true, false, with_floor, socket_quick_s, echo_fds};
    for (auto [b, n] : {std::pair<std::int64_t, std::int64_t>{8 * K, 10}, {8 * K, 1000}})
        echo.quick_points.push_back({{"blocksize", b}, {"sessions", n}, {"threads", std::int64_t{1}}});
    for (auto b : {1 * K, 2 * K, 4 * K, 8 * K, 16 * K, 80 * K})
        for (std::int64_t n : {1, 10, 100, 1000, 10000})
            echo.full_points.push_back({{"blocksize", b}, {"sessions", n}, {"threads", std::int64_t{1}}});
    s.push_back(echo);

    s.push_back({"sockets/accept_churn", "sockets",
                 "`concurrent` clients on one thread each loop over laps: connect, write 1 byte; the server accepts, "
                 "reads it, writes it back and closes; the client checks the byte, reads the end of stream and "
                 "closes (the server closes first, so TIME_WAIT never holds client ports); laps per second, and the "
                 "latency of a lap from connect to close. raw/liburing is the floor: the same laps as state machines "
                 "on one SINGLE_ISSUER|DEFER_TASKRUN ring, a multishot accept, one io_uring_enter per turn",
                 {{"ops_per_s", "ops/s", better::higher}, {"mean_us", "us", better::lower},
                  {"p99_us", "us", better::lower}},
                 sweep("concurrent", {1, 16}),
                 sweep("concurrent", {1, 4, 16}),
                 true, true, with_floor, socket_quick_s});

    s.push_back({"sockets/idle_connections", "sockets",
                 "the memory of connections that wait for data: a server process accepts `conns` loopback "
                 "connections from a client process and starts one read on each; bytes_per_conn is its RSS growth "
                 "from its baseline (loop made, listening) to every read pending, over conns; then each connection "
                 "gets one byte, checked. tern: a task per connection awaiting receive() (no buffer until bytes "
                 "arrive); asio/callbacks: Asio's recommendation for idle connections, async_wait(wait_read) and a "
                 "read_some into one shared buffer; asio/coroutines: the plain way, async_read_some into a 4 KiB "
                 "buffer per connection; fresh processes per repetition; peak RSS is the server's. The heap grows "
                 "in 64 KiB steps, 65 B per connection at 1000, and where a run falls among them varies with the "
                 "address layout: 9000 is the point that resolves a difference of tens of bytes",
                 {{"bytes_per_conn", "B", better::lower}},
                 sweep("conns", {1000, 9000}),
                 sweep("conns", {1000, 9000}),
                 false, true, all_runtimes, 0, idle_fds});

    // mg::aio bench_io's five cases. Its runs use 5 client threads against a 5-thread server (config-strong),
    // which a 2-core machine cannot hold: here a "thread" is one loop per side, the client's on CPU 0 and the
    // server's on CPU 1, and "single thread" puts both on one loop on CPU 0.
    auto msg = [](std::string name, std::int64_t threads, std::int64_t conns, std::int64_t payload, std::int64_t ints,
                  std::int64_t parallel) {
        return with_case(std::move(name), {{"threads", threads},
                                           {"conns", conns},
                                           {"payload", payload},
                                           {"ints", ints},
                                           {"parallel", parallel}});
    };
    scenario_def messages{
        "sockets/messages", "sockets",
        "mg::aio bench_io: length-prefixed frames (u64 size; u64 timestamp, u32 int_count, the ints, u64 payload "
        "size, payload) fully decoded and verified on both sides; each connection keeps `parallel` requests in "
        "flight, the server answers every frame of a receive in one write, the client re-sends one per reply; "
        "messages per second received by the clients (over each repetition; bench_io takes the median of 100 ms "
        "samples) and round-trip latency in us (bench_io: ms). The five cases scaled to 2 cores: basic = 1 client "
        "loop (CPU 0) + 1 server loop (CPU 1), 100 conns, 128 B, 5 ints (bench_io: 5+5 threads); single_thread = "
        "client and server on one loop on CPU 0, 100 conns; 100kb = 1+1 loops, 200 conns, 102400 B, 0 ints (5+5 "
        "threads); parallel = 1+1 loops, 100 conns, 5 in flight (5+5 threads); massively_parallel = 1+1 loops, "
        "5000 conns, 0 ints (20 threads)",
        {{"msg_per_s", "msg/s", better::higher}, {"mean_us", "us", better::lower}, {"p50_us", "us", better::lower},
         {"p99_us", "us", better::lower}},
        {msg("basic", 2, 100, 128, 5, 1), msg("100kb", 2, 200, 102400, 0, 1)},
        {msg("basic", 2, 100, 128, 5, 1), msg("single_thread", 1, 100, 128, 5, 1),
         msg("100kb", 2, 200, 102400, 0, 1), msg("parallel", 2, 100, 128, 5, 5),
         msg("massively_parallel", 2, 5000, 128, 0, 1)},
        true, false, with_floor, socket_quick_s, conns_fds};
    s.push_back(messages);

    s.push_back({"sockets/io_event", "sockets",
                 "libev's benchmark as evpp ran it: `pairs` AF_UNIX socketpairs, a 1-byte read pending on every read "
                 "end, 100 active: an iteration writes one byte to 100 evenly spaced pairs and each byte read "
                 "writes one to the next pair (plain send(2), as libev's callback does) until `pairs` writes are "
                 "spent; us per iteration (libev's loop time: the reads stay armed between iterations, where libev "
                 "also times re-adding n watchers); every byte checked against its pair",
                 {{"us_per_iter", "us", better::lower}},
                 sweep("pairs", {500, 5000}),
                 sweep("pairs", {500, 1000, 5000, 9000, 10000, 30000}),
                 true, true, with_raw("raw/epoll"), socket_quick_s, io_event_fds});
}

void add_http_scenarios(std::vector<scenario_def>& s) {
    // Each stack's own HTTP on both ends: tern::http's server and client, and Beast's (Asio has no HTTP of its
    // own, so Beast on Boost.Asio is the comparator).
    scenario_def minimal{"http/minimal", "http",
                         "Corosio's HTTP shape: `conns` keep-alive connections on one thread, server and clients on "
                         "one loop, each client sending GET / and waiting for the fixed 200 response (Content-Type "
                         "text/plain, the 13-byte body \"Hello, World!\") before the next; a 41-byte request and a "
                         "78-byte response on every stack (no Date, Server or User-Agent field). tern: "
                         "tern::http::server with a router answering GET /, and one tern::http::client per "
                         "connection looping on client::send (its pool keeps the connection; the first request opens "
                         "it before the phases, and the server must hold exactly `conns` connections from the first "
                         "phase to the last); beast/callbacks: a Beast server (a request_parser per request, fields "
                         "in a per-connection arena, one response built per connection) and a Beast client "
                         "(http::async_write of a request built once, http::async_read into fixed buffers), "
                         "completion handlers on one Boost.Asio io_context. Every response checked (status 200, "
                         "Content-Length 13, Content-Type, the body, keep-alive, nothing after it); requests per "
                         "second and the latency from the client's send to its checked response. Corosio's 2-thread "
                         "point (32 connections) is not part of it",
                         {{"req_per_s", "req/s", better::higher}, {"mean_us", "us", better::lower},
                          {"p99_us", "us", better::lower}},
                         {},
                         {},
                         true, true, {"tern/io_uring", "tern/epoll", "beast/callbacks"}, socket_quick_s, conns_fds};
    for (std::int64_t c : {1, 32}) minimal.quick_points.push_back({{"conns", c}, {"threads", std::int64_t{1}}});
    for (std::int64_t c : {1, 4, 16, 32}) minimal.full_points.push_back({{"conns", c}, {"threads", std::int64_t{1}}});
    minimal.comparators = {"beast/"};
    s.push_back(minimal);

    // The parsers alone: no runtime, so the comparators are the HTTP parsers Asio programs use, not Asio.
    std::vector<param_list> requests = {{{"request", std::string("get")}}, {{"request", std::string("ping")}}};
    scenario_def parse{"http/parse", "http",
                       "an HTTP/1.1 request parser alone on one thread: the same request bytes parsed over and over, "
                       "each parse validating the message and extracting the method, the target, every header "
                       "field (views into the bytes) and the body's framing and bytes; every parse's method, "
                       "target, field count, first and last field and body are checked (the first parse of a run: "
                       "every field), so a parser that gets one wrong fails the run; requests parsed per second. "
                       "request=get: a browser's 321-byte GET (Host, User-Agent, Accept, Accept-Language, "
                       "Accept-Encoding, Connection, Cookie); request=ping: Ichor's POST /ping (Host, Content-Type "
                       "application/json, Content-Length 15, body {\"sequence\": 2}). tern/parser: "
                       "request_parser::reset and parse; beast/parser: a fresh basic_parser<true> per message "
                       "(Beast's parsers are not reusable), eager; http_parser/parser: http_parser_init and one "
                       "http_parser_execute per message. Compared with the better of Beast and http-parser",
                       {{"req_per_s", "req/s", better::higher}},
                       requests,
                       requests,
                       true, true, {"tern/parser", "beast/parser", "http_parser/parser"}, socket_quick_s};
    parse.comparators = {"beast/", "http_parser/"};
    s.push_back(parse);

    // Ichor's shape, with wrk as its load generator. The worker pins itself (server on CPU 0, wrk on CPU 1), so
    // the scenario is not single_thread: the orchestrator leaves the pinning to it. The harness
    // (scenarios/http/ping_load.hpp) is shared by every stack.
    scenario_def ping{"http/ping_json", "http",
                      "Ichor's /ping under wrk: the worker is the server, its `threads` threads pinned to CPU 0; it "
                      "runs wrk 4.1 on CPU 1 (-c conns, -t1 at conns=2 and -t2 above, keep-alive) with a Lua "
                      "script it generates: every request POSTs {\"sequence\": N} to /ping with a fresh N, the "
                      "server parses the JSON (simdjson On-Demand, the code every stack shares) and answers 200 "
                      "with {\"sequence\":N}, and the script checks every answer (status, Content-Type, an N "
                      "among its requests in flight); one wrong answer, socket error or timeout fails the point. "
                      "req_per_s as wrk counts it, p50 and p99 from wrk's latency histogram, and the server's CPU "
                      "time (user + system, getrusage over the wrk run, connection setup included) per request it "
                      "answered; peak RSS is the server's own, wrk's excluded. wrk runs whole seconds: a phase "
                      "rounds to the nearest second, at least 1. threads=2 puts both server threads on CPU 0 (the "
                      "other CPU is wrk's): it shows what a second thread costs, not how the server scales",
                      {{"req_per_s", "req/s", better::higher},
                       {"p50_us", "us", better::lower},
                       {"p99_us", "us", better::lower},
                       {"server_cpu_us_per_req", "us", better::lower}},
                      {},
                      {},
                      true, false, {"tern/io_uring", "tern/epoll", "beast/callbacks"}, 0, ping_fds};
    for (std::int64_t c : {2, 400, 5000})
        for (std::int64_t t : {1, 2}) {
            param_list point{{"conns", c}, {"threads", t}};
            if (t == 1) ping.quick_points.push_back(point);
            ping.full_points.push_back(point);
        }
    ping.full_duration_s = 10;  // Ichor's runs were 10 s
    ping.comparators = {"beast/"};
    s.push_back(ping);
}

// ---- ws: WebSocket messages over loopback TCP ----

void add_ws_scenarios(std::vector<scenario_def>& s) {
    scenario_def echo{"ws/echo", "ws",
                      "`conns` WebSocket connections on one thread, server and clients on one loop: each client "
                      "sends a binary message of `size` bytes (masked, as RFC 6455 asks of clients) and waits for "
                      "its echo before the next; permessage-deflate off. The TCP connections (TCP_NODELAY) and the "
                      "opening handshakes are made before the phases. tern: tern::ws::stream<net::tcp_socket> on "
                      "both ends, ws::stream::read into a string each task keeps and ws::stream::write; "
                      "beast/callbacks: boost::beast::websocket::stream<tcp::socket> on both ends, async_read into "
                      "a flat_buffer each side keeps and async_write, completion handlers on one Boost.Asio "
                      "io_context. Every echo checked (binary, the size, every byte); after the last phase each "
                      "client runs the close handshake and every server must see it. Messages per second (round "
                      "trips) and the latency from the client's write to its checked echo. raw/epoll is the floor on "
                      "epoll: the same sockets, messages, checks and close, in a hand-written level-triggered loop "
                      "(one recv per ready socket, one send per frame, RFC 6455 frames built and parsed inline, no "
                      "opening handshake), the four socket calls a round trip needs and nothing else",
                      {{"msg_per_s", "msg/s", better::higher}, {"mean_us", "us", better::lower},
                       {"p99_us", "us", better::lower}},
                      {},
                      {},
                      true, true, {"tern/io_uring", "tern/epoll", "beast/callbacks", "raw/epoll"}, socket_quick_s,
                      conns_fds};
    for (std::int64_t size : {64, 16384}) {
        for (std::int64_t c : {1, 100}) {
            const param_list point{{"size", size}, {"conns", c}, {"threads", std::int64_t{1}}};
            if (size == 64 || c == 100) echo.quick_points.push_back(point);  // large messages: the loaded case
            echo.full_points.push_back(point);
        }
    }
    echo.comparators = {"beast/"};
    s.push_back(echo);
}

// ---- http2: tern::http2's server under h2load, against nghttp2 on a bare epoll loop and a bare io_uring loop ----

// The HTTP/1.1 comparator opens a connection per request in flight of the HTTP/2 point.
std::int64_t h2_fds(const param_list& p) { return int_param(p, "conns") * int_param(p, "streams") + fd_margin; }

void add_http2_scenarios(std::vector<scenario_def>& s) {
    scenario_def ping{"http2/ping_json", "http2",
                      "http/ping_json's /ping service over h2c (prior knowledge): the worker is the server, one "
                      "thread on CPU 0; it runs h2load (nghttp2-client) on CPU 1 with -c conns -m streams -t 1, "
                      "every request a POST of {\"sequence\": N} that the server parses (simdjson, the code every "
                      "stack shares) and answers 200 with {\"sequence\":N}. h2load checks statuses, not bodies: "
                      "after each phase nghttp POSTs a fresh N on up to 16 concurrent streams of one connection and "
                      "every body must echo it; a failed request, a non-2xx status, a wrong body or a refused "
                      "request fails the point. req_per_s over h2load's run, p50/p99 from its per-request log, and "
                      "the server's CPU time (getrusage over the phase) per request answered. tern: tern::http's "
                      "server with http2::server_protocol(); raw/nghttp2: nghttp2's session API on a hand-written "
                      "epoll loop, the floor; raw/nghttp2_uring (full profile): the same server on a hand-written "
                      "io_uring loop (tern's ring set-up), the floor of the io_uring backend; tern/io_uring-http1: the "
                      "same route over HTTP/1.1, http/ping_json's wrk with conns x streams connections (as many "
                      "requests in flight). h2load and wrk run whole seconds",
                      {{"req_per_s", "req/s", better::higher},
                       {"p50_us", "us", better::lower},
                       {"p99_us", "us", better::lower},
                       {"server_cpu_us_per_req", "us", better::lower}},
                      {},
                      {},
                      true, false,
                      {"tern/io_uring", "tern/epoll", "tern/io_uring-http1", "raw/nghttp2", "raw/nghttp2_uring"}, 0,
                      h2_fds};
    const std::vector<std::pair<std::int64_t, std::int64_t>> ping_points = {{1, 1}, {1, 100}, {100, 10}};
    for (auto [c, m] : ping_points) {
        const param_list point{{"conns", c}, {"streams", m}};
        if (c == 1 && m == 100) ping.quick_points.push_back(point);
        ping.full_points.push_back(point);
    }
    ping.full_duration_s = 10;
    ping.comparators = {"raw/nghttp2"};
    ping.full_only = {"raw/nghttp2_uring"};  // the io_uring floor: 10 s the quick profile has no room for
    s.push_back(ping);

    scenario_def streams{"http2/streams", "http2",
                         "one h2c connection, `streams` concurrent streams (h2load -c 1 -m streams on CPU 1), each a "
                         "GET of /bytes/size answered with `size` bytes of a pattern; the server on one thread on CPU "
                         "0. mb_per_s counts bodies (10^6 bytes), server_cpu_us_per_req is the server's CPU time per "
                         "response; after each phase nghttp downloads one body and every byte is compared. tern: a "
                         "streaming route writing the body from one static buffer; raw/nghttp2 and raw/nghttp2_uring: "
                         "the same floors as http2/ping_json, copying the body into DATA frames from their read "
                         "callback",
                         {{"mb_per_s", "MB/s", better::higher},
                          {"req_per_s", "req/s", better::higher},
                          {"server_cpu_us_per_req", "us", better::lower}},
                         {},
                         {},
                         true, false, {"tern/io_uring", "tern/epoll", "raw/nghttp2", "raw/nghttp2_uring"}, 0, nullptr};
    for (std::int64_t size : {16 * K, 1 * M})
        for (std::int64_t n : {1, 10, 100}) {
            const param_list point{{"streams", n}, {"size", size}};
            if (n == 10 && size == 16 * K) streams.quick_points.push_back(point);
            streams.full_points.push_back(point);
        }
    streams.comparators = {"raw/nghttp2"};
    streams.full_only = {"raw/nghttp2_uring"};
    s.push_back(streams);
}

// ---- redis: a real redis-server on the other CPU, every reply checked ----

// The client (the worker) runs on CPU 0 and starts its own redis-server pinned to CPU 1 (scenarios/redis/): the
// server's one thread sets the ceiling for every client, so the client's own CPU time per command is the figure
// that tells the clients apart; commands_per_s says how close each gets to the ceiling. A quick repetition lasts
// 0.3 s (tens of thousands of commands at one task).
void add_redis_scenarios(std::vector<scenario_def>& s) {
    const std::vector<std::string> clients = {"tern/io_uring", "tern/epoll", "hiredis/libevent"};
    scenario_def pipeline{"redis/pipeline", "redis",
                          "`tasks` loops on one connection to a redis-server pinned to CPU 1 (the client on CPU 0, "
                          "over loopback TCP), each a SET of its own key to a 32-byte value naming the task and the "
                          "iteration, then a GET whose reply must be that value; commands_per_s counts both, "
                          "client_cpu_us_per_command is the client process's CPU time (getrusage: user + system) over "
                          "the phase per command; server_cpu_us_per_command is redis-server's CPU time per command "
                          "(/proc/<pid>/schedstat) and server_commands_per_read the commands each of its read() "
                          "calls took in (/proc/<pid>/io), which is what its cost per command depends on. tern: "
                          "tasks awaiting redis::connection::command_into on one connection, pipelined by the "
                          "connection; hiredis/libevent: chains of callbacks on "
                          "hiredis 0.14's async API (redisAsyncCommandArgv) with its libevent adapter; "
                          "raw/redis-benchmark: redis-benchmark -c 1 -P tasks -d 32 -t set,get, the server's own "
                          "reference client, which checks no reply: the floor the server allows; "
                          "raw/redis-benchmark-keys: the same with -r tasks (keys drawn from as many as there are "
                          "tasks, not one); tern/io_uring-latency and tern/epoll-latency: tern's loop busy-polls "
                          "instead of parking (io_context_options::spin_before_park without end, as in latency mode), "
                          "so a reply finds the client's vCPU awake: CPU 0 is kept busy while it waits",
                          {{"commands_per_s", "commands/s", better::higher},
                           {"client_cpu_us_per_command", "us", better::lower},
                           {"server_cpu_us_per_command", "us", better::lower},
                           {"server_commands_per_read", "commands", better::higher}},
                          sweep("tasks", {256}),
                          sweep("tasks", {1, 16, 256}),
                          true, true, clients, socket_quick_s};
    pipeline.impls.push_back("tern/io_uring-latency");
    pipeline.impls.push_back("tern/epoll-latency");
    pipeline.impls.push_back("raw/redis-benchmark");
    pipeline.impls.push_back("raw/redis-benchmark-keys");
    pipeline.comparators = {"hiredis/"};
    s.push_back(pipeline);

    scenario_def pubsub{"redis/pubsub", "redis",
                        "one publisher connection with `publishers` loops of PUBLISH of a 32-byte payload carrying a "
                        "sequence number, and `subscribers` connections subscribed to the channel, each checking that "
                        "it receives every number in order; the publishers stay at most `window` messages ahead of "
                        "the slowest subscriber (redis-server without an output buffer limit for pub/sub clients, "
                        "pinned to CPU 1; the client process on CPU 0). messages_per_s counts the messages received "
                        "by all the subscribers, client_cpu_us_per_message is the client's CPU time per message "
                        "received. tern: redis::connection::receive loops and tasks awaiting PUBLISH; "
                        "hiredis/libevent: SUBSCRIBE's callback and chains of PUBLISH callbacks",
                        {{"messages_per_s", "messages/s", better::higher},
                         {"client_cpu_us_per_message", "us", better::lower}},
                        {},
                        {},
                        true, true, clients, socket_quick_s};
    for (std::int64_t subscribers : {1, 10})
        pubsub.full_points.push_back({{"subscribers", subscribers}, {"publishers", std::int64_t{16}},
                                      {"window", std::int64_t{1024}}});
    pubsub.comparators = {"hiredis/"};
    s.push_back(pubsub);
}

// ---- pg: a throwaway PostgreSQL cluster on the other CPU, every result checked ----

// The client (the worker) runs on CPU 0 and makes its own cluster in a temporary directory (scenarios/pg/), its
// server processes pinned to CPU 1, reached over a Unix socket. As with redis/*, the server's one backend per
// connection sets the ceiling: client_cpu_us_per_query tells the clients apart, queries_per_s says how close each
// gets to the ceiling. Each point costs an initdb (about a second) on top of its repetitions, so the quick profile
// keeps one: the pipelined one, where the clients differ (one task is a round trip every client pays).
void add_pg_scenarios(std::vector<scenario_def>& s) {
    const std::vector<std::string> clients = {"tern/io_uring", "tern/epoll", "raw/libpq_blocking",
                                              "raw/libpq_pipeline", "libpqxx/blocking"};
    scenario_def select{"pg/select", "pg",
                        "`tasks` loops over `conns` connections to a PostgreSQL server pinned to CPU 1 (the client "
                        "on CPU 0, over a Unix socket), each running SELECT $1::int with a number of its own and "
                        "checking the value returned; client_cpu_us_per_query is the client process's CPU time "
                        "(getrusage: user + system) over the phase per query. tern: tasks awaiting "
                        "pg::connection::query, pipelined by the connection; raw/libpq_blocking: PQexecParams one "
                        "query at a time (tasks do not apply; the connections taken in turn); raw/libpq_pipeline: "
                        "libpq's pipeline mode by hand, `tasks` queries in flight, a sync point per refill, poll(): "
                        "the floor; libpqxx/blocking: libpqxx 6.4's nontransaction::exec_params one at a time",
                        {{"queries_per_s", "queries/s", better::higher},
                         {"client_cpu_us_per_query", "us", better::lower}},
                        {{{"tasks", std::int64_t{256}}, {"conns", std::int64_t{1}}}},
                        {},
                        true, true, clients, socket_quick_s};
    for (std::int64_t conns : {1, 4})
        for (std::int64_t tasks : {1, 16, 256})
            if (tasks >= conns) select.full_points.push_back({{"tasks", tasks}, {"conns", conns}});
    select.comparators = {"raw/libpq", "libpqxx/"};
    s.push_back(select);

    // Fixed work: each repetition writes n rows (the warm-up too), so a point costs four rounds and an initdb.
    // Full profile only: the quick one is at its time budget.
    scenario_def insert{"pg/insert_batch", "pg",
                        "n rows (id int, name text, value float8; row i = (i, 'row-i', i + 0.25)) written into an "
                        "emptied table over one connection to a PostgreSQL server pinned to CPU 1 (the client on CPU "
                        "0, over a Unix socket); the TRUNCATE before and the check after each round (count, sum of "
                        "ids, sum of values, names) are outside its timing, which ends with the server's "
                        "acknowledgement of the last row; client_cpu_us_per_row is the client process's CPU time "
                        "(getrusage: user + system) over the round per row. mode=insert: one INSERT per row. tern: "
                        "`tasks` tasks awaiting pg::connection::query on a prepared pg::statement, pipelined by the "
                        "connection; raw/libpq_blocking: PQexecParams one at a time, autocommit; raw/libpq_pipeline: "
                        "the statement prepared, `tasks` PQsendQueryPrepared in flight in pipeline mode, a sync point "
                        "per refill, poll(): the floor; libpqxx/blocking: exec_prepared0 one at a time in one "
                        "pqxx::work committed at the end. mode=copy: COPY FROM STDIN in the text format. tern: "
                        "connection::copy_in and copy_writer::write of 64 KiB chunks; raw/libpq_blocking: "
                        "PQputCopyData of the same chunks, the floor (COPY is not allowed in pipeline mode, so "
                        "raw/libpq_pipeline does not run it); libpqxx/blocking: pqxx::stream_to, a tuple per row",
                        {{"rows_per_s", "rows/s", better::higher}, {"client_cpu_us_per_row", "us", better::lower}},
                        {},
                        {{{"mode", std::string("insert")}, {"tasks", std::int64_t{256}}, {"n", std::int64_t{100000}}},
                         {{"mode", std::string("copy")}, {"n", std::int64_t{100000}}}},
                        false, true, clients};
    insert.runs = [](const param_list& point, std::string_view impl, std::string_view) {
        return impl != "raw/libpq_pipeline" || *find_param(point, "mode") == param_value{std::string("insert")};
    };
    // One INSERT per round trip: blocking libpq does 5-10k rows/s here (fewer while others load the machine), so
    // up to 30 s a round; the worker's time limit follows.
    insert.fixed_rep_s = 30;
    insert.comparators = {"raw/libpq", "libpqxx/"};
    s.push_back(insert);
}

// ---- tls: loopback TCP with TLS 1.3 on OpenSSL 3, the same settings for every stack ----

// tern::tls::stream against Asio's ssl::stream, both on the system's OpenSSL, each configured by
// scenarios/tls/tls_common.hpp through its context's native handle: TLS 1.3 only, TLS_AES_128_GCM_SHA256, key
// exchange on P-256, an ECDSA P-256 certificate made in memory when the worker starts. The client loop runs on
// CPU 0 and the server loop on CPU 1 (two_threads.hpp). A quick repetition of tls/handshake lasts 0.5 s (a few
// hundred handshakes on this machine); tls/throughput is steady within milliseconds, like the socket scenarios.
constexpr double tls_quick_s = 0.5;

void add_tls_scenarios(std::vector<scenario_def>& s) {
    const char* common =
        "Loopback TCP (TCP_NODELAY), TLS 1.3 only with the cipher suite TLS_AES_128_GCM_SHA256 and the group P-256 "
        "on both ends, an ECDSA P-256 self-signed certificate for \"localhost\" made in memory at start (the client "
        "trusts it alone, verifies the chain and checks the name: SNI + SSL_set1_host), the same OpenSSL settings "
        "applied to tern::tls::context's and asio::ssl::context's SSL_CTX; every connection checked to have "
        "agreed on TLS 1.3, that suite and P-256. Client loop on CPU 0, server loop on CPU 1. tern: "
        "tern::tls::stream<net::tcp_socket> (records through tern's BIO over two buffers); asio: "
        "asio::ssl::stream<tcp::socket> (Asio's engine over its BIO pair), with completion handlers "
        "(asio/callbacks) or co_spawn + use_awaitable (asio/coroutines). ";
    auto hs_point = [](const char* resumption, std::int64_t concurrent) {
        return param_list{{"resumption", std::string(resumption)}, {"concurrent", concurrent}};
    };
    scenario_def handshake{
        "tls/handshake", "tls",
        std::string(common) +
            "`concurrent` client tasks each loop over connections: TCP connect, a full TLS handshake "
            "(resumption=on: offering the session ticket of its previous connection, which the server must "
            "accept: psk_dhe_ke, so still an ECDHE on P-256 but no certificate or signature), one byte each way "
            "(which also delivers the server's ticket: one per handshake when resumption=on, none otherwise), "
            "close_notify both ways, close. The server, one thread, runs one task per accepted connection. "
            "handshakes_per_s: connections completed per second; mean_us: from the connect to the end of the "
            "shutdown. raw/crypto is the floor, not a stack: the handshake's public-key work alone, timed "
            "in-process with OpenSSL's EVP API (what `openssl speed ecdhp256 ecdsap256` measures, with the "
            "ephemeral key generation): server = key generation + ECDH + ECDSA sign, client = key generation + "
            "ECDH + ECDSA verify (resumed: the key exchange only); handshakes_per_s = 1 / max(server, client) "
            "when concurrent > 1 (each side on its own CPU, the slower sets the pace), 1 / (server + client) at "
            "concurrent = 1; mean_us = server + client. No stack can reach it: hashing, HKDF, the record "
            "encryption, the certificate checks and the system calls come on top. raw/openssl is the second floor: "
            "OpenSSL's whole work for the same connections (the same contexts, checks and exchange), both ends in "
            "one thread over a BIO pair with no socket, each side's SSL calls timed and turned into the same two "
            "figures the same way; what a stack adds to it is its I/O and its loop",
        {{"handshakes_per_s", "handshakes/s", better::higher}, {"mean_us", "us", better::lower}},
        {hs_point("off", 8)},
        {hs_point("off", 1), hs_point("off", 8), hs_point("on", 1), hs_point("on", 8)},
        true, false, {"tern/io_uring", "tern/epoll", "asio/callbacks", "asio/coroutines", "raw/crypto", "raw/openssl"},
        tls_quick_s};
    handshake.fds_needed = [](const param_list& p) { return 4 * int_param(p, "concurrent") + fd_margin; };
    s.push_back(handshake);

    auto tp_point = [](const char* direction) {
        return param_list{{"direction", std::string(direction)}, {"size", 16 * K}};
    };
    s.push_back({"tls/throughput", "tls",
                 std::string(common) +
                     "One connection: a writer task writes `size`-byte chunks of a position-dependent pattern "
                     "(write_all / async_write), a reader task reads into a `size`-byte buffer and checks every "
                     "byte at its offset; direction=one_way: client to server; both_ways: a writer and a reader on "
                     "each end at once (full duplex). At the end each writer publishes its byte count and writes "
                     "one more chunk, and each reader must stop at exactly that count. mb_per_s: MB (10^6 bytes) "
                     "of plaintext received and checked per second, both readers together for both_ways. "
                     "raw/openssl is the floor: the same connection, contexts, checks and end, written with "
                     "OpenSSL's API alone (each end one thread, its SSL on the socket itself with read-ahead, the "
                     "socket non-blocking after the handshake, poll() when OpenSSL wants it): what OpenSSL and the "
                     "kernel charge for the stream, with no runtime and no buffer of a stack's own in between",
                 {{"mb_per_s", "MB/s", better::higher}},
                 {tp_point("one_way"), tp_point("both_ways")},
                 {tp_point("one_way"), tp_point("both_ways")},
                 true, false, {"tern/io_uring", "tern/epoll", "asio/callbacks", "asio/coroutines", "raw/openssl"},
                 socket_quick_s});
}

// ---- multi-thread dispatch and the coroutine sync primitives ----

// Thread i of every implementation is pinned to CPU i % 2 by the worker itself (the orchestrator pins only
// single-thread scenarios); on this 2-core machine 4 and 8 threads oversubscribe the cores.
constexpr double dispatch_quick_s = 0.3;

void add_thread_scenarios(std::vector<scenario_def>& s) {
    auto scaling_point = [](std::int64_t threads, const char* model) {
        return param_list{{"threads", threads}, {"model", std::string(model)}};
    };
    scenario_def scaling{
        "dispatch/scaling", "dispatch",
        "1000 independent handler chains, each handler posting its successor, run by `threads` threads (thread i "
        "pinned to CPU i % 2; 4 and 8 threads oversubscribe the 2 cores); handlers run per second by all threads, "
        "and the speedup over 1 thread (the same implementation and model measured for one repetition's length "
        "in the same process). model=shared: tern runtime::post (work-shared: queued on the calling worker, "
        "handed to idle workers); Asio one io_context (concurrency hint N) run by N threads. model=per_thread: "
        "tern post_to the worker running the handler; Asio one io_context (hint 1) per thread, chains spread "
        "round-robin (asio/coroutines: 1000 coroutines each looping on co_await post)",
        {{"ops_per_s", "ops/s", better::higher}, {"speedup", "x", better::higher}},
        {},
        {},
        true, false, all_runtimes, dispatch_quick_s};
    for (std::int64_t t : {1, 2, 8}) scaling.quick_points.push_back(scaling_point(t, "shared"));
    scaling.quick_points.push_back(scaling_point(8, "per_thread"));
    for (const char* m : {"shared", "per_thread"})
        for (std::int64_t t : {1, 2, 4, 8}) scaling.full_points.push_back(scaling_point(t, m));
    s.push_back(scaling);

    s.push_back({"dispatch/interleaved", "dispatch",
                 "one thread posts a batch of 100 handlers, runs them (poll), and repeats; handlers run per second "
                 "(asio/coroutines: a coroutine posts the 100 and then co_await post queues its continuation "
                 "behind them)",
                 {{"ops_per_s", "ops/s", better::higher}},
                 {one("threads", 1)},
                 {one("threads", 1)},
                 true, true, all_runtimes, dispatch_quick_s});

    s.push_back({"dispatch/concurrent", "dispatch",
                 "4 threads (thread i pinned to CPU i % 2, so 2 per core), each posting batches of 100 handlers and "
                 "running them: tern a runtime of 4 workers, a driver on each posting to its own loop; Asio one "
                 "io_context (hint 4) run by 4 threads with 4 drivers (asio/coroutines: each driver a coroutine "
                 "on a strand of its own); handlers run per second by all threads",
                 {{"ops_per_s", "ops/s", better::higher}},
                 {one("threads", 4)},
                 {one("threads", 4)},
                 true, false, all_runtimes, dispatch_quick_s});

    auto cross_point = [](std::int64_t producers, std::int64_t per) {
        return param_list{{"producers", producers}, {"per_producer", per}};
    };
    scenario_def cross{
        "dispatch/cross_thread", "dispatch",
        "`producers` threads each post `per_producer` increment handlers to one loop run by its own thread (loop "
        "thread pinned to CPU 0, producer p to CPU (p + 1) % 2); time from releasing the producers until the loop "
        "has run the last increment, and increments per second (tern io_context::post from foreign threads; "
        "asio/callbacks asio::post from the producer threads; asio/coroutines asio::post from a coroutine on each "
        "producer thread's own io_context)",
        {{"seconds", "s", better::lower}, {"ops_per_s", "ops/s", better::higher}},
        {},
        {},
        false, false, all_runtimes};
    for (std::int64_t p : {1, 20}) cross.quick_points.push_back(cross_point(p, 100000));
    for (std::int64_t p : {1, 2, 4, 8, 16, 20}) cross.full_points.push_back(cross_point(p, 1000000));
    s.push_back(cross);

    auto chan_point = [](std::int64_t pairs, std::int64_t n) { return param_list{{"pairs", pairs}, {"n", n}}; };
    scenario_def channel{
        "coro/channel", "coro",
        "`pairs` producer/consumer coroutine pairs, each with its own channel of capacity 1024, on 2 threads "
        "(thread i pinned to CPU i % 2), pair k on thread k % 2: tern tern::sync::channel<int> with both tasks of a "
        "pair spawned on worker k % 2 of a 2-worker runtime (runtime::spawn_on); Asio "
        "experimental::channel<void(error_code, int)> (asio 1.22.1, not thread-safe) with one io_context per "
        "thread (asio/coroutines: co_await async_send / async_receive; asio/callbacks: each "
        "completion handler starts the next operation); n messages in all, every consumer checks the count and "
        "sum of what it received; ms",
        {{"ms", "ms", better::lower}},
        {chan_point(1, 128 * K)},
        {},
        false, false, all_runtimes};
    for (std::int64_t p : {1, 2, 4, 8, 16, 32})
        for (std::int64_t n : {128 * K, 512 * K, 2 * M}) channel.full_points.push_back(chan_point(p, n));
    s.push_back(channel);

    s.push_back({"coro/event", "coro",
                 "Ichor's loop on one thread: a coroutine posts a handler that signals an auto-reset event, then "
                 "awaits the event; n iterations; iterations per second (and peak RSS). tern "
                 "tern::sync::auto_reset_event + io_context::post; Asio has no event: an "
                 "experimental::channel<void(error_code, int)> of capacity 1, signalled with try_send, awaited with "
                 "async_receive (asio/callbacks: its receive handler starts the next iteration). The channel is "
                 "cheaper than a steady_timer at time_point::max() signalled by cancel_one, which goes through the "
                 "timer queue and cannot hold a signal set before the wait",
                 {{"iter_per_s", "iter/s", better::higher}},
                 sweep("n", {1000000}),
                 sweep("n", {5000000}),
                 false, true, all_runtimes});
}

// ---- udp and unix: loopback UDP and Unix stream sockets, every byte verified ----

void add_datagram_and_local_scenarios(std::vector<scenario_def>& s) {
    s.push_back({"udp/pingpong", "udp",
                 "two loopback UDP sockets connected to each other, client and server as separate tasks on one "
                 "thread; the client sends a `size`-byte datagram and waits for the echo, the server echoes each "
                 "datagram; every byte verified on both sides; round-trip latency",
                 latency_metrics(),
                 sweep("size", {64}),
                 sweep("size", {1, 64, 1400}),
                 true, true, all_runtimes, socket_quick_s});

    s.push_back({"udp/throughput", "udp",
                 "one sender loop on CPU 0 and one receiver loop on CPU 1 over two connected loopback UDP sockets "
                 "(4 MiB socket buffers on both ends); every datagram carries a sequence number and the pattern "
                 "of that number, checked on arrival; datagrams received and verified per second. tern sends and "
                 "receives in batches of 32 (send_batch / receive_batch: sendmmsg / recvmmsg), its API for bulk "
                 "datagrams; Asio, which has no batch operation, one async_send / async_receive per datagram. "
                 "Loopback drops what the receiver cannot take: the run's info lines give the loss",
                 {{"datagrams_per_s", "datagrams/s", better::higher}},
                 sweep("size", {64}),
                 sweep("size", {64, 1400}),
                 true, false, all_runtimes, socket_quick_s});

    s.push_back({"unix/pingpong", "unix",
                 "sockets/pingpong over a Unix stream socket pair (socketpair) on one thread: the client writes "
                 "`size` bytes, the server reads them all and echoes them; every byte verified; round-trip latency",
                 latency_metrics(),
                 sweep("size", {64}),
                 sweep("size", {64}),
                 true, true, all_runtimes, socket_quick_s});
}

// ---- files: reads of one data file, every read's size and block number checked, creation never measured ----

param_list file_point(const char* mode, std::int64_t block, std::int64_t tasks, std::int64_t file_mib) {
    return {{"mode", std::string(mode)}, {"block", block}, {"tasks", tasks}, {"file_mib", file_mib}};
}

// Asio's random_access_file exists only in its io_uring configuration; libaio reads only O_DIRECT files; the
// registered-file-and-buffer mode is io_uring's (tern/io_uring and raw/liburing).
bool file_impl_runs(const param_list& point, std::string_view impl, std::string_view config) {
    const param_value* m = find_param(point, "mode");
    std::string mode = m ? to_string(*m) : "";
    if (mode == "direct_registered") return impl == "tern/io_uring" || impl == "raw/liburing";
    if (impl.rfind("asio/", 0) == 0) return config == "io_uring";
    if (impl == "raw/libaio") return mode == "direct";
    return true;
}

void add_file_scenarios(std::vector<scenario_def>& s) {
    const std::vector<std::string> impls = {"tern/io_uring", "tern/epoll",   "asio/callbacks", "asio/coroutines",
                                            "raw/liburing",  "raw/pread",    "raw/libaio"};
    const char* common =
        "each of `tasks` tasks reads `block` bytes at a time from one data file of file_mib MiB (made once, before "
        "any phase, and reused; every 4 KiB block starts with its number, and every read's size and first block "
        "number are checked); mb_per_s (10^6 bytes) and iops. mode=buffered goes through the page cache: the "
        "worker reads the whole file once before its phases (it fits in RAM), so it measures the cache, not the "
        "disk; mode=direct is "
        "O_DIRECT with 4096-aligned buffers (the page cache is never dropped: direct reads bypass it); "
        "mode=direct_registered adds a registered file and registered buffers (READ_FIXED; tern/io_uring and "
        "raw/liburing only). tern: `tasks` spawned tasks looping fs::file::read_at (on epoll a cached read is made "
        "on the loop with RWF_NOWAIT, the rest through its blocking pool); asio: random_access_file::async_read_some_at (io_uring configuration only, the one "
        "where Asio has files), one file object per task (Asio keeps one read in flight per object); raw/liburing keeps `tasks` reads in flight, one submit per batch of completions; "
        "raw/pread: `tasks` threads in a pread loop; raw/libaio (direct only): `tasks` iocbs through "
        "io_submit/io_getevents. Nothing is pinned (the kernel's workers, tern's pool and the pread threads use "
        "both CPUs). The quick profile uses a 256 MiB file so that a fresh machine does not spend a minute "
        "writing 2 GiB; the full profile 2 GiB";
    scenario_def random{"files/random_read", "files",
                        std::string("random block-aligned offsets (a per-task xorshift): ") + common,
                        {{"mb_per_s", "MB/s", better::higher}, {"iops", "ops/s", better::higher}},
                        {file_point("direct", 4 * K, 16, 256)},
                        {},
                        true, false, impls, socket_quick_s};
    random.runs = file_impl_runs;
    for (const char* mode : {"buffered", "direct", "direct_registered"}) {
        for (auto b : {4 * K, 16 * K, 64 * K, 256 * K, 1 * M}) random.full_points.push_back(file_point(mode, b, 16, 2048));
        for (std::int64_t t : {1, 4, 64, 128}) random.full_points.push_back(file_point(mode, 64 * K, t, 2048));
    }
    s.push_back(random);

    scenario_def seq = random;
    seq.name = "files/sequential_read";
    seq.summary = std::string("each task walks its own contiguous 1/tasks of the file, wrapping around: ") + common;
    seq.quick_points = {file_point("direct", 64 * K, 16, 256)};
    s.push_back(seq);
}

// ---- services: tern::services, the registry and the event bus (Ichor-style dependency injection and events) ----

// Asio has no service registry, so services/start_stop and services/start have no comparator: they keep the default
// (Asio), which no implementation matches, and the report shows their figures without a ratio ("n/a"). Ichor's
// published figures are quoted in the summaries for scale only: another machine, another program.
void add_services_scenarios(std::vector<scenario_def>& s) {
    const std::vector<std::string> tern_only = {"tern/io_uring", "tern/epoll"};
    s.push_back({"services/start_stop", "services",
                 "Ichor's start & stop on one thread: one tern::services::registry; a provider of one interface "
                 "runs, and a dependent that requires it is started with registry::start(id) (constructed with the "
                 "provider injected, its start() coroutine run) and stopped with registry::stop(id) (its stop() "
                 "run, the object destroyed), over and over; start & stop cycles per second. Every start must "
                 "report running, and the dependent's constructions, starts, stops and destructions must each "
                 "equal the cycles run. No comparator: Asio has no service registry. Ichor published 665k to 983k "
                 "start & stop per second, single-threaded, on another machine (for scale, not a comparison)",
                 {{"start_stop_per_s", "ops/s", better::higher}},
                 {one("threads", 1)},
                 {one("threads", 1)},
                 true, true, tern_only, dispatch_quick_s});

    s.push_back({"services/start", "services",
                 "`n` services in a dependency graph, started by one registry::start() on one thread; start_ms from "
                 "the call to its return (the report it returns included), and peak RSS with all n running. "
                 "Interfaces are C++ types, so the graph is built on 64 of them, level_iface<0..63>: service i is on "
                 "level d = i * 64 / n, provides level_iface<d> and requires level_iface<d-1>, <d-2> and <d-3> (those "
                 "that exist); each interface has about n / 64 providers and the registry injects the first of them "
                 "to run, so the levels start in order, each once all three below it have a running provider: a "
                 "graph 64 levels deep with about 3n required edges. The services are added (not timed) in a "
                 "scrambled order (index i * 7919 mod n), each with a start() and a stop() coroutine; after start() "
                 "every service must be running and have been constructed after its dependencies ran, and the "
                 "registry::stop() that follows must stop all n. n = 10000 in the full profile, Ichor's count. No "
                 "comparator: Asio has no service registry",
                 {{"start_ms", "ms", better::lower}},
                 sweep("n", {2000}),
                 sweep("n", {10000}),
                 false, true, tern_only});

    auto events_point = [](std::int64_t threads, std::int64_t n) { return param_list{{"threads", threads}, {"n", n}}; };
    s.push_back({"services/events", "services",
                 "Ichor's event shape: four event types, one handler each; one publisher publishes the types in "
                 "turn (16-byte events: a sequence number and a tag), n events in all, keeping at most 1024 in "
                 "flight (published, not yet handled); events handled per second. threads=1: publisher and "
                 "handlers on one loop; threads=2: the publisher on one thread (CPU 0), the handlers on another "
                 "(CPU 1). tern: tern::services::event_bus, publish() from a coroutine that yields to its loop while "
                 "the window is full, one subscription per type on the handlers' loop (threads=2: worker 1 of a "
                 "2-worker runtime, the publisher on worker 0); asio/callbacks: no bus, each event an asio::post of "
                 "a lambda capturing the event and its type's handler to the handlers' io_context (hint 1, one per "
                 "thread), the publisher re-posting itself while the window is full. Every handler checks that its "
                 "events arrive in publish order with their tag, and the counts must match what was published. Ichor "
                 "published 4.8M to 10.8M events per second, single-threaded, on another machine (for scale, not a "
                 "comparison)",
                 {{"events_per_s", "events/s", better::higher}},
                 {events_point(1, 1000000), events_point(2, 1000000)},
                 // n from 1M to 50M: the rate, and the peak RSS column, which must not grow with the events.
                 {events_point(1, 1000000), events_point(1, 10000000), events_point(1, 50000000),
                  events_point(2, 1000000), events_point(2, 10000000), events_point(2, 50000000)},
                 false, false, {"tern/io_uring", "tern/epoll", "asio/callbacks"}});
}

// ---- instructions per operation (tern-bench --instructions) ----

// The points counted under callgrind and their work. Sizes keep a whole run within minutes (callgrind runs the
// measured window some 50 times slower than the CPU) while the window's constant part (a phase switch, a
// block_on) stays below a tenth of an instruction per operation. Server scenarios are counted on the server's side,
// one connection driven by tern-bench-client; the warm-up opens the connection and fills the pools.
void add_instruction_plans(std::vector<scenario_def>& s) {
    auto plan = [&](const char* name, instruction_plan p) {
        for (auto& sc : s)
            if (sc.name == name) {
                sc.instructions = std::move(p);
                return;
            }
        throw std::logic_error(std::string("instruction plan for an unknown scenario ") + name);
    };
    constexpr std::int64_t served = 4000;  // requests (messages) in a server's window
    constexpr std::int64_t served_warmup = 400;
    plan("dispatch/post", {"handler", {one("threads", 1)}, 64 * K, 16 * K});
    plan("coro/spawn", {"task", sweep("n", {16 * K}), 0, 0});
    plan("coro/switch", {"switch", sweep("n", {64 * K}), 0, 0});
    // Valgrind 3.19, Debian 12's, keeps its lock while a thread waits in io_uring_enter (seen here: that thread in
    // the kernel's io_cqring_wait, every other one waiting for valgrind's lock): in a process whose threads wait
    // on each other, one of them on io_uring, the others never run again. The points that need two threads of
    // one process are therefore not counted on io_uring.
    const std::string two_threads_on_io_uring =
        "two threads of one process, one of them waiting in io_uring_enter, deadlock under valgrind 3.19 "
        "(it keeps its lock during that wait)";
    instruction_plan channel{"message", {{{"pairs", std::int64_t{1}}, {"n", 32 * K}}}, 0, 0};
    channel.excluded = {{"tern/io_uring", "", two_threads_on_io_uring}};
    plan("coro/channel", channel);
    plan("coro/event", {"iteration", sweep("n", {64 * K}), 0, 0});
    plan("timers/schedule_cancel", {"timer op", sweep("live_timers", {0, 1000000}), 32 * K, 8 * K});
    plan("timers/fire_rate",
         {"fire",
          {{{"timers", std::int64_t{1}}, {"delay_us", std::int64_t{0}}},
           {{"timers", std::int64_t{10000}}, {"delay_us", std::int64_t{100}}}},
          32 * K,
          16 * K});
    plan("services/events", {"event", {{{"threads", std::int64_t{1}}, {"n", 64 * K}}}, 0, 0});
    plan("http/parse", {"request", {{{"request", std::string("get")}}, {{"request", std::string("ping")}}}, 32 * K,
                        4 * K});
    plan("http/minimal", {"request", {{{"conns", std::int64_t{1}}, {"threads", std::int64_t{1}}}}, served,
                          served_warmup});
    plan("http/ping_json", {"request", {{{"conns", std::int64_t{1}}, {"threads", std::int64_t{1}}}}, served,
                            served_warmup});
    std::vector<param_list> ws_points;
    for (std::int64_t size : {64, 16384})
        ws_points.push_back({{"size", size}, {"conns", std::int64_t{1}}, {"threads", std::int64_t{1}}});
    plan("ws/echo", {"message", ws_points, served, served_warmup});
    // http2/ping_json over one connection, one stream at a time and 100 in flight (the timed quick point's);
    // `body` is the upload point (h2_upload.hpp): a 32 KiB request body, above the server's 16 KiB small body
    // buffer. The HTTP/1.1 comparator is http/ping_json's.
    auto h2_point = [](std::int64_t streams, std::int64_t body) {
        param_list p{{"conns", std::int64_t{1}}, {"streams", streams}};
        if (body != 0) p.push_back({"body", body});
        return p;
    };
    plan("http2/ping_json", {"request", {h2_point(1, 0), h2_point(100, 0), h2_point(1, 32 * K), h2_point(100, 32 * K)},
                             served, served_warmup,
                             {"tern/io_uring", "tern/epoll", "raw/nghttp2", "raw/nghttp2_uring"}});
    instruction_plan tls{"MiB", {{{"direction", std::string("one_way")}, {"size", 16 * K}}}, 32 * M, 4 * M};
    tls.apart = instruction_plan::library::openssl;
    tls.excluded = {{"tern/io_uring", "", two_threads_on_io_uring},
                    {"asio/callbacks", "io_uring", two_threads_on_io_uring},
                    {"asio/coroutines", "io_uring", two_threads_on_io_uring}};
    plan("tls/throughput", tls);
    // redis/*: the client process alone (redis-server is exec'd, so callgrind does not follow it). One task is a
    // round trip per command; 256 tasks pipeline on the one connection. The warm-up connects and fills the pools.
    instruction_plan redis_pipeline{"command", sweep("tasks", {1, 256}), 32 * K, 8 * K};
    redis_pipeline.excluded = {
        {"raw/redis-benchmark", "",
         "a program of its own, run for a fixed count of requests: it opens no instruction window, and the worker "
         "that runs it is not that process (its per-command count, from two request counts' difference, is in "
         "docs/benchmarks.md)"},
        {"raw/redis-benchmark-keys", "", "as raw/redis-benchmark"},
        {"tern/io_uring-latency", "",
         "busy polling: the loop polls while each reply is on its way, so the count follows the round trip's time, "
         "not the work per command (tern/io_uring counts that work)"},
        {"tern/epoll-latency", "", "as tern/io_uring-latency (tern/epoll counts the work)"}};
    plan("redis/pipeline", redis_pipeline);
    // pg/select: the client process alone (pg_ctl starts the server, which callgrind does not follow), at the point
    // of the targets, 256 tasks on one connection, against the floor; libpq's share apart, since every client
    // spends it and what differs is the rest. The warm-up connects and fills the pools.
    instruction_plan pg_select{"query", {{{"tasks", std::int64_t{256}}, {"conns", std::int64_t{1}}}}, 32 * K, 8 * K,
                               {"tern/io_uring", "tern/epoll", "raw/libpq_pipeline"}};
    pg_select.apart = instruction_plan::library::libpq;
    plan("pg/select", pg_select);
}

std::vector<scenario_def> build_scenarios() {
    std::vector<scenario_def> s;

    s.push_back({"dispatch/post", "dispatch",
                 "1000 handler chains on one thread, each handler posting its successor to the loop; handlers run "
                 "per second (asio/coroutines: 1000 coroutines each doing co_await post)",
                 {{"ops_per_s", "ops/s", better::higher}},
                 {one("threads", 1)},
                 {one("threads", 1)},
                 true, true, all_runtimes});

    s.push_back({"coro/spawn", "coro",
                 "spawn n empty tasks from a running task, then await them all; ns per task (asio: co_spawn with "
                 "detached, which runs each child eagerly, and a completion counter)",
                 {{"ns_per_task", "ns", better::lower}},
                 sweep("n", {128 * K, 1 * M}),
                 sweep("n", {128 * K, 256 * K, 512 * K, 1 * M, 2 * M, 4 * M}),
                 false, true, coroutine_runtimes});

    s.push_back({"coro/switch", "coro",
                 "one coroutine yields to its loop n times (asio: co_await post(use_awaitable)); ns per switch",
                 {{"ns_per_switch", "ns", better::lower}},
                 sweep("n", {512 * K, 2 * M}),
                 sweep("n", {512 * K, 1 * M, 2 * M, 4 * M, 8 * M}),
                 false, true, coroutine_runtimes});

    s.push_back({"timers/schedule_cancel", "timers",
                 "arm a timer 1 h ahead with a pending wait, cancel it, and deliver the cancelled completion, while "
                 "live_timers other waits (30..90 min ahead) stay armed; ops/s",
                 {{"ops_per_s", "ops/s", better::higher}},
                 sweep("live_timers", {0, 1000000}),
                 sweep("live_timers", {0, 1000000}),
                 true, true, all_runtimes});

    // Two shapes. delay_us=0 is the published one (wait on 0 ns repeatedly), but a wait on a deadline that is
    // already due need not reach the loop at all: tern completes it without suspending, Asio runs it through its
    // reactor. With 10000 timers each re-armed 100 us ahead, a pass over them takes longer than the delay, so
    // every wait is filed in the timer structure and fired by the loop, back to back: the cost of the fire path.
    std::vector<param_list> fire_points = {{{"timers", std::int64_t{1}}, {"delay_us", std::int64_t{0}}},
                                           {{"timers", std::int64_t{10000}}, {"delay_us", std::int64_t{100}}}};
    s.push_back({"timers/fire_rate", "timers",
                 "`timers` waiters, each re-arming its own timer delay_us ahead and awaiting it, in a loop; "
                 "completed waits per second. delay_us=0 is the published shape, but there the deadline is due "
                 "before the wait starts and tern completes it without suspending (Asio goes through its reactor); "
                 "the 10000 x 100 us point keeps every timer due and fired by the loop",
                 {{"fires_per_s", "fires/s", better::higher}},
                 fire_points,
                 fire_points,
                 true, true, all_runtimes});

    // Every point is one loop thread with `timers` periodic timers; lateness is the time from a deadline to the
    // moment its waiter runs, so it includes the runtime's timer resolution (tern: the wheel's 1 us tick, a
    // deadline fires at the first tick boundary at or after it), the kernel's wake-up from the wait for I/O, and
    // queueing behind the other timers due at the same moment.
    auto accuracy_point = [](std::int64_t timers, std::int64_t period_us) {
        return param_list{{"timers", timers}, {"period_us", period_us}};
    };
    scenario_def accuracy{"timers/accuracy", "timers",
                          "`timers` periodic timers on one thread, period_us apart, their deadlines spread evenly over "
                          "the period and kept on a fixed grid (each wait expires at the next multiple of the period, "
                          "so lateness never accumulates); lateness = when the waiter ran minus its deadline, mean "
                          "and p99 in us. It includes the timer structure's resolution (tern's wheel fires at the "
                          "first 1 us tick at or after a deadline), the kernel's wake-up of an idle vCPU, and the "
                          "timers due at the same moment that run first",
                          {{"lateness_mean_us", "us", better::lower}, {"lateness_p99_us", "us", better::lower}},
                          {accuracy_point(100, 1000)},
                          {},
                          true, true, all_runtimes};
    for (std::int64_t n : {10, 100, 1000})
        for (std::int64_t p : {1000, 15000}) accuracy.full_points.push_back(accuracy_point(n, p));
    accuracy.quick_duration_s = 0.5;
    s.push_back(accuracy);

    scenario_def jitter{"realtime/jitter", "realtime",
                        "Ichor's realtime shape: one periodic task on CPU 0 wakes every period_us on a fixed grid "
                        "(each wait expires at the next multiple of the period) and then does fixed work "
                        "(work_iterations rounds of an integer mix, about 40 us here, checked at the end); with load=1 a "
                        "thread pinned to CPU 1 loads that CPU and the memory system (an 8 MiB buffer swept at an odd "
                        "stride), load=0 is the idle baseline; lateness = when the task ran minus its deadline: min, mean, p99 and max in us. tern: "
                        "a one-worker runtime pinned to CPU 0 and a tern::timer; tern/io_uring and tern/epoll in the "
                        "runtime's normal mode (spin 20 us, then park), the -latency implementations in latency mode "
                        "(runtime_options::low_latency: busy polling, plus mlockall and a pre-faulted frame pool; "
                        "no SCHED_FIFO, which real-time throttling would stop for 50 ms a second while busy "
                        "polling); asio/callbacks: a steady_timer re-armed from its handler on an io_context run on "
                        "CPU 0",
                        {{"lateness_min_us", "us", better::lower},
                         {"lateness_mean_us", "us", better::lower},
                         {"lateness_p99_us", "us", better::lower},
                         {"lateness_max_us", "us", better::lower}},
                        {{{"period_us", std::int64_t{1000}}, {"work_iterations", std::int64_t{20000}}, {"load", std::int64_t{1}}}},
                        {{{"period_us", std::int64_t{1000}}, {"work_iterations", std::int64_t{20000}}, {"load", std::int64_t{0}}},
                         {{"period_us", std::int64_t{1000}}, {"work_iterations", std::int64_t{20000}}, {"load", std::int64_t{1}}}},
                        true, false,
                        {"tern/io_uring", "tern/epoll", "tern/io_uring-latency", "tern/epoll-latency",
                         "asio/callbacks"}};
    jitter.quick_duration_s = 1;
    jitter.full_duration_s = 10;  // the 10 s; Ichor's realtime example checks a 2 ms deadline
    s.push_back(jitter);

    auto pingpong_impls = all_runtimes;
    pingpong_impls.push_back("raw/liburing");
    pingpong_impls.push_back("tern/io_uring-sqpoll");
    scenario_def pingpong{"sockets/pingpong", "sockets",
                          "loopback TCP (TCP_NODELAY), client and server as separate tasks on one thread; the client "
                          "writes size bytes, the server reads them all and echoes them; every byte verified on both "
                          "sides; round-trip latency (tern/io_uring-sqpoll, io_uring with a kernel submission poller, "
                          "at size=64 only)",
                          latency_metrics(),
                          // 1 KiB in the full profile only: the quick profile's ten minutes (the two sizes that
                          // carry the runtime's cost stay; at 1 KiB the copies add to both sides alike).
                          sweep("size", {1, 64}),
                          sweep("size", {1, 64, 1024}),
                          true, true, pingpong_impls};
    pingpong.runs = [](const param_list& point, std::string_view impl, std::string_view) {
        if (impl != "tern/io_uring-sqpoll") return true;
        const param_value* size = find_param(point, "size");
        return size != nullptr && *size == param_value{std::int64_t{64}};
    };
    s.push_back(pingpong);

    add_thread_scenarios(s);
    add_socket_scenarios(s);
    add_http_scenarios(s);
    add_tls_scenarios(s);
    add_ws_scenarios(s);
    add_http2_scenarios(s);
    add_redis_scenarios(s);
    add_pg_scenarios(s);
    add_datagram_and_local_scenarios(s);
    add_file_scenarios(s);
    add_services_scenarios(s);

    add_instruction_plans(s);
    for (auto& sc : s) {
        sc.category = sc.name.substr(0, sc.name.find('/'));
        if (sc.instructions.points.empty()) continue;
        const std::string unit = "instr/" + sc.instructions.op;
        sc.instr_metrics.push_back({instr_per_op_name, unit, better::lower});
        if (sc.instructions.apart != instruction_plan::library::none)
            sc.instr_metrics.push_back({library_metric_name(sc.instructions.apart), unit, better::lower});
    }
    return s;
}

std::vector<impl_def> build_impls() {
    // Asio runs in both of its Linux configurations; each is compiled into its own executable because compiling
    // Asio's headers with different configuration macros into one program would violate the ODR.
    const std::vector<impl_variant> asio_variants = {{"epoll", "tern-bench-asio-epoll"},
                                                     {"io_uring", "tern-bench-asio-uring"}};
    return {
        {"tern/io_uring", "tern, io_uring backend", {{"", "tern-bench-tern"}}, "io_uring"},
        {"tern/epoll", "tern, epoll backend", {{"", "tern-bench-tern"}}, "epoll"},
        {"tern/io_uring-latency", "tern, io_uring backend, latency mode (busy-polling loops, runtime_options::low_latency)",
         {{"", "tern-bench-tern"}}, "io_uring"},
        {"tern/epoll-latency", "tern, epoll backend, latency mode (busy-polling loops, runtime_options::low_latency)",
         {{"", "tern-bench-tern"}}, "epoll"},
        {"tern/io_uring-sqpoll",
         "tern, io_uring backend with IORING_SETUP_SQPOLL (io_context_options::sqpoll: a kernel thread polls the "
         "submission queue)",
         {{"", "tern-bench-tern"}}, "io_uring"},
        {"tern/parser", "tern::http::request_parser: strict RFC 9112 head parser, fields as views, no allocation",
         {{"", "tern-bench-tern"}}},
        {"asio/callbacks", "standalone Asio with completion handlers (lambdas), concurrency_hint 1", asio_variants},
        {"asio/coroutines", "standalone Asio with co_spawn + use_awaitable, concurrency_hint 1", asio_variants},
        {"raw/liburing", "hand-written liburing loops, one ring per thread, no runtime: the floor",
         {{"", "tern-bench-raw"}}},
        {"raw/epoll",
         "hand-written level-triggered epoll loop, one epoll_wait per turn: the floor of readiness dispatch "
         "(sockets/io_event) and of a WebSocket echo over epoll (ws/echo)",
         {{"", "tern-bench-raw"}}},
        {"raw/nghttp2",
         "nghttp2 1.52's server session API (nghttp2_session_mem_recv/mem_send) on a hand-written epoll loop, one "
         "thread, no runtime: the floor of http2/*",
         {{"", "tern-bench-raw"}}},
        {"raw/nghttp2_uring",
         "raw/nghttp2's server (the same session, callbacks and handler) on a hand-written io_uring loop, one "
         "thread: a ring set up as tern's io_uring backend sets up its own, one recv and one send in flight per "
         "connection: the floor of http2/* on io_uring",
         {{"", "tern-bench-raw"}}},
        {"tern/io_uring-http1",
         "tern, io_uring backend: tern::http's HTTP/1.1 server, http2/ping_json's comparator at the same requests in "
         "flight",
         {{"", "tern-bench-tern"}}, "io_uring"},
        {"raw/blocking", "blocking send/recv on plain threads: what the kernel alone charges for a cross-thread hop",
         {{"", "tern-bench-raw"}}},
        {"raw/pread", "synchronous pread on plain threads, one per task: the classic thread-per-request floor",
         {{"", "tern-bench-raw"}}},
        {"raw/libaio", "Linux native AIO (io_submit/io_getevents) on O_DIRECT files, one thread",
         {{"", "tern-bench-raw"}}},
        {"raw/crypto",
         "tls/handshake's floor: the public-key operations of one handshake alone (ECDHE and ECDSA on P-256), "
         "timed in-process with OpenSSL's EVP API, one thread",
         {{"", "tern-bench-raw"}}},
        {"raw/openssl",
         "OpenSSL's API alone: tls/handshake's second floor (OpenSSL's whole work for each connection, both ends in "
         "one thread over a BIO pair, no socket) and tls/throughput's floor (each end one thread, SSL on a "
         "non-blocking socket, poll())",
         {{"", "tern-bench-raw"}}},
        {"hiredis/libevent",
         "hiredis 0.14 (Debian libhiredis-dev), its asynchronous API with the libevent 2.1 adapter, callbacks on one "
         "event_base",
         {{"", "tern-bench-redis"}}},
        {"raw/redis-benchmark",
         "redis-benchmark (redis-tools) with -c 1 -P tasks: redis/pipeline's floor, the server's own pipelining client",
         {{"", "tern-bench-redis"}}},
        {"raw/redis-benchmark-keys",
         "redis-benchmark as raw/redis-benchmark with -r tasks: its keys drawn from as many as there are tasks, as "
         "the other clients' loops use, instead of one key",
         {{"", "tern-bench-redis"}}},
        {"raw/libpq_blocking",
         "libpq 15 (Debian libpq-dev) used directly: PQexecParams one query at a time, what most code does "
         "(pg/insert_batch's COPY: PQputCopyData, the floor)",
         {{"", "tern-bench-pg"}}},
        {"raw/libpq_pipeline",
         "libpq 15's pipeline mode by hand (PQenterPipelineMode, PQsendQueryParams, PQpipelineSync), non-blocking, "
         "poll(): the floor of pg/select and of pg/insert_batch's INSERTs",
         {{"", "tern-bench-pg"}}},
        {"libpqxx/blocking",
         "libpqxx 6.4 (Debian libpqxx-dev) on libpq: a pqxx::nontransaction per connection, exec_params one query at "
         "a time (pg/insert_batch: exec_prepared0 in one pqxx::work, stream_to for COPY)",
         {{"", "tern-bench-pg"}}},
        {"beast/parser",
         "Boost.Beast 1.74 http::basic_parser<true> (eager), a derived class recording every field as a view",
         {{"", "tern-bench-http"}}},
        {"http_parser/parser",
         "nodejs http-parser 2.9 (Debian libhttp-parser), callbacks recording every field as a view",
         {{"", "tern-bench-http"}}},
        {"beast/callbacks",
         "Boost.Beast 1.74 on Boost.Asio 1.18 (epoll reactor; its io_uring came later), completion handlers, in the "
         "shape of Beast's http_server_fast: an io_context per thread (concurrency_hint 1), connection objects "
         "reused, fields in a per-connection arena, body in a fixed buffer; http/minimal adds Beast's client (a "
         "request built once through http::async_write, responses through http::async_read into fixed buffers); ws/echo "
         "uses Beast's websocket::stream on both ends",
         {{"", "tern-bench-http"}}},
    };
}

}  // namespace

const std::vector<scenario_def>& scenarios() {
    static const std::vector<scenario_def> all = build_scenarios();
    return all;
}

const std::vector<impl_def>& implementations() {
    static const std::vector<impl_def> all = build_impls();
    return all;
}

const char* library_metric_name(instruction_plan::library l) {
    switch (l) {
        case instruction_plan::library::openssl: return openssl_instr_per_op_name;
        case instruction_plan::library::libpq: return libpq_instr_per_op_name;
        default: return "";
    }
}

instruction_plan::library library_of_metric(const std::string& metric) {
    if (metric == openssl_instr_per_op_name) return instruction_plan::library::openssl;
    if (metric == libpq_instr_per_op_name) return instruction_plan::library::libpq;
    return instruction_plan::library::none;
}

const char* library_label(instruction_plan::library l) {
    switch (l) {
        case instruction_plan::library::openssl: return "OpenSSL";
        case instruction_plan::library::libpq: return "libpq";
        default: return "";
    }
}

const scenario_def* find_scenario(std::string_view name) {
    for (auto& s : scenarios())
        if (s.name == name) return &s;
    return nullptr;
}

const impl_def* find_impl(std::string_view id) {
    for (auto& i : implementations())
        if (i.id == id) return &i;
    return nullptr;
}

std::vector<std::string> categories() {
    std::vector<std::string> out;
    for (auto& s : scenarios())
        if (std::find(out.begin(), out.end(), s.category) == out.end()) out.push_back(s.category);
    return out;
}

}  // namespace tern_bench
