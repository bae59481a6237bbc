// unix/pingpong for asio/callbacks: sockets/pingpong's two handler chains over asio::local::stream_protocol
// sockets made by connect_pair, on one io_context; async_write / async_read of exact sizes, every byte verified.
#include "../asio_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::asio_impl {

namespace {

using stream = asio::local::stream_protocol;

class pingpong_client {
public:
    pingpong_client(stream::socket& sock, const payload_pattern& pattern, latency_meter& meter)
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
                sock_.shutdown(stream::socket::shutdown_send);
        });
    }

    stream::socket& sock_;
    const payload_pattern& pattern_;
    std::vector<unsigned char> buf_;
    latency_meter& meter_;
    std::uint64_t round_ = 0;
    bench_clock::time_point t0_{};
};

class pingpong_server {
public:
    pingpong_server(stream::socket& sock, const payload_pattern& pattern)
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

    stream::socket& sock_;
    const payload_pattern& pattern_;
    std::vector<unsigned char> buf_;
    std::uint64_t round_ = 0;
    bool done_ = false;
};

}  // namespace

void unix_pingpong_callbacks(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    stream::socket client_sock(ctx), server_sock(ctx);
    asio::local::connect_pair(client_sock, server_sock);
    payload_pattern pattern(static_cast<std::size_t>(s.param_int("size")));
    latency_meter meter(s);
    pingpong_server server(server_sock, pattern);
    pingpong_client client(client_sock, pattern, meter);
    meter.start();
    server.start();
    client.start();
    ctx.run();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
    if (!server.done()) throw bench_failure("the server did not see its client's end of stream");
}

}  // namespace tern_bench::asio_impl
