// The two sides of a stream ping-pong for tern, over any stream socket (TCP in sockets/*, Unix in unix/pingpong):
// the client writes a round's bytes with write_all and reads the echo with read_exact, verifies it and records the
// round trip; at the end it shuts down its sending side, and the server, which echoes every round after verifying
// it, ends on eof.
#pragma once

#include "../tern_setup.hpp"
#include "../../harness/meters.hpp"

#include <vector>

namespace tern_bench::tern_impl {

template <class Socket>
tern::task<void> client_loop(Socket& sock, const payload_pattern& pattern, latency_meter& meter) {
    std::vector<unsigned char> buf(pattern.size());
    for (std::uint64_t round = 0;; ++round) {
        auto t0 = bench_clock::now();
        auto [wec, wn] = co_await sock.write_all(tern::const_buffer(pattern.round(round), pattern.size()));
        expect_ok(wec, "client write");
        auto [rec, rn] = co_await sock.read_exact(tern::mutable_buffer(buf.data(), buf.size()));
        auto t1 = bench_clock::now();
        expect_ok(rec, "client read");
        pattern.verify(buf.data(), round, "client");
        if (!meter.record(t0, t1)) break;
    }
    expect_ok(sock.shutdown(tern::net::shutdown_how::send), "client shutdown");
}

template <class Socket>
tern::task<void> server_loop(Socket& sock, const payload_pattern& pattern) {
    std::vector<unsigned char> buf(pattern.size());
    for (std::uint64_t round = 0;; ++round) {
        auto [rec, rn] = co_await sock.read_exact(tern::mutable_buffer(buf.data(), buf.size()));
        if (rec == tern::net::error::eof && rn == 0) co_return;
        expect_ok(rec, "server read");
        pattern.verify(buf.data(), round, "server");
        auto [wec, wn] = co_await sock.write_all(tern::const_buffer(buf.data(), buf.size()));
        expect_ok(wec, "server write");
    }
}

}  // namespace tern_bench::tern_impl
