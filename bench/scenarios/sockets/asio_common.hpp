// Connection setup shared by the Asio socket scenarios (both implementations, both configurations). Set up with
// blocking calls before the loops run: connect() to a listening loopback socket completes from the backlog, so no
// event loop is needed, and setup is never part of what is measured.
#pragma once

#include "../asio_setup.hpp"

#include <utility>
#include <vector>

namespace tern_bench::asio_impl {

using tcp = asio::ip::tcp;

inline tcp::acceptor listen_loopback(asio::io_context& ctx) {
    return tcp::acceptor(ctx, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
}

// A connected loopback TCP pair with TCP_NODELAY on both ends (when no_delay). The client end belongs to
// client_ctx, the server end to the acceptor's context.
struct loopback_pair {
    tcp::socket client;
    tcp::socket server;

    loopback_pair(asio::io_context& client_ctx, tcp::acceptor& acceptor, bool no_delay = true)
        : client(client_ctx), server(acceptor.get_executor()) {
        connect_through(acceptor, no_delay);
    }

    // A pair on one context, through an acceptor of its own.
    explicit loopback_pair(asio::io_context& ctx) : client(ctx), server(ctx) {
        tcp::acceptor acceptor = listen_loopback(ctx);
        connect_through(acceptor, true);
    }

private:
    void connect_through(tcp::acceptor& acceptor, bool no_delay) {
        client.connect(acceptor.local_endpoint());
        acceptor.accept(server);
        if (no_delay) {
            client.set_option(tcp::no_delay(true));
            server.set_option(tcp::no_delay(true));
        }
    }
};

// n connected pairs through one acceptor: client ends on client_ctx, server ends on server_ctx.
inline std::vector<loopback_pair> connect_pairs(asio::io_context& client_ctx, asio::io_context& server_ctx,
                                                std::size_t n) {
    tcp::acceptor acceptor = listen_loopback(server_ctx);
    std::vector<loopback_pair> pairs;
    pairs.reserve(n);
    for (std::size_t i = 0; i < n; ++i) pairs.emplace_back(client_ctx, acceptor);
    return pairs;
}

inline std::vector<loopback_pair> connect_pairs(asio::io_context& ctx, std::size_t n) {
    return connect_pairs(ctx, ctx, n);
}

}  // namespace tern_bench::asio_impl
