// sockets/pingpong_cross_thread for raw/blocking: the floor of a ping-pong between two threads. Blocking send(2)
// and recv(2) on a loopback pair, the client on a thread on CPU 0, the server on one on CPU 1, no event loop at
// all: each hop is the kernel's own wake-up of a thread blocked in recv on the other vCPU.
#include "raw_common.hpp"
#include "../two_threads.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::raw_impl {

namespace sockets_raw_blocking {  // this file's own (see bench/CMakeLists.txt)
namespace {

void send_all(int fd, const unsigned char* p, std::size_t n, const char* side) {
    while (n > 0) {
        ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL);
        if (r < 0) {
            if (errno == EINTR) continue;
            fail_errno(side, errno);
        }
        p += r;
        n -= static_cast<std::size_t>(r);
    }
}

// Reads exactly n bytes; false on end of stream before the first byte.
bool recv_all(int fd, unsigned char* p, std::size_t n, const char* side) {
    std::size_t done = 0;
    while (done < n) {
        ssize_t r = ::recv(fd, p + done, n - done, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            fail_errno(side, errno);
        }
        if (r == 0) {
            if (done == 0) return false;
            throw bench_failure(std::string(side) + ": end of stream inside a message");
        }
        done += static_cast<std::size_t>(r);
    }
    return true;
}

}  // namespace
}  // namespace sockets_raw_blocking

void sockets_pingpong_cross_thread_blocking(session& s) {
    loopback_fds fds = connect_loopback();
    payload_pattern pattern(static_cast<std::size_t>(s.param_int("size")));
    latency_meter meter(s);
    run_pinned_pair(
        s,
        [&] {
            std::vector<unsigned char> buf(pattern.size());
            meter.start();
            for (std::uint64_t round = 0;; ++round) {
                auto t0 = bench_clock::now();
                sockets_raw_blocking::send_all(fds.client.fd, pattern.round(round), pattern.size(), "client send");
                if (!sockets_raw_blocking::recv_all(fds.client.fd, buf.data(), buf.size(), "client recv"))
                    throw bench_failure("client: unexpected end of stream");
                auto t1 = bench_clock::now();
                pattern.verify(buf.data(), round, "client");
                if (!meter.record(t0, t1)) break;
            }
            ::shutdown(fds.client.fd, SHUT_WR);
        },
        [&] {
            std::vector<unsigned char> buf(pattern.size());
            for (std::uint64_t round = 0; sockets_raw_blocking::recv_all(fds.server.fd, buf.data(), buf.size(),
                "server recv"); ++round) {
                pattern.verify(buf.data(), round, "server");
                sockets_raw_blocking::send_all(fds.server.fd, buf.data(), buf.size(), "server send");
            }
        },
        // Blocked threads have no loop to stop: shutting both ends down makes every blocked call return.
        [&] {
            ::shutdown(fds.client.fd, SHUT_RDWR);
            ::shutdown(fds.server.fd, SHUT_RDWR);
        });
    if (!meter.done()) throw bench_failure("the client stopped before the last phase ended");
}

}  // namespace tern_bench::raw_impl
