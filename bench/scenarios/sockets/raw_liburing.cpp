// sockets/pingpong for raw/liburing: the floor. A hand-written single-thread loop over one ring, with no runtime:
// what an io_uring program cannot go below on this kernel.
//
// The ring is SINGLE_ISSUER|DEFER_TASKRUN (completions are only processed when this thread enters the kernel to
// wait), and each turn of the loop makes exactly one io_uring_enter, which both submits the SQEs queued since the
// last turn and waits for at least one completion. Client and server are two state machines on that ring; each
// SQE's user_data names the step it completes. Partial sends and receives continue where they stopped, as
// read_exact/write_all do in the runtimes.
#include "raw_common.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <liburing.h>

#include <vector>

namespace tern_bench::raw_impl {

namespace sockets_raw_liburing {  // this file's own (see bench/CMakeLists.txt)
namespace {

enum step : std::uint64_t { client_send = 1, client_recv, server_recv, server_send };

class pingpong {
public:
    pingpong(session& s, std::size_t size)
        : fds_(connect_loopback()), pattern_(size), client_buf_(size), server_buf_(size), meter_(s) {
        io_uring_params p{};
        p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
        int rc = io_uring_queue_init_params(8, &ring_, &p);
        if (rc < 0) fail_errno("io_uring_queue_init_params(SINGLE_ISSUER|DEFER_TASKRUN)", -rc);
    }
    ~pingpong() { io_uring_queue_exit(&ring_); }

    void run() {
        meter_.start();
        queue_server_recv();
        start_round();
        while (!finished_) {
            // The one syscall of the turn: submit what the last turn queued and wait for a completion.
            int rc = io_uring_submit_and_wait(&ring_, 1);
            if (rc < 0 && rc != -EINTR) fail_errno("io_uring_submit_and_wait", -rc);
            io_uring_cqe* cqe;
            unsigned head, seen = 0;
            io_uring_for_each_cqe(&ring_, head, cqe) {
                ++seen;
                complete(static_cast<step>(cqe->user_data), cqe->res);
            }
            io_uring_cq_advance(&ring_, seen);
        }
    }

private:
    io_uring_sqe* sqe() {
        io_uring_sqe* e = io_uring_get_sqe(&ring_);
        if (!e) throw bench_failure("submission queue full");  // at most two SQEs are ever outstanding
        return e;
    }

    void start_round() {
        client_done_ = 0;
        t0_ = bench_clock::now();
        queue_client_send();
    }
    void queue_client_send() {
        auto* e = sqe();
        io_uring_prep_send(e, fds_.client.fd, pattern_.round(client_round_) + client_done_, pattern_.size() - client_done_, 0);
        io_uring_sqe_set_data64(e, client_send);
    }
    void queue_client_recv() {
        auto* e = sqe();
        io_uring_prep_recv(e, fds_.client.fd, client_buf_.data() + client_done_, client_buf_.size() - client_done_, 0);
        io_uring_sqe_set_data64(e, client_recv);
    }
    void queue_server_recv() {
        auto* e = sqe();
        io_uring_prep_recv(e, fds_.server.fd, server_buf_.data() + server_done_, server_buf_.size() - server_done_, 0);
        io_uring_sqe_set_data64(e, server_recv);
    }
    void queue_server_send() {
        auto* e = sqe();
        io_uring_prep_send(e, fds_.server.fd, server_buf_.data() + server_done_, server_buf_.size() - server_done_, 0);
        io_uring_sqe_set_data64(e, server_send);
    }

    void complete(step st, int res) {
        if (res < 0) fail_errno("ping-pong operation", -res);
        std::size_t n = static_cast<std::size_t>(res);
        switch (st) {
            case client_send:
                client_done_ += n;
                if (client_done_ < pattern_.size()) return queue_client_send();
                client_done_ = 0;
                return queue_client_recv();
            case client_recv: {
                if (n == 0) throw bench_failure("client: unexpected end of stream");
                client_done_ += n;
                if (client_done_ < client_buf_.size()) return queue_client_recv();
                auto t1 = bench_clock::now();
                pattern_.verify(client_buf_.data(), client_round_++, "client");
                if (meter_.record(t0_, t1)) return start_round();
                // Every phase is over: end the stream so the server's pending receive completes with 0.
                ::shutdown(fds_.client.fd, SHUT_WR);
                return;
            }
            case server_recv:
                if (n == 0) {
                    if (server_done_ != 0) throw bench_failure("server: end of stream inside a message");
                    finished_ = true;
                    return;
                }
                server_done_ += n;
                if (server_done_ < server_buf_.size()) return queue_server_recv();
                pattern_.verify(server_buf_.data(), server_round_++, "server");
                server_done_ = 0;
                return queue_server_send();
            case server_send:
                server_done_ += n;
                if (server_done_ < server_buf_.size()) return queue_server_send();
                server_done_ = 0;
                return queue_server_recv();
        }
        throw bench_failure("unknown completion");
    }

    loopback_fds fds_;
    io_uring ring_{};
    payload_pattern pattern_;
    std::vector<unsigned char> client_buf_;
    std::vector<unsigned char> server_buf_;
    latency_meter meter_;
    std::size_t client_done_ = 0;  // bytes of the current client send or receive already transferred
    std::size_t server_done_ = 0;  // same for the server
    std::uint64_t client_round_ = 0;
    std::uint64_t server_round_ = 0;
    bench_clock::time_point t0_{};
    bool finished_ = false;
};

}  // namespace
}  // namespace sockets_raw_liburing

void sockets_pingpong_liburing(session& s) {
    sockets_raw_liburing::pingpong(s, static_cast<std::size_t>(s.param_int("size"))).run();
}

}  // namespace tern_bench::raw_impl
