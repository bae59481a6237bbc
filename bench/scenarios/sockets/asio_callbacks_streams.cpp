// The stream scenarios for asio/callbacks: sockets/unidirectional, sockets/bidirectional, sockets/echo.
//   unidirectional: a writer chain async_write()s `size`-byte chunks of the stream pattern, a reader chain
//                   async_read_some()s into a `size`-byte buffer and checks every chunk at its offset; one io_context.
//   bidirectional:  the same in both directions at once on one connection pair (four chains, one io_context).
//   echo:           the client2/server2 method on two io_contexts (client on CPU 0, server on CPU 1): each session
//                   sends one block, then both sides echo whatever arrives (async_read_some, async_write, repeat).
// When the meter's last phase ends, the writers (or the echoing clients) stop and shut down their sending side;
// the readers drain to end of stream, still checking every byte.
#include "asio_common.hpp"
#include "../two_threads.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <memory>
#include <vector>

namespace tern_bench::asio_impl {

namespace sockets_asio_callbacks_streams {  // this file's own (see bench/CMakeLists.txt)
namespace {

constexpr std::size_t stream_period = 4093;

class stream_writer {
public:
    stream_writer(tcp::socket& sock, const stream_pattern& pattern, std::size_t size, const bool& stop)
        : sock_(sock), pattern_(pattern), size_(size), stop_(stop) {}

    void start() { write(); }

private:
    void write() {
        if (stop_) {
            sock_.shutdown(tcp::socket::shutdown_send);
            return;
        }
        asio::async_write(
            sock_, asio::buffer(pattern_.at(offset_), size_), [this](const asio::error_code& ec, std::size_t) {
                expect_ok(ec, "writer");
                offset_ += size_;
                write();
            });
    }

    tcp::socket& sock_;
    const stream_pattern& pattern_;
    std::size_t size_;
    const bool& stop_;
    std::uint64_t offset_ = 0;
};

class stream_reader {
public:
    stream_reader(tcp::socket& sock, const stream_pattern& pattern, std::size_t size, throughput_meter& meter,
                  bool& stop)
        : sock_(sock), pattern_(pattern), buf_(size), meter_(meter), stop_(stop) {}

    void start() { read(); }
    bool done() const { return done_; }

private:
    void read() {
        sock_.async_read_some(asio::buffer(buf_), [this](const asio::error_code& ec, std::size_t n) {
            if (ec == asio::error::eof) {
                if (!stop_) throw bench_failure("reader: end of stream before the last phase ended");
                done_ = true;
                return;
            }
            expect_ok(ec, "reader");
            pattern_.verify(buf_.data(), n, offset_, "reader");
            offset_ += n;
            if (!stop_ && !meter_.add(n)) stop_ = true;
            read();
        });
    }

    tcp::socket& sock_;
    const stream_pattern& pattern_;
    std::vector<unsigned char> buf_;
    throughput_meter& meter_;
    bool& stop_;
    std::uint64_t offset_ = 0;
    bool done_ = false;
};

void streams(session& s, bool both_ways) {
    announce(s);
    auto size = static_cast<std::size_t>(s.param_int("size"));
    asio::io_context ctx(concurrency_hint);
    loopback_pair pair(ctx);
    stream_pattern pattern(size, stream_period);
    throughput_meter meter(s, "mb_per_s", 1e6);
    bool stop = false;
    stream_reader reader_b(pair.server, pattern, size, meter, stop);
    stream_writer writer_a(pair.client, pattern, size, stop);
    stream_reader reader_a(pair.client, pattern, size, meter, stop);
    stream_writer writer_b(pair.server, pattern, size, stop);
    meter.start();
    reader_b.start();
    writer_a.start();
    if (both_ways) {
        reader_a.start();
        writer_b.start();
    }
    ctx.run();
    if (!meter.done() || !reader_b.done() || (both_ways && !reader_a.done()))
        throw bench_failure("the loop ran out of work before the streams ended");
}

// ---- echo ----

class echo_server_session {
public:
    echo_server_session(tcp::socket sock, const stream_pattern& pattern)
        : sock_(std::move(sock)), pattern_(pattern), buf_(pattern.period()) {}

    void start() { read(); }
    bool done() const { return done_; }

private:
    void read() {
        sock_.async_read_some(asio::buffer(buf_), [this](const asio::error_code& ec, std::size_t n) {
            if (ec == asio::error::eof) {  // the client is done; closing ends its drain
                sock_.close();
                done_ = true;
                return;
            }
            expect_ok(ec, "server read");
            pattern_.verify(buf_.data(), n, offset_, "server");
            offset_ += n;
            asio::async_write(sock_, asio::buffer(buf_.data(), n), [this](const asio::error_code& ec, std::size_t) {
                expect_ok(ec, "server write");
                read();
            });
        });
    }

    tcp::socket sock_;
    const stream_pattern& pattern_;
    std::vector<unsigned char> buf_;
    std::uint64_t offset_ = 0;
    bool done_ = false;
};

class echo_client_session {
public:
    echo_client_session(tcp::socket& sock, const stream_pattern& pattern, throughput_meter& meter)
        : sock_(sock), pattern_(pattern), buf_(pattern.period()), meter_(meter) {}

    void start() {
        asio::async_write(
            sock_, asio::buffer(pattern_.at(0), buf_.size()), [this](const asio::error_code& ec, std::size_t) {
                expect_ok(ec, "client write");
                read();
            });
    }
    bool done() const { return done_; }

private:
    void read() {
        sock_.async_read_some(asio::buffer(buf_), [this](const asio::error_code& ec, std::size_t n) {
            if (!echoing_ && ec == asio::error::eof) {
                done_ = true;
                return;
            }
            expect_ok(ec, "client read");
            pattern_.verify(buf_.data(), n, offset_, "client");
            offset_ += n;
            if (!echoing_) return read();
            if (meter_.add(n)) {
                asio::async_write(sock_, asio::buffer(buf_.data(), n), [this](const asio::error_code& ec, std::size_t) {
                    expect_ok(ec, "client write");
                    read();
                });
            } else {
                echoing_ = false;
                sock_.shutdown(tcp::socket::shutdown_send);
                read();
            }
        });
    }

    tcp::socket& sock_;
    const stream_pattern& pattern_;
    std::vector<unsigned char> buf_;
    throughput_meter& meter_;
    std::uint64_t offset_ = 0;
    bool echoing_ = true;
    bool done_ = false;
};

}  // namespace
}  // namespace sockets_asio_callbacks_streams

void sockets_unidirectional_callbacks(session& s) { sockets_asio_callbacks_streams::streams(s, false); }
void sockets_bidirectional_callbacks(session& s) { sockets_asio_callbacks_streams::streams(s, true); }

void sockets_echo_callbacks(session& s) {
    announce(s);
    auto block = static_cast<std::size_t>(s.param_int("blocksize"));
    auto sessions = static_cast<std::size_t>(s.param_int("sessions"));
    if (s.param_int("threads") != 1) throw bench_failure("sockets/echo runs one thread per side (threads=1)");
    asio::io_context client_ctx(concurrency_hint);
    asio::io_context server_ctx(concurrency_hint);
    auto pairs = connect_pairs(client_ctx, server_ctx, sessions);
    stream_pattern pattern(block, block);
    throughput_meter meter(s, "mib_per_s", 1024.0 * 1024.0);
    std::vector<std::unique_ptr<sockets_asio_callbacks_streams::echo_client_session>> clients;
    std::vector<std::unique_ptr<sockets_asio_callbacks_streams::echo_server_session>> servers;
    for (auto& p : pairs) {
        clients.push_back(std::make_unique<sockets_asio_callbacks_streams::echo_client_session>(p.client, pattern,
            meter));
        servers.push_back(std::make_unique<sockets_asio_callbacks_streams::echo_server_session>(std::move(p.server),
            pattern));
    }
    run_pinned_pair(
        s,
        [&] {
            meter.start();
            for (auto& c : clients) c->start();
            client_ctx.run();
        },
        [&] {
            for (auto& sv : servers) sv->start();
            server_ctx.run();
        },
        [&] {
            client_ctx.stop();
            server_ctx.stop();
        });
    if (!meter.done()) throw bench_failure("the sessions stopped before the last phase ended");
    for (auto& c : clients)
        if (!c->done()) throw bench_failure("a client session did not see its end of stream");
}

}  // namespace tern_bench::asio_impl
