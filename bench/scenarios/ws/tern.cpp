// ws/echo for tern: tern::ws streams over tern's TCP sockets, `conns` connections on one io_context, each client
// sending a binary message of `size` bytes and waiting for its echo before the next. The connections and their
// WebSocket handshakes are made before the phases start, so setup is never measured.
//
// The server's task per connection reads a whole message into a string it keeps (ws::stream::read reuses the
// string's capacity) and writes it back with the type it came with; the client's task writes the message built
// once, reads the echo into its own string, and checks it: binary, the size, and the bytes. permessage-deflate is
// off on both sides (the default), as in the Beast pair (beast_echo.cpp). After the last phase every client sends
// a close frame and waits for the server's answer, and every server task must have seen that close.
// Instruction mode (tern-bench --instructions) counts the server alone: the same serve() on one accepted
// connection, driven by tern-bench-client from another process (../served.hpp).
#include "../sockets/tern_common.hpp"
#include "../served.hpp"
#include "../../harness/instructions.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"
#include "ws_message.hpp"

#include <tern/ws/stream.hpp>

#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace tern_bench::tern_impl {

namespace ws = tern::ws;

namespace ws_tern {  // this file's own (see bench/CMakeLists.txt)
namespace {

using ws_tcp = ws::stream<net::tcp_socket>;

struct echo_run {
    std::string message;
    std::exception_ptr failure;  // the first failed check; every client stops at it
    std::size_t servers_closed = 0;
};

tern::task<void> serve(ws_tcp& w, echo_run& run) {
    std::string in;
    for (;;) {
        auto [ec, type] = co_await w.read(in);
        if (ec == ws::close_code::normal) {  // the client's close, answered by the read
            ++run.servers_closed;
            co_return;
        }
        if (ec) {
            if (!run.failure) run.failure = std::make_exception_ptr(bench_failure("server read: " + ec.message()));
            w.next_layer().close();  // the client's pending read ends too
            co_return;
        }
        instructions::request_handled();
        if (auto wec = co_await w.write(type, tern::const_buffer(in.data(), in.size()))) {
            if (!run.failure) run.failure = std::make_exception_ptr(bench_failure("server write: " + wec.message()));
            w.next_layer().close();
            co_return;
        }
    }
}

tern::task<void> client_loop(ws_tcp& w, request_meter& meter, echo_run& run) {
    std::string in;
    try {
        while (!run.failure) {
            const auto t0 = bench_clock::now();
            expect_ok(co_await w.write(ws::message_type::binary,
                                       tern::const_buffer(run.message.data(), run.message.size())),
                      "client write");
            auto [ec, type] = co_await w.read(in);
            expect_ok(ec, "client read");
            if (type != ws::message_type::binary) throw bench_failure("client: the echo is not binary");
            if (in.size() != run.message.size() || std::memcmp(in.data(), run.message.data(), in.size()) != 0)
                throw bench_failure("client: the echo differs from the message (" + std::to_string(in.size()) +
                                    " bytes)");
            if (!meter.record(t0, bench_clock::now())) break;
        }
        expect_ok(co_await w.close(ws::close_code::normal), "client close");
    } catch (...) {
        if (!run.failure) run.failure = std::current_exception();
        w.next_layer().close();  // the server's pending read ends too
    }
}

tern::task<void> run_echo(tern::io_context& ctx, session& s) {
    const auto conns = static_cast<std::size_t>(s.param_int("conns"));
    echo_run run;
    run.message = ws_bench::make_message(static_cast<std::size_t>(s.param_int("size")));
    ws::stream_options opts;
    opts.max_message_size = run.message.size() + 1024;

    std::vector<socket_pair> pairs = co_await connect_pairs(ctx, conns);
    std::vector<std::unique_ptr<ws_tcp>> clients, servers;
    for (auto& p : pairs) {
        clients.push_back(std::make_unique<ws_tcp>(std::move(p.client), ws::role::client, opts));
        servers.push_back(std::make_unique<ws_tcp>(std::move(p.server), ws::role::server, opts));
    }
    // The handshakes, before the phases.
    for (std::size_t i = 0; i < conns; ++i) {
        auto accepting = tern::spawn(servers[i]->accept());
        expect_ok(co_await clients[i]->handshake("127.0.0.1", "/"), "client handshake");
        expect_ok(co_await std::move(accepting), "server handshake");
    }

    request_meter meter(s, "msg_per_s");
    meter.start();
    std::vector<tern::join_handle<void>> tasks;
    for (std::size_t i = 0; i < conns; ++i) {
        tasks.push_back(tern::spawn(serve(*servers[i], run)));
        tasks.push_back(tern::spawn(client_loop(*clients[i], meter, run)));
    }
    co_await join_all(tasks);
    if (run.failure) std::rethrow_exception(run.failure);
    if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
    if (run.servers_closed != conns) throw bench_failure("a server connection did not see its client's close");
}

// Instruction mode: serve() on one connection accepted from tern-bench-client, after the server's handshake.
tern::task<void> count_echo(tern::io_context& ctx, session& s) {
    if (s.param_int("conns") != 1) throw bench_failure("ws/echo's instructions are counted with conns=1");
    const auto size = static_cast<std::size_t>(s.param_int("size"));
    echo_run run;
    ws::stream_options opts;
    opts.max_message_size = size + 1024;
    net::tcp_acceptor acceptor(ctx);
    const net::endpoint where = listen_loopback(acceptor);
    served::client client(s, where.port(), served::protocol::ws, size);
    auto [aec, sock] = co_await acceptor.accept();
    expect_ok(aec, "accept");
    expect_ok(sock.set_no_delay(true), "TCP_NODELAY");
    ws_tcp server(std::move(sock), ws::role::server, opts);
    expect_ok(co_await server.accept(), "server handshake");
    co_await serve(server, run);  // until the client's close
    client.finish();
    if (run.failure) std::rethrow_exception(run.failure);
    if (run.servers_closed != 1) throw bench_failure("the server did not see the client's close");
}

}  // namespace
}  // namespace ws_tern

void ws_echo(session& s) {
    if (s.param_int("threads") != 1) throw bench_failure("ws/echo runs on one thread (threads=1)");
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(s.instructions() ? ws_tern::count_echo(ctx, s) : ws_tern::run_echo(ctx, s));
}

}  // namespace tern_bench::tern_impl
