// sockets/accept_churn and sockets/io_event for asio/coroutines, on one io_context; the same shapes as
// asio_callbacks_churn.cpp, each chain a coroutine (co_spawn, use_awaitable). The accept loop co_spawns one
// coroutine per accepted connection.
#include "asio_common.hpp"
#include "io_event_chain.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::asio_impl {

namespace sockets_asio_coroutines_churn {  // this file's own (see bench/CMakeLists.txt)
namespace {

// ---- accept_churn ----

asio::awaitable<void> churn_connection(tcp::socket sock) {
    unsigned char b = 0;
    co_await asio::async_read(sock, asio::buffer(&b, 1), asio::use_awaitable);
    co_await asio::async_write(sock, asio::buffer(&b, 1), asio::use_awaitable);
}  // closes the connection: the server side closes first

asio::awaitable<void> churn_acceptor(tcp::acceptor& acceptor, const bool& stopping) {
    for (;;) {
        asio::error_code ec;
        tcp::socket sock = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
        if (stopping && ec == asio::error::operation_aborted) co_return;
        expect_ok(ec, "accept");
        asio::co_spawn(acceptor.get_executor(), churn_connection(std::move(sock)), rethrow{});
    }
}

asio::awaitable<void> churn_client(tcp::endpoint where, unsigned id, request_meter& meter, std::size_t& running,
                                   tcp::acceptor& acceptor, bool& stopping) {
    tcp::socket sock(co_await asio::this_coro::executor);
    for (std::uint64_t lap = 0;; ++lap) {
        auto t0 = bench_clock::now();
        co_await sock.async_connect(where, asio::use_awaitable);
        const auto sent = static_cast<unsigned char>(id * 131 + lap);
        co_await asio::async_write(sock, asio::buffer(&sent, 1), asio::use_awaitable);
        unsigned char got[2];
        co_await asio::async_read(sock, asio::buffer(got, 1), asio::use_awaitable);
        if (got[0] != sent) throw bench_failure("client: the echoed byte differs from the one sent");
        asio::error_code ec;
        co_await sock.async_read_some(asio::buffer(got + 1, 1), asio::redirect_error(asio::use_awaitable, ec));
        if (ec != asio::error::eof)
            throw bench_failure("client: expected the end of stream after the echo, got '" + ec.message() + "'");
        sock.close();
        if (!meter.record(t0, bench_clock::now())) break;
    }
    if (--running == 0) {  // the accept loop never runs out of work by itself
        stopping = true;
        acceptor.cancel();
    }
}

// ---- io_event ----

struct io_event_run {
    io_event::chain chain;
    iteration_meter meter;
    std::size_t readers_done = 0;

    io_event_run(session& s, std::size_t pairs) : chain(pairs), meter(s, "us_per_iter") {}

    void end_of_iteration() {
        if (meter.finished_one())
            chain.start_iteration();
        else
            chain.close_write_ends();  // every reader then reads end of stream
    }
};

asio::awaitable<void> io_event_reader(asio::local::stream_protocol::socket sock, std::size_t index, io_event_run& run) {
    for (;;) {
        unsigned char b;
        asio::error_code ec;
        co_await sock.async_read_some(asio::buffer(&b, 1), asio::redirect_error(asio::use_awaitable, ec));
        if (ec == asio::error::eof) break;
        expect_ok(ec, "read");
        if (run.chain.on_read(index, b)) run.end_of_iteration();
    }
    ++run.readers_done;
}

}  // namespace
}  // namespace sockets_asio_coroutines_churn

void sockets_accept_churn_coroutines(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    auto concurrent = static_cast<unsigned>(s.param_int("concurrent"));
    tcp::acceptor acceptor = listen_loopback(ctx);
    tcp::endpoint where = acceptor.local_endpoint();
    request_meter meter(s, "ops_per_s");
    bool stopping = false;
    std::size_t running = concurrent;
    asio::co_spawn(ctx, sockets_asio_coroutines_churn::churn_acceptor(acceptor, stopping), rethrow{});
    meter.start();
    for (unsigned i = 0; i < concurrent; ++i)
        asio::co_spawn(ctx, sockets_asio_coroutines_churn::churn_client(where, i, meter, running, acceptor, stopping),
            rethrow{});
    ctx.run();
    if (!meter.done() || running != 0) throw bench_failure("the clients stopped before the last phase ended");
}

void sockets_io_event_coroutines(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    auto pairs = static_cast<std::size_t>(s.param_int("pairs"));
    sockets_asio_coroutines_churn::io_event_run run(s, pairs);
    for (std::size_t i = 0; i < pairs; ++i) {
        int fd = run.chain.take_read_end(i, false);
        asio::local::stream_protocol::socket sock(ctx, asio::local::stream_protocol(), fd);
        asio::co_spawn(ctx, io_event_reader(std::move(sock), i, run), rethrow{});
    }
    run.meter.start();
    run.chain.start_iteration();
    ctx.run();
    if (!run.meter.done()) throw bench_failure("the readers stopped before the last phase ended");
    if (run.readers_done != pairs) throw bench_failure("a reader did not see its end of stream");
}

}  // namespace tern_bench::asio_impl
