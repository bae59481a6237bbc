// http/minimal for beast/callbacks: a Boost.Beast server and a Boost.Beast client on Boost.Asio with completion
// handlers, `conns` keep-alive connections, everything on one io_context (concurrency_hint 1; Boost.Asio 1.18 has
// only its epoll reactor on Linux). The connections are made with blocking calls before the loop runs, so setup is
// never measured.
//
// Both sides are written the way Beast lets a program avoid allocating per request, as beast_ping.cpp's server is:
//   - server: per connection a fixed read buffer (flat_static_buffer), a request_parser emplaced per request with
//     its fields in the connection's arena (beast_arena.hpp; Beast's parsers are not reusable), and one response
//     built once per connection (Content-Type text/plain, Content-Length 13, the body a span over a constant),
//     serialized by a response_serializer emplaced per response;
//   - client: per connection one request built once (GET / with its Host field), written with http::async_write
//     through a request_serializer emplaced per request, and a response_parser emplaced per response, its fields
//     in the connection's arena and its body in a fixed buffer, read with http::async_read through a fixed read
//     buffer.
// The server answers only GET / (anything else fails the point). The client checks every response: status 200,
// keep-alive, Content-Length 13, Content-Type text/plain, the body "Hello, World!", and nothing after it. After
// the last phase the clients shut down their sending side and each server connection reads the end of stream.
// Instruction mode (tern-bench --instructions) counts the server alone: the same server_connection on one accepted
// connection, driven by tern-bench-client from another process (../served.hpp).
#include "beast_arena.hpp"
#include "../served.hpp"
#include "../../harness/instructions.hpp"
#include "beast_setup.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_static_buffer.hpp>
#include <boost/beast/http.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace tern_bench::http_impl {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace http_beast_minimal {  // this file's own (see bench/CMakeLists.txt)
namespace {

constexpr std::string_view hello = "Hello, World!";
constexpr std::size_t read_buffer_size = 4096;  // either side's read buffer, also the limit of a head
constexpr std::size_t body_capacity = 64;       // the client's body buffer: a longer body fails the read

using request_parser = http::request_parser<http::empty_body, arena_allocator<char>>;
using response_body = http::span_body<const char>;
using response_type = http::response<response_body>;
using response_serializer = http::response_serializer<response_body>;
using request_type = http::request<http::empty_body>;
using request_serializer = http::request_serializer<http::empty_body>;
using client_body = http::basic_dynamic_body<beast::flat_static_buffer<body_capacity>>;
using response_parser = http::response_parser<client_body, arena_allocator<char>>;

void expect_ok(const error_code& ec, const char* what) {
    if (ec) throw bench_failure(std::string(what) + ": " + ec.message());
}

[[noreturn]] void bad_response(const std::string& what) { throw bench_failure("client: bad response: " + what); }

class server_connection {
public:
    explicit server_connection(tcp::socket& sock) : sock_(sock) {
        response_.result(http::status::ok);
        response_.version(11);
        response_.set(http::field::content_type, "text/plain");
        response_.body() = response_body::value_type(hello.data(), hello.size());
        response_.prepare_payload();  // Content-Length: 13
    }

    void start() { read_request(); }
    bool done() const { return done_; }

private:
    void read_request() {
        // The last request's parser goes first: its fields return to the arena, which rewinds.
        parser_.reset();
        parser_.emplace(std::piecewise_construct, std::make_tuple(), std::make_tuple(arena_allocator<char>(arena_)));
        parser_->header_limit(read_buffer_size);
        http::async_read(sock_, buffer_, *parser_, [this](error_code ec, std::size_t) { on_read(ec); });
    }

    void on_read(error_code ec) {
        if (ec == http::error::end_of_stream) {  // the client's end of stream, between two requests
            done_ = true;
            return;
        }
        expect_ok(ec, "server read");
        const auto& req = parser_->get();
        if (req.method() != http::verb::get || req.target() != "/")
            throw bench_failure("server: unexpected request " + std::string(req.method_string()) + " " +
                                std::string(req.target()));
        instructions::request_handled();
        const bool keep = req.keep_alive();
        response_.keep_alive(keep);
        serializer_.emplace(response_);
        http::async_write(sock_, *serializer_, [this, keep](error_code ec, std::size_t) {
            expect_ok(ec, "server write");
            if (keep) return read_request();
            sock_.close();
            done_ = true;
        });
    }

    tcp::socket& sock_;
    beast::flat_static_buffer<read_buffer_size> buffer_;
    field_arena arena_;  // before the parser, whose fields it holds: destroyed after it
    std::optional<request_parser> parser_;
    response_type response_;
    std::optional<response_serializer> serializer_;
    bool done_ = false;
};

class client_connection {
public:
    client_connection(tcp::socket& sock, std::string_view host, request_meter& meter) : sock_(sock), meter_(meter) {
        request_.method(http::verb::get);
        request_.target("/");
        request_.version(11);
        request_.set(http::field::host, host);
    }

    void start() { write_request(); }

private:
    void write_request() {
        t0_ = bench_clock::now();
        // A serializer of our own: http::async_write of the message itself would allocate one per request.
        serializer_.emplace(request_);
        http::async_write(sock_, *serializer_, [this](error_code ec, std::size_t) {
            expect_ok(ec, "client write");
            read_response();
        });
    }

    void read_response() {
        parser_.reset();
        parser_.emplace(std::piecewise_construct, std::make_tuple(), std::make_tuple(arena_allocator<char>(arena_)));
        parser_->header_limit(read_buffer_size);
        parser_->body_limit(body_capacity);
        http::async_read(sock_, buffer_, *parser_, [this](error_code ec, std::size_t) { on_read(ec); });
    }

    void on_read(error_code ec) {
        expect_ok(ec, "client read");
        check(parser_->get());
        if (!meter_.record(t0_, bench_clock::now())) {
            sock_.shutdown(tcp::socket::shutdown_send);
            return;
        }
        write_request();
    }

    void check(const response_parser::value_type& res) const {
        if (res.result_int() != 200) bad_response("status " + std::to_string(res.result_int()));
        if (!res.keep_alive()) bad_response("the server closes a keep-alive connection");
        if (res[http::field::content_length] != "13")
            bad_response("Content-Length '" + std::string(res[http::field::content_length]) + "'");
        if (res[http::field::content_type] != "text/plain")
            bad_response("Content-Type '" + std::string(res[http::field::content_type]) + "'");
        auto data = res.body().data();
        std::string_view body(static_cast<const char*>(data.data()), data.size());
        if (body != hello) bad_response("body '" + std::string(body) + "'");
        if (buffer_.size() != 0) bad_response("bytes after the response");
    }

    tcp::socket& sock_;
    request_meter& meter_;
    request_type request_;
    std::optional<request_serializer> serializer_;
    beast::flat_static_buffer<read_buffer_size> buffer_;
    field_arena arena_;  // before the parser, whose fields it holds: destroyed after it
    std::optional<response_parser> parser_;
    bench_clock::time_point t0_{};
};

struct connection_pair {
    explicit connection_pair(asio::io_context& ctx) : client(ctx), server(ctx) {}
    tcp::socket client;
    tcp::socket server;
};

// Instruction mode: one server_connection on the connection tern-bench-client opens.
void count_minimal_beast(session& s) {
    asio::io_context ctx(1);
    tcp::acceptor acceptor(ctx, tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), 0));
    served::client client(s, acceptor.local_endpoint().port(), served::protocol::http_get);
    tcp::socket sock(ctx);
    std::optional<server_connection> conn;
    acceptor.async_accept(sock, [&](error_code ec) {
        expect_ok(ec, "accept");
        sock.set_option(tcp::no_delay(true));
        acceptor.close();
        conn.emplace(sock);
        conn->start();
    });
    ctx.run();  // until the client's end of stream
    client.finish();
    if (!conn || !conn->done()) throw bench_failure("the server connection did not see the client's end of stream");
}

}  // namespace
}  // namespace http_beast_minimal

void http_minimal_beast(session& s) {
    if (s.param_int("threads") != 1) throw bench_failure("http/minimal runs on one thread (threads=1)");
    s.info("boost", BOOST_LIB_VERSION);
    if (s.instructions()) return http_beast_minimal::count_minimal_beast(s);
    asio::io_context ctx(1);
    tcp::acceptor acceptor(ctx, tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), 0));
    const tcp::endpoint where = acceptor.local_endpoint();
    const std::string host = "127.0.0.1:" + std::to_string(where.port());

    // Blocking connect and accept: connect() completes from the listen backlog, so no loop is needed yet.
    const auto conns = static_cast<std::size_t>(s.param_int("conns"));
    std::vector<std::unique_ptr<http_beast_minimal::connection_pair>> pairs;
    for (std::size_t i = 0; i < conns; ++i) {
        auto p = std::make_unique<http_beast_minimal::connection_pair>(ctx);
        p->client.connect(where);
        acceptor.accept(p->server);
        p->client.set_option(tcp::no_delay(true));
        p->server.set_option(tcp::no_delay(true));
        pairs.push_back(std::move(p));
    }
    acceptor.close();

    request_meter meter(s, "req_per_s");
    std::vector<std::unique_ptr<http_beast_minimal::server_connection>> servers;
    std::vector<std::unique_ptr<http_beast_minimal::client_connection>> clients;
    for (auto& p : pairs) {
        servers.push_back(std::make_unique<http_beast_minimal::server_connection>(p->server));
        clients.push_back(std::make_unique<http_beast_minimal::client_connection>(p->client, host, meter));
    }
    meter.start();
    for (std::size_t i = 0; i < conns; ++i) {
        servers[i]->start();
        clients[i]->start();
    }
    ctx.run();
    if (!meter.done()) throw bench_failure("the clients stopped before the last phase ended");
    for (auto& sv : servers)
        if (!sv->done()) throw bench_failure("a server connection did not see its client's end of stream");
}

}  // namespace tern_bench::http_impl
