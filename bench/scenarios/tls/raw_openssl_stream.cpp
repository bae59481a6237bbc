// tls/throughput's floor, raw/openssl: the same connection as the stacks' (the contexts of tls_common.hpp, the same
// certificate check, one connection, 16 KiB writes of the stream pattern, every byte checked at its offset, the
// same end protocol through `direction`), written with OpenSSL's API alone, the way a careful hand-written program
// does it: each end one thread (client on CPU 0, server on CPU 1), its SSL on the socket itself (SSL_set_fd, read
// ahead on, so a read takes whatever the socket holds instead of a record header first), the socket non-blocking
// after a blocking handshake, and a loop that writes until OpenSSL wants the socket, reads until it wants it, and
// then poll()s for what it wants. No runtime, no coroutine, no BIO of a stack's own: what is left is what OpenSSL
// and the kernel charge for the stream, which no stack can go below.
#include "tls_common.hpp"
#include "../two_threads.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

namespace tern_bench::raw_impl {

using namespace tern_bench::tls_bench;

namespace tls_raw_openssl_stream {  // this file's own (see bench/CMakeLists.txt)
namespace {

[[noreturn]] void fail_errno(const char* what) { throw bench_failure(std::string(what) + ": " + std::strerror(errno)); }

struct fd_guard {
    int fd = -1;
    ~fd_guard() {
        if (fd >= 0) ::close(fd);
    }
};

void set_no_delay(int fd) {
    const int one = 1;
    if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) fail_errno("TCP_NODELAY");
}

void set_non_blocking(int fd) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) fail_errno("O_NONBLOCK");
}

struct ssl_guard {
    SSL* ssl = nullptr;
    ~ssl_guard() { SSL_free(ssl); }
};

// The shared run, and the flag a failed end raises so that the other leaves its loop.
struct stream_run : throughput_run {
    using throughput_run::throughput_run;
    std::atomic<bool> abort{false};
};

// One end of the connection: a writer (of `out`), a reader (of `in`) or both, in one loop on a non-blocking socket.
// The server's reader drives the meter, adding what the client's reader counted meanwhile (`other`).
class stream_end {
public:
    stream_end(SSL* ssl, int fd, stream_run& run, direction* out, direction* in, throughput_meter* meter,
               const direction* other, const char* side)
        : ssl_(ssl), fd_(fd), run_(run), out_(out), side_(side), buf_(run.size) {
        if (in != nullptr) tally_.emplace(run.pattern, *in, meter, other, run.stop, side);
    }

    void run() {
        bool writing = out_ != nullptr;
        bool reading = tally_.has_value();
        while (writing || reading) {
            if (run_.abort.load(std::memory_order_relaxed)) throw bench_failure(std::string(side_) + ": stopped");
            short wanted = 0;
            bool progress = false;
            if (writing) {
                if (!last_ && run_.stop.load(std::memory_order_relaxed)) {
                    out_->final_total.store(written_ + run_.size);  // the chunk at written_ is the last one
                    last_ = true;
                }
                std::size_t n = 0;
                const int r = SSL_write_ex(ssl_, run_.pattern.at(written_), run_.size, &n);
                if (r == 1) {
                    written_ += run_.size;
                    writing = !last_;
                    progress = true;
                } else {
                    wanted |= want(r, "write");
                }
            }
            if (reading) {
                std::size_t n = 0;
                const int r = SSL_read_ex(ssl_, buf_.data(), buf_.size(), &n);
                if (r == 1) {
                    reading = tally_->took(buf_.data(), n);
                    progress = true;
                } else {
                    wanted |= want(r, "read");
                }
            }
            if (progress || (!writing && !reading)) continue;
            pollfd p{fd_, wanted, 0};
            if (::poll(&p, 1, 1000) < 0 && errno != EINTR) fail_errno("poll");
        }
    }

private:
    // The poll events an unfinished SSL call waits for; anything else fails the run.
    short want(int r, const char* what) {
        switch (SSL_get_error(ssl_, r)) {
            case SSL_ERROR_WANT_READ: return POLLIN;
            case SSL_ERROR_WANT_WRITE: return POLLOUT;
            default: throw bench_failure(std::string(side_) + " " + what + ": " + openssl_errors());
        }
    }

    SSL* ssl_;
    int fd_;
    stream_run& run_;
    direction* out_;
    const char* side_;
    std::vector<unsigned char> buf_;
    std::optional<stream_tally> tally_;  // the reader's, when this end reads
    std::uint64_t written_ = 0;
    bool last_ = false;
};

// A blocking handshake on fd, then the socket non-blocking for the stream.
SSL* open_ssl(SSL_CTX* ctx, int fd, bool client, ssl_guard& guard) {
    guard.ssl = SSL_new(ctx);
    if (guard.ssl == nullptr) throw bench_failure("SSL_new: " + openssl_errors());
    SSL* ssl = guard.ssl;
    check_ssl(SSL_set_fd(ssl, fd), "SSL_set_fd");
    SSL_set_read_ahead(ssl, 1);
    if (client) {
        check_ssl(static_cast<int>(SSL_set_tlsext_host_name(ssl, host_name)), "SNI");
        SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        check_ssl(SSL_set1_host(ssl, host_name), "SSL_set1_host");
    }
    if ((client ? SSL_connect(ssl) : SSL_accept(ssl)) != 1)
        throw bench_failure(std::string(client ? "client" : "server") + " handshake: " + openssl_errors());
    if (client) check_agreed(ssl);
    set_non_blocking(fd);
    return ssl;
}

}  // namespace
}  // namespace tls_raw_openssl_stream

void tls_throughput_openssl(session& s) {
    const auto size = static_cast<std::size_t>(s.param_int("size"));
    tls_raw_openssl_stream::stream_run run(size, both_ways(s));
    openssl_contexts contexts(false);
    throughput_meter meter(s, throughput_metric, 1e6);

    tls_raw_openssl_stream::fd_guard listener{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    if (listener.fd < 0) tls_raw_openssl_stream::fail_errno("socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener.fd, 1) != 0 ||
        ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
        tls_raw_openssl_stream::fail_errno("listen");

    // Both sockets and SSL objects outlive the two threads: neither end closes while the other may still read.
    tls_raw_openssl_stream::fd_guard client_fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    tls_raw_openssl_stream::fd_guard server_fd;
    std::atomic<int> server_sock{-1};  // server_fd's descriptor for the failure path on the other thread
    tls_raw_openssl_stream::ssl_guard client_ssl, server_ssl;
    if (client_fd.fd < 0) tls_raw_openssl_stream::fail_errno("socket");
    run_pinned_pair(
        s,
        [&] {
            if (::connect(client_fd.fd, reinterpret_cast<sockaddr*>(&addr),
                sizeof addr) != 0) tls_raw_openssl_stream::fail_errno("connect");
            tls_raw_openssl_stream::set_no_delay(client_fd.fd);
            SSL* ssl = open_ssl(contexts.client, client_fd.fd, true, client_ssl);
            tls_raw_openssl_stream::stream_end(ssl, client_fd.fd, run, &run.up, run.both ? &run.down : nullptr,
                nullptr, nullptr, "client")
                .run();
        },
        [&] {
            server_fd.fd = ::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (server_fd.fd < 0) tls_raw_openssl_stream::fail_errno("accept");
            server_sock.store(server_fd.fd);
            tls_raw_openssl_stream::set_no_delay(server_fd.fd);
            SSL* ssl = open_ssl(contexts.server, server_fd.fd, false, server_ssl);
            meter.start();
            tls_raw_openssl_stream::stream_end(ssl, server_fd.fd, run, run.both ? &run.down : nullptr, &run.up, &meter,
                       run.both ? &run.down : nullptr, "server")
                .run();
            if (!meter.done()) throw bench_failure("the stream ended before the last phase");
        },
        [&] {
            // A failed end: the other leaves its loop (it polls at least once a second) or its blocking call.
            run.abort.store(true);
            ::shutdown(client_fd.fd, SHUT_RDWR);
            ::shutdown(listener.fd, SHUT_RDWR);
            if (const int fd = server_sock.load(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
        });
}

}  // namespace tern_bench::raw_impl
