// The ping-pong family for tern: sockets/pingpong, sockets/pingpong_cross_thread, sockets/concurrent_pairs.
// Client and server are spawned tasks using read_exact and write_all (the counterparts of Asio's async_read /
// async_write of exact sizes). After the last phase the client shuts down its sending side and the server's read
// ends with eof.
//   pingpong:              both tasks on one io_context;
//   pingpong_cross_thread: the client on one io_context on CPU 0, the server on another on CPU 1, each run by
//                          its own std::thread;
//   concurrent_pairs:      `pairs` client/server pairs on one io_context, one latency meter for all of them.
#include "tern_common.hpp"
#include "tern_pingpong.hpp"
#include "../two_threads.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::tern_impl {

namespace sockets_tern {  // this file's own (see bench/CMakeLists.txt)
namespace {

tern::task<void> pingpong(tern::io_context& ctx, session& s, std::size_t size) {
    // Setup, not measured: a loopback pair with TCP_NODELAY on both ends. connect() completes from the backlog,
    // so connecting before accepting is fine.
    net::tcp_acceptor acceptor(ctx);
    expect_ok(acceptor.listen(net::endpoint::loopback_v4(0)), "listen");
    auto [lec, where] = acceptor.local_endpoint();
    expect_ok(lec, "local_endpoint");
    auto [cec, client] = co_await net::connect(ctx, where);
    expect_ok(cec, "connect");
    auto [aec, server] = co_await acceptor.accept();
    expect_ok(aec, "accept");
    expect_ok(client.set_no_delay(true), "TCP_NODELAY");
    expect_ok(server.set_no_delay(true), "TCP_NODELAY");

    payload_pattern pattern(size);
    latency_meter meter(s);
    meter.start();
    auto server_task = tern::spawn(server_loop(server, pattern));
    auto client_task = tern::spawn(client_loop(client, pattern, meter));
    co_await std::move(client_task);
    co_await std::move(server_task);
    if (!meter.done()) throw bench_failure("the client stopped before the last phase ended");
}

tern::task<void> cross_thread_client(tern::io_context& ctx, net::endpoint where, const payload_pattern& pattern,
                                     latency_meter& meter) {
    auto [ec, sock] = co_await net::connect(ctx, where);
    expect_ok(ec, "connect");
    expect_ok(sock.set_no_delay(true), "TCP_NODELAY");
    meter.start();
    co_await client_loop(sock, pattern, meter);
    if (!meter.done()) throw bench_failure("the client stopped before the last phase ended");
}

tern::task<void> cross_thread_server(net::tcp_acceptor& acceptor, const payload_pattern& pattern) {
    auto [ec, sock] = co_await acceptor.accept();
    expect_ok(ec, "accept");
    expect_ok(sock.set_no_delay(true), "TCP_NODELAY");
    co_await server_loop(sock, pattern);
}

tern::task<void> concurrent_pairs(tern::io_context& ctx, session& s, std::size_t pairs_count) {
    auto pairs = co_await connect_pairs(ctx, pairs_count);
    payload_pattern pattern(64);
    latency_meter meter(s);
    meter.start();
    std::vector<tern::join_handle<void>> tasks;
    for (auto& p : pairs) {
        tasks.push_back(tern::spawn(server_loop(p.server, pattern)));
        tasks.push_back(tern::spawn(client_loop(p.client, pattern, meter)));
    }
    co_await join_all(tasks);
    if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
}

}  // namespace
}  // namespace sockets_tern

void sockets_pingpong(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(sockets_tern::pingpong(ctx, s, static_cast<std::size_t>(s.param_int("size"))));
}

void sockets_pingpong_cross_thread(session& s) {
    // Each loop polls for a while before it parks (io_context_options::spin_before_park, as a runtime's workers
    // do by default): the reply arrives within tens of microseconds, and parking would add a vCPU wake-up to
    // every round trip.
    // In latency mode (the -latency implementations) they never park: the spin has no end, as a runtime's
    // workers do with runtime_options::busy_poll.
    tern::io_context_options opts = options_for(s);
    opts.spin_before_park = latency_mode(s) ? std::chrono::nanoseconds::max() : std::chrono::microseconds(200);
    tern::io_context client_ctx(opts);
    tern::io_context server_ctx(opts);
    announce(s, client_ctx);
    announce(s, server_ctx);
    payload_pattern pattern(static_cast<std::size_t>(s.param_int("size")));
    latency_meter meter(s);
    net::tcp_acceptor acceptor(server_ctx);
    net::endpoint where = listen_loopback(acceptor);
    run_pinned_pair(
        s, [&] { client_ctx.block_on(sockets_tern::cross_thread_client(client_ctx, where, pattern, meter)); },
        [&] { server_ctx.block_on(sockets_tern::cross_thread_server(acceptor, pattern)); },
        [&] {
            client_ctx.stop();
            server_ctx.stop();
        });
}

void sockets_concurrent_pairs(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(sockets_tern::concurrent_pairs(ctx, s, static_cast<std::size_t>(s.param_int("pairs"))));
}

}  // namespace tern_bench::tern_impl
