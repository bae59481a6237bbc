// Helpers for the tern::http2 tests: a blocking HTTP/2 client, a peer tern did not write (nghttp2's client session
// over a blocking socket, or OpenSSL over one for h2 with ALPN), that records every stream's answer, and writes
// raw bytes when a test needs frames no well-behaved client sends.
#pragma once

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tern/http/server.hpp>
#include <tern/http2/server.hpp>

#include "../http/http_support.hpp"

namespace tern_test {

// An HTTP/2 frame, serialised by hand (for what a conformant client library will not send).
inline std::string h2_frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream, std::string_view payload) {
  std::string f;
  const std::size_t n = payload.size();
  f.push_back(static_cast<char>((n >> 16) & 0xff));
  f.push_back(static_cast<char>((n >> 8) & 0xff));
  f.push_back(static_cast<char>(n & 0xff));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  for (int shift = 24; shift >= 0; shift -= 8) f.push_back(static_cast<char>((stream >> shift) & 0xff));
  f.append(payload);
  return f;
}

inline std::string be32(std::uint32_t v) {
  std::string s;
  for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((v >> shift) & 0xff));
  return s;
}

// One stream's answer as the client saw it.
struct h2_answer {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::pair<std::string, std::string>> trailers;
  std::vector<int> interim;  // 1xx statuses
  std::string body;          // (empty when the client keeps no bodies: body_size and body_hash say what came)
  std::uint64_t body_size = 0;
  std::uint64_t body_hash = 14695981039346656037ull;  // FNV-1a over the body
  bool closed = false;
  std::uint32_t close_code = 0;  // NGHTTP2_NO_ERROR unless reset
  bool reset_by_peer = false;    // an RST_STREAM arrived for it
  int data_frames = 0;
  int empty_data_frames = 0;     // DATA frames without a byte (an END_STREAM sent on its own)

  std::string header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n == name) return v;
    }
    return {};
  }
};

struct h2_client_options {
  std::uint32_t window = 1 << 20;          // our stream window (SETTINGS_INITIAL_WINDOW_SIZE)
  std::uint32_t connection_window = 1 << 20;
  bool auto_window = true;                 // false: the window reopens only by consume()
  bool tls = false;                        // h2 over TLS (ALPN "h2"), certificate not checked
  std::string alpn = "h2";
  bool upgrade = false;                    // start with HTTP/1.1 and Upgrade: h2c (GET /)
  std::string upgrade_path = "/";
  std::uint32_t max_concurrent_streams = 100;
  bool keep_bodies = true;                 // false: bodies are only counted and hashed (a 1 GiB download)
};

inline std::uint64_t fnv1a(std::string_view data, std::uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  return h;
}

class h2_client {
 public:
  explicit h2_client(std::uint16_t port, h2_client_options o = {}) : opts_(std::move(o)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    EXPECT_TRUE(connected_);
    if (opts_.tls && connected_) start_tls();
    nghttp2_session_callbacks* cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, &on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, &on_close);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &on_frame);
    nghttp2_option* opt;
    nghttp2_option_new(&opt);
    if (!opts_.auto_window) nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_session_client_new2(&session_, cb, this, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, opts_.window},
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, opts_.max_concurrent_streams},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
    };
    if (opts_.upgrade) {
      std::uint8_t payload[64];
      const ssize_t n = nghttp2_pack_settings_payload(payload, sizeof payload, settings, 3);
      send_raw("GET " + opts_.upgrade_path +
               " HTTP/1.1\r\nHost: test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
               "HTTP2-Settings: " +
               base64url(std::string_view(reinterpret_cast<char*>(payload), static_cast<std::size_t>(n))) +
               "\r\n\r\n");
      upgrade_answer_ = read_until_blank_line();
      if (upgrade_answer_.starts_with("HTTP/1.1 101")) {
        nghttp2_session_upgrade2(session_, payload, static_cast<std::size_t>(n), 0, nullptr);
        streams_[1];
      }
    }
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 3);
    if (opts_.connection_window > 65535) {
      nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                            static_cast<std::int32_t>(opts_.connection_window));
    }
  }
  h2_client(const h2_client&) = delete;
  h2_client& operator=(const h2_client&) = delete;
  ~h2_client() {
    nghttp2_session_del(session_);
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ssl_ctx_ != nullptr) SSL_CTX_free(ssl_ctx_);
    if (fd_ >= 0) ::close(fd_);
  }

  // A request; the body (if any) is sent whole, or, with open_body, later through send_body().
  std::int32_t request(std::string_view method, std::string_view path,
                       std::vector<std::pair<std::string, std::string>> headers = {},
                       std::optional<std::string> body = std::nullopt, bool open_body = false) {
    std::vector<std::pair<std::string, std::string>> all = {
        {":method", std::string(method)}, {":scheme", opts_.tls ? "https" : "http"}, {":authority", "test"},
        {":path", std::string(path)}};
    for (auto& h : headers) all.push_back(std::move(h));
    std::vector<nghttp2_nv> nva;
    for (auto& [n, v] : all) {
      nva.push_back({reinterpret_cast<std::uint8_t*>(n.data()), reinterpret_cast<std::uint8_t*>(v.data()), n.size(),
                     v.size(), NGHTTP2_NV_FLAG_NONE});
    }
    auto out = std::make_unique<outgoing>();
    nghttp2_data_provider provider{};
    provider.source.ptr = out.get();
    provider.read_callback = &read_body;
    const bool has_body = body.has_value() || open_body;
    if (body) out->data = std::move(*body);
    out->ended = !open_body;
    const std::int32_t id = nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(),
                                                   has_body ? &provider : nullptr, nullptr);
    EXPECT_GT(id, 0);
    streams_[id];
    if (has_body) outgoing_[id] = std::move(out);
    return id;
  }
  // More of an open body; end: the last piece (with trailers, if any).
  void send_body(std::int32_t id, std::string data, bool end,
                 std::vector<std::pair<std::string, std::string>> trailers = {}) {
    outgoing& o = *outgoing_.at(id);
    o.data.append(data);
    o.ended = end;
    o.trailers = std::move(trailers);
    nghttp2_session_resume_data(session_, id);
  }
  void reset(std::int32_t id, std::uint32_t code = NGHTTP2_CANCEL) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, code);
  }
  void ping() { nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, nullptr); }
  // With auto_window off: reopens the stream's window by n bytes the test has "read".
  void consume(std::int32_t id, std::size_t n) { nghttp2_session_consume(session_, id, n); }
  // Bytes straight to the socket, past the session (crafted frames).
  void send_raw(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n;
      if (ssl_ != nullptr) n = SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()));
      else n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) {
        closed_ = true;
        return;
      }
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  // Exchanges frames until done() or timeout; false on timeout. The connection's end also stops it.
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      flush();
      if (done()) return true;
      if (closed_) return done();
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      if (!pending_tls() && !readable(left)) continue;
      char buf[65536];
      ssize_t n;
      if (ssl_ != nullptr) n = SSL_read(ssl_, buf, sizeof buf);
      else n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        continue;
      }
      received_bytes_ += static_cast<std::size_t>(n);
      watch(std::string_view(buf, static_cast<std::size_t>(n)));
      const ssize_t rv =
          nghttp2_session_mem_recv(session_, reinterpret_cast<std::uint8_t*>(buf), static_cast<std::size_t>(n));
      if (rv < 0) {
        closed_ = true;
        session_error_ = static_cast<int>(rv);
      }
    }
  }
  bool finish(std::int32_t id, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return run_until([&] { return streams_[id].closed; }, timeout);
  }
  // Runs for a while, whatever happens (what a silent peer sees meanwhile).
  void run_for(std::chrono::milliseconds d) { (void)run_until([] { return false; }, d); }
  // Sends what the session has queued.
  void flush() {
    for (;;) {
      const std::uint8_t* data;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n <= 0) break;
      send_raw(std::string_view(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n)));
    }
  }

  h2_answer& answer(std::int32_t id) { return streams_[id]; }
  bool closed() const { return closed_; }
  bool goaway() const { return goaways_ != 0; }
  int goaways() const { return goaways_; }
  std::int32_t goaway_last_stream() const { return goaway_last_; }
  std::uint32_t goaway_code() const { return goaway_code_; }
  int pings_acked() const { return ping_acks_; }
  int window_updates() const { return window_updates_; }
  std::uint32_t remote_setting(nghttp2_settings_id id) const { return nghttp2_session_get_remote_settings(session_, id); }
  std::int32_t stream_send_window(std::int32_t id) const {
    return nghttp2_session_get_stream_remote_window_size(session_, id);
  }
  std::size_t received_bytes() const { return received_bytes_; }
  // The client session's own verdict on what it received (an nghttp2 error code), or 0.
  int session_error() const { return session_error_; }
  const std::string& upgrade_answer() const { return upgrade_answer_; }
  std::string alpn() const {
    const unsigned char* p = nullptr;
    unsigned n = 0;
    if (ssl_ != nullptr) SSL_get0_alpn_selected(ssl_, &p, &n);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  int fd() const { return fd_; }
  nghttp2_session* session() { return session_; }

 private:
  struct outgoing {
    std::string data;
    std::size_t taken = 0;
    bool ended = true;
    std::vector<std::pair<std::string, std::string>> trailers;
  };

  static std::string base64url(std::string_view in) {
    static constexpr char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    std::string out;
    std::uint32_t acc = 0;
    int bits = 0;
    for (unsigned char c : in) {
      acc = (acc << 8) | c;
      bits += 8;
      while (bits >= 6) {
        bits -= 6;
        out.push_back(digits[(acc >> bits) & 63]);
      }
    }
    if (bits > 0) out.push_back(digits[(acc << (6 - bits)) & 63]);
    return out;
  }

  std::string read_until_blank_line() {
    std::string got;
    char c;
    while (got.find("\r\n\r\n") == std::string::npos && readable(std::chrono::seconds(5)) &&
           ::recv(fd_, &c, 1, 0) == 1) {
      got.push_back(c);
    }
    return got;
  }

  void start_tls() {
    ssl_ctx_ = SSL_CTX_new(TLS_client_method());
    const std::string wire = std::string(1, static_cast<char>(opts_.alpn.size())) + opts_.alpn;
    SSL_CTX_set_alpn_protos(ssl_ctx_, reinterpret_cast<const unsigned char*>(wire.data()),
                            static_cast<unsigned>(wire.size()));
    ssl_ = SSL_new(ssl_ctx_);
    SSL_set_fd(ssl_, fd_);
    EXPECT_EQ(SSL_connect(ssl_), 1);
  }

  bool pending_tls() const { return ssl_ != nullptr && SSL_pending(ssl_) > 0; }
  bool readable(std::chrono::milliseconds timeout) const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(std::min<long long>(timeout.count(), 100))) == 1;
  }

  // GOAWAY frames are counted from the bytes as they arrive: nghttp2's session stops reading frames once it thinks
  // the connection is over (a first GOAWAY and no stream open), and a test wants every GOAWAY the server sent.
  void watch(std::string_view in) {
    while (!in.empty()) {
      if (frame_skip_ != 0) {
        const std::size_t k = std::min<std::size_t>(frame_skip_, in.size());
        if (goaway_bytes_.size() < 8 && frame_type_ == NGHTTP2_GOAWAY) {
          goaway_bytes_.append(in.substr(0, std::min<std::size_t>(k, 8 - goaway_bytes_.size())));
          if (goaway_bytes_.size() == 8) {
            ++goaways_;
            goaway_last_ = static_cast<std::int32_t>(be(goaway_bytes_.data()) & 0x7fffffff);
            goaway_code_ = be(goaway_bytes_.data() + 4);
          }
        }
        frame_skip_ -= k;
        in.remove_prefix(k);
        continue;
      }
      frame_header_.push_back(in.front());
      in.remove_prefix(1);
      if (frame_header_.size() < 9) continue;
      const auto* h = reinterpret_cast<const unsigned char*>(frame_header_.data());
      frame_skip_ = (std::size_t{h[0]} << 16) | (std::size_t{h[1]} << 8) | h[2];
      frame_type_ = h[3];
      frame_header_.clear();
      goaway_bytes_.clear();
    }
  }
  static std::uint32_t be(const char* p) {
    const auto* u = reinterpret_cast<const unsigned char*>(p);
    return (std::uint32_t{u[0]} << 24) | (std::uint32_t{u[1]} << 16) | (std::uint32_t{u[2]} << 8) | u[3];
  }

  static h2_client& self(void* user) { return *static_cast<h2_client*>(user); }

  static ssize_t read_body(nghttp2_session* session, std::int32_t id, std::uint8_t* buf, std::size_t length,
                           std::uint32_t* flags, nghttp2_data_source* source, void*) {
    auto& o = *static_cast<outgoing*>(source->ptr);
    const std::size_t n = std::min(length, o.data.size() - o.taken);
    std::memcpy(buf, o.data.data() + o.taken, n);
    o.taken += n;
    if (o.taken == o.data.size() && o.ended) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      if (!o.trailers.empty()) {
        std::vector<nghttp2_nv> nva;
        for (auto& [k, v] : o.trailers) {
          nva.push_back({reinterpret_cast<std::uint8_t*>(k.data()), reinterpret_cast<std::uint8_t*>(v.data()),
                         k.size(), v.size(), NGHTTP2_NV_FLAG_NONE});
        }
        nghttp2_submit_trailer(session, id, nva.data(), nva.size());
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      }
      return static_cast<ssize_t>(n);
    }
    if (n == 0) return NGHTTP2_ERR_DEFERRED;
    return static_cast<ssize_t>(n);
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
                       const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void* user) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    h2_answer& a = self(user).streams_[frame->hd.stream_id];
    const std::string n(reinterpret_cast<const char*>(name), namelen), v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status") {
      const int code = std::stoi(v);
      if (code < 200) a.interim.push_back(code);
      else a.status = code;
    } else if (frame->headers.cat == NGHTTP2_HCAT_HEADERS && a.status != 0) {
      a.trailers.emplace_back(n, v);
    } else {
      a.headers.emplace_back(n, v);
    }
    return 0;
  }
  static int on_data(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data, std::size_t len,
                     void* user) {
    h2_client& c = self(user);
    h2_answer& a = c.streams_[id];
    const std::string_view piece(reinterpret_cast<const char*>(data), len);
    if (c.opts_.keep_bodies) a.body.append(piece);
    a.body_size += len;
    a.body_hash = fnv1a(piece, a.body_hash);
    return 0;
  }
  static int on_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user) {
    h2_answer& a = self(user).streams_[id];
    a.closed = true;
    a.close_code = code;
    return 0;
  }
  static int on_frame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    h2_client& c = self(user);
    switch (frame->hd.type) {
      case NGHTTP2_PING:
        if (frame->hd.flags & NGHTTP2_FLAG_ACK) ++c.ping_acks_;
        break;
      case NGHTTP2_RST_STREAM:
        c.streams_[frame->hd.stream_id].reset_by_peer = true;
        break;
      case NGHTTP2_WINDOW_UPDATE:
        ++c.window_updates_;
        break;
      case NGHTTP2_DATA: {
        h2_answer& a = c.streams_[frame->hd.stream_id];
        ++a.data_frames;
        if (frame->hd.length == 0) ++a.empty_data_frames;
        break;
      }
      default:
        break;
    }
    return 0;
  }

  h2_client_options opts_;
  int fd_ = -1;
  bool connected_ = false;
  SSL_CTX* ssl_ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  nghttp2_session* session_ = nullptr;
  std::map<std::int32_t, h2_answer> streams_;
  std::map<std::int32_t, std::unique_ptr<outgoing>> outgoing_;
  bool closed_ = false;
  std::string frame_header_;
  std::size_t frame_skip_ = 0;
  std::uint8_t frame_type_ = 0;
  std::string goaway_bytes_;
  int goaways_ = 0;
  std::int32_t goaway_last_ = -1;
  std::uint32_t goaway_code_ = 0;
  int ping_acks_ = 0;
  int window_updates_ = 0;
  std::size_t received_bytes_ = 0;
  int session_error_ = 0;
  std::string upgrade_answer_;
};

// A process that prints "port N" and serves until its standard input closes (the Python server, nghttpd's
// wrapper). It leads a process group of its own, which the destructor ends whole: a shell's background child
// (nghttpd) would otherwise outlive the shell that a signal ended before it could end the child itself.
class peer_process {
 public:
  explicit peer_process(const std::string& command) {
    int in[2], out[2];
    EXPECT_EQ(::pipe(in), 0);
    EXPECT_EQ(::pipe(out), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::close(in[1]);
      ::close(out[0]);
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);  // also here: whichever of the two runs first
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    std::string line;
    char c;
    while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
    ::close(out[0]);
    if (line.starts_with("port ")) port_ = static_cast<std::uint16_t>(std::stoi(line.substr(5)));
    EXPECT_NE(port_, 0) << "no port from: " << command;
  }
  ~peer_process() {
    ::close(stdin_);
    ::kill(-pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  std::uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::uint16_t port_ = 0;
};

// Server options with HTTP/2 on (and, for h2 over TLS, a transport made by the test).
inline tern::http::server_options h2_server_options(tern::http2::server_options h2 = {}) {
  tern::http::server_options o;
  o.http2 = tern::http2::server_protocol(h2);
  return o;
}

}  // namespace tern_test
