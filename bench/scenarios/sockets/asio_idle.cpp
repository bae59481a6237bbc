// sockets/idle_connections for Asio (see idle_common.hpp), in the two ways an Asio server waits for data:
//   asio/callbacks:  as Asio's documentation recommends for many idle connections, a reactor wait
//                    (async_wait(wait_read)) per connection and, once readable, a synchronous read_some into one
//                    buffer shared by every connection; the connection is a shared_ptr held by its handler.
//   asio/coroutines: the plain way, co_spawn of a coroutine per connection that co_awaits async_read_some into a
//                    4 KiB buffer of its own (in its frame).
// The server accepts with blocking calls before the loop runs, then starts every read, samples its RSS, and runs
// the loop until every connection got its byte.
#include "asio_common.hpp"
#include "idle_common.hpp"
#include "../registry.hpp"

#include <array>
#include <memory>

namespace tern_bench::asio_impl {

namespace sockets_asio_idle {  // this file's own (see bench/CMakeLists.txt)
namespace {

struct idle_state {
    idle::probe* probe;
    std::int64_t done = 0;
    std::array<char, 4096> shared{};  // asio/callbacks: the one buffer every readable connection reads into
};

void wait_then_read(std::shared_ptr<tcp::socket> sock, idle_state& st) {
    sock->async_wait(tcp::socket::wait_read, [sock, &st](const asio::error_code& ec) {
        asio::error_code rec;
        const std::size_t n = ec ? 0 : sock->read_some(asio::buffer(st.shared), rec);
        if (ec || rec || n != 1 || st.shared[0] != 'i') st.probe->failed();
        sock->close();
        ++st.done;
    });
}

asio::awaitable<void> plain_read(tcp::socket sock, idle_state& st) {
    std::array<char, 4096> buf;
    asio::error_code ec;
    const std::size_t n = co_await sock.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    if (ec || n != 1 || buf[0] != 'i') st.probe->failed();
    sock.close();
    ++st.done;
}

template <class Start>
void serve(std::int64_t conns, idle::probe& p, Start start) {
    asio::io_context ctx(concurrency_hint);
    tcp::acceptor acceptor = listen_loopback(ctx);
    idle_state st{&p};
    p.listening(acceptor.local_endpoint().port());
    for (std::int64_t i = 0; i < conns; ++i) start(ctx, acceptor.accept(), st);
    acceptor.close();
    p.all_waiting();
    ctx.run();
    if (st.done != conns) throw bench_failure("not every connection was served");
}

}  // namespace
}  // namespace sockets_asio_idle

void sockets_idle_connections_callbacks(session& s) {
    announce(s);
    const std::int64_t conns = s.param_int("conns");
    s.for_each_phase([&](const phase&) {
        return idle::measure(s, conns, [](std::int64_t n, idle::probe& p) {
            sockets_asio_idle::serve(n, p, [](asio::io_context&, tcp::socket sock, sockets_asio_idle::idle_state& st) {
                wait_then_read(std::make_shared<tcp::socket>(std::move(sock)), st);
            });
        });
    });
}

void sockets_idle_connections_coroutines(session& s) {
    announce(s);
    const std::int64_t conns = s.param_int("conns");
    s.for_each_phase([&](const phase&) {
        return idle::measure(s, conns, [](std::int64_t n, idle::probe& p) {
            sockets_asio_idle::serve(n, p, [](asio::io_context& ctx, tcp::socket sock,
                sockets_asio_idle::idle_state& st) {
                asio::co_spawn(ctx, plain_read(std::move(sock), st), rethrow{});
            });
        });
    });
}

}  // namespace tern_bench::asio_impl
