// sockets/unidirectional and sockets/bidirectional for raw/liburing: the floor of stream throughput through
// io_uring on this kernel. One SINGLE_ISSUER|DEFER_TASKRUN ring; each direction is a writer that keeps one send of
// `size` bytes in flight (continuing a partial send where it stopped) and a reader that keeps one recv into a
// `size`-byte buffer in flight; one io_uring_enter per turn submits what the last turn queued and waits. Every
// received byte is checked at its offset, as in the runtimes.
#include "raw_common.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <liburing.h>

#include <vector>

namespace tern_bench::raw_impl {

namespace sockets_raw_liburing_streams {  // this file's own (see bench/CMakeLists.txt)
namespace {

constexpr std::size_t stream_period = 4093;

class streams {
public:
    streams(session& s, bool both_ways)
        : fds_(connect_loopback()),
          size_(static_cast<std::size_t>(s.param_int("size"))),
          pattern_(size_, stream_period),
          meter_(s, "mb_per_s", 1e6) {
        io_uring_params p{};
        p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
        int rc = io_uring_queue_init_params(8, &ring_, &p);
        if (rc < 0) fail_errno("io_uring_queue_init_params(SINGLE_ISSUER|DEFER_TASKRUN)", -rc);
        dirs_.push_back({fds_.client.fd, fds_.server.fd, std::vector<unsigned char>(size_)});
        if (both_ways) dirs_.push_back({fds_.server.fd, fds_.client.fd, std::vector<unsigned char>(size_)});
    }
    ~streams() { io_uring_queue_exit(&ring_); }

    void run() {
        meter_.start();
        for (std::size_t d = 0; d < dirs_.size(); ++d) {
            queue_send(d);
            queue_recv(d);
        }
        std::size_t open = dirs_.size();
        while (open > 0) {
            int rc = io_uring_submit_and_wait(&ring_, 1);
            if (rc < 0 && rc != -EINTR) fail_errno("io_uring_submit_and_wait", -rc);
            io_uring_cqe* cqe;
            unsigned head, seen = 0;
            io_uring_for_each_cqe(&ring_, head, cqe) {
                ++seen;
                std::size_t d = cqe->user_data >> 1;
                if (cqe->res < 0) fail_errno("stream operation", -cqe->res);
                auto n = static_cast<std::size_t>(cqe->res);
                if (cqe->user_data & 1) {
                    if (n == 0) {
                        if (!stop_) throw bench_failure("reader: end of stream before the last phase ended");
                        --open;
                        continue;
                    }
                    pattern_.verify(dirs_[d].buf.data(), n, dirs_[d].read_offset, "reader");
                    dirs_[d].read_offset += n;
                    if (!stop_ && !meter_.add(n)) stop_ = true;
                    queue_recv(d);
                } else {
                    dirs_[d].sent += n;
                    if (dirs_[d].sent % size_ != 0 || !stop_) {
                        queue_send(d);
                    } else if (::shutdown(dirs_[d].from, SHUT_WR) != 0) {
                        fail_errno("shutdown", errno);
                    }
                }
            }
            io_uring_cq_advance(&ring_, seen);
        }
    }

private:
    struct direction {
        int from;
        int to;
        std::vector<unsigned char> buf;
        std::uint64_t sent = 0;         // bytes sent so far; a chunk is over when this is a multiple of size
        std::uint64_t read_offset = 0;
    };

    io_uring_sqe* sqe() {
        io_uring_sqe* e = io_uring_get_sqe(&ring_);
        if (!e) throw bench_failure("submission queue full");  // at most four SQEs are ever outstanding
        return e;
    }
    void queue_send(std::size_t d) {
        auto& dir = dirs_[d];
        std::size_t left = size_ - dir.sent % size_;
        auto* e = sqe();
        io_uring_prep_send(e, dir.from, pattern_.at(dir.sent), left, MSG_NOSIGNAL);
        io_uring_sqe_set_data64(e, d << 1);
    }
    void queue_recv(std::size_t d) {
        auto* e = sqe();
        io_uring_prep_recv(e, dirs_[d].to, dirs_[d].buf.data(), size_, 0);
        io_uring_sqe_set_data64(e, (d << 1) | 1);
    }

    loopback_fds fds_;
    std::size_t size_;
    stream_pattern pattern_;
    throughput_meter meter_;
    io_uring ring_{};
    std::vector<direction> dirs_;
    bool stop_ = false;
};

}  // namespace
}  // namespace sockets_raw_liburing_streams

void sockets_unidirectional_liburing(session& s) { sockets_raw_liburing_streams::streams(s, false).run(); }
void sockets_bidirectional_liburing(session& s) { sockets_raw_liburing_streams::streams(s, true).run(); }

}  // namespace tern_bench::raw_impl
