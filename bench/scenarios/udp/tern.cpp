// udp/pingpong and udp/throughput for tern.
//   pingpong:   two loopback UDP sockets connected to each other on one io_context; the client sends `size` bytes
//               and waits for the echo, the server echoes each datagram; both verify every byte. An empty
//               datagram ends the server.
//   throughput: a sender loop on CPU 0 and a receiver loop on CPU 1. tern moves datagrams in batches of 32 with
//               send_batch / receive_batch (sendmmsg / recvmmsg, net::datagram_batch), its API for this job; the
//               receiver counts and checks each datagram, and tells the sender to stop when its meter is done.
#include "../tern_setup.hpp"
#include "../two_threads.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"
#include "datagrams.hpp"

#include <atomic>
#include <vector>

namespace tern_bench::tern_impl {

namespace net = tern::net;

namespace udp_tern {  // this file's own (see bench/CMakeLists.txt)
namespace {

// Two sockets on ctx, bound to loopback and connected to each other.
std::pair<net::udp_socket, net::udp_socket> connected_udp_pair(tern::io_context& ctx) {
    net::udp_socket a(ctx), b(ctx);
    expect_ok(a.bind(net::endpoint::loopback_v4(0)), "bind");
    expect_ok(b.bind(net::endpoint::loopback_v4(0)), "bind");
    auto [aec, a_ep] = a.local_endpoint();
    expect_ok(aec, "local_endpoint");
    auto [bec, b_ep] = b.local_endpoint();
    expect_ok(bec, "local_endpoint");
    expect_ok(a.connect(b_ep), "connect");
    expect_ok(b.connect(a_ep), "connect");
    for (auto* s : {&a, &b}) {
        expect_ok(s->set_option(net::option::receive_buffer_size{udp_buffer_bytes}), "SO_RCVBUF");
        expect_ok(s->set_option(net::option::send_buffer_size{udp_buffer_bytes}), "SO_SNDBUF");
    }
    return {std::move(a), std::move(b)};
}

tern::task<void> pingpong_client(net::udp_socket& sock, const payload_pattern& pattern, latency_meter& meter) {
    std::vector<unsigned char> buf(pattern.size() + 1);
    for (std::uint64_t round = 0;; ++round) {
        auto t0 = bench_clock::now();
        auto [sec, sent] = co_await sock.send(tern::const_buffer(pattern.round(round), pattern.size()));
        expect_ok(sec, "client send");
        auto [rec, n] = co_await sock.receive(tern::mutable_buffer(buf.data(), buf.size()));
        auto t1 = bench_clock::now();
        expect_ok(rec, "client receive");
        if (n != pattern.size()) throw bench_failure("client: echo of " + std::to_string(n) + " bytes");
        pattern.verify(buf.data(), round, "client");
        if (!meter.record(t0, t1)) break;
    }
    auto [eec, end] = co_await sock.send(tern::const_buffer(buf.data(), 0));
    expect_ok(eec, "client end");
}

tern::task<void> pingpong_server(net::udp_socket& sock, const payload_pattern& pattern) {
    std::vector<unsigned char> buf(pattern.size() + 1);
    for (std::uint64_t round = 0;; ++round) {
        auto [rec, n] = co_await sock.receive(tern::mutable_buffer(buf.data(), buf.size()));
        expect_ok(rec, "server receive");
        if (n == 0) co_return;
        if (n != pattern.size()) throw bench_failure("server: datagram of " + std::to_string(n) + " bytes");
        pattern.verify(buf.data(), round, "server");
        auto [sec, sent] = co_await sock.send(tern::const_buffer(buf.data(), n));
        expect_ok(sec, "server send");
    }
}

tern::task<void> pingpong(tern::io_context& ctx, session& s, std::size_t size) {
    auto [client, server] = connected_udp_pair(ctx);
    payload_pattern pattern(size);
    latency_meter meter(s);
    meter.start();
    auto server_task = tern::spawn(pingpong_server(server, pattern));
    auto client_task = tern::spawn(pingpong_client(client, pattern, meter));
    co_await std::move(client_task);
    co_await std::move(server_task);
    if (!meter.done()) throw bench_failure("the client stopped before the last phase ended");
}

constexpr std::size_t batch_slots = 32;

tern::task<void> send_until_stopped(net::udp_socket& sock, const datagram_stream& stream, const std::atomic<bool>& stop) {
    net::datagram_batch batch(batch_slots, stream.size());
    std::uint64_t seq = 0;
    while (!stop.load(std::memory_order_relaxed)) {
        for (std::size_t i = 0; i < batch_slots; ++i) {
            stream.fill(batch.buffer(i).data(), seq + i);
            batch.set(i, stream.size());
        }
        auto [ec, n] = co_await sock.send_batch(batch, batch_slots);
        expect_ok(ec, "send_batch");
        seq += n;  // the unsent rest is made again, with the next numbers
    }
}

tern::task<void> receive_until_done(net::udp_socket& sock, datagram_stream& stream, ops_meter& meter,
                                    std::atomic<bool>& stop) {
    net::datagram_batch batch(batch_slots, stream.size() + 1);
    meter.start();
    for (bool more = true; more;) {
        auto [ec, n] = co_await sock.receive_batch(batch);
        expect_ok(ec, "receive_batch");
        for (std::size_t i = 0; i < n && more; ++i) {
            stream.check(batch.data(i).data(), batch.size(i));
            more = meter.tick();
        }
    }
    stop.store(true, std::memory_order_relaxed);
}

}  // namespace
}  // namespace udp_tern

void udp_pingpong(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(udp_tern::pingpong(ctx, s, static_cast<std::size_t>(s.param_int("size"))));
}

void udp_throughput(session& s) {
    tern::io_context_options opts = options_for(s);
    tern::io_context sender_ctx(opts);
    tern::io_context receiver_ctx(opts);
    announce(s, sender_ctx);
    announce(s, receiver_ctx);
    // Both sockets are made on the sender's loop, then the receiving one moves to its own.
    auto [sender, receiver] = udp_tern::connected_udp_pair(sender_ctx);
    expect_ok(receiver.move_to(receiver_ctx), "move_to");
    datagram_stream stream(static_cast<std::size_t>(s.param_int("size")));
    ops_meter meter(s, "datagrams_per_s");
    std::atomic<bool> stop{false};
    run_pinned_pair(
        s, [&] { sender_ctx.block_on(udp_tern::send_until_stopped(sender, stream, stop)); },
        [&] { receiver_ctx.block_on(udp_tern::receive_until_done(receiver, stream, meter, stop)); },
        [&] {
            stop.store(true);
            sender_ctx.stop();
            receiver_ctx.stop();
        });
    if (!meter.done()) throw bench_failure("the receiver stopped before the last phase ended");
    stream.report_loss(s);
}

}  // namespace tern_bench::tern_impl
