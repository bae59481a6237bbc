// Helpers for the tern::http tests: a server running on its own thread (so that clients in the test's thread, or
// curl and python processes, can talk to it with plain blocking calls), and a blocking raw-socket client that sends
// exact bytes and reads exact answers.
#pragma once

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/wait.h>

#include <tern/http/chunked.hpp>
#include <tern/http/parser.hpp>
#include <tern/http/router.hpp>
#include <tern/http/server.hpp>
#include <tern/http/stream.hpp>
#include <tern/tern.hpp>

#include "support.hpp"

namespace tern_test {

// An http::server on a loop of its own thread, listening on 127.0.0.1 (a free port). The destructor shuts it
// down (grace 2 s) and joins the thread; a server that does not stop in time fails the test.
class server_thread {
 public:
  server_thread(tern::backend_kind backend, tern::http::router routes, tern::http::server_options opts = {})
      : ctx_(options_for(backend)), server_(ctx_, std::move(routes), std::move(opts)) {
    const std::error_code ec = server_.listen(tern::net::endpoint::loopback_v4(0));
    EXPECT_FALSE(ec) << ec.message();
    auto [lec, ep] = server_.local_endpoint();
    EXPECT_FALSE(lec);
    port_ = ep.port();
    thread_ = std::thread([this] {
      ctx_.block_on(server_.run());
      const std::string left = operations_outstanding(tern::metrics::snapshot(ctx_));
      std::lock_guard<std::mutex> lock(mutex_);
      left_after_run_ = left;
      finished_ = true;
      cv_.notify_all();
    });
  }
  server_thread(const server_thread&) = delete;
  server_thread& operator=(const server_thread&) = delete;
  ~server_thread() {
    stop(std::chrono::milliseconds(2000));
    thread_.join();
  }

  std::uint16_t port() const { return port_; }
  // The server itself: to be used on its loop only (on_loop).
  tern::http::server& server() { return server_; }
  std::string url(std::string_view path) const { return "http://127.0.0.1:" + std::to_string(port_) + std::string(path); }
  // Runs f on the server's loop (any thread).
  template <class F>
  void on_loop(F f) {
    ctx_.post(std::move(f));
  }
  // Shuts the server down with grace; true once run() has returned (within grace + 5 s).
  bool stop(std::chrono::milliseconds grace) {
    if (!stop_requested_.exchange(true)) {
      tern::http::server* s = &server_;
      tern::io_context* ctx = &ctx_;
      ctx_.post([s, ctx, grace] { tern::spawn(*ctx, s->shutdown(grace)).detach(); });
    }
    std::unique_lock<std::mutex> lock(mutex_);
    const bool done = cv_.wait_for(lock, grace + std::chrono::seconds(5), [this] { return finished_; });
    if (!done) {
      ADD_FAILURE() << "the server did not stop";
      ctx_.post([ctx = &ctx_] { ctx->stop(); });
      cv_.wait(lock, [this] { return finished_; });
    }
    return done;
  }
  // The operations the loop still had started and not completed (in the kernel: a socket's read, the listener's
  // accept) when run() returned, by kind ("accept_multishot x1"), or "" for none. Valid once stop() has returned.
  std::string left_after_run() {
    std::lock_guard<std::mutex> lock(mutex_);
    return left_after_run_;
  }
  // The server's count of open connections, read on its loop.
  std::size_t connections() {
    std::atomic<std::size_t> n{~std::size_t{0}};
    tern::http::server* s = &server_;
    ctx_.post([s, &n] { n.store(s->connections()); });
    while (n.load() == ~std::size_t{0}) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return n.load();
  }

 private:
  tern::io_context ctx_;
  tern::http::server server_;
  std::uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool finished_ = false;
  std::string left_after_run_;
  std::atomic<bool> stop_requested_{false};
};

// A blocking TCP client with a receive timeout: it sends exact bytes and reads what comes back, so a test sees
// the server's bytes as a peer that is not tern sees them.
class raw_client {
 public:
  explicit raw_client(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;
  ~raw_client() {
    if (fd_ >= 0) ::close(fd_);
  }

  void send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) {
        ADD_FAILURE() << "send failed";
        return;
      }
      data.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  // True if bytes (or the end) arrive within timeout.
  bool readable(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1;
  }
  // Everything until the server closes (or timeout passes without a byte).
  std::string read_to_close(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::string all;
    char buf[65536];
    while (readable(timeout)) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      all.append(buf, static_cast<std::size_t>(n));
    }
    return all;
  }
  // One whole response (head and body, by its framing), parsed; its raw bytes in raw. Empty status on failure.
  struct response {
    int status = 0;
    std::string head;
    std::string body;
    bool keep_alive = false;
  };
  response read_response(tern::http::method m = tern::http::method::get,
                         std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    response r;
    tern::http::response_parser p;
    std::error_code ec;
    for (;;) {
      if (p.parse(pending_, m, ec)) {
        const auto& h = p.head();
        if (h.status == 100) {  // an interim answer: the final one follows
          interim_.push_back(100);
          pending_.erase(0, h.size);
          p.reset();
          continue;
        }
        r.status = h.status;
        r.keep_alive = h.keep_alive;
        r.head = pending_.substr(0, h.size);
        const auto framing = h.framing;
        const auto length = h.content_length;
        pending_.erase(0, h.size);
        if (framing == tern::http::body_framing::content_length) {
          while (pending_.size() < length && fill(timeout)) {
          }
          r.body = pending_.substr(0, static_cast<std::size_t>(length));
          pending_.erase(0, r.body.size());
        } else if (framing == tern::http::body_framing::chunked) {
          tern::http::chunked_decoder d;
          while (!d.done()) {
            auto s = d.decode(pending_, ec);
            if (ec) return {};
            r.body.append(s.data);
            pending_.erase(0, s.consumed);
            if (!d.done() && (s.consumed == 0 || pending_.empty()) && !fill(timeout)) return {};
          }
        } else if (framing == tern::http::body_framing::until_close) {
          while (fill(timeout)) {
          }
          r.body = std::move(pending_);
          pending_.clear();
        }
        return r;
      }
      if (ec || !fill(timeout)) return r;
    }
  }
  // The next n bytes after what read_response took (fewer if the connection ends or timeout passes first).
  std::string read_bytes(std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    while (pending_.size() < n && fill(timeout)) {
    }
    std::string out = pending_.substr(0, n);
    pending_.erase(0, out.size());
    return out;
  }
  bool closed() const { return closed_; }
  // Whether the server closed the connection (end of stream within timeout, nothing else pending).
  bool server_closed(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    if (closed_) return true;
    read_to_close(timeout);
    return closed_;
  }
  const std::vector<int>& interim() const { return interim_; }
  int fd() const { return fd_; }

 private:
  bool fill(std::chrono::milliseconds timeout) {
    if (!readable(timeout)) return false;
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    pending_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool closed_ = false;
  std::string pending_;
  std::vector<int> interim_;
};

// The size and the byte sum of data: what the tests' /sum routes answer, and what a test computes itself.
inline std::string size_and_sum(std::string_view data) {
  std::uint64_t sum = 0;
  for (char c : data) sum += static_cast<unsigned char>(c);
  return std::to_string(data.size()) + " " + std::to_string(sum);
}

// GET /pattern/{n}: n bytes of 'a'..'z' repeating, chunked, in writes of at most piece bytes.
inline void add_pattern_route(tern::http::router& r, std::size_t piece_size) {
  namespace http = tern::http;
  r.stream(http::method::get, "/pattern/{n}",
           [piece_size](http::request& q, http::body_reader&, http::response_stream& out) -> tern::task<void> {
             const std::size_t n = std::stoul(std::string(q.param("n")));
             (void)co_await out.start(200);  // chunked
             std::string piece;
             for (std::size_t at = 0; at < n; at += piece.size()) {
               piece.resize(std::min<std::size_t>(piece_size, n - at));
               for (std::size_t i = 0; i < piece.size(); ++i) piece[i] = static_cast<char>('a' + (at + i) % 26);
               if (co_await out.write(tern::const_buffer(piece.data(), piece.size()))) co_return;
             }
             (void)co_await out.finish();
           });
}

// Runs a shell command; its standard output (and the exit status in status).
inline std::string command_output(const std::string& command, int& status) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) {
    status = -1;
    return out;
  }
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

}  // namespace tern_test
