// g++ 12 and tern's API: the shapes g++ 12 compiles wrongly must not be the shapes tern's calls take. This test is
// built only with g++ and always under AddressSanitizer (g++'s libasan), which reports the double destruction those
// miscompilations cause; see docs/guide.md, "Compilers", for the two bugs and tests/gcc/known_bug.cpp for each one
// reproduced on its own.
//
// Each test makes the natural call from inside a coroutine, where an argument the call leaves out used to be an
// aggregate temporary of the awaiting coroutine's expression (server_options{} for http::serve), and the
// if/else form of a choice between two awaited results.
#include "support.hpp"

#include <tern/http/client.hpp>
#include <tern/http/server.hpp>

#include <array>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace tern_test;
namespace http = tern::http;
namespace net = tern::net;

class gcc_shapes_test : public ::testing::TestWithParam<tern::backend_kind> {};
TERN_INSTANTIATE_BACKENDS(gcc_shapes_test);

http::router hello_routes() {
  http::router routes;
  routes.get("/hello", [](http::request&) -> tern::task<http::response> { co_return http::response(200, "hello\n"); });
  return routes;
}

// The guide's call: a router by value, an endpoint, nothing else; the runtime's shutdown ends it.
TEST_P(gcc_shapes_test, serve_called_as_the_guide_does_returns_at_shutdown) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  std::promise<std::error_code> served;
  http::router routes = hello_routes();
  rt.spawn_on(0, [&rt, &routes, &served]() -> tern::task<> {
    std::error_code ec = co_await http::serve(rt, routes, net::endpoint::loopback_v4(0));
    served.set_value(ec);
  }).detach();
  std::this_thread::sleep_for(50ms);  // every worker listens, or the shutdown ends the listening first: both fine
  EXPECT_TRUE(rt.shutdown(5s));
  auto result = served.get_future();
  ASSERT_EQ(result.wait_for(0s), std::future_status::ready);
  EXPECT_FALSE(result.get());
}

// With a shared router and options: a request is answered by one of the servers, then the shutdown ends them.
TEST_P(gcc_shapes_test, serve_with_options_answers_and_returns_at_shutdown) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  auto routes = std::make_shared<const http::router>(hello_routes());
  std::promise<net::endpoint> listening;
  std::promise<std::error_code> served;
  http::server_options opts;  // a variable, not a {} in the awaiting expression
  opts.server_name = "shapes";
  rt.spawn_on(0, [&]() -> tern::task<> {
    std::error_code ec = co_await http::serve(rt, routes, net::endpoint::loopback_v4(0), opts, 2s,
                                              [&listening](const net::endpoint& ep) { listening.set_value(ep); });
    served.set_value(ec);
  }).detach();
  const net::endpoint where = listening.get_future().get();
  const std::string body = rt.block_on([](net::endpoint where) -> tern::task<std::string> {
    http::client client(*tern::io_context::current());
    auto [ec, r] = co_await client.get("http://" + where.to_string() + "/hello");
    client.close_idle();
    co_return ec ? ec.message() : r.body + std::string(r.headers.get("server"));
  }(where));
  EXPECT_EQ(body, "hello\nshapes");
  EXPECT_TRUE(rt.shutdown(5s));
  auto result = served.get_future();
  ASSERT_EQ(result.wait_for(0s), std::future_status::ready);
  EXPECT_FALSE(result.get());
}

// A client made for one request inside the awaiting expression: the options it leaves out must not be an aggregate
// temporary of that expression (client_options holds strings and functions).
TEST_P(gcc_shapes_test, a_client_made_in_the_awaiting_expression) {
  tern::io_context ctx(options_for(GetParam()));
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<> {
    http::server server(ctx, hello_routes());
    CO_ASSERT_OK(server.listen(net::endpoint::loopback_v4(0)));
    auto running = tern::spawn(ctx, server.run());
    const std::string url = "http://" + server.local_endpoint().value.to_string() + "/hello";
    auto [ec, r] = co_await http::client(ctx).get(url);
    CO_ASSERT_OK(ec);
    EXPECT_EQ(r.body, "hello\n");
    server.stop();
    EXPECT_FALSE(co_await std::move(running));
  }(ctx));
}

// Operations whose arguments have defaults, awaited from a coroutine: resolve (service), connect (options).
TEST_P(gcc_shapes_test, operations_with_defaulted_arguments_awaited_from_a_coroutine) {
  tern::io_context ctx(options_for(GetParam()));
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<> {
    net::resolver resolver(ctx);
    auto [rec, found] = co_await resolver.resolve("127.0.0.1");
    CO_ASSERT_OK(rec);
    EXPECT_EQ(found.endpoints.size(), 1u);
    net::tcp_acceptor acceptor(ctx);
    CO_ASSERT_OK(acceptor.listen(net::endpoint::loopback_v4(0)));
    const std::vector<net::endpoint> where{acceptor.local_endpoint().value};  // g++ 12 refuses a braced list here
    auto [cec, socket] = co_await net::connect(ctx, where);
    CO_ASSERT_OK(cec);
    auto [aec, peer] = co_await acceptor.accept();
    CO_ASSERT_OK(aec);
  }(ctx));
}

// The safe form of `c ? co_await a() : co_await b()` (which g++ 12 miscompiles: known_bug.cpp): assign in an
// if/else. (`co_await (c ? a() : b())` is no better: g++ 12 frees the chosen task's frame twice.)
TEST_P(gcc_shapes_test, a_choice_between_two_awaited_results_in_its_safe_form) {
  tern::io_context ctx(options_for(GetParam()));
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<> {
    net::resolver resolver(ctx);
    const std::array<bool, 2> choices{true, false};
    for (const bool first : choices) {
      tern::io_result<net::resolve_results> assigned;
      if (first) {
        assigned = co_await resolver.resolve("127.0.0.1", "80");
      } else {
        assigned = co_await resolver.resolve("127.0.0.2", "80");
      }
      CO_ASSERT_OK(assigned.ec);
      EXPECT_EQ(assigned.value.endpoints.at(0).to_string(), first ? "127.0.0.1:80" : "127.0.0.2:80");
    }
  }(ctx));
}

}  // namespace
