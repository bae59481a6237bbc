// udp/pingpong and udp/throughput for asio/coroutines: the same exchanges as asio/callbacks, as coroutines with
// use_awaitable (async_send / async_receive of one datagram each).
#include "asio_common.hpp"
#include "../two_threads.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <atomic>
#include <vector>

namespace tern_bench::asio_impl {

namespace udp_asio_coroutines {  // this file's own (see bench/CMakeLists.txt)
namespace {

asio::awaitable<void> pingpong_client(udp::socket& sock, const payload_pattern& pattern, latency_meter& meter) {
    std::vector<unsigned char> buf(pattern.size() + 1);
    for (std::uint64_t round = 0;; ++round) {
        auto t0 = bench_clock::now();
        co_await sock.async_send(asio::buffer(pattern.round(round), pattern.size()), asio::use_awaitable);
        std::size_t n = co_await sock.async_receive(asio::buffer(buf), asio::use_awaitable);
        auto t1 = bench_clock::now();
        if (n != pattern.size()) throw bench_failure("client: echo of " + std::to_string(n) + " bytes");
        pattern.verify(buf.data(), round, "client");
        if (!meter.record(t0, t1)) break;
    }
    co_await sock.async_send(asio::buffer(buf.data(), 0), asio::use_awaitable);
}

asio::awaitable<void> pingpong_server(udp::socket& sock, const payload_pattern& pattern, bool& done) {
    std::vector<unsigned char> buf(pattern.size() + 1);
    for (std::uint64_t round = 0;; ++round) {
        std::size_t n = co_await sock.async_receive(asio::buffer(buf), asio::use_awaitable);
        if (n == 0) break;
        if (n != pattern.size()) throw bench_failure("server: datagram of " + std::to_string(n) + " bytes");
        pattern.verify(buf.data(), round, "server");
        co_await sock.async_send(asio::buffer(buf.data(), n), asio::use_awaitable);
    }
    done = true;
}

asio::awaitable<void> send_until_stopped(udp::socket& sock, const datagram_stream& stream,
                                         const std::atomic<bool>& stop) {
    std::vector<unsigned char> buf(stream.size());
    for (std::uint64_t seq = 0; !stop.load(std::memory_order_relaxed); ++seq) {
        stream.fill(buf.data(), seq);
        co_await sock.async_send(asio::buffer(buf), asio::use_awaitable);
    }
}

asio::awaitable<void> receive_until_done(udp::socket& sock, datagram_stream& stream, ops_meter& meter,
                                         std::atomic<bool>& stop) {
    std::vector<unsigned char> buf(stream.size() + 1);
    do {
        std::size_t n = co_await sock.async_receive(asio::buffer(buf), asio::use_awaitable);
        stream.check(buf.data(), n);
    } while (meter.tick());
    stop.store(true, std::memory_order_relaxed);
}

}  // namespace
}  // namespace udp_asio_coroutines

void udp_pingpong_coroutines(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    udp_pair pair(ctx);
    payload_pattern pattern(static_cast<std::size_t>(s.param_int("size")));
    latency_meter meter(s);
    bool server_done = false;
    meter.start();
    asio::co_spawn(ctx, udp_asio_coroutines::pingpong_server(pair.b, pattern, server_done), rethrow{});
    asio::co_spawn(ctx, udp_asio_coroutines::pingpong_client(pair.a, pattern, meter), rethrow{});
    ctx.run();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
    if (!server_done) throw bench_failure("the server did not see the end of the exchange");
}

void udp_throughput_coroutines(session& s) {
    announce(s);
    asio::io_context sender_ctx(concurrency_hint);
    asio::io_context receiver_ctx(concurrency_hint);
    udp_pair pair(sender_ctx, receiver_ctx);
    datagram_stream stream(static_cast<std::size_t>(s.param_int("size")));
    ops_meter meter(s, "datagrams_per_s");
    std::atomic<bool> stop{false};
    asio::co_spawn(sender_ctx, udp_asio_coroutines::send_until_stopped(pair.a, stream, stop), rethrow{});
    asio::co_spawn(receiver_ctx, udp_asio_coroutines::receive_until_done(pair.b, stream, meter, stop), rethrow{});
    run_pinned_pair(
        s, [&] { sender_ctx.run(); },
        [&] {
            meter.start();
            receiver_ctx.run();
        },
        [&] {
            stop.store(true);
            sender_ctx.stop();
            receiver_ctx.stop();
        });
    if (!meter.done()) throw bench_failure("the receiver stopped before the last phase ended");
    stream.report_loss(s);
}

}  // namespace tern_bench::asio_impl
