// udp/pingpong and udp/throughput for asio/callbacks.
//   pingpong:   two connected loopback UDP sockets on one io_context; client chain: async_send(size bytes) ->
//               async_receive -> verify -> next round; server chain: async_receive -> verify -> async_send(echo).
//               An empty datagram ends the server.
//   throughput: a sender chain on an io_context run on CPU 0 (async_send of one datagram, then the next) and a
//               receiver chain on another on CPU 1 (async_receive, check, count); Asio has no batch operation.
#include "asio_common.hpp"
#include "../two_threads.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <atomic>
#include <vector>

namespace tern_bench::asio_impl {

namespace udp_asio_callbacks {  // this file's own (see bench/CMakeLists.txt)
namespace {

class pingpong_client {
public:
    pingpong_client(udp::socket& sock, const payload_pattern& pattern, latency_meter& meter)
        : sock_(sock), pattern_(pattern), buf_(pattern.size() + 1), meter_(meter) {}

    void start() { send(); }

private:
    void send() {
        t0_ = bench_clock::now();
        sock_.async_send(asio::buffer(pattern_.round(round_), pattern_.size()),
                         [this](const asio::error_code& ec, std::size_t) {
                             expect_ok(ec, "client send");
                             receive();
                         });
    }

    void receive() {
        sock_.async_receive(asio::buffer(buf_), [this](const asio::error_code& ec, std::size_t n) {
            auto t1 = bench_clock::now();
            expect_ok(ec, "client receive");
            if (n != pattern_.size()) throw bench_failure("client: echo of " + std::to_string(n) + " bytes");
            pattern_.verify(buf_.data(), round_++, "client");
            if (meter_.record(t0_, t1)) {
                send();
            } else {
                sock_.async_send(asio::buffer(buf_.data(), 0),
                                 [](const asio::error_code& ec, std::size_t) { expect_ok(ec, "client end"); });
            }
        });
    }

    udp::socket& sock_;
    const payload_pattern& pattern_;
    std::vector<unsigned char> buf_;
    latency_meter& meter_;
    std::uint64_t round_ = 0;
    bench_clock::time_point t0_{};
};

class pingpong_server {
public:
    pingpong_server(udp::socket& sock, const payload_pattern& pattern)
        : sock_(sock), pattern_(pattern), buf_(pattern.size() + 1) {}

    void start() { receive(); }
    bool done() const { return done_; }

private:
    void receive() {
        sock_.async_receive(asio::buffer(buf_), [this](const asio::error_code& ec, std::size_t n) {
            expect_ok(ec, "server receive");
            if (n == 0) {
                done_ = true;
                return;
            }
            if (n != pattern_.size()) throw bench_failure("server: datagram of " + std::to_string(n) + " bytes");
            pattern_.verify(buf_.data(), round_++, "server");
            sock_.async_send(asio::buffer(buf_.data(), n), [this](const asio::error_code& ec, std::size_t) {
                expect_ok(ec, "server send");
                receive();
            });
        });
    }

    udp::socket& sock_;
    const payload_pattern& pattern_;
    std::vector<unsigned char> buf_;
    std::uint64_t round_ = 0;
    bool done_ = false;
};

class sender {
public:
    sender(udp::socket& sock, const datagram_stream& stream, const std::atomic<bool>& stop)
        : sock_(sock), stream_(stream), stop_(stop), buf_(stream.size()) {}

    void start() { send(); }

private:
    void send() {
        if (stop_.load(std::memory_order_relaxed)) return;
        stream_.fill(buf_.data(), seq_);
        sock_.async_send(asio::buffer(buf_), [this](const asio::error_code& ec, std::size_t) {
            expect_ok(ec, "send");
            ++seq_;
            send();
        });
    }

    udp::socket& sock_;
    const datagram_stream& stream_;
    const std::atomic<bool>& stop_;
    std::vector<unsigned char> buf_;
    std::uint64_t seq_ = 0;
};

class receiver {
public:
    receiver(udp::socket& sock, datagram_stream& stream, ops_meter& meter, std::atomic<bool>& stop)
        : sock_(sock), stream_(stream), meter_(meter), stop_(stop), buf_(stream.size() + 1) {}

    void start() { receive(); }

private:
    void receive() {
        sock_.async_receive(asio::buffer(buf_), [this](const asio::error_code& ec, std::size_t n) {
            expect_ok(ec, "receive");
            stream_.check(buf_.data(), n);
            if (meter_.tick()) {
                receive();
            } else {
                stop_.store(true, std::memory_order_relaxed);
            }
        });
    }

    udp::socket& sock_;
    datagram_stream& stream_;
    ops_meter& meter_;
    std::atomic<bool>& stop_;
    std::vector<unsigned char> buf_;
};

}  // namespace
}  // namespace udp_asio_callbacks

void udp_pingpong_callbacks(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    udp_pair pair(ctx);
    payload_pattern pattern(static_cast<std::size_t>(s.param_int("size")));
    latency_meter meter(s);
    udp_asio_callbacks::pingpong_server server(pair.b, pattern);
    udp_asio_callbacks::pingpong_client client(pair.a, pattern, meter);
    meter.start();
    server.start();
    client.start();
    ctx.run();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
    if (!server.done()) throw bench_failure("the server did not see the end of the exchange");
}

void udp_throughput_callbacks(session& s) {
    announce(s);
    asio::io_context sender_ctx(concurrency_hint);
    asio::io_context receiver_ctx(concurrency_hint);
    udp_pair pair(sender_ctx, receiver_ctx);
    datagram_stream stream(static_cast<std::size_t>(s.param_int("size")));
    ops_meter meter(s, "datagrams_per_s");
    std::atomic<bool> stop{false};
    udp_asio_callbacks::sender send_side(pair.a, stream, stop);
    udp_asio_callbacks::receiver receive_side(pair.b, stream, meter, stop);
    run_pinned_pair(
        s,
        [&] {
            send_side.start();
            sender_ctx.run();
        },
        [&] {
            meter.start();
            receive_side.start();
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
