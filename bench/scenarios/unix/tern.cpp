// unix/pingpong for tern: sockets/pingpong over a Unix stream socket pair (unix_stream_socket::pair) on one
// io_context; the client writes `size` bytes with write_all and reads the echo with read_exact, the server echoes;
// both verify every byte. The client's shutdown of its sending side ends the server with eof.
#include "../tern_setup.hpp"
#include "../sockets/tern_pingpong.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

namespace tern_bench::tern_impl {

namespace net = tern::net;

namespace unix_tern {  // this file's own (see bench/CMakeLists.txt)
namespace {

tern::task<void> pingpong(tern::io_context& ctx, session& s, std::size_t size) {
    auto [ec, ends] = net::unix_stream_socket::pair(ctx);
    expect_ok(ec, "socketpair");
    payload_pattern pattern(size);
    latency_meter meter(s);
    meter.start();
    auto server_task = tern::spawn(server_loop(ends.second, pattern));
    auto client_task = tern::spawn(client_loop(ends.first, pattern, meter));
    co_await std::move(client_task);
    co_await std::move(server_task);
    if (!meter.done()) throw bench_failure("the client stopped before the last phase ended");
}

}  // namespace
}  // namespace unix_tern

void unix_pingpong(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(unix_tern::pingpong(ctx, s, static_cast<std::size_t>(s.param_int("size"))));
}

}  // namespace tern_bench::tern_impl
