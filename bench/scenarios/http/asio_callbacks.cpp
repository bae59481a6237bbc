// http/minimal for asio/callbacks: `conns` keep-alive connections, clients and servers on one io_context. A client
// chain async_write()s the request, async_read_some()s until the response is complete (http_codec.hpp parses and
// checks it) and records the latency; a server chain async_read_some()s and answers every complete request in one
// async_write. After the last phase the clients shut down their sending side and the servers read end of stream.
#include "http_codec.hpp"
#include "../sockets/asio_common.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <memory>
#include <vector>

namespace tern_bench::asio_impl {

namespace {

class http_server {
public:
    explicit http_server(tcp::socket& sock) : sock_(sock) {}

    void start() { read(); }
    bool done() const { return done_; }

private:
    void read() {
        sock_.async_read_some(
            asio::buffer(conn_.space(), conn_.space_size()), [this](const asio::error_code& ec, std::size_t n) {
                if (ec == asio::error::eof) {
                    if (!conn_.idle()) throw bench_failure("server: end of stream inside a request");
                    done_ = true;
                    return;
                }
                expect_ok(ec, "server read");
                bool keep = conn_.received(n);
                if (conn_.out().empty()) return keep ? read() : finish();
                asio::async_write(
                    sock_, asio::buffer(conn_.out()), [this, keep](const asio::error_code& ec, std::size_t) {
                        expect_ok(ec, "server write");
                        conn_.out().clear();
                        keep ? read() : finish();
                    });
            });
    }
    void finish() {
        sock_.close();
        done_ = true;
    }

    tcp::socket& sock_;
    http::server_connection conn_;
    bool done_ = false;
};

class http_client {
public:
    http_client(tcp::socket& sock, request_meter& meter) : sock_(sock), meter_(meter) {}

    void start() { write(); }

private:
    void write() {
        t0_ = bench_clock::now();
        const auto request = http::client_connection::request();
        asio::async_write(
            sock_, asio::buffer(request.data(), request.size()), [this](const asio::error_code& ec, std::size_t) {
                expect_ok(ec, "client write");
                read();
            });
    }

    void read() {
        sock_.async_read_some(
            asio::buffer(conn_.space(), conn_.space_size()), [this](const asio::error_code& ec, std::size_t n) {
                expect_ok(ec, "client read");
                if (!conn_.received(n)) return read();
                if (meter_.record(t0_, bench_clock::now()))
                    write();
                else
                    sock_.shutdown(tcp::socket::shutdown_send);
            });
    }

    tcp::socket& sock_;
    request_meter& meter_;
    http::client_connection conn_;
    bench_clock::time_point t0_{};
};

}  // namespace

void http_minimal_callbacks(session& s) {
    announce(s);
    if (s.param_int("threads") != 1) throw bench_failure("http/minimal runs on one thread (threads=1)");
    asio::io_context ctx(concurrency_hint);
    auto pairs = connect_pairs(ctx, static_cast<std::size_t>(s.param_int("conns")));
    request_meter meter(s, "req_per_s");
    std::vector<std::unique_ptr<http_server>> servers;
    std::vector<std::unique_ptr<http_client>> clients;
    for (auto& p : pairs) {
        servers.push_back(std::make_unique<http_server>(p.server));
        clients.push_back(std::make_unique<http_client>(p.client, meter));
    }
    meter.start();
    for (std::size_t i = 0; i < pairs.size(); ++i) {
        servers[i]->start();
        clients[i]->start();
    }
    ctx.run();
    if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
    for (auto& sv : servers)
        if (!sv->done()) throw bench_failure("a server did not see its client's end of stream");
}

}  // namespace tern_bench::asio_impl
