// sockets/messages for raw/liburing: the floor of mg::aio bench_io's frames through io_uring on this kernel. The
// frames are encoded, decoded and verified by the code every stack uses (frames.hpp); what is left is the I/O,
// written the way a careful hand-written server does it: per loop one SINGLE_ISSUER|DEFER_TASKRUN ring
// (raw_uring_loop.hpp) with one io_uring_enter per turn that submits and waits; threads=2 puts the clients' loop
// on CPU 0 and the servers' on CPU 1, threads=1 both on one loop on CPU 0, as every stack.
//
// Every connection keeps one multishot receive armed into a provided-buffer ring of 8 KiB buffers (bench_io's
// receive size, and the read_some size of the other stacks), so no SQE is spent on a read. The decoder needs a
// frame in one piece, so a filled buffer is copied to the connection's receive buffer and goes straight back to
// the ring (every buffer given back during a turn reaches the kernel with one tail update). A multishot receive
// that ends without IORING_CQE_F_MORE is re-armed; one that ended because the ring was empty (ENOBUFS) is re-armed
// at the end of the turn, when the buffers of the turn are back.
//
// Sends: the replies (server) or requests (client) that the receives of a turn produce accumulate in the
// connection's out buffer, and one send carries all of them; while it is in flight the next ones accumulate
// behind it, and a partial send continues where it stopped. So a connection never has more than one send in
// flight and writes everything that is ready in one go, as write_all of the runtimes does per receive.
//
// A client that is finished (the meter is over and every reply is in) shuts down its sending side; its server
// connection then reads end of stream, checks that no frame was left half received, and is done.
//
// With TERN_BENCH_RAW_FIXED=1 in its environment, the same program puts the connections in the ring's file table
// (IOSQE_FIXED_FILE), reported as the run's info "fixed_files".
#include "raw_uring_loop.hpp"
#include "frames.hpp"
#include "../two_threads.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

namespace tern_bench::raw_impl {

using frames::codec;

namespace sockets_raw_liburing_messages {  // this file's own (see bench/CMakeLists.txt)
namespace {

constexpr unsigned ring_entries = 4096;
constexpr unsigned short buffer_group = 0;

enum op : std::uint64_t { op_recv = 0, op_send = 1 };

class message_loop {
public:
    // The loop's connections: the client ends of pairs when clients, the server ends when servers (both: one
    // loop for the whole run).
    message_loop(const std::vector<loopback_fds>& pairs, bool clients, bool servers, bool fixed,
                 const frames::messages_params& p, const codec& c, request_meter& meter)
        : ring_(ring_entries),
          bufs_(ring_, buffer_entries(pairs.size() * (clients && servers ? 2 : 1)), frames::recv_size, buffer_group),
          fixed_(fixed),
          meter_(meter) {
        std::vector<int> fds;
        std::size_t n = pairs.size() * (clients && servers ? 2 : 1);
        fds.reserve(n);
        conns_.reserve(n);
        if (clients) {
            clients_.reserve(pairs.size());
            for (std::size_t i = 0; i < pairs.size(); ++i) {
                clients_.emplace_back(c, p.parallel, static_cast<std::uint32_t>(i + 1));
                conns_.push_back({pairs[i].client.fd, true, i});
                fds.push_back(pairs[i].client.fd);
            }
        }
        if (servers) {
            servers_.reserve(pairs.size());
            for (std::size_t i = 0; i < pairs.size(); ++i) {
                servers_.emplace_back(c);
                conns_.push_back({pairs[i].server.fd, false, i});
                fds.push_back(pairs[i].server.fd);
            }
        }
        if (fixed_) ring_.register_files(fds);
    }

    void run(bool start_meter) {
        for (std::size_t i = 0; i < conns_.size(); ++i) arm(i);
        if (start_meter) meter_.start();
        for (std::size_t i = 0; i < conns_.size(); ++i) {
            if (!conns_[i].client) continue;
            clients_[conns_[i].side].start();
            flush(i);
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
        int fd;
        bool client;
        std::size_t side;                 // index in clients_ or servers_
        std::vector<unsigned char> wire{};  // the bytes of the send in flight
        std::size_t sent = 0;
        bool sending = false;
        bool done = false;
    };

    // One buffer per connection up to 4096 (tern's receive pool at most; every buffer goes back within the turn
    // that filled it, so this is about the receives that complete in one turn).
    static unsigned buffer_entries(std::size_t conns) {
        return std::clamp<unsigned>(std::bit_ceil(static_cast<unsigned>(conns)), 64u, 4096u);
    }

    static std::uint64_t tag(std::size_t i, op o) { return (static_cast<std::uint64_t>(i) << 1) | o; }
    int target(std::size_t i) const { return fixed_ ? static_cast<int>(i) : conns_[i].fd; }
    void arm(std::size_t i) { prep_recv_multishot(ring_, target(i), fixed_, bufs_, tag(i, op_recv)); }

    std::vector<unsigned char>& out(const conn& c) {
        return c.client ? clients_[c.side].out() : servers_[c.side].out();
    }
    frames::frame_connection& frames_of(const conn& c) {
        return c.client ? clients_[c.side].conn() : servers_[c.side].conn();
    }

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
            auto bid = static_cast<unsigned>(flags >> IORING_CQE_BUFFER_SHIFT);
            bufs_.taken();
            auto n = static_cast<std::size_t>(res);
            std::memcpy(frames_of(c).space(), bufs_.data(bid), n);  // n <= recv_size, the buffers' size
            bufs_.give_back(bid);
            if (c.client) {
                clients_[c.side].received(n, meter_);
                flush(i);
                client_check_finished(c);
            } else {
                servers_[c.side].received(n);
                flush(i);
            }
            if (!(flags & IORING_CQE_F_MORE) && !c.done) rearm_or_wait(i);
            return;
        }
        if (res == -ENOBUFS) {
            if (!c.done) starved_.wait(i);
            return;
        }
        if (res < 0) fail_errno(c.client ? "client receive" : "server receive", -res);
        // End of stream.
        if (c.client) throw bench_failure("client: end of stream before every reply came");
        servers_[c.side].check_end();
        if (c.sending) throw bench_failure("server: end of stream while a reply was being sent");
        finish(c);
    }

    void sent(std::size_t i, int res) {
        conn& c = conns_[i];
        if (res < 0) fail_errno(c.client ? "client send" : "server send", -res);
        c.sent += static_cast<std::size_t>(res);
        if (c.sent < c.wire.size()) {
            prep_send(ring_, target(i), fixed_, c.wire.data() + c.sent, c.wire.size() - c.sent, tag(i, op_send));
            return;
        }
        c.sending = false;
        c.wire.clear();
        flush(i);
        if (c.client) client_check_finished(c);
    }

    // Sends everything the connection has ready, unless a send is in flight (then it goes after it).
    void flush(std::size_t i) {
        conn& c = conns_[i];
        auto& o = out(c);
        if (c.sending || o.empty()) return;
        c.wire.swap(o);  // o takes the cleared buffer of the last send: no allocation in the steady state
        c.sent = 0;
        c.sending = true;
        prep_send(ring_, target(i), fixed_, c.wire.data(), c.wire.size(), tag(i, op_send));
    }

    void client_check_finished(conn& c) {
        if (c.done || c.sending || !clients_[c.side].finished()) return;
        if (::shutdown(c.fd, SHUT_WR) != 0) fail_errno("client shutdown", errno);
        finish(c);
    }
    void finish(conn& c) {
        if (c.done) throw bench_failure("a connection ended twice");
        c.done = true;
        --open_;
    }

    void rearm_or_wait(std::size_t i) {
        starved_.rearm_or_wait(bufs_, i, [this](std::size_t k) { arm(k); });
    }
    void rearm_starved() {
        starved_.rearm(bufs_, [this](std::size_t k) {
            if (!conns_[k].done) arm(k);
        });
    }

    uring ring_;
    buffer_ring bufs_;  // after ring_: unregistered before the ring goes
    bool fixed_;
    request_meter& meter_;
    std::vector<frames::client_connection> clients_;
    std::vector<frames::server_connection> servers_;
    std::vector<conn> conns_;
    starved_connections starved_;
    std::size_t open_ = 0;
};

}  // namespace
}  // namespace sockets_raw_liburing_messages

void sockets_messages_liburing(session& s) {
    frames::messages_params p = frames::read_messages_params(s);
    const bool fixed = fixed_files_requested(s);
    codec c(p.shape);
    request_meter meter(s, "msg_per_s");
    auto pairs = connect_loopback_pairs(p.conns);
    if (p.threads == 1) {
        pin_single_thread(s);
        sockets_raw_liburing_messages::message_loop(pairs, true, true, fixed, p, c, meter).run(true);
    } else {
        // Each loop makes its ring on its own thread: SINGLE_ISSUER binds a ring to the thread that creates it.
        run_pinned_pair(
            s, [&] { sockets_raw_liburing_messages::message_loop(pairs, true, false, fixed, p, c, meter).run(true); },
            [&] { sockets_raw_liburing_messages::message_loop(pairs, false, true, fixed, p, c, meter).run(false); },
                [&] { shut_all(pairs); });
    }
    if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
}

}  // namespace tern_bench::raw_impl
