// http/minimal for tern: tern::http's server and client, `conns` keep-alive connections, all on one io_context.
//
// The server is an http::server whose router answers GET / with the fixed 200: Content-Type text/plain and the
// 13-byte body "Hello, World!". Its Date and Server fields are turned off and the client sends no User-Agent, so
// that the messages are the ones the Beast pair (beast_minimal.cpp) exchanges, 41 and 78 bytes:
//   GET / HTTP/1.1, Host: 127.0.0.1:<port>
//   HTTP/1.1 200 OK, Content-Length: 13, Content-Type: text/plain, Hello, World!
// (Beast's server writes the two fields in the other order).
// Every connection has its own http::client: a client pools its connections per host and port, and the requests
// of one task follow one another, so each client holds exactly one connection, kept alive from request to
// request. A client task loops on client::send of one GET / built once, checks the response (status 200,
// Content-Length 13, Content-Type text/plain, the body, no Connection: close, and the connection back in the
// client's pool, which it is only when the response ended where its framing said and the server keeps it open)
// and records the latency. The first request of every client opens its connection before the meter starts; the
// server must then hold exactly `conns` connections, and still hold them after the last phase, when its handler
// must have answered exactly the requests the clients received, every one of them from a client port it saw
// before the phases (a client whose pooled connection died would open another one without a word). A failed check
// stops every client, and the server is shut down before the failure ends the run.
// Instruction mode (tern-bench --instructions) counts the server alone: the same server and handler, driven over
// one connection by tern-bench-client from another process (../served.hpp).
#include "../sockets/tern_common.hpp"
#include "../served.hpp"
#include "../../harness/instructions.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <tern/http/client.hpp>
#include <tern/http/server.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tern_bench::tern_impl {

namespace http = tern::http;

namespace http_tern {  // this file's own (see bench/CMakeLists.txt)
namespace {

constexpr std::string_view hello = "Hello, World!";

struct minimal_run {
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;
    http::client_request request;  // GET /
    std::uint64_t served = 0;      // requests the server's handler answered
    std::uint64_t received = 0;    // responses the clients received and checked
    std::exception_ptr failure;    // the first failed check; every client stops at it
    // The port of each client's connection, as the handler saw it on the client's first request (sorted once
    // every client has made one); a request from any other port came over a connection opened later.
    std::vector<std::uint16_t> client_ports;
    bool ports_known = false;
    std::uint64_t from_new_connections = 0;
};

[[noreturn]] void bad_response(const std::string& what) { throw bench_failure("client: bad response: " + what); }

void check(const tern::io_result<http::response>& result, const http::client& client, minimal_run& run) {
    expect_ok(result.ec, "client request");
    const http::response& r = result.value;
    if (r.status != http::status::ok) bad_response("status " + std::to_string(r.status));
    if (r.headers.get("content-length") != "13")
        bad_response("Content-Length '" + std::string(r.headers.get("content-length")) + "'");
    if (r.headers.get("content-type") != "text/plain")
        bad_response("Content-Type '" + std::string(r.headers.get("content-type")) + "'");
    if (http::iequals(r.headers.get("connection"), "close")) bad_response("the server closes a keep-alive connection");
    if (r.body != hello) bad_response("body '" + r.body + "'");
    if (client.idle_connections() != 1) bad_response("the connection did not go back to the client's pool");
    ++run.received;
}

http::router minimal_routes(minimal_run& run) {
    http::router routes;
    routes.get("/", [&run](http::request& req) -> tern::task<http::response> {
        ++run.served;
        instructions::request_handled();
        const std::uint16_t port = req.remote_endpoint().port();
        if (!run.ports_known)
            run.client_ports.push_back(port);
        else if (!std::binary_search(run.client_ports.begin(), run.client_ports.end(), port))
            ++run.from_new_connections;
        co_return http::response(http::status::ok, std::string(hello), "text/plain");
    });
    return routes;
}

tern::task<void> client_loop(http::client& client, request_meter& meter, minimal_run& run) {
    try {
        while (!run.failure) {
            auto t0 = bench_clock::now();
            auto result = co_await client.send(run.host, run.port, run.request);
            check(result, client, run);
            if (!meter.record(t0, bench_clock::now())) break;
        }
    } catch (...) {
        if (!run.failure) run.failure = std::current_exception();
    }
}

// Opens every client's connection with a first request, then runs the clients through the meter's phases.
tern::task<void> drive_clients(tern::io_context& ctx, session& s, http::server& server,
                               std::vector<std::unique_ptr<http::client>>& clients, minimal_run& run) {
    const auto conns = static_cast<std::size_t>(s.param_int("conns"));
    http::client_options opts;
    opts.user_agent = "";
    for (std::size_t i = 0; i < conns; ++i) {
        clients.push_back(std::make_unique<http::client>(ctx, opts));
        check(co_await clients.back()->send(run.host, run.port, run.request), *clients.back(), run);
    }
    if (server.connections() != conns)
        throw bench_failure("the server holds " + std::to_string(server.connections()) + " connections, not " +
                            std::to_string(conns));
    std::sort(run.client_ports.begin(), run.client_ports.end());
    if (std::adjacent_find(run.client_ports.begin(), run.client_ports.end()) != run.client_ports.end())
        throw bench_failure("two clients' first requests came over one connection");
    run.ports_known = true;

    request_meter meter(s, "req_per_s");
    meter.start();
    std::vector<tern::join_handle<void>> tasks;
    for (auto& c : clients) tasks.push_back(tern::spawn(client_loop(*c, meter, run)));
    co_await join_all(tasks);
    if (run.failure) std::rethrow_exception(run.failure);
    if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
    if (server.connections() != conns)
        throw bench_failure("the server ends with " + std::to_string(server.connections()) + " connections, not " +
                            std::to_string(conns));
    if (run.served != run.received)
        throw bench_failure("the server answered " + std::to_string(run.served) + " requests, the clients received " +
                            std::to_string(run.received));
    if (run.from_new_connections != 0)
        throw bench_failure(std::to_string(run.from_new_connections) +
                            " requests came over connections opened during the phases");
}

tern::task<void> run_minimal(tern::io_context& ctx, session& s) {
    minimal_run run;
    http::server_options opts;
    opts.date = false;
    opts.server_name = "";
    http::server server(ctx, minimal_routes(run), opts);
    expect_ok(server.listen(net::endpoint::loopback_v4(0)), "listen");
    auto [ec, where] = server.local_endpoint();
    expect_ok(ec, "local_endpoint");
    run.port = where.port();
    auto serving = tern::spawn(server.run());

    // Whatever happens to the clients, the server is shut down and run() returns before the server is destroyed.
    std::exception_ptr failure;
    std::vector<std::unique_ptr<http::client>> clients;
    try {
        co_await drive_clients(ctx, s, server, clients, run);
    } catch (...) {
        failure = std::current_exception();
    }
    clients.clear();  // closes their connections
    co_await server.shutdown(std::chrono::seconds(1));
    co_await std::move(serving);
    if (failure) std::rethrow_exception(failure);
}

// Instruction mode: the server of run_minimal on this loop, tern-bench-client as its one client.
tern::task<void> count_minimal(tern::io_context& ctx, session& s) {
    minimal_run run;
    run.ports_known = true;  // one client, one connection: the handler's check is the steady state's
    http::server_options opts;
    opts.date = false;
    opts.server_name = "";
    http::server server(ctx, minimal_routes(run), opts);
    expect_ok(server.listen(net::endpoint::loopback_v4(0)), "listen");
    auto [ec, where] = server.local_endpoint();
    expect_ok(ec, "local_endpoint");
    // The last request stops the server: it answers that request (with Connection: close), closes, and run()
    // returns.
    served::client client(s, where.port(), served::protocol::http_get, 0, [&server] { server.stop(); });
    co_await server.run();
    client.finish();
}

}  // namespace
}  // namespace http_tern

void http_minimal(session& s) {
    if (s.param_int("threads") != 1) throw bench_failure("http/minimal runs on one thread (threads=1)");
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(s.instructions() ? http_tern::count_minimal(ctx, s) : http_tern::run_minimal(ctx, s));
}

}  // namespace tern_bench::tern_impl
