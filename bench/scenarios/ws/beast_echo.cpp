// ws/echo for beast/callbacks: Boost.Beast's websocket::stream on Boost.Asio with completion handlers, `conns`
// connections on one io_context (concurrency_hint 1), each client sending a binary message of `size` bytes and
// waiting for its echo before the next. The TCP connections are made with blocking calls and the WebSocket
// handshakes run before the phases start, so setup is never measured.
//
// Written the way Beast lets a program avoid work per message: each side reads into a flat_buffer that keeps its
// capacity (consume() after each message), the client's message is built once, the server echoes the message it
// read from its own buffer, and permessage-deflate is off on both sides (Beast's default). The client checks every
// echo: binary, the size, and the bytes (compared with what it sent).
// Instruction mode (tern-bench --instructions) counts the server alone: the same server_connection on one accepted
// connection, after its handshake, driven by tern-bench-client from another process (../served.hpp).
#include "../http/beast_setup.hpp"
#include "../served.hpp"
#include "../../harness/instructions.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"
#include "ws_message.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>

#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tern_bench::http_impl {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace ws_beast_echo {  // this file's own (see bench/CMakeLists.txt)
namespace {

using ws_stream = websocket::stream<tcp::socket>;

void expect_ok(const error_code& ec, const char* what) {
    if (ec) throw bench_failure(std::string(what) + ": " + ec.message());
}

class server_connection {
public:
    explicit server_connection(ws_stream& ws) : ws_(ws) {}

    void start() { read(); }
    bool done() const { return done_; }

private:
    void read() {
        ws_.async_read(buffer_, [this](error_code ec, std::size_t) {
            if (ec == websocket::error::closed) {  // the client's close, between two messages
                done_ = true;
                return;
            }
            expect_ok(ec, "server read");
            instructions::request_handled();
            ws_.binary(ws_.got_binary());
            ws_.async_write(buffer_.data(), [this](error_code wec, std::size_t) {
                expect_ok(wec, "server write");
                buffer_.consume(buffer_.size());
                read();
            });
        });
    }

    ws_stream& ws_;
    beast::flat_buffer buffer_;
    bool done_ = false;
};

class client_connection {
public:
    client_connection(ws_stream& ws, const std::string& message, request_meter& meter)
        : ws_(ws), message_(message), meter_(meter) {
        ws_.binary(true);
    }

    void start() { send(); }

private:
    void send() {
        t0_ = bench_clock::now();
        ws_.async_write(asio::buffer(message_), [this](error_code ec, std::size_t) {
            expect_ok(ec, "client write");
            ws_.async_read(buffer_, [this](error_code rec, std::size_t) { on_read(rec); });
        });
    }

    void on_read(error_code ec) {
        expect_ok(ec, "client read");
        if (!ws_.got_binary()) throw bench_failure("client: the echo is not binary");
        if (buffer_.size() != message_.size() ||
            std::memcmp(buffer_.data().data(), message_.data(), message_.size()) != 0)
            throw bench_failure("client: the echo differs from the message (" + std::to_string(buffer_.size()) +
                                " bytes)");
        buffer_.consume(buffer_.size());
        if (!meter_.record(t0_, bench_clock::now())) {
            ws_.async_close(websocket::close_code::normal, [](error_code cec) { expect_ok(cec, "client close"); });
            return;
        }
        send();
    }

    ws_stream& ws_;
    const std::string& message_;
    request_meter& meter_;
    beast::flat_buffer buffer_;
    bench_clock::time_point t0_{};
};

struct connection_pair {
    explicit connection_pair(asio::io_context& ctx) : client(ctx), server(ctx) {}
    ws_stream client;
    ws_stream server;
};

// Instruction mode: the server's handshake, then one server_connection, on the connection tern-bench-client opens.
void count_echo_beast(session& s) {
    if (s.param_int("conns") != 1) throw bench_failure("ws/echo's instructions are counted with conns=1");
    const auto size = static_cast<std::size_t>(s.param_int("size"));
    asio::io_context ctx(1);
    tcp::acceptor acceptor(ctx, tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), 0));
    served::client client(s, acceptor.local_endpoint().port(), served::protocol::ws, size);
    ws_stream ws(ctx);
    std::optional<server_connection> conn;
    acceptor.async_accept(ws.next_layer(), [&](error_code ec) {
        expect_ok(ec, "accept");
        ws.next_layer().set_option(tcp::no_delay(true));
        ws.read_message_max(size + 1024);
        acceptor.close();
        ws.async_accept([&](error_code hec) {
            expect_ok(hec, "server handshake");
            conn.emplace(ws);
            conn->start();
        });
    });
    ctx.run();  // until the client's close
    client.finish();
    if (!conn || !conn->done()) throw bench_failure("the server connection did not see the client's close");
}

}  // namespace
}  // namespace ws_beast_echo

void ws_echo_beast(session& s) {
    if (s.param_int("threads") != 1) throw bench_failure("ws/echo runs on one thread (threads=1)");
    s.info("boost", BOOST_LIB_VERSION);
    if (s.instructions()) return ws_beast_echo::count_echo_beast(s);
    asio::io_context ctx(1);
    tcp::acceptor acceptor(ctx, tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), 0));
    const tcp::endpoint where = acceptor.local_endpoint();
    const std::string host = "127.0.0.1:" + std::to_string(where.port());

    const auto conns = static_cast<std::size_t>(s.param_int("conns"));
    const std::string message = ws_bench::make_message(static_cast<std::size_t>(s.param_int("size")));
    std::vector<std::unique_ptr<ws_beast_echo::connection_pair>> pairs;
    for (std::size_t i = 0; i < conns; ++i) {
        auto p = std::make_unique<ws_beast_echo::connection_pair>(ctx);
        p->client.next_layer().connect(where);
        acceptor.accept(p->server.next_layer());
        p->client.next_layer().set_option(tcp::no_delay(true));
        p->server.next_layer().set_option(tcp::no_delay(true));
        p->server.read_message_max(message.size() + 1024);
        p->client.read_message_max(message.size() + 1024);
        pairs.push_back(std::move(p));
    }
    acceptor.close();
    // The handshakes, on the loop, before the phases.
    std::size_t shaken = 0;
    for (auto& p : pairs) {
        p->server.async_accept([&shaken](error_code ec) {
            ws_beast_echo::expect_ok(ec, "server handshake");
            ++shaken;
        });
        p->client.async_handshake(host, "/", [&shaken](error_code ec) {
            ws_beast_echo::expect_ok(ec, "client handshake");
            ++shaken;
        });
    }
    ctx.run();
    if (shaken != 2 * conns) throw bench_failure("a WebSocket handshake did not finish");
    ctx.restart();

    request_meter meter(s, "msg_per_s");
    std::vector<std::unique_ptr<ws_beast_echo::server_connection>> servers;
    std::vector<std::unique_ptr<ws_beast_echo::client_connection>> clients;
    for (auto& p : pairs) {
        servers.push_back(std::make_unique<ws_beast_echo::server_connection>(p->server));
        clients.push_back(std::make_unique<ws_beast_echo::client_connection>(p->client, message, meter));
    }
    meter.start();
    for (std::size_t i = 0; i < conns; ++i) {
        servers[i]->start();
        clients[i]->start();
    }
    ctx.run();
    if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
    for (auto& sv : servers)
        if (!sv->done()) throw bench_failure("a server connection did not see its client's close");
}

}  // namespace tern_bench::http_impl
