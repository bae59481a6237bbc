// sockets/idle_connections for tern (see idle_common.hpp): one task per connection awaiting receive(), which
// ties no buffer to a connection while it waits (io_uring: a multishot receive on the loop's provided-buffer
// ring; epoll: a buffer taken from the pool only once the socket is readable).
#include "tern_common.hpp"
#include "idle_common.hpp"
#include "../registry.hpp"

namespace tern_bench::tern_impl {

namespace sockets_tern_idle {  // this file's own (see bench/CMakeLists.txt)
namespace {

struct idle_state {
    idle::probe* probe;
    std::int64_t waiting = 0;
    std::int64_t done = 0;
};

tern::task<void> idle_session(net::tcp_socket sock, idle_state& st) {
    ++st.waiting;
    auto [ec, lease] = co_await sock.receive();
    if (ec || lease.view() != "i") st.probe->failed();
    ++st.done;
}

tern::task<void> serve(tern::io_context& ctx, std::int64_t conns, idle_state& st) {
    net::tcp_acceptor acceptor(ctx);
    expect_ok(acceptor.listen(net::endpoint::loopback_v4(0), {.backlog = 4096}), "listen");
    st.probe->listening(acceptor.local_endpoint().value.port());
    for (std::int64_t i = 0; i < conns; ++i) {
        auto [ec, sock] = co_await acceptor.accept();
        expect_ok(ec, "accept");
        tern::spawn(ctx, idle_session(std::move(sock), st)).detach();
    }
    acceptor.close();
    while (st.waiting < conns) co_await tern::yield();  // every session has reached its receive
    st.probe->all_waiting();
    while (st.done < conns) co_await tern::sleep_for(ctx, std::chrono::milliseconds(1));
}

}  // namespace
}  // namespace sockets_tern_idle

void sockets_idle_connections(session& s) {
    const std::int64_t conns = s.param_int("conns");
    {
        // The servers run in forked processes; this loop only tells the orchestrator the backend they get.
        tern::io_context ctx(options_for(s));
        announce(s, ctx);
    }
    s.for_each_phase([&](const phase&) {
        return idle::measure(s, conns, [&s](std::int64_t n, idle::probe& p) {
            tern::io_context ctx(options_for(s));
            sockets_tern_idle::idle_state st{&p};
            ctx.block_on(serve(ctx, n, st));
        });
    });
}

}  // namespace tern_bench::tern_impl
