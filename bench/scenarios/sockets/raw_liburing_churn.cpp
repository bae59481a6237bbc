// sockets/accept_churn for raw/liburing: the floor. A hand-written single-thread loop over one ring, with the
// io_uring features tern uses for this traffic and no runtime: the echo and messages floors' ring (raw_uring_loop.hpp:
// SINGLE_ISSUER|DEFER_TASKRUN, its fd registered, one io_uring_enter per turn that submits and waits), and a
// multishot accept that stays armed on the listener.
//
// A client is a state machine: socket() (a plain call, as every stack makes it), CONNECT, SEND of its byte, RECV
// of the echo (checked), RECV of the end of stream, close(); then its lap is recorded and the next one starts. A
// server connection, started by each accept CQE: RECV of the byte, SEND of it back, close() (the server closes
// first, as in the other implementations). A SQE's user_data holds the step it completes and whose it is: the
// client's index, or the server connection's fd (below 20000 here), which also indexes its state.
#include "raw_uring_loop.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::raw_impl {

namespace sockets_raw_liburing_churn {  // this file's own (see bench/CMakeLists.txt)
namespace {

enum step : std::uint64_t { accepted = 1, client_connect, client_send, client_recv, client_eof, server_recv,
                            server_send };

constexpr std::uint64_t data(step s, std::uint64_t who) { return (who << 8) | s; }

class churn {
public:
    churn(session& s, unsigned concurrent) : clients_(concurrent), meter_(s, "ops_per_s") {
        listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listener_ < 0) fail_errno("socket", errno);
        addr_.sin_family = AF_INET;
        addr_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr_;
        if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_) != 0) fail_errno("bind", errno);
        if (::listen(listener_, 4096) != 0) fail_errno("listen", errno);
        if (::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr_), &len) != 0) fail_errno("getsockname", errno);
    }
    ~churn() {
        ::close(listener_);  // the ring, destroyed after this body, cancels the multishot accept
        for (auto& c : clients_)
            if (c.fd >= 0) ::close(c.fd);
        for (std::size_t fd = 0; fd < servers_.size(); ++fd)
            if (servers_[fd].open) ::close(static_cast<int>(fd));
    }

    void run() {
        arm_accept();
        meter_.start();
        for (unsigned i = 0; i < clients_.size(); ++i) start_lap(i);
        while (running_ > 0) ring_.turn([this](const io_uring_cqe& cqe) { complete(cqe); });
        if (!meter_.done()) throw bench_failure("the clients stopped before the last phase ended");
    }

private:
    struct client {
        int fd = -1;
        unsigned char sent = 0;
        unsigned char got[2] = {};
        std::uint64_t lap = 0;
        bench_clock::time_point t0;
    };
    struct server_conn {
        bool open = false;
        unsigned char byte = 0;
    };

    void arm_accept() {
        io_uring_sqe* e = ring_.sqe();
        io_uring_prep_multishot_accept(e, listener_, nullptr, nullptr, SOCK_CLOEXEC);
        io_uring_sqe_set_data64(e, data(accepted, 0));
    }

    void start_lap(unsigned i) {
        client& c = clients_[i];
        c.t0 = bench_clock::now();
        c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c.fd < 0) fail_errno("socket", errno);
        io_uring_sqe* e = ring_.sqe();
        io_uring_prep_connect(e, c.fd, reinterpret_cast<const sockaddr*>(&addr_), sizeof addr_);
        io_uring_sqe_set_data64(e, data(client_connect, i));
    }

    void client_io(unsigned i, step s) {
        client& c = clients_[i];
        io_uring_sqe* e = ring_.sqe();
        if (s == client_send) {
            c.sent = static_cast<unsigned char>(i * 131 + c.lap);
            io_uring_prep_send(e, c.fd, &c.sent, 1, MSG_NOSIGNAL);
        } else {
            io_uring_prep_recv(e, c.fd, s == client_recv ? &c.got[0] : &c.got[1], 1, 0);
        }
        io_uring_sqe_set_data64(e, data(s, i));
    }

    void server_io(int fd, step s) {
        io_uring_sqe* e = ring_.sqe();
        if (s == server_recv) {
            io_uring_prep_recv(e, fd, &servers_[fd].byte, 1, 0);
        } else {
            io_uring_prep_send(e, fd, &servers_[fd].byte, 1, MSG_NOSIGNAL);
        }
        io_uring_sqe_set_data64(e, data(s, static_cast<std::uint64_t>(fd)));
    }

    void complete(const io_uring_cqe& cqe) {
        const auto s = static_cast<step>(cqe.user_data & 0xff);
        const std::uint64_t who = cqe.user_data >> 8;
        const int res = cqe.res;
        switch (s) {
            case accepted: {
                if (res < 0) fail_errno("accept", -res);
                if (static_cast<std::size_t>(res) >= servers_.size()) servers_.resize(static_cast<std::size_t>(res) + 64);
                servers_[res].open = true;
                server_io(res, server_recv);
                if (!(cqe.flags & IORING_CQE_F_MORE)) arm_accept();  // the kernel ended the multishot: re-arm it
                break;
            }
            case server_recv:
                if (res != 1) fail_errno("server recv", res < 0 ? -res : EPROTO);
                server_io(static_cast<int>(who), server_send);
                break;
            case server_send:
                if (res != 1) fail_errno("server send", res < 0 ? -res : EPROTO);
                servers_[who].open = false;
                ::close(static_cast<int>(who));  // the server closes first
                break;
            case client_connect:
                if (res < 0) fail_errno("connect", -res);
                client_io(static_cast<unsigned>(who), client_send);
                break;
            case client_send:
                if (res != 1) fail_errno("client send", res < 0 ? -res : EPROTO);
                client_io(static_cast<unsigned>(who), client_recv);
                break;
            case client_recv: {
                if (res != 1) fail_errno("client recv", res < 0 ? -res : EPROTO);
                const client& c = clients_[who];
                if (c.got[0] != c.sent) throw bench_failure("client: the echoed byte differs from the one sent");
                client_io(static_cast<unsigned>(who), client_eof);
                break;
            }
            case client_eof: {
                if (res != 0) throw bench_failure("client: expected the end of stream after the echo");
                client& c = clients_[who];
                ::close(c.fd);
                c.fd = -1;
                ++c.lap;
                if (meter_.record(c.t0, bench_clock::now())) {
                    start_lap(static_cast<unsigned>(who));
                } else {
                    --running_;
                }
                break;
            }
        }
    }

    uring ring_{256};
    int listener_ = -1;
    sockaddr_in addr_{};
    std::vector<client> clients_;
    std::vector<server_conn> servers_ = std::vector<server_conn>(1024);
    std::size_t running_ = clients_.size();
    request_meter meter_;
};

}  // namespace
}  // namespace sockets_raw_liburing_churn

void sockets_accept_churn_liburing(session& s) {
    sockets_raw_liburing_churn::churn c(s, static_cast<unsigned>(s.param_int("concurrent")));
    c.run();
}

}  // namespace tern_bench::raw_impl
