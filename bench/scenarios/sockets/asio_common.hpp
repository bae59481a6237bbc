// The loopback connection both Asio ping-pong implementations start from.
#pragma once

#include "../asio_setup.hpp"

namespace tern_bench::asio_impl {

// A connected loopback TCP pair with TCP_NODELAY on both ends. Set up with blocking calls before the loop runs:
// connect() to a listening loopback socket completes from the backlog, so no event loop is needed, and setup is
// not part of what is measured.
struct loopback_pair {
    asio::ip::tcp::socket client;
    asio::ip::tcp::socket server;

    explicit loopback_pair(asio::io_context& ctx) : client(ctx), server(ctx) {
        asio::ip::tcp::acceptor acceptor(ctx, asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0));
        client.connect(acceptor.local_endpoint());
        acceptor.accept(server);
        client.set_option(asio::ip::tcp::no_delay(true));
        server.set_option(asio::ip::tcp::no_delay(true));
    }
};

}  // namespace tern_bench::asio_impl
