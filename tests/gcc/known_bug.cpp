// The two g++ 12 coroutine bugs, each reproduced through tern's API in the way a user would meet it; built only
// with g++ under AddressSanitizer, whose report of a double free is what the test expects (ctest's pass
// expression). When a compiler stops miscompiling them the test fails, and docs/guide.md ("Compilers") should say so.
//
// KNOWN_BUG 1: an aggregate temporary (here net::resolver_options{...}) in a full-expression that co_awaits is
//              destroyed twice.
// KNOWN_BUG 2: `c ? co_await a() : co_await b()` destroys the chosen result twice.
#include <tern/tern.hpp>

#include <cstdio>
#include <vector>

namespace net = tern::net;

// Not a braced list in the awaited expression: g++ 12 refuses that outright (array used as initializer).
std::vector<net::endpoint> local_server() { return {net::endpoint::loopback_v4(53)}; }

tern::task<int> reproduce(tern::io_context& ctx, bool c) {
#if KNOWN_BUG == 1
  auto [ec, found] = co_await net::resolver(ctx, net::resolver_options{.servers = local_server()})
                         .resolve("127.0.0.1", "80");
#elif KNOWN_BUG == 2
  net::resolver resolver(ctx);
  auto [ec, found] = c ? co_await resolver.resolve("127.0.0.1", "80") : co_await resolver.resolve("127.0.0.2", "80");
#endif
  (void)c;
  std::printf("%s: %zu endpoints\n", ec ? ec.message().c_str() : "resolved", found.endpoints.size());
  co_return ec ? 1 : 0;
}

int main(int argc, char**) {
  tern::io_context ctx;
  return ctx.block_on(reproduce(ctx, argc > 0));
}
