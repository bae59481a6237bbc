// sockets/accept_churn and sockets/io_event for asio/callbacks, on one io_context.
//   accept_churn: `concurrent` client chains each loop over laps: async_connect, async_write one byte, async_read
//                 it back, async_read_some the end of stream, close. An accept chain (async_accept, move form)
//                 starts one connection object per accepted socket: read the byte, write it back, close.
//   io_event:     libev's socketpair chain (io_event_chain.hpp); one chain per pair keeps a 1-byte
//                 async_read_some pending on its read end (a local::stream_protocol socket).
#include "asio_common.hpp"
#include "io_event_chain.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <memory>
#include <vector>

namespace tern_bench::asio_impl {

namespace sockets_asio_callbacks_churn {  // this file's own (see bench/CMakeLists.txt)
namespace {

// ---- accept_churn ----

class churn_connection : public std::enable_shared_from_this<churn_connection> {
public:
    explicit churn_connection(tcp::socket sock) : sock_(std::move(sock)) {}

    void start() {
        asio::async_read(
            sock_, asio::buffer(&byte_, 1), [self = shared_from_this()](const asio::error_code& ec, std::size_t) {
                expect_ok(ec, "server read");
                asio::async_write(
                    self->sock_, asio::buffer(&self->byte_, 1), [self](const asio::error_code& ec, std::size_t) {
                        expect_ok(ec, "server write");
                        self->sock_.close();  // the server side closes first
                    });
            });
    }

private:
    tcp::socket sock_;
    unsigned char byte_ = 0;
};

class churn_server {
public:
    explicit churn_server(asio::io_context& ctx) : acceptor_(listen_loopback(ctx)) {}

    tcp::endpoint where() const { return acceptor_.local_endpoint(); }
    void start() { accept(); }
    void stop() {
        stopping_ = true;
        acceptor_.cancel();
    }

private:
    void accept() {
        acceptor_.async_accept([this](const asio::error_code& ec, tcp::socket sock) {
            if (stopping_ && ec == asio::error::operation_aborted) return;
            expect_ok(ec, "accept");
            std::make_shared<churn_connection>(std::move(sock))->start();
            accept();
        });
    }

    tcp::acceptor acceptor_;
    bool stopping_ = false;
};

class churn_client {
public:
    churn_client(asio::io_context& ctx, churn_server& server, unsigned id, request_meter& meter, std::size_t& running)
        : sock_(ctx), server_(server), where_(server.where()), id_(id), meter_(meter), running_(running) {}

    void start() { lap(); }

private:
    void lap() {
        t0_ = bench_clock::now();
        sent_ = static_cast<unsigned char>(id_ * 131 + lap_);
        sock_.async_connect(where_, [this](const asio::error_code& ec) {
            expect_ok(ec, "connect");
            asio::async_write(sock_, asio::buffer(&sent_, 1), [this](const asio::error_code& ec, std::size_t) {
                expect_ok(ec, "client write");
                asio::async_read(sock_, asio::buffer(got_, 1), [this](const asio::error_code& ec, std::size_t) {
                    expect_ok(ec, "client read");
                    if (got_[0] != sent_) throw bench_failure("client: the echoed byte differs from the one sent");
                    sock_.async_read_some(asio::buffer(got_ + 1, 1), [this](const asio::error_code& ec, std::size_t) {
                        if (ec != asio::error::eof)
                            throw bench_failure("client: expected the end of stream after the echo, got '" +
                                                ec.message() + "'");
                        sock_.close();
                        ++lap_;
                        if (meter_.record(t0_, bench_clock::now()))
                            lap();
                        else if (--running_ == 0)
                            server_.stop();  // the accept chain never runs out of work by itself
                    });
                });
            });
        });
    }

    tcp::socket sock_;
    churn_server& server_;
    tcp::endpoint where_;
    unsigned id_;
    request_meter& meter_;
    std::size_t& running_;
    std::uint64_t lap_ = 0;
    unsigned char sent_ = 0;
    unsigned char got_[2] = {};
    bench_clock::time_point t0_{};
};

// ---- io_event ----

struct io_event_run;

class io_event_reader {
public:
    io_event_reader(asio::io_context& ctx, int fd, std::size_t index, io_event_run& run)
        : sock_(ctx, asio::local::stream_protocol(), fd), index_(index), run_(run) {}

    void start();
    bool done() const { return done_; }

private:
    asio::local::stream_protocol::socket sock_;
    std::size_t index_;
    io_event_run& run_;
    unsigned char byte_ = 0;
    bool done_ = false;
};

struct io_event_run {
    io_event::chain chain;
    iteration_meter meter;

    io_event_run(session& s, std::size_t pairs) : chain(pairs), meter(s, "us_per_iter") {}

    void end_of_iteration() {
        if (meter.finished_one())
            chain.start_iteration();
        else
            chain.close_write_ends();  // every reader then reads end of stream
    }
};

void io_event_reader::start() {
    sock_.async_read_some(asio::buffer(&byte_, 1), [this](const asio::error_code& ec, std::size_t) {
        if (ec == asio::error::eof) {
            done_ = true;
            return;
        }
        expect_ok(ec, "read");
        if (run_.chain.on_read(index_, byte_)) run_.end_of_iteration();
        start();
    });
}

}  // namespace
}  // namespace sockets_asio_callbacks_churn

void sockets_accept_churn_callbacks(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    auto concurrent = static_cast<unsigned>(s.param_int("concurrent"));
    sockets_asio_callbacks_churn::churn_server server(ctx);
    request_meter meter(s, "ops_per_s");
    std::size_t running = concurrent;
    std::vector<std::unique_ptr<sockets_asio_callbacks_churn::churn_client>> clients;
    for (unsigned i = 0; i < concurrent; ++i)
        clients.push_back(std::make_unique<sockets_asio_callbacks_churn::churn_client>(ctx, server, i, meter, running));
    server.start();
    meter.start();
    for (auto& c : clients) c->start();
    ctx.run();
    if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
}

void sockets_io_event_callbacks(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    auto pairs = static_cast<std::size_t>(s.param_int("pairs"));
    sockets_asio_callbacks_churn::io_event_run run(s, pairs);
    std::vector<std::unique_ptr<sockets_asio_callbacks_churn::io_event_reader>> readers;
    readers.reserve(pairs);
    for (std::size_t i = 0; i < pairs; ++i)
        readers.push_back(std::make_unique<sockets_asio_callbacks_churn::io_event_reader>(ctx,
            run.chain.take_read_end(i, false), i, run));
    for (auto& r : readers) r->start();
    run.meter.start();
    run.chain.start_iteration();
    ctx.run();
    if (!run.meter.done()) throw bench_failure("the readers stopped before the last phase ended");
    for (auto& r : readers)
        if (!r->done()) throw bench_failure("a reader did not see its end of stream");
}

}  // namespace tern_bench::asio_impl
