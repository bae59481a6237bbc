// http2/*'s floors, raw/nghttp2 and raw/nghttp2_uring: nghttp2's server session API (the library tern::http2 is built
// on) on a small hand-written loop, one thread, no runtime; raw/nghttp2's loop is level-triggered epoll,
// raw/nghttp2_uring's is io_uring. Both share everything but the loop (server_base below): each connection's bytes
// are fed to nghttp2_session_mem_recv; the callbacks record a request's method, path, Content-Type and body in a
// stream record taken from a free list, and at the end of the request submit the response: /ping through the same
// ping::service as every stack, /bytes/<n> from the shared pattern buffer. Output is gathered from
// nghttp2_session_mem_send into a buffer of up to 64 KiB per write (as tern's server gathers it). A response's head
// has the fields tern's server sends by default (:status, Server, Date, Content-Length, Content-Type), so that both
// put the same bytes on the wire. The session's settings are tern::http2's defaults (100 concurrent streams, 1 MiB
// stream window, 8 MiB connection window), so that both advertise the same windows to h2load. POST /upload
// (h2_upload.hpp, instruction mode) gathers its body in the stream record's string, whose capacity the free list
// keeps.
//
// raw/nghttp2 (epoll_server): reads into one 64 KiB buffer of the server's, writes the gathered output at once and
// keeps only what the socket would not take, with EPOLLOUT armed until it has gone.
//
// raw/nghttp2_uring (uring_server): the same server with its loop on io_uring, so that what tern/io_uring costs
// beyond this floor is tern's and what it costs beyond raw/nghttp2 splits into the kernel interface's part (this
// floor against the epoll one) and the runtime's. The ring is set up as tern's io_uring backend sets up its own
// (src/io_uring/setup.ipp): SINGLE_ISSUER|DEFER_TASKRUN|SUBMIT_ALL with TASKRUN_FLAG, created disabled and enabled by
// the thread that runs it, falling back as tern does, its fd registered. Per connection one RECV is outstanding into
// the connection's own 64 KiB buffer, re-armed when it completes, and one SEND at a time from the connection's
// output buffer (a short send goes on from where it stopped; the next gather waits for the send to complete). A
// multishot ACCEPT stays armed on the listener, and a READ of the stop eventfd ends the loop. A turn of the loop is
// one io_uring_enter that submits what the last turn queued and waits for a completion, then every CQE there is, then
// a gather and a send for each connection that may have output. In instruction mode its loop runs on the worker's
// own thread and ends by itself (count_uring), as tern's io_uring server does under callgrind (../served.hpp).
#include "h2_load.hpp"
#include "h2_upload.hpp"
#include "../http/ping_service.hpp"
#include "../registry.hpp"
#include "../served.hpp"

#include <liburing.h>
#include <nghttp2/nghttp2.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <iterator>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace tern_bench::raw_impl {

namespace http2_raw_nghttp2 {  // this file's own (see bench/CMakeLists.txt)
namespace {

constexpr std::size_t io_size = 64 * 1024;

struct stream_rec {
    std::string method;
    std::string path;
    std::string content_type;
    std::string body;
    ping::answer answer;
    char length[24];
    char upload[h2::upload_answer_size];
    const char* out = nullptr;
    std::size_t out_size = 0;
    std::size_t out_at = 0;
};

class server_base;

// A connection's part that the session's callbacks see (their user data): each loop's connection derives from it.
struct connection_base {
    int fd = -1;
    nghttp2_session* session = nullptr;
    server_base* server = nullptr;
};

// Everything but the loop: the listener, the stop eventfd, the server thread, and the HTTP/2 part (the session's
// callbacks and settings, the stream records, the handler). `socket_flags` are the listener's and the eventfd's
// (SOCK_NONBLOCK for the epoll loop; io_uring's operations wait themselves, and would end with EAGAIN on a
// non-blocking eventfd).
class server_base : public ping::server {
public:
    std::uint16_t port() const override { return port_; }
    ping::server_stats stats() const override {
        return {service_.answered(), service_.refused(), failures_.get()};
    }
    void stop() override {
        if (!thread_.joinable()) return;
        const std::uint64_t one = 1;
        (void)!::write(stop_fd_, &one, sizeof one);
        thread_.join();
    }

protected:
    explicit server_base(int socket_flags) {
        listen_fd_ = ::socket(AF_INET, SOCK_STREAM | socket_flags | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
            ::listen(listen_fd_, 4096) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
            throw bench_failure(std::string("listen: ") + std::strerror(errno));
        port_ = ntohs(a.sin_port);
        stop_fd_ = ::eventfd(0, ((socket_flags & SOCK_NONBLOCK) != 0 ? EFD_NONBLOCK : 0) | EFD_CLOEXEC);
        if (stop_fd_ < 0) throw bench_failure(std::string("eventfd: ") + std::strerror(errno));
        make_callbacks();
        nghttp2_option_new(&option_);
    }
    // The derived server has stopped the thread and ended its connections' sessions.
    ~server_base() override {
        nghttp2_session_callbacks_del(callbacks_);
        nghttp2_option_del(option_);
        ::close(listen_fd_);
        ::close(stop_fd_);
    }

    // Runs the derived server's loop on the server thread; a failure is kept for stats().
    template <class Loop>
    void start(Loop loop) {
        thread_ = std::thread([this, loop] {
            try {
                loop();
            } catch (const std::exception& e) {
                failures_.set(e.what());
            }
        });
    }

    // A session for an accepted socket, with tern::http2's settings queued as its first output.
    void open_session(connection_base& c) {
        const int one = 1;
        ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c.server = this;
        if (nghttp2_session_server_new2(&c.session, callbacks_, &c, option_) != 0)
            throw bench_failure("nghttp2_session_server_new2 failed");
        const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100},
                                                   {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1024 * 1024}};
        nghttp2_submit_settings(c.session, NGHTTP2_FLAG_NONE, settings, 2);
        nghttp2_session_set_local_window_size(c.session, NGHTTP2_FLAG_NONE, 0, 8 * 1024 * 1024);
    }

    // Gathers what the session has to send into `out` (io_size bytes): its size, or -1 on the session's failure.
    static long gather(nghttp2_session* session, char* out) {
        std::size_t size = 0;
        for (;;) {
            const std::uint8_t* data = nullptr;
            const auto n = nghttp2_session_mem_send(session, &data);
            if (n < 0) return -1;
            if (n == 0) break;
            std::memcpy(out + size, data, static_cast<std::size_t>(n));  // frames are at most 16 KiB
            size += static_cast<std::size_t>(n);
            if (size + 16384 + 64 > io_size) break;
        }
        return static_cast<long>(size);
    }

    int listen_fd_ = -1;
    int stop_fd_ = -1;

private:
    stream_rec* take() {
        if (free_.empty()) return new stream_rec;
        stream_rec* r = free_.back().release();
        free_.pop_back();
        return r;
    }
    void give(stream_rec* r) { free_.emplace_back(r); }

    void respond(nghttp2_session* session, std::int32_t id, stream_rec& r) {
        const long long n = r.method == "GET" ? h2::bytes_size(r.path) : -1;
        if (n < 0 && r.method == "POST" && r.path == h2::upload_path) {
            r.out = r.upload;
            r.out_size = h2::upload_answer(r.body, r.upload);
            r.answer.status = 200;
            instructions::request_handled();
        } else if (n >= 0) {
            r.out = h2::body_bytes();
            r.out_size = static_cast<std::size_t>(n);
            r.answer.status = 200;
        } else {
            const std::string_view path = std::string_view(r.path).substr(0, r.path.find('?'));  // the target's path
            service_.handle(r.method, path, r.content_type, r.body, r.answer);
            r.out = r.answer.body;
            r.out_size = r.answer.size;
        }
        r.out_at = 0;
        const int len = std::snprintf(r.length, sizeof r.length, "%zu", r.out_size);
        const int code = r.answer.status;
        const char* status = code == 200 ? "200" : code == 404 ? "404" : code == 405 ? "405" : code == 415 ? "415" : "400";
        auto nv = [](const char* name, const char* value, std::size_t value_len) {
            return nghttp2_nv{reinterpret_cast<std::uint8_t*>(const_cast<char*>(name)),
                              reinterpret_cast<std::uint8_t*>(const_cast<char*>(value)), std::strlen(name), value_len,
                              NGHTTP2_NV_FLAG_NO_COPY_NAME};
        };
        // The head tern's server sends by default: Server, and the Date an origin server with a clock sends (RFC 9110
        // §6.6.1), its text kept from one response to the next and rewritten when the second changes.
        const std::time_t now = std::time(nullptr);
        if (now != date_second_) {
            date_second_ = now;
            std::tm tm{};
            ::gmtime_r(&now, &tm);
            std::strftime(date_, sizeof date_, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        }
        const nghttp2_nv head[] = {nv(":status", status, 3), nv("server", "tern", 4), nv("date", date_, 29),
                                   nv("content-length", r.length, static_cast<std::size_t>(len)),
                                   r.out == r.upload ? nv("content-type", "text/plain", 10)
                                   : nv("content-type", n >= 0 ? "application/octet-stream" : "application/json",
                                        n >= 0 ? 24 : 16)};
        nghttp2_data_provider provider{};
        provider.source.ptr = &r;
        provider.read_callback = read_body;
        nghttp2_submit_response(session, id, head, std::size(head), r.out_size > 0 ? &provider : nullptr);
    }

    static ssize_t read_body(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                             std::uint32_t* flags, nghttp2_data_source* source, void*) {
        auto* r = static_cast<stream_rec*>(source->ptr);
        const std::size_t n = std::min(length, r->out_size - r->out_at);
        std::memcpy(buf, r->out + r->out_at, n);
        r->out_at += n;
        if (r->out_at == r->out_size) *flags |= NGHTTP2_DATA_FLAG_EOF;
        return static_cast<ssize_t>(n);
    }

    static server_base& of(void* user) { return *static_cast<connection_base*>(user)->server; }

    void make_callbacks() {
        nghttp2_session_callbacks_new(&callbacks_);
        nghttp2_session_callbacks_set_on_begin_headers_callback(
            callbacks_, [](nghttp2_session* session, const nghttp2_frame* frame, void* user) -> int {
                if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
                stream_rec* r = of(user).take();
                r->method.clear();
                r->path.clear();
                r->content_type.clear();
                r->body.clear();
                nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, r);
                return 0;
            });
        nghttp2_session_callbacks_set_on_header_callback(
            callbacks_, [](nghttp2_session* session, const nghttp2_frame* frame, const std::uint8_t* name,
                           std::size_t namelen, const std::uint8_t* value, std::size_t valuelen, std::uint8_t,
                           void*) -> int {
                auto* r = static_cast<stream_rec*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
                if (r == nullptr) return 0;
                const std::string_view n(reinterpret_cast<const char*>(name), namelen);
                const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
                if (n == ":method") r->method = v;
                else if (n == ":path") r->path = v;
                else if (n == "content-type") r->content_type = v;
                return 0;
            });
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
            callbacks_, [](nghttp2_session* session, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                           std::size_t len, void*) -> int {
                auto* r = static_cast<stream_rec*>(nghttp2_session_get_stream_user_data(session, id));
                if (r != nullptr && r->body.size() + len <= h2::max_upload + 1)
                    r->body.append(reinterpret_cast<const char*>(data), len);
                return 0;
            });
        nghttp2_session_callbacks_set_on_frame_recv_callback(
            callbacks_, [](nghttp2_session* session, const nghttp2_frame* frame, void* user) -> int {
                if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
                    (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0)
                    return 0;
                auto* r = static_cast<stream_rec*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
                if (r != nullptr) of(user).respond(session, frame->hd.stream_id, *r);
                return 0;
            });
        nghttp2_session_callbacks_set_on_stream_close_callback(
            callbacks_, [](nghttp2_session* session, std::int32_t id, std::uint32_t, void* user) -> int {
                auto* r = static_cast<stream_rec*>(nghttp2_session_get_stream_user_data(session, id));
                if (r != nullptr) of(user).give(r);
                return 0;
            });
    }

    std::uint16_t port_ = 0;
    nghttp2_session_callbacks* callbacks_ = nullptr;
    nghttp2_option* option_ = nullptr;
    ping::service service_;
    ping::failure_slot failures_;
    std::vector<std::unique_ptr<stream_rec>> free_;
    std::time_t date_second_ = -1;
    char date_[30] = {};
    std::thread thread_;
};

// raw/nghttp2: the level-triggered epoll loop.
struct epoll_connection : connection_base {
    std::string pending;  // output the socket did not take
    bool writing = false; // EPOLLOUT armed
};

class epoll_server final : public server_base {
public:
    epoll_server() : server_base(SOCK_NONBLOCK) {
        epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (epoll_fd_ < 0) throw bench_failure(std::string("epoll: ") + std::strerror(errno));
        add(listen_fd_, EPOLLIN, nullptr);
        add(stop_fd_, EPOLLIN, &stop_fd_);
        start([this] { run(); });
    }
    ~epoll_server() override {
        stop();
        for (auto& [fd, c] : conns_) close_connection(c.get(), false);
        ::close(epoll_fd_);
    }

private:
    void add(int fd, std::uint32_t events, void* tag) {
        epoll_event ev{};
        ev.events = events;
        ev.data.ptr = tag;
        if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
            throw bench_failure(std::string("epoll_ctl: ") + std::strerror(errno));
    }

    void run() {
        epoll_event events[256];
        for (;;) {
            const int n = ::epoll_wait(epoll_fd_, events, 256, -1);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) throw bench_failure(std::string("epoll_wait: ") + std::strerror(errno));
            for (int i = 0; i < n; ++i) {
                void* tag = events[i].data.ptr;
                if (tag == &stop_fd_) return;
                if (tag == nullptr) {
                    accept_all();
                    continue;
                }
                auto* c = static_cast<epoll_connection*>(tag);
                if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !on_readable(c)) continue;
                if (!flush(c)) continue;
            }
        }
    }

    void accept_all() {
        for (;;) {
            const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) return;
            auto c = std::make_unique<epoll_connection>();
            c->fd = fd;
            open_session(*c);
            add(fd, EPOLLIN, c.get());
            epoll_connection* raw = c.get();
            conns_[fd] = std::move(c);
            flush(raw);
        }
    }

    // False when the connection was closed.
    bool on_readable(epoll_connection* c) {
        const ssize_t n = ::read(c->fd, input_, sizeof input_);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
        if (n <= 0) return close_connection(c, true);
        const auto rv = nghttp2_session_mem_recv(c->session, reinterpret_cast<const std::uint8_t*>(input_),
                                                 static_cast<std::size_t>(n));
        if (rv < 0) return close_connection(c, true);
        return true;
    }

    // Writes what the session has to send, gathered; false when the connection was closed.
    bool flush(epoll_connection* c) {
        if (!c->pending.empty()) {
            const ssize_t w = ::send(c->fd, c->pending.data(), c->pending.size(), MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN) return close_connection(c, true);
            if (w > 0) c->pending.erase(0, static_cast<std::size_t>(w));
            if (!c->pending.empty()) return arm(c, true);
        }
        for (;;) {
            const long gathered = gather(c->session, output_);
            if (gathered < 0) return close_connection(c, true);
            const auto size = static_cast<std::size_t>(gathered);
            if (size == 0) break;
            const ssize_t w = ::send(c->fd, output_, size, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN) return close_connection(c, true);
            const std::size_t done = w > 0 ? static_cast<std::size_t>(w) : 0;
            if (done < size) {
                c->pending.assign(output_ + done, size - done);
                return arm(c, true);
            }
        }
        if (!nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session))
            return close_connection(c, true);
        return arm(c, false);
    }

    bool arm(epoll_connection* c, bool writing) {
        if (c->writing == writing) return true;
        c->writing = writing;
        epoll_event ev{};
        ev.events = EPOLLIN | (writing ? EPOLLOUT : 0u);
        ev.data.ptr = c;
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
        return true;
    }

    bool close_connection(epoll_connection* c, bool erase) {
        nghttp2_session_del(c->session);
        ::close(c->fd);
        if (erase) conns_.erase(c->fd);
        return false;
    }

    int epoll_fd_ = -1;
    std::unordered_map<int, std::unique_ptr<epoll_connection>> conns_;
    alignas(64) char input_[io_size];
    alignas(64) char output_[io_size];
};

// raw/nghttp2_uring: the io_uring loop.
struct uring_connection : connection_base {
    std::size_t index = 0;     // in uring_server::conns_
    std::size_t out_size = 0;  // bytes gathered into out
    std::size_t out_at = 0;    // of which the kernel has taken
    unsigned in_flight = 0;    // SQEs whose CQE is still to come
    bool sending = false;      // a SEND of out is in flight
    bool queued = false;       // on uring_server::ready_
    bool closed = false;       // the session is gone; the object waits for its CQEs
    alignas(64) char in[io_size];
    alignas(64) char out[io_size];
};

class uring_server final : public server_base {
public:
    // own_thread: the loop runs on a server thread of its own; otherwise on the caller's, in run_here().
    explicit uring_server(bool own_thread) : server_base(0) {
        // src/io_uring/setup.ipp's tries, in its order (without its SQPOLL ones): completions are processed only in
        // this thread's own enter (DEFER_TASKRUN), the kernel takes every SQE up to the tail (SUBMIT_ALL), and the
        // ring is bound to the thread that enables it (R_DISABLED), the server thread rather than this one.
        constexpr unsigned defer = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED |
                                   IORING_SETUP_SUBMIT_ALL;
        const unsigned tries[] = {
            defer | IORING_SETUP_TASKRUN_FLAG,
            defer,
            IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_R_DISABLED | IORING_SETUP_COOP_TASKRUN |
                IORING_SETUP_TASKRUN_FLAG,
            IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
            0,
        };
        int rc = -EINVAL;
        for (unsigned flags : tries) {
            io_uring_params p{};
            p.flags = flags;
            rc = io_uring_queue_init_params(ring_entries, &ring_, &p);
            if (rc == 0) {
                disabled_ = (flags & IORING_SETUP_R_DISABLED) != 0;
                break;
            }
        }
        if (rc < 0) throw bench_failure(std::string("io_uring_queue_init_params: ") + std::strerror(-rc));
        conns_.reserve(256);
        ready_.reserve(256);
        if (own_thread) start([this] { run(); });
    }
    ~uring_server() override {
        stop();
        io_uring_queue_exit(&ring_);  // the thread's exit has cancelled what was in flight
        for (auto& c : conns_) {
            if (c->session != nullptr) nghttp2_session_del(c->session);
            ::close(c->fd);
        }
    }

    // Instruction mode: the loop on this thread until drain() was called and every connection has closed.
    void run_here() { run(); }
    // Called on the loop's thread: once its connections are gone, the loop ends.
    void drain() { draining_ = true; }

private:
    static constexpr unsigned ring_entries = 512;
    // user_data: a connection's address with the operation in its low bits (the object is 64-byte aligned), or
    // one of the two tags, which no address is.
    static constexpr std::uint64_t op_recv = 0, op_send = 1, op_mask = 63;
    static constexpr std::uint64_t accept_tag = 1, stop_tag = 2;

    void run() {
        if (disabled_) {
            // liburing 2.3's shared library lacks io_uring_enable_rings; the register call is one line.
            if (::syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0) != 0)
                throw bench_failure(std::string("IORING_REGISTER_ENABLE_RINGS: ") + std::strerror(errno));
        }
        (void)io_uring_register_ring_fd(&ring_);  // each enter then skips the fd lookup; without it, as before
        arm_accept();
        io_uring_prep_read(sqe(), stop_fd_, &stop_value_, sizeof stop_value_, 0);
        io_uring_sqe_set_data64(last_, stop_tag);
        for (;;) {
            // The one system call of a turn: submit what the last turn queued and wait for a completion.
            const int rc = io_uring_submit_and_wait(&ring_, 1);
            if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
                throw bench_failure(std::string("io_uring_submit_and_wait: ") + std::strerror(-rc));
            io_uring_cqe* cqe;
            unsigned head, seen = 0;
            io_uring_for_each_cqe(&ring_, head, cqe) {
                ++seen;
                complete(cqe->user_data, cqe->res, cqe->flags);
            }
            io_uring_cq_advance(&ring_, seen);
            if (stopping_) return;
            for (uring_connection* c : ready_) flush(c);
            ready_.clear();
            if (draining_ && conns_.empty()) return;
        }
    }

    // A free SQE; a full queue is submitted first (without waiting) to make room.
    io_uring_sqe* sqe() {
        io_uring_sqe* e = io_uring_get_sqe(&ring_);
        if (e == nullptr) {
            const int rc = io_uring_submit(&ring_);
            if (rc < 0) throw bench_failure(std::string("io_uring_submit: ") + std::strerror(-rc));
            e = io_uring_get_sqe(&ring_);
            if (e == nullptr) throw bench_failure("submission queue full after a submit");
        }
        last_ = e;
        return e;
    }

    void arm_accept() {
        io_uring_prep_multishot_accept(sqe(), listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        io_uring_sqe_set_data64(last_, accept_tag);
    }
    void arm_recv(uring_connection* c) {
        io_uring_prep_recv(sqe(), c->fd, c->in, io_size, 0);
        io_uring_sqe_set_data64(last_, reinterpret_cast<std::uintptr_t>(c) | op_recv);
        ++c->in_flight;
    }
    void arm_send(uring_connection* c) {
        io_uring_prep_send(sqe(), c->fd, c->out + c->out_at, c->out_size - c->out_at, MSG_NOSIGNAL);
        io_uring_sqe_set_data64(last_, reinterpret_cast<std::uintptr_t>(c) | op_send);
        ++c->in_flight;
    }
    // The connection may have output: gathered after this turn's CQEs.
    void ready(uring_connection* c) {
        if (c->queued) return;
        c->queued = true;
        ready_.push_back(c);
    }

    void complete(std::uint64_t data, int res, unsigned flags) {
        if (data == stop_tag) {
            stopping_ = true;
            return;
        }
        if (data == accept_tag) return accepted(res, flags);
        auto* c = reinterpret_cast<uring_connection*>(data & ~op_mask);
        --c->in_flight;
        if (c->closed) return release(c);
        if (res <= 0 && !((data & op_mask) == op_send && res == 0)) return close_connection(c);
        if ((data & op_mask) == op_recv) {
            const auto rv = nghttp2_session_mem_recv(c->session, reinterpret_cast<const std::uint8_t*>(c->in),
                                                     static_cast<std::size_t>(res));
            if (rv < 0) return close_connection(c);
            arm_recv(c);
            return ready(c);
        }
        c->out_at += static_cast<std::size_t>(res);
        if (c->out_at < c->out_size) return arm_send(c);  // a short send: the rest
        c->sending = false;
        ready(c);
    }

    void accepted(int res, unsigned flags) {
        if ((flags & IORING_CQE_F_MORE) == 0) arm_accept();  // the multishot ended
        if (res < 0) {
            if (res == -EINTR || res == -ECONNABORTED || res == -EAGAIN) return;
            throw bench_failure(std::string("accept: ") + std::strerror(-res));
        }
        std::unique_ptr<uring_connection> c(new uring_connection);  // its buffers left as they are, not zeroed
        c->fd = res;
        c->index = conns_.size();
        open_session(*c);
        arm_recv(c.get());
        ready(c.get());
        conns_.push_back(std::move(c));
    }

    // Gathers and sends what the session has, unless a send is in flight (its completion comes back here).
    void flush(uring_connection* c) {
        c->queued = false;
        if (c->closed) return release(c);
        if (c->sending) return;
        const long gathered = gather(c->session, c->out);
        if (gathered < 0) return close_connection(c);
        if (gathered > 0) {
            c->out_size = static_cast<std::size_t>(gathered);
            c->out_at = 0;
            c->sending = true;
            return arm_send(c);
        }
        if (!nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session))
            close_connection(c);
    }

    // Ends the session; the socket is shut down so that an outstanding receive completes, and the object goes
    // once no CQE and no turn refers to it.
    void close_connection(uring_connection* c) {
        nghttp2_session_del(c->session);
        c->session = nullptr;
        c->closed = true;
        if (c->in_flight != 0) ::shutdown(c->fd, SHUT_RDWR);
        release(c);
    }
    void release(uring_connection* c) {
        if (c->in_flight != 0 || c->queued) return;
        ::close(c->fd);
        const std::size_t i = c->index;
        if (i + 1 != conns_.size()) {
            conns_[i] = std::move(conns_.back());
            conns_[i]->index = i;
        }
        conns_.pop_back();
    }

    io_uring ring_{};
    bool disabled_ = false;
    bool stopping_ = false;
    bool draining_ = false;
    io_uring_sqe* last_ = nullptr;  // the SQE sqe() handed out last
    std::uint64_t stop_value_ = 0;
    std::vector<std::unique_ptr<uring_connection>> conns_;
    std::vector<uring_connection*> ready_;
};

std::unique_ptr<ping::server> start_epoll_server(session&, int threads) {
    if (threads != 1) throw bench_failure("raw/nghttp2 serves on one thread");
    return std::make_unique<epoll_server>();
}

std::unique_ptr<ping::server> start_uring_server(session&, int threads) {
    if (threads != 1) throw bench_failure("raw/nghttp2_uring serves on one thread");
    return std::make_unique<uring_server>(true);
}

// Instruction mode (h2_load.cpp's count_ping for the epoll floor): the loop runs on the worker's own thread, since
// under valgrind no other thread runs while one waits in io_uring_enter (../served.hpp), and ends by itself once
// the last request was handled and the client has closed its connection.
void count_uring(session& s) {
    if (s.param_int("conns") != 1 || s.param_int("streams") < 1)
        throw bench_failure("http2/ping_json's instructions are counted with conns=1");
    const std::int64_t body = s.request().params.count("body") ? s.param_int("body") : 0;
    pin_to_cpu(0);
    uring_server srv(false);
    served::client client(s, srv.port(), body > 0 ? served::protocol::h2_upload : served::protocol::h2_ping,
                          static_cast<std::size_t>(body), [&srv] { srv.drain(); },
                          static_cast<std::uint64_t>(s.param_int("streams")));
    srv.run_here();
    client.finish();
    const ping::server_stats st = srv.stats();
    if (st.refused != 0) throw bench_failure("the server refused " + std::to_string(st.refused) + " requests");
}

}  // namespace
}  // namespace http2_raw_nghttp2

void http2_ping_json_nghttp2(session& s) { h2::run_ping(s, http2_raw_nghttp2::start_epoll_server); }
void http2_streams_nghttp2(session& s) { h2::run_streams(s, http2_raw_nghttp2::start_epoll_server); }
void http2_ping_json_nghttp2_uring(session& s) {
    if (s.instructions()) return http2_raw_nghttp2::count_uring(s);
    h2::run_ping(s, http2_raw_nghttp2::start_uring_server);
}
void http2_streams_nghttp2_uring(session& s) { h2::run_streams(s, http2_raw_nghttp2::start_uring_server); }

}  // namespace tern_bench::raw_impl
