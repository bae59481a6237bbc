// Steady state of tern::http's server: once a keep-alive connection has warmed up, requests cost no heap
// allocation: not the parse, the routing, the body, the handler's frame, its response (a short body and a few
// fields fit inside the response object), the Date field, nor the write. Checked over 10000 requests of each kind,
// on both backends, with a client that is a plain tern socket on the same loop.
#include "counting_new.hpp"
#include "net_support.hpp"

#include <tern/http/router.hpp>
#include <tern/http/server.hpp>

#include <string>
#include <string_view>

namespace {

using namespace tern_test;
namespace http = tern::http;

class http_alloc_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(http_alloc_test);

constexpr int warmup = 1000;
constexpr int measured = 10'000;

http::router routes() {
  http::router r;
  r.get("/hello/{name}", [](http::request& q) -> tern::task<http::response> {
    http::response resp(200, q.param("name") == "world" ? "hello, world" : "who?");
    resp.headers.set("Cache-Control", "no-store");
    co_return resp;
  });
  r.post("/ping", [](http::request& q) -> tern::task<http::response> {
    co_return http::response(200, std::string(q.body()), "application/json");
  });
  return r;
}

// Sends requests (count of them, pipelined) in one write and reads until count responses, recognised by their
// last bytes, are in. One write: the server then reads every time the same requests at once and answers them
// into its output buffer together, which the warm-up has grown to its size. Written one by one, the requests
// reached the server's reads in splits that depend on the machine's load, and a split seen for the first time
// after the warm-up (all of them at once) grew that buffer then: a one-off growth, not a cost per request.
tern::task<std::error_code> exchange(tern::net::tcp_socket& s, std::string_view requests, int count,
                                     std::string_view tail, char* buf, std::size_t size) {
  auto [wec, wn] = co_await s.write_all(tern::const_buffer(requests.data(), requests.size()));
  if (wec) co_return wec;
  int seen = 0;
  std::size_t have = 0;
  while (seen < count) {
    auto [ec, n] = co_await s.read_some(tern::mutable_buffer(buf + have, size - have));
    if (ec) co_return ec;
    have += n;
    std::string_view v(buf, have);
    for (std::size_t at; (at = v.find(tail)) != std::string_view::npos;) {
      ++seen;
      v.remove_prefix(at + tail.size());
    }
    // Keep a possible partial tail for the next read.
    const std::size_t keep = std::min(v.size(), tail.size());
    std::memmove(buf, buf + have - keep, keep);
    have = keep;
  }
  co_return std::error_code{};
}

TEST_P(http_alloc_test, requests_on_a_warm_connection_allocate_nothing) {
  struct result {
    std::size_t allocations = ~std::size_t{0};
  } r;
  run_bounded(ctx, [](tern::io_context& ctx, result& r) -> tern::task<void> {
    http::server server(ctx, routes());
    CO_ASSERT_OK(server.listen(tern::net::endpoint::loopback_v4(0)));
    auto [lec, ep] = server.local_endpoint();
    CO_ASSERT_OK(lec);
    auto running = tern::spawn(ctx, server.run());
    auto [cec, s] = co_await tern::net::connect(ctx, ep);
    CO_ASSERT_OK(cec);
    char buf[8192];
    const std::string_view get = "GET /hello/world HTTP/1.1\r\nHost: t\r\n\r\n";
    const std::string_view post =
        "POST /ping HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n"
        "{\"sequence\": 2}";
    std::string posts;
    for (int i = 0; i < 4; ++i) posts.append(post);
    for (int i = 0; i < warmup; ++i) {
      CO_ASSERT_OK(co_await exchange(s, get, 1, "hello, world", buf, sizeof buf));
      CO_ASSERT_OK(co_await exchange(s, posts, 4, "{\"sequence\": 2}", buf, sizeof buf));
    }
    start_counting();
    for (int i = 0; i < measured; ++i) {
      if (co_await exchange(s, get, 1, "hello, world", buf, sizeof buf)) break;
      if (co_await exchange(s, posts, 4, "{\"sequence\": 2}", buf, sizeof buf)) break;  // pipelined
    }
    r.allocations = stop_counting();
    s.close();
    server.stop();
    co_await std::move(running);
  }(ctx, r));
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << measured * 5 << " requests";
}

}  // namespace
