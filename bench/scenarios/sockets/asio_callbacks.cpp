// sockets/pingpong for asio/callbacks: client and server as two handler chains on one io_context.
// Client: async_write(size bytes) -> async_read(size bytes) -> verify -> next round. Server: async_read(size
// bytes) -> verify -> async_write(echo) -> next read. After the last phase the client shuts down its sending
// side, the server's read ends with eof, and run() returns.
#include "asio_common.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::asio_impl {

namespace {

class pingpong {
public:
    pingpong(session& s, std::size_t size)
        : pair_(ctx_), pattern_(size), client_buf_(size), server_buf_(size), meter_(s) {}

    void run() {
        meter_.start();
        server_read();
        client_write();
        ctx_.run();
        if (!meter_.done()) throw bench_failure("the loop ran out of work before the last phase ended");
        if (!server_done_) throw bench_failure("the server did not see the client's end of stream");
    }

private:
    void client_write() {
        t0_ = bench_clock::now();
        asio::async_write(pair_.client, asio::buffer(pattern_.round(client_round_), pattern_.size()),
                          [this](const asio::error_code& ec, std::size_t) {
                              expect_ok(ec, "client write");
                              client_read();
                          });
    }

    void client_read() {
        asio::async_read(pair_.client, asio::buffer(client_buf_), [this](const asio::error_code& ec, std::size_t) {
            auto t1 = bench_clock::now();
            expect_ok(ec, "client read");
            pattern_.verify(client_buf_.data(), client_round_++, "client");
            if (meter_.record(t0_, t1))
                client_write();
            else
                pair_.client.shutdown(asio::ip::tcp::socket::shutdown_send);
        });
    }

    void server_read() {
        asio::async_read(pair_.server, asio::buffer(server_buf_), [this](const asio::error_code& ec, std::size_t n) {
            if (ec == asio::error::eof && n == 0) {
                server_done_ = true;
                return;
            }
            expect_ok(ec, "server read");
            pattern_.verify(server_buf_.data(), server_round_++, "server");
            asio::async_write(pair_.server, asio::buffer(server_buf_), [this](const asio::error_code& ec, std::size_t) {
                expect_ok(ec, "server write");
                server_read();
            });
        });
    }

    asio::io_context ctx_{concurrency_hint};
    loopback_pair pair_;
    payload_pattern pattern_;
    std::vector<unsigned char> client_buf_;
    std::vector<unsigned char> server_buf_;
    latency_meter meter_;
    std::uint64_t client_round_ = 0;
    std::uint64_t server_round_ = 0;
    bench_clock::time_point t0_{};
    bool server_done_ = false;
};

}  // namespace

void sockets_pingpong_callbacks(session& s) {
    announce(s);
    pingpong(s, static_cast<std::size_t>(s.param_int("size"))).run();
}

}  // namespace tern_bench::asio_impl
