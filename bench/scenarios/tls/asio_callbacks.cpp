// tls/handshake and tls/throughput for asio/callbacks: asio::ssl::stream<tcp::socket> driven by completion handlers
// (lambdas), the client's io_context on CPU 0 and the server's on CPU 1; the same shapes and checks as
// asio_coroutines.cpp and tern.cpp.
//   handshake:  each client object chains async_connect, async_handshake, one byte each way and async_shutdown, then
//               posts its next connection (the finished stream is replaced outside its own handler); the server's
//               accept chain starts one connection object per socket.
//   throughput: a writer chain of async_write calls and a reader chain of async_read_some calls per direction.
#include "asio_tls.hpp"
#include "../two_threads.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace tern_bench::asio_impl {

namespace tls_asio_callbacks {  // this file's own (see bench/CMakeLists.txt)
namespace {

// ---- handshake ----

class handshake_connection : public std::enable_shared_from_this<handshake_connection> {
public:
    handshake_connection(tcp::socket sock, asio::ssl::context& ctx) : s_(std::move(sock), ctx) {}

    void start() {
        s_.next_layer().set_option(tcp::no_delay(true));
        auto self = shared_from_this();
        s_.async_handshake(asio::ssl::stream_base::server, [self](const asio::error_code& ec) {
            expect_ok(ec, "server handshake");
            asio::async_read(self->s_, asio::buffer(&self->b_, 1), [self](const asio::error_code& ec, std::size_t) {
                expect_ok(ec, "server read");
                asio::async_write(
                    self->s_, asio::buffer(&self->b_, 1), [self](const asio::error_code& ec, std::size_t) {
                        expect_ok(ec, "server write");
                        self->s_.async_read_some(
                            asio::buffer(&self->b_, 1), [self](const asio::error_code& ec, std::size_t) {
                                expect(ec, asio::error::eof, "server: the client's close_notify");
                                self->s_.async_shutdown([self](const asio::error_code& ec) {
                                    if (ec && ec != asio::error::eof) expect_ok(ec, "server shutdown");
                                });
                            });
                    });
            });
        });
    }

private:
    ssl_stream s_;
    unsigned char b_ = 0;
};

class handshake_server {
public:
    handshake_server(asio::io_context& io, asio::ssl::context& ctx) : acceptor_(listen_loopback(io)), ctx_(ctx) {}

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
            std::make_shared<handshake_connection>(std::move(sock), ctx_)->start();
            accept();
        });
    }

    tcp::acceptor acceptor_;
    asio::ssl::context& ctx_;
    bool stopping_ = false;
};

// What the clients of a run share: the meter, and what happens when they are all primed or all done.
struct client_group {
    request_meter meter;
    unsigned unprimed;
    unsigned running;
    std::function<void()> all_primed;
    std::function<void()> all_done;

    client_group(session& s, unsigned n) : meter(s, handshakes_metric), unprimed(n), running(n) {}
};

class handshake_client {
public:
    handshake_client(asio::io_context& io, tcp::endpoint where, asio::ssl::context& ctx, bool resume, unsigned id,
                     client_group& group)
        : io_(io), where_(where), ctx_(ctx), resume_(resume), id_(id), group_(group) {}

    void start() { connect(); }  // the first connection primes (its session is the first offered)
    void next() { connect(); }   // the measured ones, once every client is primed

private:
    void connect() {
        s_.emplace(io_, ctx_);
        t0_ = bench_clock::now();
        s_->next_layer().async_connect(where_, [this](const asio::error_code& ec) {
            expect_ok(ec, "connect");
            s_->next_layer().set_option(tcp::no_delay(true));
            set_host(*s_);
            offered_ = resume_ && kept_.s != nullptr;
            if (offered_) check_ssl(SSL_set_session(s_->native_handle(), kept_.s), "SSL_set_session");
            s_->async_handshake(asio::ssl::stream_base::client, [this](const asio::error_code& ec) {
                expect_ok(ec, "client handshake");
                if ((SSL_session_reused(s_->native_handle()) == 1) != offered_)
                    throw bench_failure(offered_ ? "the server did not resume the session"
                                                 : "a session was resumed unasked");
                check_agreed(s_->native_handle());
                sent_ = primed_ ? static_cast<unsigned char>(id_ * 131 + lap_) : 0;
                asio::async_write(*s_, asio::buffer(&sent_, 1), [this](const asio::error_code& ec, std::size_t) {
                    expect_ok(ec, "client write");
                    asio::async_read(*s_, asio::buffer(&got_, 1), [this](const asio::error_code& ec, std::size_t) {
                        expect_ok(ec, "client read");
                        if (got_ != sent_) throw bench_failure("client: the echoed byte differs from the one sent");
                        if (resume_) {
                            SSL_SESSION* fresh = SSL_get1_session(s_->native_handle());
                            if (fresh != nullptr && SSL_SESSION_is_resumable(fresh) == 1)
                                kept_.reset(fresh);
                            else
                                SSL_SESSION_free(fresh);
                        }
                        s_->async_shutdown([this](const asio::error_code& ec) {
                            if (ec && ec != asio::error::eof) expect_ok(ec, "client shutdown");
                            asio::post(io_, [this] { finished(); });
                        });
                    });
                });
            });
        });
    }

    void finished() {
        s_.reset();
        if (!primed_) {
            if (resume_ && kept_.s == nullptr) throw bench_failure("no resumable session after the first connection");
            primed_ = true;
            if (--group_.unprimed == 0) group_.all_primed();
            return;
        }
        ++lap_;
        if (group_.meter.record(t0_, bench_clock::now()))
            connect();
        else if (--group_.running == 0)
            group_.all_done();
    }

    asio::io_context& io_;
    tcp::endpoint where_;
    asio::ssl::context& ctx_;
    bool resume_;
    unsigned id_;
    client_group& group_;
    std::optional<ssl_stream> s_;
    ssl_session_ref kept_;
    bool primed_ = false;
    bool offered_ = false;
    std::uint64_t lap_ = 0;
    unsigned char sent_ = 0;
    unsigned char got_ = 0;
    bench_clock::time_point t0_{};
};

// ---- throughput ----

class stream_writer {
public:
    stream_writer(ssl_stream& s, throughput_run& run, direction& d) : s_(s), run_(run), d_(d) {}

    void start() { write(); }

private:
    void write() {
        asio::async_write(s_, asio::buffer(run_.pattern.at(offset_), run_.size),
                          [this](const asio::error_code& ec, std::size_t) {
                              expect_ok(ec, "writer");
                              offset_ += run_.size;
                              if (last_) return;
                              if (run_.stop.load(std::memory_order_relaxed)) {
                                  d_.final_total.store(offset_ + run_.size);
                                  last_ = true;
                              }
                              write();
                          });
    }

    ssl_stream& s_;
    throughput_run& run_;
    direction& d_;
    std::uint64_t offset_ = 0;
    bool last_ = false;
};

class stream_reader {
public:
    stream_reader(ssl_stream& s, throughput_run& run, direction& d, throughput_meter* meter, const direction* other,
                  const char* side)
        : s_(s), side_(side), buf_(run.size), tally_(run.pattern, d, meter, other, run.stop, side) {}

    void start() { read(); }
    bool done() const { return done_; }

private:
    void read() {
        s_.async_read_some(asio::buffer(buf_), [this](const asio::error_code& ec, std::size_t n) {
            expect_ok(ec, side_);
            if (!tally_.took(buf_.data(), n)) {
                done_ = true;
                return;
            }
            read();
        });
    }

    ssl_stream& s_;
    const char* side_;
    std::vector<unsigned char> buf_;
    stream_tally tally_;
    bool done_ = false;
};

}  // namespace
}  // namespace tls_asio_callbacks

void tls_handshake_callbacks(session& s) {
    announce(s);
    const bool resume = resumption(s);
    const auto concurrent = static_cast<unsigned>(s.param_int("concurrent"));
    tls_contexts ssl_ctxs(resume);
    asio::io_context client_io(concurrency_hint);
    asio::io_context server_io(concurrency_hint);
    tls_asio_callbacks::handshake_server server(server_io, ssl_ctxs.server);
    tls_asio_callbacks::client_group group(s, concurrent);
    std::vector<std::unique_ptr<tls_asio_callbacks::handshake_client>> clients;
    for (unsigned i = 0; i < concurrent; ++i)
        clients.push_back(
            std::make_unique<tls_asio_callbacks::handshake_client>(client_io, server.where(), ssl_ctxs.client, resume,
                i, group));
    group.all_primed = [&] {
        group.meter.start();
        for (auto& c : clients) c->next();
    };
    group.all_done = [&] { asio::post(server_io, [&server] { server.stop(); }); };
    run_pinned_pair(
        s,
        [&] {
            for (auto& c : clients) c->start();
            client_io.run();
            if (!group.meter.done()) throw bench_failure("the clients stopped before the last phase ended");
        },
        [&] {
            server.start();
            server_io.run();
        },
        [&] {
            client_io.stop();
            server_io.stop();
        });
}

void tls_throughput_callbacks(session& s) {
    announce(s);
    const auto size = static_cast<std::size_t>(s.param_int("size"));
    throughput_run run(size, both_ways(s));
    tls_contexts ssl_ctxs(false);
    asio::io_context client_io(concurrency_hint);
    asio::io_context server_io(concurrency_hint);
    tcp::acceptor acceptor = listen_loopback(server_io);
    const tcp::endpoint where = acceptor.local_endpoint();
    throughput_meter meter(s, throughput_metric, 1e6);
    ssl_stream client(client_io, ssl_ctxs.client);
    std::optional<ssl_stream> server;
    std::optional<tls_asio_callbacks::stream_writer> up_writer, down_writer;
    std::optional<tls_asio_callbacks::stream_reader> up_reader, down_reader;
    run_pinned_pair(
        s,
        [&] {
            client.next_layer().async_connect(where, [&](const asio::error_code& ec) {
                expect_ok(ec, "connect");
                client.next_layer().set_option(tcp::no_delay(true));
                set_host(client);
                client.async_handshake(asio::ssl::stream_base::client, [&](const asio::error_code& ec) {
                    expect_ok(ec, "client handshake");
                    check_agreed(client.native_handle());
                    up_writer.emplace(client, run, run.up).start();
                    if (run.both) down_reader.emplace(client, run, run.down, nullptr, nullptr, "client").start();
                });
            });
            client_io.run();
        },
        [&] {
            acceptor.async_accept([&](const asio::error_code& ec, tcp::socket sock) {
                expect_ok(ec, "accept");
                sock.set_option(tcp::no_delay(true));
                server.emplace(std::move(sock), ssl_ctxs.server);
                server->async_handshake(asio::ssl::stream_base::server, [&](const asio::error_code& ec) {
                    expect_ok(ec, "server handshake");
                    meter.start();
                    up_reader.emplace(*server, run, run.up, &meter, run.both ? &run.down : nullptr, "server").start();
                    if (run.both) down_writer.emplace(*server, run, run.down).start();
                });
            });
            server_io.run();
            if (!meter.done() || !up_reader || !up_reader->done())
                throw bench_failure("the stream ended before the last phase");
        },
        [&] {
            client_io.stop();
            server_io.stop();
        });
}

}  // namespace tern_bench::asio_impl
