// tern-bench-client: the client that drives a server scenario's server from another process while the server is
// counted under callgrind (tern-bench --instructions, harness/instructions.hpp). One connection, blocking
// sockets, no runtime: a request, then its whole answer read and checked, then the next, so that every server is
// driven the same way by the same code, in lockstep, and its instruction count holds only its own work.
//
//   tern-bench-client --port P --protocol http_get|http_ping|ws|ws_raw|h2_ping|h2_upload --requests N [--size S]
//                     [--streams M]
//
// http_get: http/minimal's GET / (41 bytes); the answer must be 200, Content-Length 13, Content-Type text/plain,
// the body "Hello, World!", and the connection kept open (except after the last answer, where the server may
// stop). http_ping: http/ping_json's POST /ping with {"sequence": N} (N of constant width, so every request has
// the same size); the answer must be 200, Content-Type application/json and {"sequence":N}. ws: RFC 6455's
// opening handshake (the RFC's example key, whose Sec-WebSocket-Accept is checked), then N binary messages of S
// bytes (ws_message.hpp's bytes), each masked with a fresh key, each echo checked (binary, unmasked, reassembled
// from its fragments, the size and every byte), then the close handshake (1000); ws_raw: the same without the
// opening handshake (the raw/epoll floor has none). h2_ping: http_ping's POST over HTTP/2 with prior knowledge
// (nghttp2's client session on the same blocking socket), M streams in flight (a new request as soon as one is
// answered; 1 by default), each answer checked as http_ping's;
// h2_upload: POSTs of S bytes to /upload (h2_upload.hpp), the answer's size, head and tail checked. Nothing may
// arrive that was not asked for. Prints "tern-bench-client answers=N" and exits 0, or prints the failure on stderr, sends SIGTERM to
// its parent (the server being counted, which would otherwise wait for requests that never come) and exits 1.
#include "../scenarios/http2/h2_upload.hpp"
#include "../scenarios/ws/ws_message.hpp"

#include <nghttp2/nghttp2.h>

#include <arpa/inet.h>
#include <signal.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace {

struct failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& what) { throw failure(what); }

class connection {
public:
    explicit connection(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
        if (fd_ < 0) fail(std::string("socket: ") + std::strerror(errno));
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
            fail(std::string("connect: ") + std::strerror(errno));
        int one = 1;
        if (::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
            fail(std::string("TCP_NODELAY: ") + std::strerror(errno));
    }
    ~connection() { ::close(fd_); }
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    void send_all(std::string_view bytes) {
        while (!bytes.empty()) {
            ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EINTR) continue;
                fail(std::string("send: ") + std::strerror(errno));
            }
            bytes.remove_prefix(static_cast<std::size_t>(n));
        }
    }

    // Makes at least n bytes available in buffered(); fails at the end of the stream.
    void fill(std::size_t n) {
        while (in_.size() < n) {
            char chunk[65536];
            ssize_t got = ::recv(fd_, chunk, sizeof chunk, 0);
            if (got < 0) {
                if (errno == EINTR) continue;
                fail(std::string("recv: ") + std::strerror(errno));
            }
            if (got == 0) fail("the server closed the connection");
            in_.append(chunk, static_cast<std::size_t>(got));
        }
    }

    // The bytes up to and including the first "\r\n\r\n", taken out of the buffer.
    std::string take_head() {
        for (;;) {
            auto end = in_.find("\r\n\r\n");
            if (end != std::string::npos) {
                std::string head = in_.substr(0, end + 4);
                in_.erase(0, end + 4);
                return head;
            }
            if (in_.size() > 65536) fail("an answer's head longer than 64 KiB");
            fill(in_.size() + 1);
        }
    }

    std::string take(std::size_t n) {
        fill(n);
        std::string out = in_.substr(0, n);
        in_.erase(0, n);
        return out;
    }

    // Some bytes from the socket (what is buffered first); fails at the end of the stream.
    std::size_t read_some(char* out, std::size_t n) {
        if (in_.empty()) fill(1);
        const std::size_t k = std::min(n, in_.size());
        std::memcpy(out, in_.data(), k);
        in_.erase(0, k);
        return k;
    }

    // Nothing may be left over after an answer: the server sends only what was asked for.
    void expect_empty(const char* after) const {
        if (!in_.empty()) fail(std::to_string(in_.size()) + " unexpected bytes after " + after);
    }

private:
    int fd_;
    std::string in_;
};

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

struct http_answer {
    int status = 0;
    std::string head;
    std::string body;

    // A field's value (the first of that name, case-insensitive), or nullopt-like "\0" when absent.
    std::string field(std::string_view name) const {
        std::size_t pos = head.find("\r\n");
        while (pos != std::string::npos && pos + 2 < head.size()) {
            std::size_t start = pos + 2;
            std::size_t end = head.find("\r\n", start);
            if (end == std::string::npos || end == start) break;
            std::string_view line(head.data() + start, end - start);
            auto colon = line.find(':');
            if (colon != std::string_view::npos && iequals(line.substr(0, colon), name)) {
                std::string_view v = line.substr(colon + 1);
                while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
                while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
                return std::string(v);
            }
            pos = end;
        }
        return std::string(1, '\0');
    }
    bool has(std::string_view name) const { return field(name) != std::string(1, '\0'); }
};

// An HTTP/1.1 answer framed by Content-Length (none: no body).
http_answer read_http(connection& c) {
    http_answer a;
    a.head = c.take_head();
    if (a.head.rfind("HTTP/1.1 ", 0) != 0 || a.head.size() < 12) fail("not an HTTP/1.1 status line: " + a.head);
    a.status = std::atoi(a.head.c_str() + 9);
    if (a.has("transfer-encoding")) fail("an answer with Transfer-Encoding (a fixed length was expected)");
    if (a.has("content-length")) {
        const std::string len = a.field("content-length");
        char* end = nullptr;
        unsigned long n = std::strtoul(len.c_str(), &end, 10);
        if (end == len.c_str() || *end != '\0' || n > 1 << 20) fail("a bad Content-Length '" + len + "'");
        a.body = c.take(n);
    }
    return a;
}

// Every answer but the last keeps the connection: the server may stop after the last one (its Connection: close).
void check_kept_alive(const http_answer& a, bool last) {
    if (!last && a.has("connection") && iequals(a.field("connection"), "close"))
        fail("the server closes the connection");
}

void http_get(connection& c, std::uint16_t port, std::uint64_t requests) {
    const std::string request = "GET / HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n\r\n";
    for (std::uint64_t i = 0; i < requests; ++i) {
        c.send_all(request);
        http_answer a = read_http(c);
        if (a.status != 200) fail("status " + std::to_string(a.status));
        if (a.field("content-length") != "13") fail("Content-Length '" + a.field("content-length") + "'");
        if (a.field("content-type") != "text/plain") fail("Content-Type '" + a.field("content-type") + "'");
        if (a.body != "Hello, World!") fail("body '" + a.body + "'");
        check_kept_alive(a, i + 1 == requests);
        c.expect_empty("an answer");
    }
}

void http_ping(connection& c, std::uint16_t port, std::uint64_t requests) {
    const std::string head = "POST /ping HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                             "\r\nContent-Type: application/json\r\nContent-Length: ";
    for (std::uint64_t i = 0; i < requests; ++i) {
        const std::uint64_t sequence = 10000000 + i;  // eight digits for the first 90 million
        const std::string body = "{\"sequence\": " + std::to_string(sequence) + "}";
        c.send_all(head + std::to_string(body.size()) + "\r\n\r\n" + body);
        http_answer a = read_http(c);
        if (a.status != 200) fail("status " + std::to_string(a.status));
        const std::string type = a.field("content-type");
        if (!iequals(type.substr(0, 16), "application/json")) fail("Content-Type '" + type + "'");
        if (a.body != "{\"sequence\":" + std::to_string(sequence) + "}") fail("body '" + a.body + "'");
        check_kept_alive(a, i + 1 == requests);
        c.expect_empty("an answer");
    }
}

class ws_client {
public:
    ws_client(connection& c, std::uint16_t port, bool handshake) : c_(c) {
        if (!handshake) return;
        c_.send_all("GET / HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                    "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                    "Sec-WebSocket-Version: 13\r\n\r\n");
        http_answer a = read_http(c_);
        if (a.status != 101) fail("handshake: status " + std::to_string(a.status));
        if (!iequals(a.field("upgrade"), "websocket")) fail("handshake: Upgrade '" + a.field("upgrade") + "'");
        // RFC 6455 section 1.3: the accept value of its example key.
        if (a.field("sec-websocket-accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
            fail("handshake: Sec-WebSocket-Accept '" + a.field("sec-websocket-accept") + "'");
        c_.expect_empty("the handshake");
    }

    void send(unsigned char opcode, std::string_view payload) {
        std::string frame;
        frame += static_cast<char>(0x80 | opcode);
        if (payload.size() < 126) {
            frame += static_cast<char>(0x80 | payload.size());
        } else if (payload.size() <= 0xffff) {
            frame += static_cast<char>(0x80 | 126);
            frame += static_cast<char>(payload.size() >> 8);
            frame += static_cast<char>(payload.size() & 0xff);
        } else {
            fail("messages up to 64 KiB");
        }
        unsigned char key[4];
        next_key(key);
        frame.append(reinterpret_cast<const char*>(key), 4);
        const std::size_t at = frame.size();
        frame += payload;
        for (std::size_t i = 0; i < payload.size(); ++i) frame[at + i] = static_cast<char>(frame[at + i] ^ key[i & 3]);
        c_.send_all(frame);
    }

    // The next message: its opcode and payload, reassembled from its fragments (a server may cut a message into
    // frames of its own size). Frames must be unmasked.
    std::pair<unsigned, std::string> receive() {
        auto [fin, opcode, payload] = frame();
        while (!fin) {
            auto [more_fin, more_opcode, more] = frame();
            if (more_opcode != 0) fail("a frame of opcode " + std::to_string(more_opcode) + " inside a fragmented message");
            payload += more;
            fin = more_fin;
        }
        return {opcode, std::move(payload)};
    }

private:
    std::tuple<bool, unsigned, std::string> frame() {
        std::string h = c_.take(2);
        const auto b0 = static_cast<unsigned char>(h[0]);
        const auto b1 = static_cast<unsigned char>(h[1]);
        if ((b1 & 0x80) != 0) fail("a masked frame from the server");
        std::size_t len = b1 & 0x7f;
        if (len == 126) {
            std::string ext = c_.take(2);
            len = (std::size_t{static_cast<unsigned char>(ext[0])} << 8) | static_cast<unsigned char>(ext[1]);
        } else if (len == 127) {
            fail("a frame longer than 64 KiB");
        }
        return {(b0 & 0x80) != 0, b0 & 0x0fu, c_.take(len)};
    }


    void next_key(unsigned char* key) {
        state_ ^= state_ << 13;
        state_ ^= state_ >> 7;
        state_ ^= state_ << 17;
        const auto k = static_cast<std::uint32_t>(state_);
        std::memcpy(key, &k, 4);
    }

    connection& c_;
    std::uint64_t state_ = 0x9e3779b97f4a7c15ull;
};

void ws_echo(connection& c, std::uint16_t port, std::uint64_t requests, std::size_t size, bool handshake) {
    ws_client ws(c, port, handshake);
    const std::string message = tern_bench::ws_bench::make_message(size);
    for (std::uint64_t i = 0; i < requests; ++i) {
        ws.send(0x2, message);
        auto [opcode, payload] = ws.receive();
        if (opcode != 0x2) fail("an echo with opcode " + std::to_string(opcode));
        if (payload != message) fail("an echo that differs from the message (" + std::to_string(payload.size()) + " bytes)");
        c.expect_empty("an echo");
    }
    ws.send(0x8, std::string_view("\x03\xe8", 2));  // 1000, normal closure
    auto [opcode, payload] = ws.receive();
    if (opcode != 0x8) fail("the answer to the close has opcode " + std::to_string(opcode));
    if (payload.size() >= 2 && (static_cast<unsigned char>(payload[0]) << 8 | static_cast<unsigned char>(payload[1])) != 1000)
        fail("the server closed with another code than 1000");
}


// HTTP/2 with prior knowledge on the blocking connection: nghttp2's client session, up to `streams` requests in
// flight (a new one as soon as one is answered), every answer checked as it completes.
class h2_client {
public:
    // The request for a sequence number: its path, content type and body; the answer it must get.
    struct exchange {
        const char* path = "";
        std::string_view type;
        std::string body;
        std::string expected_type;  // a prefix of the answer's Content-Type
        std::string expected_body;
    };
    using make_exchange = std::function<void(std::uint64_t sequence, exchange& x)>;

    h2_client(connection& c, std::uint16_t port) : c_(c), authority_("127.0.0.1:" + std::to_string(port)) {
        nghttp2_session_callbacks* cb = nullptr;
        nghttp2_session_callbacks_new(&cb);
        nghttp2_session_callbacks_set_on_header_callback(
            cb, [](nghttp2_session* session, const nghttp2_frame* frame, const std::uint8_t* name,
                   std::size_t namelen, const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void*) -> int {
                auto* x = static_cast<stream*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
                if (x == nullptr) return 0;
                const std::string_view n(reinterpret_cast<const char*>(name), namelen);
                const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
                if (n == ":status") x->status = std::atoi(std::string(v).c_str());
                else if (n == "content-type") x->content_type = v;
                return 0;
            });
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
            cb, [](nghttp2_session* session, std::uint8_t, std::int32_t id, const std::uint8_t* data, std::size_t len,
                   void*) -> int {
                auto* x = static_cast<stream*>(nghttp2_session_get_stream_user_data(session, id));
                if (x != nullptr) x->answer.append(reinterpret_cast<const char*>(data), len);
                return 0;
            });
        nghttp2_session_callbacks_set_on_stream_close_callback(
            cb, [](nghttp2_session* session, std::int32_t id, std::uint32_t error, void* user) -> int {
                auto* x = static_cast<stream*>(nghttp2_session_get_stream_user_data(session, id));
                if (x != nullptr) static_cast<h2_client*>(user)->answered(*x, error);
                return 0;
            });
        const int rv = nghttp2_session_client_new(&session_, cb, this);
        nghttp2_session_callbacks_del(cb);
        if (rv != 0) fail("nghttp2_session_client_new failed");
        nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
    }
    ~h2_client() { nghttp2_session_del(session_); }
    h2_client(const h2_client&) = delete;
    h2_client& operator=(const h2_client&) = delete;

    // Makes `requests` requests, `streams` at a time, and checks every answer.
    void run(std::uint64_t requests, std::uint64_t streams, const make_exchange& make) {
        std::vector<stream> slots(streams);
        std::vector<stream*> idle;
        for (auto& x : slots) idle.push_back(&x);
        std::uint64_t next = 0;
        while (answered_ < requests) {
            while (!idle.empty() && next < requests) {
                stream* x = idle.back();
                idle.pop_back();
                submit(*x, next++, make);
            }
            flush();
            char buf[65536];
            const std::size_t n = c_.read_some(buf, sizeof buf);
            if (nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(buf), n) < 0)
                fail(failure_.empty() ? std::string("the server's frames are not HTTP/2") : failure_);
            for (auto& x : slots)
                if (x.done) {
                    x.done = false;
                    idle.push_back(&x);
                }
        }
        flush();  // the WINDOW_UPDATEs the answers call for
    }

private:
    struct stream {
        exchange x;
        std::size_t sent = 0;
        int status = 0;
        std::string content_type;
        std::string answer;
        bool done = false;
    };

    void submit(stream& s, std::uint64_t sequence, const make_exchange& make) {
        make(sequence, s.x);
        s.sent = 0;
        s.status = 0;
        s.content_type.clear();
        s.answer.clear();
        length_ = std::to_string(s.x.body.size());
        auto nv = [](std::string_view name, std::string_view value) {
            return nghttp2_nv{reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
                              reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
                              value.size(), NGHTTP2_NV_FLAG_NONE};
        };
        const nghttp2_nv head[] = {nv(":method", "POST"),         nv(":scheme", "http"),
                                   nv(":authority", authority_),    nv(":path", s.x.path),
                                   nv("content-type", s.x.type),    nv("content-length", length_)};
        nghttp2_data_provider provider{};
        provider.source.ptr = &s;
        provider.read_callback = [](nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                                    std::uint32_t* flags, nghttp2_data_source* source, void*) -> ssize_t {
            auto& x = *static_cast<stream*>(source->ptr);
            const std::size_t n = std::min(length, x.x.body.size() - x.sent);
            std::memcpy(buf, x.x.body.data() + x.sent, n);
            x.sent += n;
            if (x.sent == x.x.body.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
            return static_cast<ssize_t>(n);
        };
        if (nghttp2_submit_request(session_, nullptr, head, 6, &provider, &s) < 0)
            fail("nghttp2_submit_request failed");
    }

    // Inside nghttp2's callback: a failure is kept and ends mem_recv (nothing may throw through nghttp2).
    void answered(stream& s, std::uint32_t error) {
        std::string why;
        if (error != 0) why = "a stream was reset, error " + std::to_string(error);
        else if (s.status != 200) why = "status " + std::to_string(s.status);
        else if (!iequals(s.content_type.substr(0, s.x.expected_type.size()), s.x.expected_type))
            why = "Content-Type '" + s.content_type + "'";
        else if (s.answer != s.x.expected_body) why = "body '" + s.answer + "', expected '" + s.x.expected_body + "'";
        if (!why.empty() && failure_.empty()) failure_ = why;
        s.done = true;
        ++answered_;
        if (!failure_.empty()) nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
    }

    void flush() {
        std::string gathered;
        for (;;) {
            const std::uint8_t* data = nullptr;
            const ssize_t n = nghttp2_session_mem_send(session_, &data);
            if (n < 0) fail("nghttp2_session_mem_send failed");
            if (n == 0) break;
            gathered.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
        }
        if (!failure_.empty()) fail(failure_);
        if (!gathered.empty()) c_.send_all(gathered);
    }

    connection& c_;
    std::string authority_;
    nghttp2_session* session_ = nullptr;
    std::string length_;
    std::uint64_t answered_ = 0;
    std::string failure_;
};

void h2_ping(connection& c, std::uint16_t port, std::uint64_t requests, std::uint64_t streams) {
    h2_client h2(c, port);
    h2.run(requests, streams, [](std::uint64_t i, h2_client::exchange& x) {
        const std::uint64_t sequence = 10000000 + i;
        x.path = "/ping";
        x.type = "application/json";
        x.body = "{\"sequence\": " + std::to_string(sequence) + "}";
        x.expected_type = "application/json";
        x.expected_body = "{\"sequence\":" + std::to_string(sequence) + "}";
    });
}

void h2_upload(connection& c, std::uint16_t port, std::uint64_t requests, std::uint64_t streams, std::size_t size) {
    using namespace tern_bench::h2;
    if (size < 2 * upload_stamp) fail("an upload of at least " + std::to_string(2 * upload_stamp) + " bytes");
    h2_client h2(c, port);
    const std::string pattern = make_upload(size);
    h2.run(requests, streams, [&](std::uint64_t i, h2_client::exchange& x) {
        x.path = upload_path;
        x.type = "application/octet-stream";
        x.body = pattern;
        stamp_upload(x.body, 10000000 + i);
        x.expected_type = "text/plain";
        x.expected_body = upload_answer(x.body);
    });
}

}  // namespace

int main(int argc, char** argv) {
    try {
        std::uint16_t port = 0;
        std::string protocol;
        std::uint64_t requests = 0;
        std::size_t size = 64;
        std::uint64_t streams = 1;
        for (int i = 1; i + 1 < argc; i += 2) {
            std::string_view a = argv[i];
            const char* v = argv[i + 1];
            if (a == "--port")
                port = static_cast<std::uint16_t>(std::atoi(v));
            else if (a == "--protocol")
                protocol = v;
            else if (a == "--requests")
                requests = std::strtoull(v, nullptr, 10);
            else if (a == "--size")
                size = std::strtoull(v, nullptr, 10);
            else if (a == "--streams")
                streams = std::strtoull(v, nullptr, 10);
            else
                fail("unknown argument " + std::string(a));
        }
        if (argc % 2 == 0) fail("arguments come in pairs: --port P --protocol NAME --requests N [--size S]");
        if (port == 0 || requests == 0 || streams == 0) fail("--port and --requests are needed, --streams at least 1");
        connection c(port);
        if (protocol == "http_get")
            http_get(c, port, requests);
        else if (protocol == "http_ping")
            http_ping(c, port, requests);
        else if (protocol == "ws" || protocol == "ws_raw")
            ws_echo(c, port, requests, size, protocol == "ws");
        else if (protocol == "h2_ping")
            h2_ping(c, port, requests, streams);
        else if (protocol == "h2_upload")
            h2_upload(c, port, requests, streams, size);
        else
            fail("unknown protocol '" + protocol + "' (http_get, http_ping, ws, ws_raw, h2_ping, h2_upload)");
        std::printf("tern-bench-client answers=%llu\n", static_cast<unsigned long long>(requests));
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tern-bench-client: %s\n", e.what());
        // The server that started this client may wait for a request that will never come: end it.
        ::kill(::getppid(), SIGTERM);
        return 1;
    }
}
