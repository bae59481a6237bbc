// Connection setup shared by the tern socket scenarios. Setup is never part of what is measured: the meters start
// after it.
#pragma once

#include "../tern_setup.hpp"

#include <utility>
#include <vector>

namespace tern_bench::tern_impl {

namespace net = tern::net;

struct socket_pair {
    net::tcp_socket client;
    net::tcp_socket server;
};

// A listening loopback acceptor on an ephemeral port, and its address.
inline net::endpoint listen_loopback(net::tcp_acceptor& acceptor) {
    expect_ok(acceptor.listen(net::endpoint::loopback_v4(0)), "listen");
    auto [ec, where] = acceptor.local_endpoint();
    expect_ok(ec, "local_endpoint");
    return where;
}

// n connected loopback pairs on one loop, TCP_NODELAY on both ends when no_delay. Connects and accepts
// alternately: connect() completes from the listen backlog before the accept is issued.
inline tern::task<std::vector<socket_pair>> connect_pairs(tern::io_context& ctx, std::size_t n, bool no_delay = true) {
    net::tcp_acceptor acceptor(ctx);
    net::endpoint where = listen_loopback(acceptor);
    std::vector<socket_pair> pairs;
    pairs.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        auto [cec, client] = co_await net::connect(ctx, where);
        expect_ok(cec, "connect");
        auto [aec, server] = co_await acceptor.accept();
        expect_ok(aec, "accept");
        if (no_delay) {
            expect_ok(client.set_no_delay(true), "TCP_NODELAY");
            expect_ok(server.set_no_delay(true), "TCP_NODELAY");
        }
        pairs.push_back({std::move(client), std::move(server)});
    }
    co_return pairs;
}

// The server side of the two-loop scenarios: accepts n connections on its own loop (TCP_NODELAY) and hands each
// to start(socket), which spawns the connection's task on that loop.
template <class Start>
tern::task<void> accept_n(net::tcp_acceptor& acceptor, std::size_t n, Start start) {
    for (std::size_t i = 0; i < n; ++i) {
        auto [ec, s] = co_await acceptor.accept();
        expect_ok(ec, "accept");
        expect_ok(s.set_no_delay(true), "TCP_NODELAY");
        start(std::move(s));
    }
}

// The client side: n connections to `where` on the client's loop, TCP_NODELAY.
inline tern::task<std::vector<net::tcp_socket>> connect_n(tern::io_context& ctx, net::endpoint where, std::size_t n) {
    std::vector<net::tcp_socket> out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        auto [ec, s] = co_await net::connect(ctx, where);
        expect_ok(ec, "connect");
        expect_ok(s.set_no_delay(true), "TCP_NODELAY");
        out.push_back(std::move(s));
    }
    co_return out;
}

// Runs t to completion; an exception escaping a detached task fails the run too (the trap stops the loop, and its
// exception wins over block_on's "the loop was stopped").
inline void block_on_trapped(tern::io_context& ctx, tern::task<void> t) {
    exception_trap trap(ctx);
    try {
        ctx.block_on(std::move(t));
    } catch (...) {
        trap.rethrow_if_any();
        throw;
    }
    trap.rethrow_if_any();
}

// Awaits every handle in order (each rethrows its task's exception).
template <class T>
tern::task<void> join_all(std::vector<tern::join_handle<T>>& handles) {
    for (auto& h : handles) co_await std::move(h);
}

}  // namespace tern_bench::tern_impl
