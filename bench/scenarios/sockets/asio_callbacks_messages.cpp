// sockets/messages for asio/callbacks: mg::aio bench_io's frames (frames.hpp). Each client connection sends
// `parallel` requests, then for every receive decodes the replies, records their latency, encodes one new request
// per reply and writes them in one async_write; each server connection decodes the requests of a receive and
// writes the replies in one async_write. threads=1: clients and servers on one io_context; threads=2: the clients
// on one io_context on CPU 0, the servers on another on CPU 1.
#include "asio_common.hpp"
#include "frames.hpp"
#include "../two_threads.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <memory>
#include <vector>

namespace tern_bench::asio_impl {

using frames::codec;

namespace sockets_asio_callbacks_messages {  // this file's own (see bench/CMakeLists.txt)
namespace {

class message_server {
public:
    message_server(tcp::socket sock, const codec& c) : sock_(std::move(sock)), side_(c) {}

    void start() { read(); }
    bool done() const { return done_; }

private:
    void read() {
        sock_.async_read_some(asio::buffer(side_.conn().space(), side_.conn().space_size()),
                              [this](const asio::error_code& ec, std::size_t n) {
                                  if (ec == asio::error::eof) {
                                      side_.check_end();
                                      sock_.close();
                                      done_ = true;
                                      return;
                                  }
                                  expect_ok(ec, "server read");
                                  side_.received(n);
                                  if (side_.out().empty()) return read();
                                  asio::async_write(sock_, asio::buffer(side_.out()),
                                                    [this](const asio::error_code& ec, std::size_t) {
                                                        expect_ok(ec, "server write");
                                                        side_.out().clear();
                                                        read();
                                                    });
                              });
    }

    tcp::socket sock_;
    frames::server_connection side_;
    bool done_ = false;
};

class message_client {
public:
    message_client(tcp::socket& sock, const codec& c, std::size_t parallel, std::uint32_t seed, request_meter& meter)
        : sock_(sock), side_(c, parallel, seed), meter_(meter) {}

    void start() {
        side_.start();
        write();
    }

private:
    void write() {
        asio::async_write(sock_, asio::buffer(side_.out()), [this](const asio::error_code& ec, std::size_t) {
            expect_ok(ec, "client write");
            side_.out().clear();
            read();
        });
    }

    void read() {
        sock_.async_read_some(asio::buffer(side_.conn().space(), side_.conn().space_size()),
                              [this](const asio::error_code& ec, std::size_t n) {
                                  expect_ok(ec, "client read");
                                  side_.received(n, meter_);
                                  if (side_.finished())
                                      sock_.shutdown(tcp::socket::shutdown_send);
                                  else if (!side_.out().empty())
                                      write();
                                  else
                                      read();
                              });
    }

    tcp::socket& sock_;
    frames::client_connection side_;
    request_meter& meter_;
};

}  // namespace
}  // namespace sockets_asio_callbacks_messages

void sockets_messages_callbacks(session& s) {
    announce(s);
    frames::messages_params p = frames::read_messages_params(s);
    codec c(p.shape);
    request_meter meter(s, "msg_per_s");
    asio::io_context client_ctx(concurrency_hint);
    asio::io_context server_ctx(concurrency_hint);
    asio::io_context& servers_ctx = p.threads == 1 ? client_ctx : server_ctx;
    auto pairs = connect_pairs(client_ctx, servers_ctx, p.conns);
    std::vector<std::unique_ptr<sockets_asio_callbacks_messages::message_client>> clients;
    std::vector<std::unique_ptr<sockets_asio_callbacks_messages::message_server>> servers;
    for (std::size_t i = 0; i < p.conns; ++i) {
        clients.push_back(
            std::make_unique<sockets_asio_callbacks_messages::message_client>(pairs[i].client, c, p.parallel,
                static_cast<std::uint32_t>(i + 1), meter));
        servers.push_back(std::make_unique<sockets_asio_callbacks_messages::message_server>(std::move(pairs[i].server),
            c));
    }
    auto run_clients = [&] {
        meter.start();
        for (auto& cl : clients) cl->start();
        client_ctx.run();
    };
    auto run_servers = [&] {
        for (auto& sv : servers) sv->start();
        if (p.threads == 2) server_ctx.run();
    };
    if (p.threads == 1) {
        pin_single_thread(s);
        run_servers();
        run_clients();
    } else {
        run_pinned_pair(s, run_clients, run_servers, [&] {
            client_ctx.stop();
            server_ctx.stop();
        });
    }
    if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
    for (auto& sv : servers)
        if (!sv->done()) throw bench_failure("a server connection did not see its end of stream");
}

}  // namespace tern_bench::asio_impl
