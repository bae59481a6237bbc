// http::client on both backends: against tern's server (keep-alive through the pool, bodies both ways, chunked
// and Content-Length, HEAD, streaming exchanges, a stale pooled connection retried, timeouts and limits) and
// against Python's http.server (an HTTP/1.0 server whose bodies end with the connection), plus URL parsing.
#include "http_support.hpp"

#include <tern/http/client.hpp>
#include <tern/http/router.hpp>
#include <tern/http/stream.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

extern char** environ;

namespace {

using namespace tern_test;
namespace http = tern::http;
using namespace std::chrono_literals;

class http_client_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(http_client_test);

http::router client_routes() {
  http::router r;
  r.get("/hello", [](http::request&) -> tern::task<http::response> { co_return http::response(200, "hello\n"); });
  r.post("/echo", [](http::request& q) -> tern::task<http::response> {
    http::response resp(200, std::string(q.body()));
    resp.headers.set("X-Method", q.method_name());
    resp.headers.set("X-Agent", q.header("user-agent"));
    co_return resp;
  });
  r.get("/slow", [](http::request&) -> tern::task<http::response> {
    co_await tern::sleep_for(2s);
    co_return http::response(200, "late");
  });
  r.get("/big", [](http::request&) -> tern::task<http::response> {
    co_return http::response(200, std::string(100000, 'b'));
  });
  r.stream(http::method::get, "/chunks/{n}",
           [](http::request& q, http::body_reader&, http::response_stream& out) -> tern::task<void> {
             const int n = std::stoi(std::string(q.param("n")));
             (void)co_await out.start(200);
             for (int i = 0; i < n; ++i) {
               const std::string piece = "piece" + std::to_string(i) + ";";
               if (co_await out.write(tern::const_buffer(piece.data(), piece.size()))) co_return;
             }
             (void)co_await out.finish();
           });
  // A head of nearly the client's whole buffer, then a long chunked body.
  r.stream(http::method::get, "/big-head",
           [](http::request&, http::body_reader&, http::response_stream& out) -> tern::task<void> {
             http::fields f;
             f.set("X-Big", std::string(16000, 'h'));
             (void)co_await out.start(200, f);
             const std::string piece(7000, 'c');
             for (int i = 0; i < 20; ++i) {
               if (co_await out.write(tern::const_buffer(piece.data(), piece.size()))) co_return;
             }
             (void)co_await out.finish();
           });
  // A body that trickles: n pieces of 1000 bytes, 20 ms apart.
  r.stream(http::method::get, "/drip/{n}",
           [](http::request& q, http::body_reader&, http::response_stream& out) -> tern::task<void> {
             const int n = std::stoi(std::string(q.param("n")));
             if (co_await out.start(200, {}, static_cast<std::uint64_t>(n) * 1000)) co_return;
             const std::string piece(1000, 'd');
             for (int i = 0; i < n; ++i) {
               if (co_await out.write(tern::const_buffer(piece.data(), piece.size()))) co_return;
               co_await tern::sleep_for(20ms);
             }
             (void)co_await out.finish();
           });
  // Reads its body only after a while (so that an upload fills the sockets first), then counts it.
  r.stream(http::method::put, "/late-count",
           [](http::request&, http::body_reader& body, http::response_stream& out) -> tern::task<void> {
             co_await tern::sleep_for(300ms);
             std::string all;
             if (co_await body.read_all(all, 1 << 26)) co_return;
             const std::string text = std::to_string(all.size());
             (void)co_await out.start(200, {}, text.size());
             (void)co_await out.write(tern::const_buffer(text.data(), text.size()));
             (void)co_await out.finish();
           });
  r.stream(http::method::put, "/count",
           [](http::request&, http::body_reader& body, http::response_stream& out) -> tern::task<void> {
             std::string all;
             if (co_await body.read_all(all, 1 << 24)) co_return;
             const std::string text = std::to_string(all.size()) + (all.find_first_not_of('u') == std::string::npos ? " u" : " ?");
             (void)co_await out.start(200, {}, text.size());
             (void)co_await out.write(tern::const_buffer(text.data(), text.size()));
             (void)co_await out.finish();
           });
  return r;
}

TEST_P(http_client_test, requests_reuse_pooled_connections) {
  server_thread s(GetParam(), client_routes());
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& s) -> tern::task<void> {
    http::client c(ctx);
    auto [ec, r] = co_await c.get(s.url("/hello"));
    CO_ASSERT_OK(ec);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "hello\n");
    EXPECT_EQ(r.headers.get("content-length"), "6");
    EXPECT_EQ(c.idle_connections(), 1u) << "kept for the next request";
    for (int i = 0; i < 5; ++i) {
      auto [pec, p] = co_await c.post(s.url("/echo"), "body " + std::to_string(i), "text/plain");
      CO_ASSERT_OK(pec);
      EXPECT_EQ(p.body, "body " + std::to_string(i));
      EXPECT_EQ(p.headers.get("x-method"), "POST");
      EXPECT_EQ(p.headers.get("x-agent"), "tern");
    }
    EXPECT_EQ(c.idle_connections(), 1u);
    EXPECT_EQ(s.connections(), 1u) << "every request went over the one connection";

    http::client_request head;
    head.method = http::method::head;
    head.target = "/big";
    auto [hec, h] = co_await c.send("127.0.0.1", s.port(), head);
    CO_ASSERT_OK(hec);
    EXPECT_EQ(h.headers.get("content-length"), "100000");
    EXPECT_EQ(h.body, "");
    auto [bec, big] = co_await c.get(s.url("/big"));
    CO_ASSERT_OK(bec);
    EXPECT_EQ(big.body, std::string(100000, 'b'));
    auto [cec, chunks] = co_await c.get(s.url("/chunks/50"));
    CO_ASSERT_OK(cec);
    std::string expected;
    for (int i = 0; i < 50; ++i) expected += "piece" + std::to_string(i) + ";";
    EXPECT_EQ(chunks.body, expected);
    auto [nec, missing] = co_await c.get(s.url("/missing"));
    CO_ASSERT_OK(nec);
    EXPECT_EQ(missing.status, 404);
    EXPECT_EQ(s.connections(), 1u);
  }(ctx, s));
}

// An operation copies the strings it is given: requests made from a URL, a content type, a host and a target that
// are gone (their memory written over) before the requests are awaited still go where they were sent.
TEST_P(http_client_test, a_request_keeps_copies_of_its_url_host_and_target) {
  server_thread s(GetParam(), client_routes());
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& s) -> tern::task<void> {
    http::client c(ctx);
    auto getting = [&] { return c.get(s.url("/chunks/" + std::to_string(3))); }();
    scribble(s.url("/chunks/3").size());
    auto posting = [&] { return c.post(s.url("/echo"), "posted", "text/" + std::string(40, 'p')); }();
    scribble(s.url("/echo").size());
    auto exchanging = [&] {
      return c.exchange(std::string("127.0.0.1"), s.port(), http::method::get, "/chunks/" + std::to_string(2));
    }();
    scribble(40);
    auto [gec, g] = co_await std::move(getting);
    CO_ASSERT_OK(gec);
    EXPECT_EQ(g.body, "piece0;piece1;piece2;");
    auto [pec, posted] = co_await std::move(posting);
    CO_ASSERT_OK(pec);
    EXPECT_EQ(posted.body, "posted");
    auto [xec, ex] = co_await std::move(exchanging);
    CO_ASSERT_OK(xec);
    CO_ASSERT_OK(co_await ex.finish());
    std::string body;
    char buf[64];
    for (;;) {
      auto [rec, n] = co_await ex.read_some(tern::mutable_buffer(buf, sizeof buf));
      if (rec == tern::error::eof) break;
      CO_ASSERT_OK(rec);
      body.append(buf, n);
    }
    EXPECT_EQ(body, "piece0;piece1;");
  }(ctx, s));
}

TEST_P(http_client_test, streaming_exchanges) {
  server_thread s(GetParam(), client_routes());
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& s) -> tern::task<void> {
    http::client c(ctx);
    // A chunked upload of 1 MB in pieces, then the response read in small pieces.
    {
      auto [ec, ex] = co_await c.exchange("127.0.0.1", s.port(), http::method::put, "/count");
      CO_ASSERT_OK(ec);
      const std::string piece(100000, 'u');
      for (int i = 0; i < 10; ++i) CO_ASSERT_OK(co_await ex.write(tern::const_buffer(piece.data(), piece.size())));
      CO_ASSERT_OK(co_await ex.finish());
      EXPECT_EQ(ex.head().status, 200);
      std::string body;
      char buf[3];
      for (;;) {
        auto [rec, n] = co_await ex.read_some(tern::mutable_buffer(buf, sizeof buf));
        if (rec == tern::error::eof) break;
        CO_ASSERT_OK(rec);
        body.append(buf, n);
      }
      EXPECT_EQ(body, "1000000 u");
    }
    EXPECT_EQ(c.idle_connections(), 1u) << "a response read whole gives the connection back";
    // head()'s views stay right while the body streams through the buffer after it.
    {
      auto [ec, ex] = co_await c.exchange("127.0.0.1", s.port(), http::method::get, "/big-head");
      CO_ASSERT_OK(ec);
      CO_ASSERT_OK(co_await ex.finish());
      std::size_t total = 0;
      char buf[1000];
      for (;;) {
        auto [rec, n] = co_await ex.read_some(tern::mutable_buffer(buf, sizeof buf));
        if (rec == tern::error::eof) break;
        CO_ASSERT_OK(rec);
        total += n;
      }
      EXPECT_EQ(total, 140000u);
      EXPECT_EQ(ex.head().headers.get("x-big"), std::string(16000, 'h'));
    }
    // With a declared length: writing past it, or finishing short of it, is refused.
    {
      auto [ec, ex] = co_await c.exchange("127.0.0.1", s.port(), http::method::put, "/count", {}, 4);
      CO_ASSERT_OK(ec);
      EXPECT_EC(co_await ex.write(tern::const_buffer("uuuuu", 5)), std::errc::invalid_argument);
      CO_ASSERT_OK(co_await ex.write(tern::const_buffer("uu", 2)));
      EXPECT_EC(co_await ex.finish(), std::errc::invalid_argument);
      CO_ASSERT_OK(co_await ex.write(tern::const_buffer("uu", 2)));
      CO_ASSERT_OK(co_await ex.finish());
      char buf[16];
      auto [rec, n] = co_await ex.read_some(tern::mutable_buffer(buf, sizeof buf));
      CO_ASSERT_OK(rec);
      EXPECT_EQ(std::string(buf, n), "4 u");
    }
    // An exchange dropped before its response was read closes its connection instead of pooling it.
    const std::size_t pooled = c.idle_connections();
    {
      auto [ec, ex] = co_await c.exchange("127.0.0.1", s.port(), http::method::get, "/big");
      CO_ASSERT_OK(ec);
      CO_ASSERT_OK(co_await ex.finish());
      EXPECT_EQ(ex.head().status, 200);
    }
    EXPECT_EQ(c.idle_connections(), pooled - 1);
  }(ctx, s));
}

TEST_P(http_client_test, a_stale_pooled_connection_is_replaced) {
  http::server_options opts;
  opts.idle_timeout = 100ms;
  server_thread s(GetParam(), client_routes(), opts);
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& s) -> tern::task<void> {
    http::client c(ctx);
    CO_ASSERT_OK((co_await c.get(s.url("/hello"))).ec);
    EXPECT_EQ(c.idle_connections(), 1u);
    co_await tern::sleep_for(400ms);  // the server closes the idle connection meanwhile
    auto [ec, r] = co_await c.get(s.url("/hello"));
    CO_ASSERT_OK(ec);
    EXPECT_EQ(r.body, "hello\n");
    auto [pec, p] = co_await c.post(s.url("/echo"), "after", "text/plain");
    CO_ASSERT_OK(pec);
    EXPECT_EQ(p.body, "after");
  }(ctx, s));
}

TEST_P(http_client_test, errors_timeouts_and_limits) {
  server_thread s(GetParam(), client_routes());
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& s) -> tern::task<void> {
    http::client_options opts;
    opts.response_timeout = 200ms;
    opts.limits.max_body = 50000;
    http::client c(ctx, opts);
    auto [tec, t] = co_await c.get(s.url("/slow"));
    EXPECT_EC(tec, tern::error::timed_out);
    auto [bec, b] = co_await c.get(s.url("/big"));
    EXPECT_EC(bec, http::error::body_too_large);
    auto [uec, u] = co_await c.get("ftp://127.0.0.1/");
    EXPECT_EC(uec, std::errc::invalid_argument);
    // A closed port.
    tern::net::tcp_acceptor a(ctx);
    CO_ASSERT_OK(a.listen(tern::net::endpoint::loopback_v4(0)));
    auto [lec, ep] = a.local_endpoint();
    a.close();
    auto [rec, r] = co_await c.get("http://127.0.0.1:" + std::to_string(ep.port()) + "/");
    EXPECT_EC(rec, std::errc::connection_refused);
    // Cancellation through the task's deadline.
    auto [cec, cr] = co_await tern::with_timeout(c.get(s.url("/slow")), 100ms);
    EXPECT_EC(cec, tern::error::timed_out);
    // And the client still works afterwards.
    http::client fine(ctx);
    auto [ok, hello] = co_await fine.get(s.url("/hello"));
    CO_ASSERT_OK(ok);
    EXPECT_EQ(hello.body, "hello\n");
    (void)lec, (void)t, (void)b, (void)u, (void)r, (void)cr;
  }(ctx, s));
}

// Python's http.server answers HTTP/1.0 without Content-Length for the streamed reply below: the body ends
// where the connection does.
TEST_P(http_client_test, against_python_http_server) {
  const std::string script = R"(
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200)
        self.send_header("X-Path", self.path)
        self.end_headers()
        self.wfile.write(b"streamed " * 1000)
    def do_POST(self):
        n = int(self.headers["Content-Length"])
        data = self.rfile.read(n)
        self.send_response(201)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[::-1])
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
)";
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  std::vector<char*> argv = {const_cast<char*>("python3"), const_cast<char*>("-c"), const_cast<char*>(script.c_str()),
                             nullptr};
  pid_t pid = 0;
  ASSERT_EQ(::posix_spawnp(&pid, "python3", &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  char line[32] = {};
  const ssize_t n = ::read(out[0], line, sizeof line - 1);
  ::close(out[0]);
  ASSERT_GT(n, 0);
  const int port = std::atoi(line);
  run_bounded(ctx, [](tern::io_context& ctx, int port) -> tern::task<void> {
    http::client c(ctx);
    const std::string base = "http://127.0.0.1:" + std::to_string(port);
    auto [ec, r] = co_await c.get(base + "/a/b?c=d");
    CO_ASSERT_OK(ec);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.headers.get("x-path"), "/a/b?c=d");
    std::string expected;
    for (int i = 0; i < 1000; ++i) expected += "streamed ";
    EXPECT_EQ(r.body, expected) << "a body delimited by the end of the connection";
    EXPECT_EQ(c.idle_connections(), 0u) << "such a connection cannot be reused";
    auto [pec, p] = co_await c.post(base + "/rev", "abcdef", "text/plain");
    CO_ASSERT_OK(pec);
    EXPECT_EQ(p.status, 201);
    EXPECT_EQ(p.body, "fedcba");
  }(ctx, port));
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// An exchange may outlive its client: it goes on (the client's options are its own), and its connection is closed
// rather than pooled when it ends. The client is on the heap, so that ASan sees any use of it after it went.
TEST_P(http_client_test, an_exchange_outlives_its_client) {
  server_thread s(GetParam(), client_routes());
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& s) -> tern::task<void> {
    auto c = std::make_unique<http::client>(ctx);
    auto [ec, ex] = co_await c->exchange("127.0.0.1", s.port(), http::method::put, "/count");
    CO_ASSERT_OK(ec);
    c.reset();
    const std::string piece(50000, 'u');
    for (int i = 0; i < 4; ++i) CO_ASSERT_OK(co_await ex.write(tern::const_buffer(piece.data(), piece.size())));
    CO_ASSERT_OK(co_await ex.finish());
    EXPECT_EQ(ex.head().status, 200);
    char buf[64];
    auto [rec, n] = co_await ex.read_some(tern::mutable_buffer(buf, sizeof buf));
    CO_ASSERT_OK(rec);
    EXPECT_EQ(std::string(buf, n), "200000 u");
    auto [eof, none] = co_await ex.read_some(tern::mutable_buffer(buf, sizeof buf));
    EXPECT_EC(eof, tern::error::eof);
  }(ctx, s));
}

// A client destroyed while its requests run: they finish as if it were still there (the client's state is
// shared with them), and nothing is pooled after it.
TEST_P(http_client_test, requests_outlive_their_client) {
  server_thread s(GetParam(), client_routes());
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& s) -> tern::task<void> {
    auto c = std::make_unique<http::client>(ctx);
    CO_ASSERT_OK((co_await c->get(s.url("/hello"))).ec);  // one connection pooled
    auto slow = tern::spawn(ctx, c->get(s.url("/drip/10")));
    auto fresh = tern::spawn(ctx, c->get(s.url("/hello")));
    co_await tern::sleep_for(50ms);
    c.reset();
    auto [sec, slow_r] = co_await std::move(slow);
    CO_ASSERT_OK(sec);
    EXPECT_EQ(slow_r.body, std::string(10000, 'd'));
    auto [fec, fresh_r] = co_await std::move(fresh);
    CO_ASSERT_OK(fec);
    EXPECT_EQ(fresh_r.body, "hello\n");
    // Their connections were closed, not kept for a pool that is gone.
    for (int i = 0; i < 200 && s.connections() != 0; ++i) co_await tern::sleep_for(10ms);
    EXPECT_EQ(s.connections(), 0u);
  }(ctx, s));
}

// A client used from another worker than its loop's: requests and exchange operations refuse at once with
// wrong_loop, and the pool is as it was (a request from the wrong thread used to take a pooled connection, fail
// on it, and lose it, racing the loop that owns the pool).
TEST_P(http_client_test, requests_from_another_worker_are_refused_and_change_nothing) {
  server_thread s(GetParam(), client_routes());
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  const bool ok = rt.block_on([](tern::runtime& rt, server_thread& s) -> tern::task<bool> {
    co_await rt.switch_to(0);
    http::client c(rt.worker(0));
    auto [xec, ex] = co_await c.exchange("127.0.0.1", s.port(), http::method::put, "/count");
    if (xec) co_return false;
    auto [ec, r] = co_await c.get(s.url("/hello"));  // a second connection, pooled after
    if (ec) co_return false;
    co_await rt.switch_to(1);
    auto [gec, g] = co_await c.get(s.url("/hello"));
    auto [pec, p] = co_await c.post(s.url("/echo"), "x", "text/plain");
    auto [eec, e] = co_await c.exchange("127.0.0.1", s.port(), http::method::get, "/hello");
    const std::error_code wec = co_await ex.write(tern::const_buffer("uu", 2));
    const std::error_code fec = co_await ex.finish();
    co_await rt.switch_to(0);
    EXPECT_EC(gec, tern::error::wrong_loop);
    EXPECT_EC(pec, tern::error::wrong_loop);
    EXPECT_EC(eec, tern::error::wrong_loop);
    EXPECT_EC(wec, tern::error::wrong_loop);
    EXPECT_EC(fec, tern::error::wrong_loop);
    EXPECT_EQ(c.idle_connections(), 1u);
    // The exchange goes on where it belongs.
    EXPECT_OK(co_await ex.write(tern::const_buffer("uuu", 3)));
    EXPECT_OK(co_await ex.finish());
    char buf[16];
    auto [rec, n] = co_await ex.read_some(tern::mutable_buffer(buf, sizeof buf));
    EXPECT_OK(rec);
    EXPECT_EQ(std::string(buf, n), "3 u");
    auto [again, a] = co_await c.get(s.url("/hello"));
    EXPECT_OK(again);
    EXPECT_EQ(a.body, "hello\n");
    EXPECT_EQ(s.connections(), 2u) << "the pooled connection served again; the exchange has its own";
    co_return true;
  }(rt, s));
  EXPECT_TRUE(ok);
}

// Several tasks sending to one host at once through one client: each gets its own answer, over connections the
// pool shares out (never one connection for two requests at a time).
TEST_P(http_client_test, concurrent_requests_to_one_host) {
  server_thread s(GetParam(), client_routes());
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& s) -> tern::task<void> {
    http::client c(ctx);
    constexpr int tasks = 8, each = 25;
    auto one = [](http::client& c, server_thread& s, int k) -> tern::task<int> {
      int right = 0;
      for (int i = 0; i < each; ++i) {
        const std::string body = "task " + std::to_string(k) + " request " + std::to_string(i);
        if (i % 3 == 0) {
          auto [ec, r] = co_await c.get(s.url("/chunks/" + std::to_string(i)));
          std::string expected;
          for (int j = 0; j < i; ++j) expected += "piece" + std::to_string(j) + ";";
          if (!ec && r.body == expected) ++right;
        } else {
          auto [ec, r] = co_await c.post(s.url("/echo"), body, "text/plain");
          if (!ec && r.status == 200 && r.body == body) ++right;
        }
      }
      co_return right;
    };
    std::vector<tern::join_handle<int>> running;
    for (int k = 0; k < tasks; ++k) running.push_back(tern::spawn(ctx, one(c, s, k)));
    for (int k = 0; k < tasks; ++k) EXPECT_EQ(co_await std::move(running[k]), each) << "task " << k;
    EXPECT_LE(c.idle_connections(), static_cast<std::size_t>(tasks));
    EXPECT_LE(s.connections(), static_cast<std::size_t>(tasks));
  }(ctx, s));
}

// A request cancelled in the middle of its response's body, or of its own body: its connection is not pooled
// (what is left of the message would be read as the next response), and the next requests are answered right.
TEST_P(http_client_test, a_request_cancelled_in_mid_body) {
  http::server_options opts;
  opts.limits.max_body = 1u << 27;
  server_thread s(GetParam(), client_routes(), opts);
  run_bounded(ctx, [](tern::io_context& ctx, server_thread& s) -> tern::task<void> {
    http::client c(ctx);
    // The response's body, by a deadline on the request.
    auto [tec, t] = co_await tern::with_timeout(c.get(s.url("/drip/50")), 150ms);
    EXPECT_EC(tec, tern::error::timed_out);
    EXPECT_EQ(c.idle_connections(), 0u);
    auto [ec, r] = co_await c.get(s.url("/hello"));
    CO_ASSERT_OK(ec);
    EXPECT_EQ(r.body, "hello\n");
    // The response's body, by a deadline on one read of an exchange; the exchange is dropped after it.
    {
      auto [xec, ex] = co_await c.exchange("127.0.0.1", s.port(), http::method::get, "/drip/50");
      CO_ASSERT_OK(xec);
      CO_ASSERT_OK(co_await ex.finish());
      char buf[100000];
      std::size_t got = 0;
      for (;;) {
        auto [rec, n] = co_await tern::with_timeout(ex.read_some(tern::mutable_buffer(buf, sizeof buf)), 5ms);
        got += n;
        if (rec) {
          EXPECT_EC(rec, tern::error::timed_out);
          break;
        }
      }
      EXPECT_GT(got, 0u);
      EXPECT_LT(got, 50000u);
    }
    // The request's own body: an upload the server does not read yet, cut by a deadline.
    {
      auto [xec, ex] = co_await c.exchange("127.0.0.1", s.port(), http::method::put, "/late-count", {}, 64u << 20);
      CO_ASSERT_OK(xec);
      const std::string big(32u << 20, 'u');
      EXPECT_EC(co_await tern::with_timeout(ex.write(tern::const_buffer(big.data(), big.size())), 100ms),
                tern::error::timed_out);
    }
    EXPECT_EQ(c.idle_connections(), 0u) << "no connection cut in mid-message is pooled";
    for (int i = 0; i < 3; ++i) {
      auto [pec, p] = co_await c.post(s.url("/echo"), "after " + std::to_string(i), "text/plain");
      CO_ASSERT_OK(pec);
      EXPECT_EQ(p.body, "after " + std::to_string(i));
    }
  }(ctx, s));
}

TEST(http_url, parse) {
  auto u = http::url::parse("http://example.org:8080/a/b?c=d#frag");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "example.org");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->target, "/a/b?c=d");
  u = http::url::parse("HTTP://[::1]/");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 80);
  u = http::url::parse("http://h?x=1");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->target, "/?x=1");
  EXPECT_EQ(u->scheme, http::scheme::http);
  u = http::url::parse("https://example.org/x");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->scheme, http::scheme::https);
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->target, "/x");
  u = http::url::parse("HTTPS://example.org:8443");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->port, 8443);
  EXPECT_FALSE(http::url::parse("ftp://example.org/"));
  EXPECT_FALSE(http::url::parse("httpx://example.org/"));
  EXPECT_FALSE(http::url::parse("http://:80/"));
  EXPECT_FALSE(http::url::parse("http://h:99999/"));
  EXPECT_FALSE(http::url::parse("http://user:pw@h/"));
  EXPECT_FALSE(http::url::parse("http://[::1/"));
}

}  // namespace
