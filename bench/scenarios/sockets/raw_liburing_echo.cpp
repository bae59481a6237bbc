// sockets/echo for raw/liburing: the floor of the client2/server2 echo through io_uring on this kernel. What a
// careful hand-written server does, with nothing a runtime adds: per side one thread (client on CPU 0, server on
// CPU 1, as every stack) and one SINGLE_ISSUER|DEFER_TASKRUN ring (raw_uring_loop.hpp), one io_uring_enter per
// turn that submits and waits.
//
// Every connection keeps one multishot receive armed into a provided-buffer ring of 16 KiB buffers (tern's receive
// buffer size), so no SQE is spent on a read. The kernel takes buffers at the ring's head and they come back at its
// tail, so a run cycles through every buffer of the ring: four per session, at least 64 and at most 4096 (tern's
// pool grows by 64 up to 4096), keep the ones in use warm in the cache. A filled buffer is checked at its offset
// and written back from where it lies (no copy); a connection's buffers queue in arrival order behind its one send
// in flight (a partial send continues where it stopped), and each goes back to the ring when its send is done.
// The buffers given back during a turn reach the kernel with one tail update. A multishot receive that ends
// without IORING_CQE_F_MORE is re-armed; one that ended because the ring was empty (ENOBUFS) is re-armed at the
// end of a turn that gave buffers back.
//
// As in the runtimes: the client sends one block per session, then both sides echo what arrives; when the meter's
// last phase ends a client stops echoing (what it still receives is checked, not sent), shuts down its sending
// side once its send in flight is done, and drains to end of stream; the server shuts down its own sending side
// once it has read end of stream and written back everything before it (a shutdown, not a close: a registered
// file stays open while the ring's table holds it).
//
// With TERN_BENCH_RAW_FIXED=1 in its environment, the same program puts the connections in the ring's file table
// (IOSQE_FIXED_FILE), reported as the run's info "fixed_files".
#include "raw_uring_loop.hpp"
#include "../two_threads.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <algorithm>
#include <bit>
#include <vector>

namespace tern_bench::raw_impl {

namespace sockets_raw_liburing_echo {  // this file's own (see bench/CMakeLists.txt)
namespace {

constexpr unsigned ring_entries = 4096;
constexpr std::size_t buffer_size = 16384;
constexpr unsigned short buffer_group = 0;
constexpr std::uint32_t no_buffer = ~std::uint32_t{0};

enum op : std::uint64_t { op_recv = 0, op_send = 1 };

class echo_side {
public:
    // client: the sessions' client ends (the meter is read on this side only); else their server ends.
    echo_side(const std::vector<loopback_fds>& pairs, bool client, bool fixed, const stream_pattern& pattern,
              throughput_meter* meter)
        : ring_(ring_entries),
          bufs_(ring_, buffer_entries(pairs.size()), buffer_size, buffer_group),
          client_(client),
          fixed_(fixed),
          pattern_(pattern),
          meter_(meter),
          next_(buffer_entries(pairs.size()), no_buffer),
          len_(buffer_entries(pairs.size()), 0),
          conns_(pairs.size()) {
        std::vector<int> fds;
        fds.reserve(pairs.size());
        for (auto& p : pairs) fds.push_back(client ? p.client.fd : p.server.fd);
        for (std::size_t i = 0; i < conns_.size(); ++i) conns_[i].fd = fds[i];
        if (fixed_) ring_.register_files(fds);
    }

    void run() {
        for (std::size_t i = 0; i < conns_.size(); ++i) arm(i);
        if (client_) {
            meter_->start();
            for (std::size_t i = 0; i < conns_.size(); ++i) {
                conns_[i].sending = conns_[i].first = true;
                prep_send(ring_, target(i), fixed_, pattern_.at(0), pattern_.period(), tag(i, op_send));
            }
        }
        open_ = conns_.size();
        while (open_ > 0) {
            ring_.turn([this](const io_uring_cqe& cqe) { complete(cqe); });
            bufs_.publish();
            rearm_starved();
        }
    }

private:
    struct conn {
        int fd = -1;
        std::uint64_t offset = 0;       // bytes received (and checked) so far
        std::uint32_t head = no_buffer;  // received buffers to write back, oldest first; the head's send is in flight
        std::uint32_t tail = no_buffer;
        std::size_t sent = 0;            // bytes of the head buffer sent so far
        bool sending = false;            // a send is in flight: of the head buffer, or of the first block
        bool first = false;              // client: the send in flight is the session's first block
        bool echoing = true;             // client: the meter still runs
        bool eof = false;                // server: end of stream read
        bool done = false;
    };

    static unsigned buffer_entries(std::size_t sessions) {
        return std::clamp<unsigned>(std::bit_ceil(4 * static_cast<unsigned>(sessions)), 64u, 4096u);
    }

    static std::uint64_t tag(std::size_t i, op o) { return (static_cast<std::uint64_t>(i) << 1) | o; }
    int target(std::size_t i) const { return fixed_ ? static_cast<int>(i) : conns_[i].fd; }
    void arm(std::size_t i) { prep_recv_multishot(ring_, target(i), fixed_, bufs_, tag(i, op_recv)); }

    void complete(const io_uring_cqe& cqe) {
        std::size_t i = cqe.user_data >> 1;
        if ((cqe.user_data & 1) == op_recv)
            received(i, cqe.res, cqe.flags);
        else
            sent(i, cqe.res);
    }

    void received(std::size_t i, int res, unsigned flags) {
        conn& c = conns_[i];
        if (res > 0) {
            if (!(flags & IORING_CQE_F_BUFFER)) throw bench_failure("receive without a buffer");
            auto bid = static_cast<std::uint32_t>(flags >> IORING_CQE_BUFFER_SHIFT);
            bufs_.taken();
            auto n = static_cast<std::size_t>(res);
            pattern_.verify(bufs_.data(bid), n, c.offset, client_ ? "client" : "server");
            c.offset += n;
            if (client_ && c.echoing && !meter_->add(n)) stop_echoing(c);
            if (client_ && !c.echoing) {
                bufs_.give_back(bid);  // draining: checked, not sent
            } else {
                enqueue(i, bid, n);
            }
            if (!(flags & IORING_CQE_F_MORE)) rearm_or_wait(i);
            return;
        }
        if (res == -ENOBUFS) {
            starved_.wait(i);  // armed again once buffers come back
            return;
        }
        if (res < 0) fail_errno(client_ ? "client receive" : "server receive", -res);
        // End of stream.
        if (client_) {
            if (c.echoing) throw bench_failure("client: end of stream while the sessions still echo");
            finish(c);
        } else {
            c.eof = true;
            if (!c.sending) server_end(c);
        }
    }

    void sent(std::size_t i, int res) {
        conn& c = conns_[i];
        if (res < 0) fail_errno(client_ ? "client send" : "server send", -res);
        c.sent += static_cast<std::size_t>(res);
        if (c.first) {  // the client's first block, sent from the pattern
            if (c.sent < pattern_.period()) return send_first_rest(i);
            c.first = false;
        } else {
            if (c.sent < len_[c.head]) return send_head(i);
            std::uint32_t done = c.head;
            c.head = next_[done];
            if (c.head == no_buffer) c.tail = no_buffer;
            bufs_.give_back(done);
        }
        c.sent = 0;
        c.sending = false;
        if (client_ && !c.echoing) {
            drop_queue(c);
            if (::shutdown(c.fd, SHUT_WR) != 0) fail_errno("client shutdown", errno);
            return;
        }
        if (c.head != no_buffer) return send_head(i);
        if (c.eof) server_end(c);
    }

    // Appends a filled buffer to the connection's queue; sends it at once if no send is in flight.
    void enqueue(std::size_t i, std::uint32_t bid, std::size_t n) {
        conn& c = conns_[i];
        len_[bid] = static_cast<std::uint32_t>(n);
        next_[bid] = no_buffer;
        if (c.tail == no_buffer)
            c.head = bid;
        else
            next_[c.tail] = bid;
        c.tail = bid;
        if (!c.sending) send_head(i);
    }

    void send_head(std::size_t i) {
        conn& c = conns_[i];
        c.sending = true;
        prep_send(ring_, target(i), fixed_, bufs_.data(c.head) + c.sent, len_[c.head] - c.sent, tag(i, op_send));
    }
    void send_first_rest(std::size_t i) {
        conn& c = conns_[i];
        prep_send(ring_, target(i), fixed_, pattern_.at(c.sent), pattern_.period() - c.sent, tag(i, op_send));
    }

    // The meter's last phase is over: the connection's echo stops. Its queued buffers go back to the ring, and its
    // sending side is shut down now, or once the send in flight is done.
    void stop_echoing(conn& c) {
        c.echoing = false;
        if (!c.sending) {
            drop_queue(c);
            if (::shutdown(c.fd, SHUT_WR) != 0) fail_errno("client shutdown", errno);
            return;
        }
        // A send is in flight: keep its buffer (the head, unless it is the first block) until it completes.
        std::uint32_t rest = c.head;
        if (!c.first && c.head != no_buffer) {
            rest = next_[c.head];
            next_[c.head] = no_buffer;
            c.tail = c.head;
        } else {
            c.head = c.tail = no_buffer;
        }
        while (rest != no_buffer) {
            std::uint32_t b = rest;
            rest = next_[b];
            bufs_.give_back(b);
        }
    }
    void drop_queue(conn& c) {
        while (c.head != no_buffer) {
            std::uint32_t b = c.head;
            c.head = next_[b];
            bufs_.give_back(b);
        }
        c.tail = no_buffer;
    }

    void server_end(conn& c) {
        if (::shutdown(c.fd, SHUT_WR) != 0) fail_errno("server shutdown", errno);
        finish(c);
    }
    void finish(conn& c) {
        if (c.done) throw bench_failure("a session ended twice");
        c.done = true;
        --open_;
    }

    void rearm_or_wait(std::size_t i) {
        starved_.rearm_or_wait(bufs_, i, [this](std::size_t k) { arm(k); });
    }
    void rearm_starved() {
        starved_.rearm(bufs_, [this](std::size_t k) { arm(k); });
    }

    uring ring_;
    buffer_ring bufs_;  // after ring_: unregistered before the ring goes
    bool client_;
    bool fixed_;
    const stream_pattern& pattern_;
    throughput_meter* meter_;
    std::vector<std::uint32_t> next_;  // per buffer: the next one in its connection's queue
    std::vector<std::uint32_t> len_;   // per buffer: the bytes it holds
    std::vector<conn> conns_;
    starved_connections starved_;
    std::size_t open_ = 0;
};

}  // namespace
}  // namespace sockets_raw_liburing_echo

void sockets_echo_liburing(session& s) {
    auto block = static_cast<std::size_t>(s.param_int("blocksize"));
    auto sessions = static_cast<std::size_t>(s.param_int("sessions"));
    if (s.param_int("threads") != 1) throw bench_failure("sockets/echo runs one thread per side (threads=1)");
    const bool fixed = fixed_files_requested(s);
    auto pairs = connect_loopback_pairs(sessions);
    stream_pattern pattern(block, block);
    throughput_meter meter(s, "mib_per_s", 1024.0 * 1024.0);
    // Each side makes its ring on its own thread: SINGLE_ISSUER binds a ring to the thread that creates it.
    run_pinned_pair(
        s, [&] { sockets_raw_liburing_echo::echo_side(pairs, true, fixed, pattern, &meter).run(); },
        [&] { sockets_raw_liburing_echo::echo_side(pairs, false, fixed, pattern, nullptr).run(); },
            [&] { shut_all(pairs); });
    if (!meter.done()) throw bench_failure("the sessions stopped before the last phase ended");
}

}  // namespace tern_bench::raw_impl
