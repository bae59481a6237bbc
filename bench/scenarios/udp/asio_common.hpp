// Socket setup shared by the Asio UDP scenarios (both implementations, both configurations): two loopback UDP
// sockets connected to each other, with the socket buffers every implementation uses.
#pragma once

#include "../asio_setup.hpp"
#include "datagrams.hpp"

namespace tern_bench::asio_impl {

using udp = asio::ip::udp;

struct udp_pair {
    udp::socket a;
    udp::socket b;

    udp_pair(asio::io_context& a_ctx, asio::io_context& b_ctx)
        : a(a_ctx, udp::endpoint(asio::ip::address_v4::loopback(), 0)),
          b(b_ctx, udp::endpoint(asio::ip::address_v4::loopback(), 0)) {
        a.connect(b.local_endpoint());
        b.connect(a.local_endpoint());
        for (auto* s : {&a, &b}) {
            s->set_option(asio::socket_base::receive_buffer_size(udp_buffer_bytes));
            s->set_option(asio::socket_base::send_buffer_size(udp_buffer_bytes));
        }
    }
    explicit udp_pair(asio::io_context& ctx) : udp_pair(ctx, ctx) {}
};

}  // namespace tern_bench::asio_impl
