// sockets/accept_churn and sockets/io_event for tern, on one io_context.
//   accept_churn: `concurrent` client tasks each loop over laps: connect, write one byte, read it back, read the end
//                 of stream, close. An accept loop spawns one task per connection: read the byte, write it back,
//                 close. A lap is timed from the connect to the client's close.
//   io_event:     libev's socketpair chain. `pairs` AF_UNIX socketpairs; one task per pair keeps a 1-byte read_some
//                 pending on its read end. An iteration sends one byte to 100 evenly spaced pairs; each byte read
//                 sends one to the next pair (a direct send(2), as libev's callback does) until `pairs` such
//                 writes are spent; the iteration ends when every byte sent has been read, and the reader that
//                 reads the last one starts the next iteration.
#include "tern_common.hpp"
#include "io_event_chain.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <vector>

namespace tern_bench::tern_impl {

namespace sockets_tern_churn {  // this file's own (see bench/CMakeLists.txt)
namespace {

// ---- accept_churn ----

tern::task<void> churn_server_connection(net::tcp_socket sock) {
    unsigned char b = 0;
    auto [ec, n] = co_await sock.read_exact(tern::mutable_buffer(&b, 1));
    expect_ok(ec, "server read");
    auto [wec, wn] = co_await sock.write_all(tern::const_buffer(&b, 1));
    expect_ok(wec, "server write");
}  // closes the connection: the server side closes first

tern::task<void> churn_acceptor(net::tcp_acceptor& acceptor, const bool& stopping) {
    for (;;) {
        auto [ec, sock] = co_await acceptor.accept();
        if (stopping && ec == std::errc::operation_canceled) co_return;
        expect_ok(ec, "accept");
        tern::spawn(churn_server_connection(std::move(sock))).detach();
    }
}

tern::task<void> churn_client(tern::io_context& ctx, net::endpoint where, unsigned id, request_meter& meter) {
    for (std::uint64_t lap = 0;; ++lap) {
        auto t0 = bench_clock::now();
        auto [cec, sock] = co_await net::connect(ctx, where);
        expect_ok(cec, "connect");
        const auto sent = static_cast<unsigned char>(id * 131 + lap);
        auto [wec, wn] = co_await sock.write_all(tern::const_buffer(&sent, 1));
        expect_ok(wec, "client write");
        unsigned char got[2];
        auto [rec, rn] = co_await sock.read_exact(tern::mutable_buffer(got, 1));
        expect_ok(rec, "client read");
        if (got[0] != sent) throw bench_failure("client: the echoed byte differs from the one sent");
        auto [eec, en] = co_await sock.read_some(tern::mutable_buffer(got + 1, 1));
        if (eec != net::error::eof)
            throw bench_failure("client: expected the end of stream after the echo, got '" + eec.message() + "'");
        sock.close();
        if (!meter.record(t0, bench_clock::now())) co_return;
    }
}

tern::task<void> accept_churn(tern::io_context& ctx, session& s) {
    auto concurrent = static_cast<unsigned>(s.param_int("concurrent"));
    net::tcp_acceptor acceptor(ctx);
    net::endpoint where = listen_loopback(acceptor);
    request_meter meter(s, "ops_per_s");
    bool stopping = false;
    auto server = tern::spawn(churn_acceptor(acceptor, stopping));
    meter.start();
    std::vector<tern::join_handle<void>> clients;
    for (unsigned i = 0; i < concurrent; ++i) clients.push_back(tern::spawn(churn_client(ctx, where, i, meter)));
    co_await join_all(clients);
    stopping = true;
    acceptor.cancel();
    co_await std::move(server);
    if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
}

// ---- io_event ----

struct io_event_run {
    io_event::chain chain;
    std::vector<net::tcp_socket> readers;
    iteration_meter meter;

    io_event_run(session& s, std::size_t pairs) : chain(pairs), meter(s, "us_per_iter") {}

    void end_of_iteration() {
        if (meter.finished_one())
            chain.start_iteration();
        else
            chain.close_write_ends();  // every reader then reads end of stream and returns
    }
};

tern::task<void> io_event_reader(io_event_run& run, std::size_t i) {
    net::tcp_socket& sock = run.readers[i];
    for (;;) {
        unsigned char b;
        auto [ec, n] = co_await sock.read_some(tern::mutable_buffer(&b, 1));
        if (ec == net::error::eof) co_return;
        expect_ok(ec, "read");
        if (run.chain.on_read(i, b)) run.end_of_iteration();
    }
}

tern::task<void> io_event(tern::io_context& ctx, session& s) {
    auto pairs = static_cast<std::size_t>(s.param_int("pairs"));
    io_event_run run(s, pairs);
    // The read ends are adopted by the loop, which sets the blocking mode its backend needs.
    run.readers.reserve(pairs);
    for (std::size_t i = 0; i < pairs; ++i) {
        auto [ec, sock] = net::tcp_socket::adopt(ctx, run.chain.take_read_end(i, false));
        expect_ok(ec, "adopt");
        run.readers.push_back(std::move(sock));
    }
    std::vector<tern::join_handle<void>> tasks;
    tasks.reserve(pairs);
    for (std::size_t i = 0; i < pairs; ++i) tasks.push_back(tern::spawn(io_event_reader(run, i)));
    run.meter.start();
    run.chain.start_iteration();
    co_await join_all(tasks);
    if (!run.meter.done()) throw bench_failure("the readers stopped before the last phase ended");
}

}  // namespace
}  // namespace sockets_tern_churn

void sockets_accept_churn(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    block_on_trapped(ctx, sockets_tern_churn::accept_churn(ctx, s));  // the server connections are detached tasks
}

void sockets_io_event(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(sockets_tern_churn::io_event(ctx, s));
}

}  // namespace tern_bench::tern_impl
