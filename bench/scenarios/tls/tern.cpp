// tls/handshake and tls/throughput for tern: tern::tls::stream<net::tcp_socket>, the client's io_context on CPU 0
// and the server's on CPU 1 (two_threads.hpp), both contexts configured by tls_common.hpp through native_handle().
//   handshake:  `concurrent` client tasks each loop over connections: connect, handshake (offering the session of
//               its previous connection when resumption=on, which the server must accept), write one byte, read
//               its echo (which also takes the server's ticket), shutdown (close_notify both ways). The server
//               accepts and runs one task per connection: handshake, echo the byte, read the client's
//               close_notify, send its own. A connection is timed from the connect to the end of the shutdown.
//   throughput: one connection; a writer task write_all()s 16 KiB chunks of the stream pattern, a reader task
//               read_some()s into a 16 KiB buffer and checks every chunk at its offset (direction=both_ways: a
//               writer and a reader on each end). The server's reader drives the meter (adding what the client's
//               reader counted meanwhile); when the last phase ends the writers publish their totals and write one
//               last chunk, and each reader stops exactly at its writer's total.
#include "tls_common.hpp"
#include "../sockets/tern_common.hpp"
#include "../two_threads.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <tern/sync/wait_group.hpp>
#include <tern/tls/context.hpp>
#include <tern/tls/stream.hpp>

#include <atomic>
#include <vector>

namespace tern_bench::tern_impl {

namespace tls = tern::tls;
using namespace tern_bench::tls_bench;

namespace tls_tern {  // this file's own (see bench/CMakeLists.txt)
namespace {

using tls_stream = tls::stream<net::tcp_socket>;

// The two contexts of a run, from fresh credentials, configured alike for every stack.
struct contexts {
    tls::context server{tls::role::server};
    tls::context client{tls::role::client};

    explicit contexts(bool tickets) {
        const credentials c = make_credentials();
        expect_ok(server.use_certificate_chain(c.certificate_pem), "server certificate");
        expect_ok(server.use_private_key(c.key_pem), "server key");
        configure_server(server.native_handle(), tickets);
        expect_ok(client.add_certificate_authority(c.certificate_pem), "client trust");
        configure_client(client.native_handle());
    }
};

void expect_eof(const std::error_code& ec, const char* what) {
    if (ec != tern::error::eof)
        throw bench_failure(std::string(what) + ": expected the peer's close_notify, got '" + ec.message() + "'");
}

// ---- handshake ----

tern::task<void> handshake_server_connection(net::tcp_socket sock, const tls::context& ctx,
                                             tern::sync::wait_group& open) {
    expect_ok(sock.set_no_delay(true), "TCP_NODELAY");
    tls_stream s(std::move(sock), ctx);
    expect_ok(co_await s.handshake(), "server handshake");
    unsigned char b = 0;
    auto [rec, rn] = co_await s.read_exact(tern::mutable_buffer(&b, 1));
    expect_ok(rec, "server read");
    auto [wec, wn] = co_await s.write_all(tern::const_buffer(&b, 1));
    expect_ok(wec, "server write");
    auto [eec, en] = co_await s.read_some(tern::mutable_buffer(&b, 1));
    expect_eof(eec, "server");
    expect_ok(co_await s.shutdown_send(), "server close_notify");
    open.done();
}

tern::task<void> handshake_server(net::tcp_acceptor& acceptor, const tls::context& ctx,
                                  const std::atomic<bool>& stopping) {
    tern::sync::wait_group open;
    for (;;) {
        auto [ec, sock] = co_await acceptor.accept();
        if (ec == std::errc::operation_canceled && stopping.load()) break;
        expect_ok(ec, "accept");
        open.add();
        tern::spawn(handshake_server_connection(std::move(sock), ctx, open)).detach();
    }
    expect_ok(co_await open.wait(), "waiting for the last connections");
}

// One connection of a client; `kept` is the session it offers (resumption=on) and then the one it got.
tern::task<void> one_handshake(tern::io_context& ctx, net::endpoint where, const tls::context& tctx, bool resume,
                               tls::session& kept, unsigned char byte) {
    auto [cec, sock] = co_await net::connect(ctx, where);
    expect_ok(cec, "connect");
    expect_ok(sock.set_no_delay(true), "TCP_NODELAY");
    tls_stream s(std::move(sock), tctx);
    expect_ok(s.set_host_name(host_name), "host name");
    const bool offered = resume && kept;
    if (offered) expect_ok(s.set_session(kept), "set_session");
    expect_ok(co_await s.handshake(), "client handshake");
    if (s.session_reused() != offered)
        throw bench_failure(offered ? "the server did not resume the session" : "a session was resumed unasked");
    check_agreed(s.native_handle());
    auto [wec, wn] = co_await s.write_all(tern::const_buffer(&byte, 1));
    expect_ok(wec, "client write");
    unsigned char got = 0;
    auto [rec, rn] = co_await s.read_exact(tern::mutable_buffer(&got, 1));
    expect_ok(rec, "client read");
    if (got != byte) throw bench_failure("client: the echoed byte differs from the one sent");
    if (resume) {
        tls::session fresh = s.session();  // the ticket came before the echo
        if (fresh.resumable()) kept = std::move(fresh);
    }
    expect_ok(co_await s.shutdown(), "client shutdown");
}

tern::task<void> handshake_client_loop(tern::io_context& ctx, net::endpoint where, const tls::context& tctx,
                                       bool resume, tls::session& kept, unsigned id, request_meter& meter) {
    for (std::uint64_t lap = 0;; ++lap) {
        const auto t0 = bench_clock::now();
        co_await one_handshake(ctx, where, tctx, resume, kept, static_cast<unsigned char>(id * 131 + lap));
        if (!meter.record(t0, bench_clock::now())) co_return;
    }
}

tern::task<void> handshake_client(tern::io_context& ctx, session& s, net::endpoint where, const tls::context& tctx,
                                  bool resume, unsigned concurrent) {
    request_meter meter(s, handshakes_metric);
    // One connection per client before the phases: it gives each its first session to offer.
    std::vector<tls::session> kept(concurrent);
    for (unsigned i = 0; i < concurrent; ++i) {
        co_await one_handshake(ctx, where, tctx, resume, kept[i], 0);
        if (resume && !kept[i]) throw bench_failure("no resumable session after the first connection");
    }
    meter.start();
    std::vector<tern::join_handle<void>> clients;
    for (unsigned i = 0; i < concurrent; ++i)
        clients.push_back(tern::spawn(handshake_client_loop(ctx, where, tctx, resume, kept[i], i, meter)));
    co_await join_all(clients);
    if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
}

// ---- throughput ----

tern::task<void> stream_writer(tls_stream& s, const stream_pattern& pattern, std::size_t size,
                               const std::atomic<bool>& stop, direction& d) {
    std::uint64_t offset = 0;
    while (!stop.load(std::memory_order_relaxed)) {
        auto [ec, n] = co_await s.write_all(tern::const_buffer(pattern.at(offset), size));
        expect_ok(ec, "writer");
        offset += size;
    }
    d.final_total.store(offset + size);
    auto [ec, n] = co_await s.write_all(tern::const_buffer(pattern.at(offset), size));
    expect_ok(ec, "writer");
}

// The reader of direction d. With a meter it drives the phases (adding what `other`'s reader counted) and raises
// stop after the last; without one it publishes its count in d.received.
tern::task<void> stream_reader(tls_stream& s, const stream_pattern& pattern, std::size_t size, direction& d,
                               throughput_meter* meter, const direction* other, std::atomic<bool>& stop,
                               const char* side) {
    std::vector<unsigned char> buf(size);
    stream_tally tally(pattern, d, meter, other, stop, side);
    for (;;) {
        auto [ec, n] = co_await s.read_some(tern::mutable_buffer(buf.data(), buf.size()));
        expect_ok(ec, side);
        if (!tally.took(buf.data(), n)) break;
    }
}

tern::task<void> throughput_server(net::tcp_acceptor& acceptor, const tls::context& ctx, throughput_run& run,
                                   throughput_meter& meter) {
    auto [aec, sock] = co_await acceptor.accept();
    expect_ok(aec, "accept");
    expect_ok(sock.set_no_delay(true), "TCP_NODELAY");
    tls_stream s(std::move(sock), ctx);
    expect_ok(co_await s.handshake(), "server handshake");
    meter.start();
    std::vector<tern::join_handle<void>> tasks;
    tasks.push_back(tern::spawn(
        stream_reader(s, run.pattern, run.size, run.up, &meter, run.both ? &run.down : nullptr, run.stop, "server")));
    if (run.both) tasks.push_back(tern::spawn(stream_writer(s, run.pattern, run.size, run.stop, run.down)));
    co_await join_all(tasks);
    if (!meter.done()) throw bench_failure("the stream ended before the last phase");
}

tern::task<void> throughput_client(tern::io_context& ctx, net::endpoint where, const tls::context& tctx,
                                   throughput_run& run) {
    auto [cec, sock] = co_await net::connect(ctx, where);
    expect_ok(cec, "connect");
    expect_ok(sock.set_no_delay(true), "TCP_NODELAY");
    tls_stream s(std::move(sock), tctx);
    expect_ok(s.set_host_name(host_name), "host name");
    expect_ok(co_await s.handshake(), "client handshake");
    check_agreed(s.native_handle());
    std::vector<tern::join_handle<void>> tasks;
    tasks.push_back(tern::spawn(stream_writer(s, run.pattern, run.size, run.stop, run.up)));
    if (run.both)
        tasks.push_back(
            tern::spawn(stream_reader(s, run.pattern, run.size, run.down, nullptr, nullptr, run.stop, "client")));
    co_await join_all(tasks);
}

}  // namespace
}  // namespace tls_tern

void tls_handshake(session& s) {
    const bool resume = resumption(s);
    const auto concurrent = static_cast<unsigned>(s.param_int("concurrent"));
    tls_tern::contexts tls_contexts(resume);
    tern::io_context client_ctx(options_for(s));
    tern::io_context server_ctx(options_for(s));
    announce(s, client_ctx);
    announce(s, server_ctx);
    net::tcp_acceptor acceptor(server_ctx);
    const net::endpoint where = listen_loopback(acceptor);
    std::atomic<bool> stopping{false};
    run_pinned_pair(
        s,
        [&] {
            block_on_trapped(client_ctx,
                             tls_tern::handshake_client(client_ctx, s, where, tls_contexts.client, resume, concurrent));
            stopping.store(true);
            server_ctx.post([&acceptor] { acceptor.cancel(); });
        },
        [&] { block_on_trapped(server_ctx, tls_tern::handshake_server(acceptor, tls_contexts.server, stopping)); },
        [&] {
            client_ctx.stop();
            server_ctx.stop();
        });
}

void tls_throughput(session& s) {
    const auto size = static_cast<std::size_t>(s.param_int("size"));
    throughput_run run(size, both_ways(s));
    tls_tern::contexts tls_contexts(false);
    tern::io_context client_ctx(options_for(s));
    tern::io_context server_ctx(options_for(s));
    announce(s, client_ctx);
    announce(s, server_ctx);
    net::tcp_acceptor acceptor(server_ctx);
    const net::endpoint where = listen_loopback(acceptor);
    throughput_meter meter(s, throughput_metric, 1e6);
    run_pinned_pair(
        s, [&] { client_ctx.block_on(tls_tern::throughput_client(client_ctx, where, tls_contexts.client, run)); },
        [&] { server_ctx.block_on(tls_tern::throughput_server(acceptor, tls_contexts.server, run, meter)); },
        [&] {
            client_ctx.stop();
            server_ctx.stop();
        });
}

}  // namespace tern_bench::tern_impl
