// The two sides of a stream ping-pong for Asio, over any stream socket (TCP in sockets/*, Unix in unix/pingpong),
// in both styles. The client writes a round's bytes (async_write) and reads the echo (async_read of the exact
// size), verifies it and records the round trip; at the end it shuts down its sending side, and the server, which
// echoes every round after verifying it, ends on eof.
//   pingpong_client / pingpong_server: asio/callbacks, two handler chains;
//   client_loop / server_loop:         asio/coroutines, use_awaitable (the server's read through redirect_error,
//                                      so that the end of stream ends it without an exception).
#pragma once

#include "../asio_setup.hpp"
#include "../../harness/meters.hpp"

#include <vector>

namespace tern_bench::asio_impl {

template <class Socket>
class pingpong_client {
public:
    pingpong_client(Socket& sock, const payload_pattern& pattern, latency_meter& meter)
        : sock_(sock), pattern_(pattern), buf_(pattern.size()), meter_(meter) {}

    void start() { write(); }

private:
    void write() {
        t0_ = bench_clock::now();
        asio::async_write(sock_, asio::buffer(pattern_.round(round_), pattern_.size()),
                          [this](const asio::error_code& ec, std::size_t) {
                              expect_ok(ec, "client write");
                              read();
                          });
    }

    void read() {
        asio::async_read(sock_, asio::buffer(buf_), [this](const asio::error_code& ec, std::size_t) {
            auto t1 = bench_clock::now();
            expect_ok(ec, "client read");
            pattern_.verify(buf_.data(), round_++, "client");
            if (meter_.record(t0_, t1))
                write();
            else
                sock_.shutdown(Socket::shutdown_send);
        });
    }

    Socket& sock_;
    const payload_pattern& pattern_;
    std::vector<unsigned char> buf_;
    latency_meter& meter_;
    std::uint64_t round_ = 0;
    bench_clock::time_point t0_{};
};

template <class Socket>
class pingpong_server {
public:
    pingpong_server(Socket& sock, const payload_pattern& pattern)
        : sock_(sock), pattern_(pattern), buf_(pattern.size()) {}

    void start() { read(); }
    bool done() const { return done_; }

private:
    void read() {
        asio::async_read(sock_, asio::buffer(buf_), [this](const asio::error_code& ec, std::size_t n) {
            if (ec == asio::error::eof && n == 0) {
                done_ = true;
                return;
            }
            expect_ok(ec, "server read");
            pattern_.verify(buf_.data(), round_++, "server");
            asio::async_write(sock_, asio::buffer(buf_), [this](const asio::error_code& ec, std::size_t) {
                expect_ok(ec, "server write");
                read();
            });
        });
    }

    Socket& sock_;
    const payload_pattern& pattern_;
    std::vector<unsigned char> buf_;
    std::uint64_t round_ = 0;
    bool done_ = false;
};

template <class Socket>
asio::awaitable<void> client_loop(Socket& sock, const payload_pattern& pattern, latency_meter& meter) {
    std::vector<unsigned char> buf(pattern.size());
    for (std::uint64_t round = 0;; ++round) {
        auto t0 = bench_clock::now();
        co_await asio::async_write(sock, asio::buffer(pattern.round(round), pattern.size()), asio::use_awaitable);
        co_await asio::async_read(sock, asio::buffer(buf), asio::use_awaitable);
        auto t1 = bench_clock::now();
        pattern.verify(buf.data(), round, "client");
        if (!meter.record(t0, t1)) break;
    }
    sock.shutdown(Socket::shutdown_send);
}

template <class Socket>
asio::awaitable<void> server_loop(Socket& sock, const payload_pattern& pattern, int& done) {
    std::vector<unsigned char> buf(pattern.size());
    for (std::uint64_t round = 0;; ++round) {
        asio::error_code ec;
        std::size_t n = co_await asio::async_read(sock, asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
        if (ec == asio::error::eof && n == 0) break;
        expect_ok(ec, "server read");
        pattern.verify(buf.data(), round, "server");
        co_await asio::async_write(sock, asio::buffer(buf), asio::use_awaitable);
    }
    ++done;
}

}  // namespace tern_bench::asio_impl
