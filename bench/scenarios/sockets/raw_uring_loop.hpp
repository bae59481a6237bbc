// What the raw liburing floors of the many-connection scenarios (sockets/echo, sockets/messages) share: the ring
// of one thread and its provided-buffer ring.
//
// uring: IORING_SETUP_SINGLE_ISSUER|DEFER_TASKRUN, made on the thread that runs it (SINGLE_ISSUER binds the ring
// to its creator), with its own fd registered (each io_uring_enter then skips the fd lookup). turn() is the one
// system call of a loop turn: it submits every SQE queued since the last turn and waits for a completion, then
// hands over every CQE there is. When the submission queue is full in the middle of a turn (the first turn arms
// a receive on every connection) sqe() submits what is queued without waiting. The completion queue has room for
// two CQEs (a receive and a send) of 16384 connections, so that a turn where every connection of a large run
// completes does not overflow it: the kernel would then end multishot receives that cannot post.
//
// buffer_ring: a provided-buffer ring (IORING_REGISTER_PBUF_RING) for multishot receives. liburing 2.3 has no
// io_uring_setup_buf_ring, so the ring is mapped here and registered with io_uring_register_buf_ring. Buffers
// handed back during a turn are published to the kernel with one tail update before the turn's enter.
//
// Registered files (uring::register_files, IOSQE_FIXED_FILE): a connection's SQEs then name its slot in the
// ring's file table, which spares the kernel an fd lookup and a file reference per operation.
#pragma once

#include "raw_common.hpp"

#include <liburing.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

namespace tern_bench::raw_impl {

class uring {
public:
    explicit uring(unsigned entries) {
        io_uring_params p{};
        p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE;
        p.cq_entries = 32768;
        int rc = io_uring_queue_init_params(entries, &ring_, &p);
        if (rc < 0) fail_errno("io_uring_queue_init_params(SINGLE_ISSUER|DEFER_TASKRUN)", -rc);
        rc = io_uring_register_ring_fd(&ring_);
        if (rc < 0) {
            io_uring_queue_exit(&ring_);
            fail_errno("io_uring_register_ring_fd", -rc);
        }
    }
    ~uring() { io_uring_queue_exit(&ring_); }
    uring(const uring&) = delete;
    uring& operator=(const uring&) = delete;

    io_uring* get() { return &ring_; }

    // A free SQE; a full queue is submitted first (without waiting) to make room.
    io_uring_sqe* sqe() {
        io_uring_sqe* e = io_uring_get_sqe(&ring_);
        if (e) return e;
        int rc = io_uring_submit(&ring_);
        if (rc < 0) fail_errno("io_uring_submit", -rc);
        e = io_uring_get_sqe(&ring_);
        if (!e) throw bench_failure("submission queue full after a submit");
        return e;
    }

    // Registers fds as the ring's file table: fds[i] is slot i.
    void register_files(std::span<const int> fds) {
        int rc = io_uring_register_files(&ring_, fds.data(), static_cast<unsigned>(fds.size()));
        if (rc < 0) fail_errno("io_uring_register_files", -rc);
    }

    // One loop turn: submit and wait in one io_uring_enter, then on_cqe(cqe) for every completion there is.
    template <class F>
    void turn(F&& on_cqe) {
        int rc = io_uring_submit_and_wait(&ring_, 1);
        if (rc < 0 && rc != -EINTR) fail_errno("io_uring_submit_and_wait", -rc);
        io_uring_cqe* cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring_, head, cqe) {
            ++seen;
            on_cqe(*cqe);
        }
        io_uring_cq_advance(&ring_, seen);
    }

private:
    io_uring ring_{};
};

class buffer_ring {
public:
    // entries (a power of two) buffers of `size` bytes, registered as buffer group `group`, all in the ring.
    buffer_ring(uring& ring, unsigned entries, std::size_t size, unsigned short group)
        : ring_(ring), entries_(entries), size_(size), group_(group) {
        ring_bytes_ = entries * sizeof(io_uring_buf);
        void* r = ::mmap(nullptr, ring_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r == MAP_FAILED) fail_errno("mmap (buffer ring)", errno);
        br_ = static_cast<io_uring_buf_ring*>(r);
        // The buffers' memory: pages the kernel never writes into are never made resident.
        void* m = ::mmap(nullptr, entries * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            ::munmap(r, ring_bytes_);
            fail_errno("mmap (buffers)", errno);
        }
        mem_ = static_cast<unsigned char*>(m);
        io_uring_buf_ring_init(br_);
        io_uring_buf_reg reg{};
        reg.ring_addr = reinterpret_cast<std::uintptr_t>(br_);
        reg.ring_entries = entries;
        reg.bgid = group;
        int rc = io_uring_register_buf_ring(ring_.get(), &reg, 0);
        if (rc < 0) {
            ::munmap(m, entries * size);
            ::munmap(r, ring_bytes_);
            fail_errno("io_uring_register_buf_ring", -rc);
        }
        for (unsigned bid = 0; bid < entries; ++bid) give_back(bid);
        publish();
    }
    ~buffer_ring() {
        (void)io_uring_unregister_buf_ring(ring_.get(), group_);
        ::munmap(mem_, entries_ * size_);
        ::munmap(br_, ring_bytes_);
    }
    buffer_ring(const buffer_ring&) = delete;
    buffer_ring& operator=(const buffer_ring&) = delete;

    unsigned short group() const { return group_; }
    std::size_t size() const { return size_; }
    unsigned char* data(unsigned bid) const { return mem_ + static_cast<std::size_t>(bid) * size_; }

    // The kernel filled buffer bid (a CQE with IORING_CQE_F_BUFFER named it).
    void taken() { --in_ring_; }
    // Buffers the kernel can pick from.
    unsigned in_ring() const { return in_ring_; }

    // Queues buffer bid for the kernel; it sees it after the next publish().
    void give_back(unsigned bid) {
        io_uring_buf_ring_add(br_, data(bid), static_cast<unsigned>(size_), static_cast<unsigned short>(bid),
                              io_uring_buf_ring_mask(entries_), static_cast<int>(pending_++));
    }
    // Makes the buffers given back since the last call visible to the kernel: one tail store for all of them.
    void publish() {
        if (pending_ == 0) return;
        io_uring_buf_ring_advance(br_, static_cast<int>(pending_));
        in_ring_ += pending_;
        pending_ = 0;
    }

private:
    uring& ring_;
    unsigned entries_;
    std::size_t size_;
    unsigned short group_;
    std::size_t ring_bytes_ = 0;
    io_uring_buf_ring* br_ = nullptr;
    unsigned char* mem_ = nullptr;
    unsigned in_ring_ = 0;
    unsigned pending_ = 0;
};

// Whether the run puts its connections in the ring's file table (TERN_BENCH_RAW_FIXED=1 in the environment): an
// experiment, not a row of the report, since it measured within the noise (docs/benchmarks.md). Said in the run's
// info either way.
inline bool fixed_files_requested(session& s) {
    const char* v = std::getenv("TERN_BENCH_RAW_FIXED");
    const bool fixed = v != nullptr && v[0] == '1';
    s.info("fixed_files", fixed ? "yes" : "no");
    return fixed;
}

// Arms a multishot receive on `target` (an fd, or a slot when fixed) into buffers of `bufs`.
// The connections whose multishot receive ended on an empty buffer ring (ENOBUFS): armed again at the end of a
// turn that gave buffers back, since arming on an empty ring would only end again at once.
class starved_connections {
public:
    // A multishot receive of connection i ended: arm(i) now if the ring has a buffer, else remember i.
    template <class Arm>
    void rearm_or_wait(const buffer_ring& bufs, std::size_t i, Arm&& arm) {
        if (bufs.in_ring() > 0)
            arm(i);
        else
            ids_.push_back(i);
    }
    void wait(std::size_t i) { ids_.push_back(i); }
    // End of a turn: arm(i) for each remembered connection once the ring has buffers again.
    template <class Arm>
    void rearm(const buffer_ring& bufs, Arm&& arm) {
        if (ids_.empty() || bufs.in_ring() == 0) return;
        for (std::size_t i : ids_) arm(i);
        ids_.clear();
    }

private:
    std::vector<std::size_t> ids_;
};

inline void prep_recv_multishot(uring& ring, int target, bool fixed, const buffer_ring& bufs, std::uint64_t data) {
    io_uring_sqe* e = ring.sqe();
    io_uring_prep_recv_multishot(e, target, nullptr, 0, 0);
    e->flags |= IOSQE_BUFFER_SELECT;
    if (fixed) e->flags |= IOSQE_FIXED_FILE;  // after the prep, which clears the flags
    e->buf_group = bufs.group();
    io_uring_sqe_set_data64(e, data);
}

inline void prep_send(uring& ring, int target, bool fixed, const void* p, std::size_t n, std::uint64_t data) {
    io_uring_sqe* e = ring.sqe();
    io_uring_prep_send(e, target, p, n, MSG_NOSIGNAL);
    if (fixed) e->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(e, data);
}

// Ends every connection at once (both directions): the stop of a two-thread run when one side failed. Each side's
// loop then sees end of stream or an error on its receives and returns, so neither waits for a peer that is gone.
inline void shut_all(const std::vector<loopback_fds>& pairs) {
    for (auto& p : pairs) {
        ::shutdown(p.client.fd, SHUT_RDWR);
        ::shutdown(p.server.fd, SHUT_RDWR);
    }
}

}  // namespace tern_bench::raw_impl
