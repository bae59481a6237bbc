// ws/echo for raw/epoll: the floor of a WebSocket echo through epoll on this kernel. What a program with no
// runtime and no WebSocket library pays for the same messages: `conns` loopback pairs on one thread, every socket
// registered once (level-triggered EPOLLIN), each turn one epoll_wait and, for each ready socket, one recv; a
// whole frame is answered with one send. So a round trip is the four socket calls that tern/epoll and Beast make
// too (the client's send and recv, the server's recv and send), plus epoll_wait shared by whatever was ready.
//
// The frames are RFC 6455's, built and parsed here in the fewest steps: the client sends a binary frame of `size`
// bytes masked with a fresh key (xorshift), the server checks the header, unmasks the payload in its input buffer
// and sends it back unmasked, the client checks the echo (binary, the size, every byte). A send the socket does not
// take whole waits for EPOLLOUT. No opening handshake: an HTTP exchange per connection before the phases, which
// the other implementations make and never measure. After the last phase each client sends a close frame
// (1000) and waits for the server's answer, and every server must have answered one.
// Instruction mode (tern-bench --instructions) counts the server's side alone: the same loop with one server
// endpoint, on a connection accepted from tern-bench-client, which drives it from another process without the
// opening handshake (../served.hpp).
#include "../sockets/raw_common.hpp"
#include "../served.hpp"
#include "../../harness/instructions.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"
#include "ws_message.hpp"

#include <sys/epoll.h>

#include <arpa/inet.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace tern_bench::raw_impl {

namespace ws_raw_epoll_echo {  // this file's own (see bench/CMakeLists.txt)
namespace {

constexpr unsigned char fin_binary = 0x82;
constexpr unsigned char fin_close = 0x88;
constexpr unsigned char mask_bit = 0x80;
constexpr std::size_t max_header = 2 + 8 + 4;

// A frame's header: FIN and the opcode, the length (7 bits, or 126 and 16 bits), the masking key if masked.
std::size_t put_header(unsigned char* out, unsigned char first, std::size_t len, const unsigned char* key) {
    std::size_t n = 0;
    out[n++] = first;
    const unsigned char masked = key != nullptr ? mask_bit : 0;
    if (len < 126) {
        out[n++] = static_cast<unsigned char>(masked | len);
    } else if (len <= 0xffff) {
        out[n++] = masked | 126;
        out[n++] = static_cast<unsigned char>(len >> 8);
        out[n++] = static_cast<unsigned char>(len);
    } else {
        throw bench_failure("ws/echo raw/epoll: messages up to 64 KiB");
    }
    if (key != nullptr) {
        std::memcpy(out + n, key, 4);
        n += 4;
    }
    return n;
}

// XORs the key over p, eight bytes at a time (the compiler widens the loop further), as a WebSocket library does.
// Its own, not tern::ws's (which has the same loop): the floor links no WebSocket code of any stack.
void apply_mask(unsigned char* p, std::size_t n, const unsigned char* key) {
    std::uint32_t k32;
    std::memcpy(&k32, key, 4);
    const std::uint64_t k64 = (std::uint64_t{k32} << 32) | k32;
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, p + i, 8);
        w ^= k64;
        std::memcpy(p + i, &w, 8);
    }
    for (; i < n; ++i) p[i] ^= key[i & 3];
}

struct endpoint {
    int fd = -1;
    bool client = false;
    std::vector<unsigned char> in;   // bytes received, not yet a whole frame
    std::size_t have = 0;
    std::vector<unsigned char> out;  // the frame being sent
    std::size_t out_begin = 0;
    std::size_t out_end = 0;
    bool writable_armed = false;
    bool done = false;  // client: the server answered its close; server: it answered the client's
    bench_clock::time_point t0{};
};

class echo_loop {
public:
    echo_loop(session& s, std::size_t conns, std::size_t size)
        : meter_(s, "msg_per_s"), pairs_(connect_loopback_pairs(conns)), ep_(::epoll_create1(EPOLL_CLOEXEC)) {
        ends_.resize(2 * conns);
        for (std::size_t i = 0; i < conns; ++i) {
            ends_[2 * i].fd = pairs_[i].client.fd;
            ends_[2 * i].client = true;
            ends_[2 * i + 1].fd = pairs_[i].server.fd;
        }
        register_ends(size);
    }

    // Instruction mode: the server's end of one accepted connection, nothing else.
    echo_loop(session& s, fd_owner server, std::size_t size)
        : meter_(s, "msg_per_s"), ep_(::epoll_create1(EPOLL_CLOEXEC)), server_only_(true) {
        pairs_.emplace_back();
        pairs_.back().server.fd = std::exchange(server.fd, -1);
        ends_.resize(1);
        ends_[0].fd = pairs_.back().server.fd;
        register_ends(size);
    }

    void run() {
        meter_.start();
        for (endpoint& e : ends_)
            if (e.client) send_message(e);
        std::size_t open = ends_.size();
        std::vector<epoll_event> events(1024);
        while (open > 0) {
            const int n = ::epoll_wait(ep_.fd, events.data(), static_cast<int>(events.size()), -1);
            if (n < 0) {
                if (errno == EINTR) continue;
                fail_errno("epoll_wait", errno);
            }
            for (int k = 0; k < n; ++k) {
                endpoint& e = ends_[events[k].data.u64];
                const bool was_finished = finished(e);
                if ((events[k].events & EPOLLOUT) != 0) flush(e);
                if (!e.done && (events[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) receive(e);
                if (!was_finished && finished(e)) --open;
            }
        }
        if (!server_only_ && !meter_.done()) throw bench_failure("the clients stopped before the last phase ended");
    }

private:
    void register_ends(std::size_t size) {
        if (ep_.fd < 0) fail_errno("epoll_create1", errno);
        const std::string m = ws_bench::make_message(size);
        message_.assign(m.begin(), m.end());
        for (std::size_t i = 0; i < ends_.size(); ++i) {
            endpoint& e = ends_[i];
            e.in.resize(max_header + size);
            e.out.resize(max_header + size);
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.u64 = i;
            if (::epoll_ctl(ep_.fd, EPOLL_CTL_ADD, e.fd, &ev) != 0) fail_errno("epoll_ctl", errno);
        }
    }

    // Done, and its last frame (a close) has left: nothing more happens on it.
    static bool finished(const endpoint& e) { return e.done && e.out_begin == e.out_end; }

    void send_message(endpoint& e) {
        e.t0 = bench_clock::now();
        unsigned char key[4];
        next_key(key);
        const std::size_t h = put_header(e.out.data(), fin_binary, message_.size(), key);
        std::memcpy(e.out.data() + h, message_.data(), message_.size());
        apply_mask(e.out.data() + h, message_.size(), key);
        start_send(e, h + message_.size());
    }

    void send_close(endpoint& e, const unsigned char* key) {
        const unsigned char code[2] = {0x03, 0xe8};  // 1000, normal closure
        const std::size_t h = put_header(e.out.data(), fin_close, 2, key);
        std::memcpy(e.out.data() + h, code, 2);
        if (key != nullptr) apply_mask(e.out.data() + h, 2, key);
        start_send(e, h + 2);
    }

    void start_send(endpoint& e, std::size_t n) {
        if (e.out_begin != e.out_end) throw bench_failure("ws/echo raw/epoll: a send while one is unfinished");
        e.out_begin = 0;
        e.out_end = n;
        flush(e);
    }

    void flush(endpoint& e) {
        while (e.out_begin < e.out_end) {
            const ssize_t n =
                ::send(e.fd, e.out.data() + e.out_begin, e.out_end - e.out_begin, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0) {
                if (errno == EAGAIN) {
                    watch_writable(e, true);
                    return;
                }
                fail_errno("send", errno);
            }
            e.out_begin += static_cast<std::size_t>(n);
        }
        e.out_begin = e.out_end = 0;
        watch_writable(e, false);
    }

    void watch_writable(endpoint& e, bool on) {
        if (e.writable_armed == on) return;
        epoll_event ev{};
        ev.events = on ? EPOLLIN | EPOLLOUT : EPOLLIN;
        ev.data.u64 = static_cast<std::uint64_t>(&e - ends_.data());
        if (::epoll_ctl(ep_.fd, EPOLL_CTL_MOD, e.fd, &ev) != 0) fail_errno("epoll_ctl", errno);
        e.writable_armed = on;
    }

    void receive(endpoint& e) {
        const ssize_t n = ::recv(e.fd, e.in.data() + e.have, e.in.size() - e.have, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN) return;
            fail_errno("recv", errno);
        }
        if (n == 0) throw bench_failure(e.client ? "client: the server closed" : "server: the client closed");
        e.have += static_cast<std::size_t>(n);
        while (!e.done && take_frame(e)) {
        }
    }

    // Handles the whole frame at the front of e.in, if there is one; false when more bytes are needed.
    bool take_frame(endpoint& e) {
        if (e.have < 2) return false;
        const unsigned char* p = e.in.data();
        std::size_t len = p[1] & 0x7f;
        std::size_t h = 2;
        if (len == 126) {
            if (e.have < 4) return false;
            len = (std::size_t{p[2]} << 8) | p[3];
            h = 4;
        } else if (len == 127) {
            throw bench_failure("ws/echo raw/epoll: a frame longer than 64 KiB");
        }
        const bool masked = (p[1] & mask_bit) != 0;
        if (masked == e.client) throw bench_failure(e.client ? "client: a masked frame" : "server: an unmasked frame");
        const unsigned char* key = masked ? p + h : nullptr;
        if (masked) h += 4;
        if (h + len > e.in.size()) throw bench_failure("ws/echo raw/epoll: a frame larger than the message");
        if (e.have < h + len) return false;
        unsigned char* payload = e.in.data() + h;
        if (p[0] == fin_binary) {
            if (e.client) {
                if (len != message_.size() || std::memcmp(payload, message_.data(), len) != 0)
                    throw bench_failure("client: the echo differs from the message (" + std::to_string(len) +
                                        " bytes)");
                if (meter_.record(e.t0, bench_clock::now())) {
                    send_message(e);
                } else {
                    unsigned char close_key[4];
                    next_key(close_key);
                    send_close(e, close_key);
                }
            } else {
                instructions::request_handled();
                apply_mask(payload, len, key);
                const std::size_t oh = put_header(e.out.data(), fin_binary, len, nullptr);
                std::memcpy(e.out.data() + oh, payload, len);
                start_send(e, oh + len);
            }
        } else if (p[0] == fin_close) {
            if (!e.client) send_close(e, nullptr);
            e.done = true;
        } else {
            throw bench_failure("ws/echo raw/epoll: an unexpected frame (first byte " + std::to_string(p[0]) + ")");
        }
        e.have -= h + len;
        if (e.have != 0) std::memmove(e.in.data(), e.in.data() + h + len, e.have);
        return true;
    }

    void next_key(unsigned char* key) {
        state_ ^= state_ << 13;
        state_ ^= state_ >> 7;
        state_ ^= state_ << 17;
        const auto k = static_cast<std::uint32_t>(state_);
        std::memcpy(key, &k, 4);
    }

    request_meter meter_;
    std::vector<loopback_fds> pairs_;
    fd_owner ep_;
    std::vector<unsigned char> message_;
    std::vector<endpoint> ends_;
    std::uint64_t state_ = 0x9e3779b97f4a7c15ull;
    bool server_only_ = false;
};

// Instruction mode: a listener, tern-bench-client connecting to it, the loop serving that one connection.
void count_echo(session& s) {
    if (s.param_int("conns") != 1) throw bench_failure("ws/echo's instructions are counted with conns=1");
    const auto size = static_cast<std::size_t>(s.param_int("size"));
    fd_owner listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (listener.fd < 0) fail_errno("socket", errno);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail_errno("bind", errno);
    if (::listen(listener.fd, 4) != 0) fail_errno("listen", errno);
    if (::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) fail_errno("getsockname", errno);
    served::client client(s, ntohs(addr.sin_port), served::protocol::ws_raw, size);
    fd_owner conn(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.fd < 0) fail_errno("accept", errno);
    int one = 1;
    if (::setsockopt(conn.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) fail_errno("TCP_NODELAY", errno);
    echo_loop loop(s, std::move(conn), size);
    loop.run();  // until the client's close
    client.finish();
}

}  // namespace
}  // namespace ws_raw_epoll_echo

void ws_echo_epoll(session& s) {
    if (s.param_int("threads") != 1) throw bench_failure("ws/echo runs on one thread (threads=1)");
    if (s.instructions()) return ws_raw_epoll_echo::count_echo(s);
    ws_raw_epoll_echo::echo_loop loop(s, static_cast<std::size_t>(s.param_int("conns")),
        static_cast<std::size_t>(s.param_int("size")));
    loop.run();
}

}  // namespace tern_bench::raw_impl
