// tls/handshake and tls/throughput for asio/coroutines: asio::ssl::stream<tcp::socket> (Asio's engine over its
// BIO pair, on the same OpenSSL), the client's io_context on CPU 0 and the server's on CPU 1, every chain a
// coroutine (co_spawn, use_awaitable); the same shapes and checks as tern.cpp, both ssl::contexts configured by
// tls_common.hpp through native_handle().
//   handshake:  per connection async_connect, async_handshake (SSL_set_session first when resumption=on),
//               one byte each way, async_shutdown (close_notify both ways: Asio's shutdown waits for the peer's);
//               the server reads the client's close_notify (eof), then answers with its own (async_shutdown).
//   throughput: a writer coroutine async_write()s 16 KiB chunks, a reader async_read_some()s into 16 KiB and checks
//               every chunk at its offset; the writer's total is published before its last chunk (tls_common.hpp).
#include "asio_tls.hpp"
#include "../two_threads.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <atomic>
#include <vector>

namespace tern_bench::asio_impl {

namespace tls_asio_coroutines {  // this file's own (see bench/CMakeLists.txt)
namespace {

// ---- handshake ----

struct handshake_server_state {
    tcp::acceptor acceptor;
    bool stopping = false;
};

asio::awaitable<void> handshake_server_connection(tcp::socket sock, asio::ssl::context& ctx) {
    sock.set_option(tcp::no_delay(true));
    ssl_stream s(std::move(sock), ctx);
    co_await s.async_handshake(asio::ssl::stream_base::server, asio::use_awaitable);
    unsigned char b = 0;
    co_await asio::async_read(s, asio::buffer(&b, 1), asio::use_awaitable);
    co_await asio::async_write(s, asio::buffer(&b, 1), asio::use_awaitable);
    asio::error_code ec;
    co_await s.async_read_some(asio::buffer(&b, 1), asio::redirect_error(asio::use_awaitable, ec));
    expect(ec, asio::error::eof, "server: the client's close_notify");
    co_await s.async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
    if (ec && ec != asio::error::eof) expect_ok(ec, "server shutdown");
}

asio::awaitable<void> handshake_server(handshake_server_state& st, asio::ssl::context& ctx) {
    for (;;) {
        asio::error_code ec;
        tcp::socket sock = co_await st.acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
        if (st.stopping && ec == asio::error::operation_aborted) co_return;
        expect_ok(ec, "accept");
        asio::co_spawn(st.acceptor.get_executor(), handshake_server_connection(std::move(sock), ctx), rethrow{});
    }
}

asio::awaitable<void> one_handshake(asio::io_context& io, tcp::endpoint where, asio::ssl::context& ctx, bool resume,
                                    ssl_session_ref& kept, unsigned char byte) {
    ssl_stream s(io, ctx);
    co_await s.next_layer().async_connect(where, asio::use_awaitable);
    s.next_layer().set_option(tcp::no_delay(true));
    set_host(s);
    const bool offered = resume && kept.s != nullptr;
    if (offered) check_ssl(SSL_set_session(s.native_handle(), kept.s), "SSL_set_session");
    co_await s.async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
    if ((SSL_session_reused(s.native_handle()) == 1) != offered)
        throw bench_failure(offered ? "the server did not resume the session" : "a session was resumed unasked");
    check_agreed(s.native_handle());
    co_await asio::async_write(s, asio::buffer(&byte, 1), asio::use_awaitable);
    unsigned char got = 0;
    co_await asio::async_read(s, asio::buffer(&got, 1), asio::use_awaitable);
    if (got != byte) throw bench_failure("client: the echoed byte differs from the one sent");
    if (resume) {
        SSL_SESSION* fresh = SSL_get1_session(s.native_handle());  // the ticket came before the echo
        if (fresh != nullptr && SSL_SESSION_is_resumable(fresh) == 1)
            kept.reset(fresh);
        else
            SSL_SESSION_free(fresh);
    }
    asio::error_code ec;
    co_await s.async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
    if (ec && ec != asio::error::eof) expect_ok(ec, "client shutdown");
}

asio::awaitable<void> handshake_client_loop(asio::io_context& io, tcp::endpoint where, asio::ssl::context& ctx,
                                            bool resume, ssl_session_ref& kept, unsigned id, request_meter& meter) {
    for (std::uint64_t lap = 0;; ++lap) {
        const auto t0 = bench_clock::now();
        co_await one_handshake(io, where, ctx, resume, kept, static_cast<unsigned char>(id * 131 + lap));
        if (!meter.record(t0, bench_clock::now())) co_return;
    }
}

asio::awaitable<void> handshake_client(asio::io_context& io, session& s, tcp::endpoint where,
                                       asio::ssl::context& ctx, bool resume, unsigned concurrent,
                                       request_meter& meter, std::vector<ssl_session_ref>& kept) {
    for (unsigned i = 0; i < concurrent; ++i) {
        co_await one_handshake(io, where, ctx, resume, kept[i], 0);
        if (resume && kept[i].s == nullptr) throw bench_failure("no resumable session after the first connection");
    }
    (void)s;
    meter.start();
    for (unsigned i = 0; i < concurrent; ++i)
        asio::co_spawn(io, handshake_client_loop(io, where, ctx, resume, kept[i], i, meter), rethrow{});
}

// ---- throughput ----

asio::awaitable<void> stream_writer(ssl_stream& s, const stream_pattern& pattern, std::size_t size,
                                    const std::atomic<bool>& stop, direction& d) {
    std::uint64_t offset = 0;
    while (!stop.load(std::memory_order_relaxed)) {
        co_await asio::async_write(s, asio::buffer(pattern.at(offset), size), asio::use_awaitable);
        offset += size;
    }
    d.final_total.store(offset + size);
    co_await asio::async_write(s, asio::buffer(pattern.at(offset), size), asio::use_awaitable);
}

asio::awaitable<void> stream_reader(ssl_stream& s, const stream_pattern& pattern, std::size_t size, direction& d,
                                    throughput_meter* meter, const direction* other, std::atomic<bool>& stop,
                                    const char* side) {
    std::vector<unsigned char> buf(size);
    stream_tally tally(pattern, d, meter, other, stop, side);
    for (;;) {
        std::size_t n = co_await s.async_read_some(asio::buffer(buf), asio::use_awaitable);
        if (!tally.took(buf.data(), n)) break;
    }
}

// The shared run, and how many of the coroutine readers have finished.
struct coroutine_run : throughput_run {
    using throughput_run::throughput_run;
    int readers_done = 0;
};

asio::awaitable<void> throughput_server(tcp::acceptor& acceptor, asio::ssl::context& ctx, coroutine_run& run,
                                        throughput_meter& meter, std::unique_ptr<ssl_stream>& kept) {
    tcp::socket sock = co_await acceptor.async_accept(asio::use_awaitable);
    sock.set_option(tcp::no_delay(true));
    kept = std::make_unique<ssl_stream>(std::move(sock), ctx);
    ssl_stream& s = *kept;
    co_await s.async_handshake(asio::ssl::stream_base::server, asio::use_awaitable);
    meter.start();
    auto ex = acceptor.get_executor();
    asio::co_spawn(ex, stream_reader(s, run.pattern, run.size, run.up, &meter, run.both ? &run.down : nullptr,
                                     run.stop, "server"),
                   rethrow{});
    if (run.both) asio::co_spawn(ex, stream_writer(s, run.pattern, run.size, run.stop, run.down), rethrow{});
}

asio::awaitable<void> throughput_client(asio::io_context& io, tcp::endpoint where, asio::ssl::context& ctx,
                                        coroutine_run& run, std::unique_ptr<ssl_stream>& kept) {
    kept = std::make_unique<ssl_stream>(io, ctx);
    ssl_stream& s = *kept;
    co_await s.next_layer().async_connect(where, asio::use_awaitable);
    s.next_layer().set_option(tcp::no_delay(true));
    set_host(s);
    co_await s.async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
    check_agreed(s.native_handle());
    asio::co_spawn(io, stream_writer(s, run.pattern, run.size, run.stop, run.up), rethrow{});
    if (run.both)
        asio::co_spawn(io, stream_reader(s, run.pattern, run.size, run.down, nullptr, nullptr, run.stop, "client"),
                       rethrow{});
}

}  // namespace
}  // namespace tls_asio_coroutines

void tls_handshake_coroutines(session& s) {
    announce(s);
    const bool resume = resumption(s);
    const auto concurrent = static_cast<unsigned>(s.param_int("concurrent"));
    tls_contexts ssl_ctxs(resume);
    asio::io_context client_io(concurrency_hint);
    asio::io_context server_io(concurrency_hint);
    tls_asio_coroutines::handshake_server_state server{listen_loopback(server_io)};
    const tcp::endpoint where = server.acceptor.local_endpoint();
    request_meter meter(s, handshakes_metric);
    std::vector<ssl_session_ref> kept(concurrent);
    run_pinned_pair(
        s,
        [&] {
            asio::co_spawn(client_io,
                           tls_asio_coroutines::handshake_client(client_io, s, where, ssl_ctxs.client, resume,
                               concurrent, meter, kept),
                           rethrow{});
            client_io.run();
            if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
            asio::post(server_io, [&server] {
                server.stopping = true;
                server.acceptor.cancel();
            });
        },
        [&] {
            asio::co_spawn(server_io, handshake_server(server, ssl_ctxs.server), rethrow{});
            server_io.run();
        },
        [&] {
            client_io.stop();
            server_io.stop();
        });
}

void tls_throughput_coroutines(session& s) {
    announce(s);
    const auto size = static_cast<std::size_t>(s.param_int("size"));
    tls_asio_coroutines::coroutine_run run(size, both_ways(s));
    tls_contexts ssl_ctxs(false);
    asio::io_context client_io(concurrency_hint);
    asio::io_context server_io(concurrency_hint);
    tcp::acceptor acceptor = listen_loopback(server_io);
    const tcp::endpoint where = acceptor.local_endpoint();
    throughput_meter meter(s, throughput_metric, 1e6);
    std::unique_ptr<ssl_stream> client_stream, server_stream;
    run_pinned_pair(
        s,
        [&] {
            asio::co_spawn(client_io, throughput_client(client_io, where, ssl_ctxs.client, run, client_stream),
                           rethrow{});
            client_io.run();
        },
        [&] {
            asio::co_spawn(server_io, throughput_server(acceptor, ssl_ctxs.server, run, meter, server_stream),
                           rethrow{});
            server_io.run();
            if (!meter.done()) throw bench_failure("the stream ended before the last phase");
        },
        [&] {
            client_io.stop();
            server_io.stop();
        });
}

}  // namespace tern_bench::asio_impl
