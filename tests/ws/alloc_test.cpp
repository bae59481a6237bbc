// Steady state of ws::stream: once a connection has carried a few messages, a message costs no heap allocation
// without permessage-deflate: not the framing, the masking, the read into a string that already has the room, the
// automatic pong, nor the tasks' frames. Checked on both backends over 2000 echoes of small and 64 KiB messages
// (with pings between them), between a tern client and a tern server on one loop.
#include "counting_new.hpp"
#include "ws/ws_support.hpp"

#include <string>

namespace {

using namespace tern_test;

class ws_alloc_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(ws_alloc_test);

constexpr int warmup = 100;
constexpr int measured = 2000;

tern::task<bool> echo_round(ws_pair& p, std::string& client_in, std::string& server_in, std::string_view message,
                            bool ping) {
  if (co_await p.client.write(ws::message_type::binary, message)) co_return false;
  if (ping && co_await p.client.ping("keepalive")) co_return false;
  auto [sec, st] = co_await p.server.read(server_in);
  if (sec || server_in.size() != message.size()) co_return false;
  if (co_await p.server.write(st, server_in)) co_return false;
  auto [cec, ct] = co_await p.client.read(client_in);
  co_return !cec && client_in == message;
}

TEST_P(ws_alloc_test, no_allocation_per_message_on_a_warm_connection) {
  std::size_t allocations = 0;
  bool ok = true;
  run_bounded(ctx, [](tern::io_context& ctx, std::size_t& allocations, bool& ok) -> tern::task<void> {
    ws_pair p = co_await ws_over_tcp(ctx);
    std::string client_in, server_in;
    const std::string small = "a small message of some bytes";
    const std::string large(64 * 1024, 'L');
    for (int i = 0; i < warmup; ++i) {
      ok = ok && co_await echo_round(p, client_in, server_in, i % 2 ? small : large, i % 10 == 0);
    }
    start_counting();
    for (int i = 0; i < measured; ++i) {
      ok = ok && co_await echo_round(p, client_in, server_in, i % 2 ? small : large, i % 10 == 0);
    }
    allocations = stop_counting();
  }(ctx, allocations, ok));
  EXPECT_TRUE(ok);
  EXPECT_EQ(allocations, 0u) << "heap allocations over " << measured << " echoes";
}

}  // namespace
