// http::server on both backends, spoken to by a raw blocking socket (exact bytes in, exact bytes out): routing
// and captures, 404/405/HEAD, keep-alive and pipelining, Content-Length and chunked request bodies split
// anywhere, Expect: 100-continue, every refusal with its status and a closed connection, handlers that throw,
// the timeouts (slowloris, idle, slow bodies), the connection cap, graceful shutdown, and the streaming form.
#include "http_support.hpp"
#include "net_support.hpp"

#include <tern/http/router.hpp>
#include <tern/http/stream.hpp>

#include <future>
#include <numeric>
#include <set>
#include <stdexcept>

namespace {

using namespace tern_test;
namespace http = tern::http;
using namespace std::chrono_literals;

class http_server_test : public ::testing::TestWithParam<tern::backend_kind> {};
TERN_INSTANTIATE_BACKENDS(http_server_test);

http::router test_routes() {
  http::router r;
  r.get("/hello", [](http::request&) -> tern::task<http::response> { co_return http::response(200, "hello\n"); });
  r.get("/users/{id}", [](http::request& q) -> tern::task<http::response> {
    co_return http::response(200, "user " + std::string(q.param("id")));
  });
  r.get("/users/me", [](http::request&) -> tern::task<http::response> { co_return http::response(200, "me"); });
  r.get("/users/{id}/posts/{post}", [](http::request& q) -> tern::task<http::response> {
    co_return http::response(200, std::string(q.param("id")) + "/" + std::string(q.param("post")) + "?" +
                                      std::string(q.query()));
  });
  r.post("/echo", [](http::request& q) -> tern::task<http::response> {
    http::response resp(200, std::string(q.body()), "application/octet-stream");
    resp.headers.set("X-Length", std::to_string(q.body().size()));
    co_return resp;
  });
  r.get("/slow", [](http::request&) -> tern::task<http::response> {
    co_await tern::sleep_for(300ms);
    co_return http::response(200, "slow");
  });
  r.get("/throw", [](http::request&) -> tern::task<http::response> {
    throw std::runtime_error("handler failure");
    co_return http::response(200);
  });
  r.get("/close", [](http::request&) -> tern::task<http::response> {
    http::response resp(200, "bye");
    resp.headers.set("Connection", "close");
    co_return resp;
  });
  return r;
}

std::string get(std::string_view path, std::string_view extra = "") {
  return "GET " + std::string(path) + " HTTP/1.1\r\nHost: test\r\n" + std::string(extra) + "\r\n";
}

TEST_P(http_server_test, routes_params_and_misses) {
  server_thread s(GetParam(), test_routes());
  raw_client c(s.port());
  c.send(get("/hello"));
  auto r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello\n");
  EXPECT_NE(r.head.find("Content-Length: 6\r\n"), std::string::npos) << r.head;
  EXPECT_NE(r.head.find("Date: "), std::string::npos);
  EXPECT_NE(r.head.find("Server: tern\r\n"), std::string::npos);
  EXPECT_TRUE(r.keep_alive);

  c.send(get("/users/42"));
  EXPECT_EQ(c.read_response().body, "user 42");
  c.send(get("/users/me"));
  EXPECT_EQ(c.read_response().body, "me") << "a literal segment wins over a capture";
  c.send(get("/users/7/posts/12?full=1"));
  EXPECT_EQ(c.read_response().body, "7/12?full=1");
  c.send(get("/nothing/here"));
  EXPECT_EQ(c.read_response().status, 404);
  c.send("DELETE /hello HTTP/1.1\r\nHost: test\r\n\r\n");
  r = c.read_response();
  EXPECT_EQ(r.status, 405);
  EXPECT_NE(r.head.find("Allow: GET, HEAD\r\n"), std::string::npos) << r.head;
  // HEAD: the GET route's head, its Content-Length, no body.
  c.send("HEAD /hello HTTP/1.1\r\nHost: test\r\n\r\n");
  r = c.read_response(http::method::head);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.head.find("Content-Length: 6\r\n"), std::string::npos) << r.head;
  EXPECT_EQ(r.body, "");
  // Still the same connection, in order: one more request answers normally.
  c.send(get("/hello"));
  EXPECT_EQ(c.read_response().body, "hello\n");
  EXPECT_FALSE(c.closed());
}

TEST_P(http_server_test, pipelined_requests_are_answered_in_order) {
  server_thread s(GetParam(), test_routes());
  raw_client c(s.port());
  // A slow request first: the fast ones behind it must still come after it.
  std::string batch = get("/slow") + get("/users/1") + "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nabcde" +
                      get("/users/2") + get("/nope") + get("/users/3");
  c.send(batch);
  EXPECT_EQ(c.read_response().body, "slow");
  EXPECT_EQ(c.read_response().body, "user 1");
  EXPECT_EQ(c.read_response().body, "abcde");
  EXPECT_EQ(c.read_response().body, "user 2");
  EXPECT_EQ(c.read_response().status, 404);
  EXPECT_EQ(c.read_response().body, "user 3");
}

// What the pipelining test below uses: how many requests the connection had answered when another task of the loop,
// queued by the first request's handler, got to run.
// Atomics: the server's thread writes them, the test's thread reads them once the answers are in (the socket orders
// the two, but not in the C++ memory model, which ThreadSanitizer checks).
struct burst_probe {
  std::atomic<int> handled{0};
  std::atomic<int> handled_when_other_ran{-1};
};

tern::task<void> note_turn(burst_probe* p) {
  p->handled_when_other_ran.store(p->handled.load());
  co_return;
}

TEST_P(http_server_test, a_pipelining_client_lets_the_loops_other_tasks_run) {
  // 200 pipelined requests in one write arrive in one read or a few. The connection answers a few of them and then
  // lets the loop's queue run: a task queued by the first handler runs long before the last request is answered
  // (answering all of a read's requests in a row kept every other connection of the loop waiting).
  burst_probe probe;
  http::router r;
  r.get("/n", [&probe](http::request&) -> tern::task<http::response> {
    if (probe.handled++ == 0) tern::spawn(*tern::io_context::current(), note_turn(&probe)).detach();
    co_return http::response(200, "n");
  });
  server_thread s(GetParam(), std::move(r));
  raw_client c(s.port());
  std::string batch;
  for (int i = 0; i < 200; ++i) batch += get("/n");
  c.send(batch);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(c.read_response().body, "n") << "answer " << i;
  EXPECT_EQ(probe.handled.load(), 200);
  EXPECT_GE(probe.handled_when_other_ran.load(), 1);
  EXPECT_LE(probe.handled_when_other_ran.load(), 17) << "the queued task waited for that many answers";
}

TEST_P(http_server_test, bodies_split_anywhere) {
  server_thread s(GetParam(), test_routes());
  std::string body(100000, 'x');
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i * 7 % 26);
  // Content-Length, the head and body sent in pieces with pauses between them.
  {
    raw_client c(s.port());
    const std::string req = "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) +
                            "\r\n\r\n" + body;
    for (std::size_t at = 0; at < req.size(); at += 30011) {
      c.send(std::string_view(req).substr(at, 30011));
      std::this_thread::sleep_for(5ms);
    }
    auto r = c.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, body);
  }
  // Chunked, with extensions and trailers, each piece of framing split across writes.
  {
    raw_client c(s.port());
    std::string req = "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    std::size_t at = 0;
    for (std::size_t size : {1u, 10u, 4096u, 33333u}) {
      char hex[32];
      std::snprintf(hex, sizeof hex, "%zx;ext=1\r\n", size);
      req += hex + body.substr(at, size) + "\r\n";
      at += size;
    }
    req += "0\r\nX-Trailer: yes\r\n\r\n";
    for (std::size_t i = 0; i < req.size(); i += 7) {
      c.send(std::string_view(req).substr(i, 7));
      if (i % 700 == 0) std::this_thread::sleep_for(1ms);
    }
    auto r = c.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, body.substr(0, at));
    // The connection goes on after a chunked body.
    c.send(get("/users/9"));
    EXPECT_EQ(c.read_response().body, "user 9");
  }
}

// A head that fills the connection's first buffer exactly, then a chunked body: the body is decoded after the head,
// which moves into a larger buffer to make room, its views still right.
TEST_P(http_server_test, a_head_that_fills_the_buffer_then_a_chunked_body) {
  http::server_options opts;
  opts.buffer_size = 256;
  server_thread s(GetParam(), test_routes(), opts);
  std::string head = "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nX-Pad: ";
  const std::string end = "\r\n\r\n";
  head += std::string(256 - head.size() - end.size(), 'p') + end;
  ASSERT_EQ(head.size(), 256u);
  raw_client c(s.port());
  c.send(head);
  std::this_thread::sleep_for(20ms);  // the head alone in the first read
  c.send("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  auto r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello world");
  c.send(get("/users/5"));
  EXPECT_EQ(c.read_response().body, "user 5");
}

TEST_P(http_server_test, expect_100_continue) {
  server_thread s(GetParam(), test_routes());
  raw_client c(s.port());
  c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  ASSERT_TRUE(c.readable(5s)) << "the server answers 100 before the body is sent";
  c.send("data");
  auto r = c.read_response();
  EXPECT_EQ(c.interim(), std::vector<int>{100});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "data");
}

struct refusal {
  std::string name;
  std::string request;
  int status;
};

// Each malformed or hostile request gets its exact status, Connection: close, and the server closes the
// connection, so that nothing after it can be read as another request (the smuggling defence).
TEST_P(http_server_test, bad_requests_get_their_status_and_a_closed_connection) {
  http::server_options opts;
  opts.limits.max_body = 1000;
  opts.limits.max_request_line = 200;
  opts.limits.max_header_bytes = 1000;
  server_thread s(GetParam(), test_routes(), opts);
  const std::vector<refusal> cases = {
      {"cl and te", "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
      {"two cl", "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde", 400},
      {"obs-fold", "GET /hello HTTP/1.1\r\nHost: t\r\nX: a\r\n b\r\n\r\n", 400},
      {"bare cr", "GET /hello HTTP/1.1\r\nHost: t\r\nX: a\rb\r\n\r\n", 400},
      {"bare lf", "GET /hello HTTP/1.1\nHost: t\n\n", 400},
      {"no host", "GET /hello HTTP/1.1\r\n\r\n", 400},
      {"bad chunk size", "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"gzip coding", "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"long target", "GET /" + std::string(300, 'a') + " HTTP/1.1\r\nHost: t\r\n\r\n", 414},
      {"big headers", "GET /hello HTTP/1.1\r\nHost: t\r\nX: " + std::string(1200, 'a') + "\r\n\r\n", 431},
      {"big body", "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n", 413},
      {"big chunked body", "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3e9\r\n" + std::string(1001, 'a') + "\r\n0\r\n\r\n", 413},
      {"http/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505},
      {"expectation", "GET /hello HTTP/1.1\r\nHost: t\r\nExpect: 200-ok\r\n\r\n", 417},
  };
  for (const auto& k : cases) {
    raw_client c(s.port());
    c.send(k.request + get("/hello"));  // a request smuggled behind it is never answered
    auto r = c.read_response();
    EXPECT_EQ(r.status, k.status) << k.name;
    EXPECT_NE(r.head.find("Connection: close\r\n"), std::string::npos) << k.name << ": " << r.head;
    EXPECT_TRUE(c.server_closed()) << k.name;
  }
}

TEST_P(http_server_test, a_throwing_handler_gets_500_and_the_connection_goes_on) {
  server_thread s(GetParam(), test_routes());
  raw_client c(s.port());
  c.send(get("/throw"));
  EXPECT_EQ(c.read_response().status, 500);
  c.send(get("/hello"));
  EXPECT_EQ(c.read_response().status, 200);
}

TEST_P(http_server_test, connection_close_from_either_side) {
  server_thread s(GetParam(), test_routes());
  {
    raw_client c(s.port());
    c.send(get("/hello", "Connection: close\r\n"));
    auto r = c.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.head.find("Connection: close\r\n"), std::string::npos);
    EXPECT_TRUE(c.server_closed());
  }
  {
    raw_client c(s.port());
    c.send(get("/close"));
    EXPECT_EQ(c.read_response().body, "bye");
    EXPECT_TRUE(c.server_closed());
  }
  {
    raw_client c(s.port());
    c.send("GET /hello HTTP/1.0\r\n\r\n");
    auto r = c.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.head.substr(0, 9), "HTTP/1.0 ");
    EXPECT_TRUE(c.server_closed()) << "HTTP/1.0 without keep-alive";
  }
  {
    raw_client c(s.port());
    c.send("GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    auto r = c.read_response();
    EXPECT_NE(r.head.find("Connection: keep-alive\r\n"), std::string::npos) << r.head;
    c.send("GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    EXPECT_EQ(c.read_response().status, 200);
  }
}

TEST_P(http_server_test, slowloris_idle_and_slow_bodies_are_cut) {
  http::server_options opts;
  opts.header_timeout = 300ms;
  opts.idle_timeout = 300ms;
  opts.body_timeout = 300ms;
  opts.min_body_rate = 1000;
  server_thread s(GetParam(), test_routes(), opts);
  {  // a head that never completes: 408 once header_timeout has passed since its first byte
    raw_client c(s.port());
    const auto t0 = std::chrono::steady_clock::now();
    c.send("GET /hello HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(50ms);
      c.send("X-Drip: 1\r\n");  // drips do not extend the deadline
    }
    auto r = c.read_response();
    EXPECT_EQ(r.status, 408);
    EXPECT_TRUE(c.server_closed());
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms);
  }
  {  // silence after a response: closed without an answer
    raw_client c(s.port());
    c.send(get("/hello"));
    EXPECT_EQ(c.read_response().status, 200);
    EXPECT_EQ(c.read_to_close(5s), "");
    EXPECT_TRUE(c.closed());
  }
  {  // a body that stops arriving
    raw_client c(s.port());
    c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\nabc");
    auto r = c.read_response();
    EXPECT_EQ(r.status, 408);
    EXPECT_TRUE(c.server_closed());
  }
}

// A connection's reads share one deadline node, filed at the idle timeout while it waits between requests: the first
// bytes of the next head must bring its deadline forward to the header timeout, not leave it at the idle one.
TEST_P(http_server_test, a_head_begun_after_an_idle_wait_gets_the_header_timeout) {
  http::server_options opts;
  opts.header_timeout = 300ms;
  opts.idle_timeout = 30s;
  server_thread s(GetParam(), test_routes(), opts);
  raw_client c(s.port());
  c.send(get("/hello"));
  EXPECT_EQ(c.read_response().status, 200);
  // Longer than the header timeout: the connection now waits for its next request at the idle timeout alone.
  std::this_thread::sleep_for(600ms);
  const auto t0 = std::chrono::steady_clock::now();
  c.send("GET /hello HTTP/1.1\r\nHost: t\r\n");
  auto r = c.read_response(http::method::get, 10s);
  EXPECT_EQ(r.status, 408);
  EXPECT_TRUE(c.server_closed());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

// A peer that stops reading: the response's write waits until write_timeout, then the connection is closed.
TEST_P(http_server_test, a_response_the_peer_does_not_read_is_cut_at_the_write_timeout) {
  http::server_options opts;
  opts.write_timeout = 300ms;
  http::router r;
  r.get("/big", [](http::request&) -> tern::task<http::response> {
    co_return http::response(200, std::string(std::size_t{32} << 20, 'x'));  // more than the sockets' buffers hold
  });
  server_thread s(GetParam(), std::move(r), opts);
  raw_client c(s.port());
  c.send(get("/big"));
  ASSERT_TRUE(c.readable(5s)) << "the response has begun";  // the client reads none of it
  const auto t0 = std::chrono::steady_clock::now();
  while (s.connections() != 0 && std::chrono::steady_clock::now() - t0 < 10s) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(s.connections(), 0u) << "closed once the write timeout has passed";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 200ms);
}

TEST_P(http_server_test, connections_beyond_the_cap_are_refused_at_once) {
  http::server_options opts;
  opts.max_connections = 2;
  server_thread s(GetParam(), test_routes(), opts);
  raw_client a(s.port()), b(s.port());
  a.send(get("/hello"));
  b.send(get("/hello"));
  EXPECT_EQ(a.read_response().status, 200);
  EXPECT_EQ(b.read_response().status, 200);
  raw_client third(s.port());
  auto r = third.read_response(http::method::get, 5s);
  EXPECT_EQ(r.status, 503);
  EXPECT_TRUE(third.server_closed());
  // The two keep working.
  a.send(get("/users/1"));
  EXPECT_EQ(a.read_response().body, "user 1");
}

TEST_P(http_server_test, graceful_shutdown_finishes_the_request_in_flight) {
  server_thread s(GetParam(), test_routes());
  raw_client idle(s.port());
  idle.send(get("/hello"));
  EXPECT_EQ(idle.read_response().status, 200);
  raw_client busy(s.port());
  busy.send(get("/slow"));
  std::this_thread::sleep_for(50ms);
  std::thread stopper([&] { EXPECT_TRUE(s.stop(2s)); });
  auto r = busy.read_response();
  EXPECT_EQ(r.status, 200) << "the request in flight is answered";
  EXPECT_EQ(r.body, "slow");
  EXPECT_NE(r.head.find("Connection: close\r\n"), std::string::npos);
  EXPECT_TRUE(busy.server_closed());
  EXPECT_TRUE(idle.server_closed()) << "an idle keep-alive connection is closed";
  stopper.join();
  // No longer listening.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(s.port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_NE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::close(fd);
}

// A keep-alive client's next request that reached the server's kernel queue before stop() is read and answered
// (with Connection: close), not cut with the idle connections. The loop is held by a blocking item while the
// request lands, so stop() runs before the loop has handled the read: the request is in the queue, the connection
// still idle. A connection with nothing waiting is cut as before.
TEST_P(http_server_test, stop_answers_the_request_an_idle_connection_has_already_received) {
  server_thread s(GetParam(), test_routes());
  raw_client busy(s.port()), idle(s.port());
  busy.send(get("/hello"));
  ASSERT_EQ(busy.read_response().status, 200);
  idle.send(get("/hello"));
  ASSERT_EQ(idle.read_response().status, 200);
  // Both connections wait for their next request.
  std::this_thread::sleep_for(50ms);
  std::atomic<bool> held{false}, release{false};
  tern::http::server* server = &s.server();
  s.on_loop([&held, &release, server] {
    held = true;
    while (!release) std::this_thread::sleep_for(1ms);
    server->stop();
  });
  while (!held) std::this_thread::sleep_for(1ms);
  busy.send(get("/users/7"));
  std::this_thread::sleep_for(50ms);  // through loopback into the server's receive queue
  release = true;
  auto r = busy.read_response();
  EXPECT_EQ(r.status, 200) << "the request already received is answered";
  EXPECT_EQ(r.body, "user 7");
  EXPECT_NE(r.head.find("Connection: close\r\n"), std::string::npos);
  EXPECT_TRUE(busy.server_closed());
  EXPECT_TRUE(idle.server_closed()) << "an idle connection with nothing received is closed";
  EXPECT_TRUE(s.stop(2s));
}

TEST_P(http_server_test, shutdown_cuts_what_outlives_the_grace) {
  http::router r;
  r.get("/forever", [](http::request&) -> tern::task<http::response> {
    co_await tern::sleep_for(60s);
    co_return http::response(200);
  });
  server_thread s(GetParam(), std::move(r));
  raw_client c(s.port());
  c.send(get("/forever"));
  std::this_thread::sleep_for(50ms);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(s.stop(200ms));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_TRUE(c.server_closed());
}

// When run() returns after a shutdown, nothing the server started is still in the kernel, the listener's accept
// included: the loop may then be destroyed on another thread, where it could no longer reap it. Here every
// connection has ended before the shutdown (the server closed it after a Connection: close), so nothing but the
// listener is left for stop() to end.
TEST_P(http_server_test, run_returns_with_nothing_in_the_kernel) {
  server_thread s(GetParam(), test_routes());
  raw_client c(s.port());
  c.send("GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(c.read_response().status, 200);
  EXPECT_TRUE(c.server_closed());
  for (int i = 0; i < 5000 && s.connections() != 0; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(s.connections(), 0u) << "the server has closed its side";
  ASSERT_TRUE(s.stop(2s));
  EXPECT_EQ(s.left_after_run(), "");
}

// A server that never listened: accept fails at once, every time. run() used to go round that failure without
// ever suspending, so neither a timeout nor stop() could reach it (the loop was stuck in one item). A one-second
// deadline around run() must end it, and stop() from another task of the loop too.
TEST_P(http_server_test, run_on_a_server_that_never_listened_returns) {
  tern::io_context ctx(options_for(GetParam()));
  run_bounded(
      ctx,
      [](tern::io_context& ctx) -> tern::task<void> {
        http::server server(ctx, test_routes());
        const auto t0 = std::chrono::steady_clock::now();
        // The error is persistent: run() ends with it at once.
        EXPECT_EC(co_await tern::with_timeout(server.run(), 1s), std::errc::bad_file_descriptor);
        EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
        http::server other(ctx, test_routes());
        auto running = tern::spawn(ctx, other.run());
        co_await tern::sleep_for(20ms);
        other.stop();
        EXPECT_EC(co_await std::move(running), std::errc::bad_file_descriptor);
      }(ctx),
      10s);
}

// Out of descriptors, accept fails for as long as the table stays full: run() backs off, and stop() reaches it.
TEST_P(http_server_test, stop_reaches_a_run_backing_off_from_a_full_descriptor_table) {
  // The sanitizers' own runtime needs descriptors (a pipe to probe memory for UBSan's vptr check, /proc for
  // ASan's thread checks): with the table full it reports errors of its own, not tern's.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a full descriptor table starves the sanitizer runtime";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  GTEST_SKIP() << "a full descriptor table starves the sanitizer runtime";
#endif
#endif
  tern::io_context ctx(options_for(GetParam()));
  run_bounded(
      ctx,
      [](tern::io_context& ctx) -> tern::task<void> {
        http::server server(ctx, test_routes());
        CO_ASSERT_OK(server.listen(tern::net::endpoint::loopback_v4(0)));
        tern::net::tcp_socket client(ctx);
        CO_ASSERT_OK(co_await client.connect(server.local_endpoint().value));  // waits in the accept queue
        fd_table_filler filler;
        const bool full = filler.full();
        auto running = tern::spawn(ctx, server.run());
        co_await tern::sleep_for(100ms);
        server.stop();
        const std::error_code result = co_await std::move(running);
        filler.release();
        CO_ASSERT(full);
        EXPECT_OK(result);
      }(ctx),
      10s);
}

// Cancelling run() (a deadline on it, a stop of the task that awaits it) ends it: it stops accepting, cuts its
// connections, busy or idle, and returns once they are gone.
TEST_P(http_server_test, a_deadline_on_run_ends_it_and_its_connections) {
  tern::io_context ctx(options_for(GetParam()));
  run_bounded(
      ctx,
      [](tern::io_context& ctx) -> tern::task<void> {
        http::router r = test_routes();
        r.get("/forever", [](http::request&) -> tern::task<http::response> {
          co_await tern::sleep_for(60s);
          co_return http::response(200);
        });
        http::server server(ctx, std::move(r));
        CO_ASSERT_OK(server.listen(tern::net::endpoint::loopback_v4(0)));
        const tern::net::endpoint ep = server.local_endpoint().value;
        auto client = [](tern::io_context& ctx, tern::net::endpoint ep, std::string request) -> tern::task<std::string> {
          auto [cec, s] = co_await tern::net::connect(ctx, ep);
          if (cec) co_return "connect: " + cec.message();
          (void)co_await s.write_all(tern::const_buffer(request.data(), request.size()));
          std::string got;
          char buf[4096];
          for (;;) {
            auto [ec, n] = co_await s.read_some(tern::mutable_buffer(buf, sizeof buf));
            if (ec) break;
            got.append(buf, n);
          }
          co_return got;
        };
        const std::string hello = get("/hello"), forever = get("/forever");
        auto idle = tern::spawn(ctx, client(ctx, ep, hello));
        auto busy = tern::spawn(ctx, client(ctx, ep, forever));
        const auto t0 = std::chrono::steady_clock::now();
        const std::error_code ec = co_await tern::with_timeout(server.run(), 300ms);
        EXPECT_EC(ec, std::errc::timed_out);
        EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
        EXPECT_EQ(server.connections(), 0u);
        const std::string idle_got = co_await std::move(idle);
        EXPECT_NE(idle_got.find("hello\n"), std::string::npos) << idle_got;
        EXPECT_EQ(co_await std::move(busy), "") << "cut without an answer";
      }(ctx),
      10s);
}

// ---- the streaming form ----

http::router stream_routes() {
  http::router r;
  // Reads the body in small pieces, answers its length and a checksum, chunked.
  r.stream(http::method::post, "/sum",
           [](http::request&, http::body_reader& body, http::response_stream& out) -> tern::task<void> {
             char buf[1000];
             std::uint64_t total = 0, sum = 0;
             for (;;) {
               auto [ec, n] = co_await body.read_some(tern::mutable_buffer(buf, sizeof buf));
               if (ec == tern::error::eof) break;
               if (ec) co_return;
               total += n;
               for (std::size_t i = 0; i < n; ++i) sum += static_cast<unsigned char>(buf[i]);
             }
             (void)co_await out.start(200);
             const std::string text = std::to_string(total) + " " + std::to_string(sum);
             (void)co_await out.write(tern::const_buffer(text.data(), text.size()));
             (void)co_await out.finish();
           });
  // A download in pieces, with a declared length.
  r.stream(http::method::get, "/bytes/{n}",
           [](http::request& q, http::body_reader&, http::response_stream& out) -> tern::task<void> {
             const std::size_t n = std::stoul(std::string(q.param("n")));
             (void)co_await out.start(200, {}, n);
             std::string piece;
             for (std::size_t at = 0; at < n; at += piece.size()) {
               piece.assign(std::min<std::size_t>(50000, n - at), 'z');
               if (co_await out.write(tern::const_buffer(piece.data(), piece.size()))) co_return;
             }
             (void)co_await out.finish();
           });
  // Ignores the body and answers nothing: the server answers 500 and drops the body.
  r.stream(http::method::post, "/lazy",
           [](http::request&, http::body_reader&, http::response_stream&) -> tern::task<void> { co_return; });
  return r;
}

TEST_P(http_server_test, streaming_bodies_both_ways) {
  server_thread s(GetParam(), stream_routes());
  raw_client c(s.port());
  std::string body(300000, '\0');
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < body.size(); ++i) {
    body[i] = static_cast<char>(i * 31 % 251);
    sum += static_cast<unsigned char>(body[i]);
  }
  c.send("POST /sum HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  auto r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.head.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  EXPECT_EQ(r.body, std::to_string(body.size()) + " " + std::to_string(sum));

  c.send("POST /sum HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n");
  r = c.read_response();
  std::uint64_t small = 0;
  for (char ch : std::string("helloabc")) small += static_cast<unsigned char>(ch);
  EXPECT_EQ(r.body, "8 " + std::to_string(small));

  c.send(get("/bytes/123456"));
  r = c.read_response();
  EXPECT_NE(r.head.find("Content-Length: 123456\r\n"), std::string::npos);
  EXPECT_EQ(r.body, std::string(123456, 'z'));

  c.send("POST /lazy HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n" + std::string(5000, 'q') + get("/bytes/3"));
  EXPECT_EQ(c.read_response().status, 500);
  EXPECT_EQ(c.read_response().body, "zzz") << "the unread body was dropped, the next request read whole";
}

}  // namespace

namespace {

// serve(): a server on every worker of a runtime, one port for all (SO_REUSEPORT), stopped by the runtime's
// shutdown. Requests on many connections are answered, and by more than one worker.
TEST_P(http_server_test, serve_on_every_worker_of_a_runtime) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  auto routes = std::make_shared<http::router>();
  routes->get("/worker", [&rt](http::request&) -> tern::task<http::response> {
    co_return http::response(200, std::to_string(rt.current_worker()));
  });
  std::promise<tern::net::endpoint> listening;
  std::thread server([&] {
    const std::error_code ec = rt.block_on(http::serve(rt, routes, tern::net::endpoint::loopback_v4(0), {},
                                                       std::chrono::seconds(2),
                                                       [&](const tern::net::endpoint& ep) { listening.set_value(ep); }));
    EXPECT_FALSE(ec) << ec.message();
  });
  const std::uint16_t port = listening.get_future().get().port();
  std::set<std::string> workers;
  for (int i = 0; i < 40; ++i) {
    raw_client c(port);
    for (int j = 0; j < 3; ++j) {
      c.send(get("/worker"));
      auto r = c.read_response();
      ASSERT_EQ(r.status, 200);
      workers.insert(r.body);
    }
  }
  EXPECT_EQ(workers.size(), 2u) << "the kernel spreads connections over both workers' listeners";
  EXPECT_TRUE(rt.shutdown(std::chrono::seconds(3)));
  server.join();
}

}  // namespace
