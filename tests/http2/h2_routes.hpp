// The routes the tern::http2 tests serve, and the checks they share (internal to the tests).
#pragma once

#include "h2_support.hpp"

#include <tern/http/router.hpp>
#include <tern/http/stream.hpp>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <atomic>
#include <cstdio>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

namespace tern_test {

namespace http = tern::http;
using namespace std::chrono_literals;

inline std::string version_name(http::version v) { return std::to_string(v.major) + "." + std::to_string(v.minor); }

inline std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

inline std::string sha256_hex(std::string_view data) {
  unsigned char digest[32];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return to_hex(std::string_view(reinterpret_cast<char*>(digest), sizeof digest));
}

inline std::string pattern(std::size_t n) {
  std::string s(n, ' ');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + i % 26);
  return s;
}

// Whether this build runs under a sanitizer (several times slower: timing bounds widen, volumes shrink).
constexpr bool sanitized_build() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#endif
#endif
  return false;
}

// Whether this build runs under ThreadSanitizer, whose shadow memory (several bytes for each byte the program
// touches) makes a process's RSS say little about what the program itself holds.
constexpr bool thread_sanitized_build() {
#if defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return true;
#endif
#endif
  return false;
}

// 1 GiB; a quarter of it under a sanitizer, whose point is the memory errors of the path, not the volume (CI time).
inline std::uint64_t gibibyte_test_size() { return std::uint64_t{1} << (sanitized_build() ? 28 : 30); }

// The process's resident memory, and its peak, in KiB (/proc/self/status).
inline std::size_t status_kib(std::string_view field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  std::size_t kib = 0;
  while (f != nullptr && std::fgets(line, sizeof line, f) != nullptr) {
    if (std::string_view(line).starts_with(field)) kib = std::strtoull(line + field.size() + 1, nullptr, 10);
  }
  if (f != nullptr) std::fclose(f);
  return kib;
}

// The body of /in-one-write: 32 MiB of pattern(), made once. A test that measures the server's memory calls it
// first, so that these bytes (the handler's own) are resident before it counts.
inline const std::string& one_write_source() {
  static const std::string all = pattern(32 << 20);
  return all;
}

// State the routes share with the test thread.
struct probe {
  std::atomic<int> cancelled{0};      // handlers that saw operation_canceled
  std::atomic<int> finished{0};       // /slow handlers that ran to their end
  std::atomic<bool> release{false};   // /hold waits for it
  std::atomic<std::size_t> read_so_far{0};
  std::atomic<int> lent_sent{0};      // /last/{n} handlers whose write_last succeeded
  std::atomic<int> timed_out{0};      // handlers that saw timed_out
  std::atomic<int> refused{0};        // /last-checked's write_last refused for a length it did not reach
};

inline http::router test_routes(probe& p) {
  http::router r;
  r.get("/hello", [](http::request& q) -> tern::task<http::response> {
    http::response resp(200, "hello over " + version_name(q.version()) + "\n");
    resp.headers.set("X-Custom", "Yes");
    co_return resp;
  });
  r.get("/users/{id}", [](http::request& q) -> tern::task<http::response> {
    co_return http::response(200, "user " + std::string(q.param("id")) + " " + std::string(q.query()) + " " +
                                      std::string(q.header("host")));
  });
  r.post("/echo", [](http::request& q) -> tern::task<http::response> {
    co_return http::response(200, std::string(q.body()), "application/octet-stream");
  });
  r.get("/throw", [](http::request&) -> tern::task<http::response> {
    throw std::runtime_error("handler failure");
    co_return http::response(200);
  });
  r.get("/slow", [&p](http::request&) -> tern::task<http::response> {
    co_await tern::sleep_for(300ms);
    ++p.finished;
    co_return http::response(200, "slow");
  });
  // Waits until cancelled (RST_STREAM), counting the cancellation.
  r.get("/forever", [&p](http::request&) -> tern::task<http::response> {
    auto ec = co_await tern::sleep_for(60s);
    if (ec == tern::error::operation_canceled) ++p.cancelled;
    co_return http::response(200, "woke");
  });
  // Reads the body only once released, then answers its size and sum.
  r.stream(http::method::put, "/hold",
           [&p](http::request&, http::body_reader& body, http::response_stream& out) -> tern::task<void> {
             while (!p.release.load()) {
               if (co_await tern::sleep_for(5ms)) co_return;
             }
             std::string all;
             char buf[16384];
             for (;;) {
               auto [ec, n] = co_await body.read_some(tern::mutable_buffer(buf, sizeof buf));
               if (ec == tern::error::eof) break;
               if (ec) co_return;
               all.append(buf, n);
               p.read_so_far = all.size();
             }
             (void)co_await out.start(200);
             const std::string answer = size_and_sum(all);
             (void)co_await out.write(tern::const_buffer(answer.data(), answer.size()));
             (void)co_await out.finish();
           });
  // Streams its request body back, piece by piece, with the request's trailers as its own.
  r.stream(http::method::post, "/stream",
           [](http::request&, http::body_reader& body, http::response_stream& out) -> tern::task<void> {
             if (co_await out.start(200)) co_return;
             char buf[8192];
             for (;;) {
               auto [ec, n] = co_await body.read_some(tern::mutable_buffer(buf, sizeof buf));
               if (ec == tern::error::eof) break;
               if (ec) co_return;
               if (co_await out.write(tern::const_buffer(buf, n))) co_return;
             }
             http::fields t;
             for (http::field f : body.trailers()) t.add(std::string("echo-") + std::string(f.name), f.value);
             t.add("X-Sum", "done");
             (void)co_await out.finish(t);
           });
  // The SHA-256 of the request body, in hex, read piece by piece.
  r.stream(http::method::post, "/sha256",
           [](http::request&, http::body_reader& body, http::response_stream& out) -> tern::task<void> {
             std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
             EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr);
             char buf[16384];
             for (;;) {
               auto [ec, n] = co_await body.read_some(tern::mutable_buffer(buf, sizeof buf));
               if (ec == tern::error::eof) break;
               if (ec) co_return;
               EVP_DigestUpdate(md.get(), buf, n);
             }
             unsigned char digest[32];
             EVP_DigestFinal_ex(md.get(), digest, nullptr);
             const std::string hex = to_hex(std::string_view(reinterpret_cast<char*>(digest), sizeof digest));
             if (co_await out.start(200, {}, hex.size())) co_return;
             (void)co_await out.write(tern::const_buffer(hex.data(), hex.size()));
             (void)co_await out.finish();
           });
  // n bytes of the alphabet repeating (pattern(n)), streamed in pieces of 16 KiB with a Content-Length.
  r.stream(http::method::get, "/bytes/{n}",
           [](http::request& q, http::body_reader&, http::response_stream& out) -> tern::task<void> {
             const std::uint64_t n = std::stoull(std::string(q.param("n")));
             static const std::string alphabet = pattern(26 * 1024);
             if (co_await out.start(200, {}, n)) co_return;
             for (std::uint64_t at = 0; at < n;) {
               const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(16384, n - at));
               if (co_await out.write(tern::const_buffer(alphabet.data() + at % 26, k))) co_return;
               at += k;
             }
             (void)co_await out.finish();
           });
  // pattern(n) in one write_last, from a buffer of the handler's own that it overwrites and frees once write_last
  // has returned: a byte read from it after that arrives as 'X' (or, under ASan, as a use after free).
  r.stream(http::method::get, "/last/{n}",
           [&p](http::request& q, http::body_reader&, http::response_stream& out) -> tern::task<void> {
             const std::size_t n = std::stoull(std::string(q.param("n")));
             auto body = std::make_unique<std::string>(pattern(n));
             if (co_await out.start(200, {}, n)) co_return;
             const std::error_code ec = co_await out.write_last(tern::const_buffer(body->data(), body->size()));
             if (!ec) ++p.lent_sent;
             else if (ec == tern::error::operation_canceled) ++p.cancelled;
             else if (ec == tern::error::timed_out) ++p.timed_out;
             body->assign(body->size(), 'X');
           });
  // A declared length of 10: write_last of fewer bytes is refused with nothing sent, then 10 go.
  r.stream(http::method::get, "/last-checked",
           [&p](http::request&, http::body_reader&, http::response_stream& out) -> tern::task<void> {
             if (co_await out.start(200, {}, 10)) co_return;
             if (co_await out.write_last(tern::const_buffer("short", 5)) == std::errc::invalid_argument) ++p.refused;
             if (!co_await out.write_last(tern::const_buffer("0123456789", 10))) ++p.lent_sent;
           });
  // one_write_source() in one write: a handler that hands the stream more than its room at once.
  r.stream(http::method::get, "/in-one-write",
           [](http::request&, http::body_reader&, http::response_stream& out) -> tern::task<void> {
             const std::string& all = one_write_source();
             if (co_await out.start(200, {}, all.size())) co_return;
             if (co_await out.write(tern::const_buffer(all.data(), all.size()))) co_return;
             (void)co_await out.finish();
           });
  add_pattern_route(r, 10000);
  return r;
}

// Runs a server with HTTP/2 on, and the routes above.
struct h2_server {
  probe p;
  server_thread s;
  h2_server(tern::backend_kind backend, http::server_options o = h2_server_options())
      : s(backend, test_routes(p), std::move(o)) {}
};

// http::serve on a runtime, whose handlers may move between its workers, from a thread of its own (a 2 s grace
// period); port() once it listens. stop() shuts the runtime down: true if it stopped within 3 s.
class runtime_server {
 public:
  runtime_server(tern::runtime& rt, std::shared_ptr<const http::router> routes, http::server_options opts)
      : rt_(rt), routes_(std::move(routes)), opts_(std::move(opts)) {
    auto ready = listening_.get_future();
    thread_ = std::thread([this] {
      const std::error_code ec = rt_.block_on(http::serve(rt_, routes_, tern::net::endpoint::loopback_v4(0), opts_,
                                                          std::chrono::seconds(2),
                                                          [this](const tern::net::endpoint& ep) { listening_.set_value(ep); }));
      EXPECT_FALSE(ec) << ec.message();
    });
    port_ = ready.get().port();
  }
  runtime_server(const runtime_server&) = delete;
  runtime_server& operator=(const runtime_server&) = delete;
  ~runtime_server() {
    if (thread_.joinable()) (void)stop();
  }

  std::uint16_t port() const { return port_; }
  bool stop() {
    const bool stopped = rt_.shutdown(std::chrono::seconds(3));
    thread_.join();
    return stopped;
  }

 private:
  tern::runtime& rt_;
  std::shared_ptr<const http::router> routes_;
  http::server_options opts_;
  std::promise<tern::net::endpoint> listening_;
  std::thread thread_;
  std::uint16_t port_ = 0;
};

}  // namespace tern_test
