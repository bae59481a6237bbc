// http/ping_json for beast/callbacks: Boost.Beast on Boost.Asio with completion handlers, in the shape of Beast's
// http_server_fast example, which is Beast's own answer to "how fast can a Beast server be":
//   - one io_context per thread, concurrency_hint 1, each run by its thread (Boost.Asio 1.18 has only its epoll
//     reactor on Linux);
//   - connection objects that are made once and reused for the next accepted socket, each with a fixed read
//     buffer (flat_static_buffer), its header fields in an arena of its own that rewinds after every request
//     (beast_arena.hpp), and the request body in a fixed buffer (basic_dynamic_body over a flat_static_buffer),
//     so that a warm server allocates nothing per request;
//   - a request_parser emplaced per request (Beast's parsers are not reusable) and a response_serializer per
//     response, the answer's body a span over the connection's bytes.
// Unlike the example, which serves files and closes each connection after one response, connections are kept
// alive (wrk's are), and any number of them is served: a connection object is made when none is idle.
// With threads=2 the acceptor runs on the first thread and deals accepted sockets to the threads in turn.
// The /ping work itself is ping_service.hpp's, the same on every stack.
#include "beast_arena.hpp"
#include "beast_setup.hpp"
#include "ping_load.hpp"
#include "ping_service.hpp"
#include "../registry.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_static_buffer.hpp>
#include <boost/beast/http.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace tern_bench::http_impl {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace http_beast_ping {  // this file's own (see bench/CMakeLists.txt)
namespace {

constexpr std::size_t read_buffer_size = 8192;  // also the limit of a request's head

using fields_type = http::basic_fields<arena_allocator<char>>;
using request_body = http::basic_dynamic_body<beast::flat_static_buffer<ping::max_body>>;
using parser_type = http::request_parser<request_body, arena_allocator<char>>;
using response_body = http::span_body<const char>;
using response_type = http::response<response_body, fields_type>;
using serializer_type = http::response_serializer<response_body, fields_type>;

// How a connection may end without anything being wrong: the client closed or reset it (wrk drops its
// connections when its run ends), or the server is stopping.
bool normal_end(const error_code& ec) {
    return ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
           ec == asio::error::broken_pipe || ec == asio::error::operation_aborted;
}

class connection;

// One server thread: its io_context, its /ping service, its connection objects.
struct loop {
    explicit loop(ping::failure_slot& f) : failures(f) {}

    void start(tcp::socket sock);
    void release(connection* c) { idle.push_back(c); }

    asio::io_context ctx{1};
    asio::executor_work_guard<asio::io_context::executor_type> guard{ctx.get_executor()};
    ping::service service;
    ping::failure_slot& failures;
    std::vector<std::unique_ptr<connection>> connections;  // destroyed before ctx, which their sockets use
    std::vector<connection*> idle;
    std::thread thread;
};

class connection {
public:
    explicit connection(loop& home) : home_(home), sock_(home.ctx) {}

    void start(tcp::socket sock) {
        sock_ = std::move(sock);
        error_code ignored;
        sock_.set_option(tcp::no_delay(true), ignored);
        read_request();
    }

private:
    void read_request() {
        // The last request's parser and response go first: their fields return to the arena, which rewinds.
        serializer_.reset();
        response_.reset();
        parser_.reset();
        parser_.emplace(std::piecewise_construct, std::make_tuple(), std::make_tuple(arena_allocator<char>(arena_)));
        parser_->header_limit(read_buffer_size);
        parser_->body_limit(ping::max_body);
        http::async_read(sock_, buffer_, *parser_, [this](error_code ec, std::size_t) { on_read(ec); });
    }

    void on_read(error_code ec) {
        if (ec) return finish(ec);
        auto& req = parser_->get();
        auto body = req.body().data();
        home_.service.handle(req.method_string(), req.target(), req[http::field::content_type],
                             std::string_view(static_cast<const char*>(body.data()), body.size()), answer_);
        response_.emplace(std::piecewise_construct, std::make_tuple(), std::make_tuple(arena_allocator<char>(arena_)));
        response_->result(static_cast<unsigned>(answer_.status));
        response_->version(11);
        if (answer_.size != 0) response_->set(http::field::content_type, ping::json_type);
        response_->body() = response_body::value_type(answer_.body, answer_.size);
        response_->keep_alive(req.keep_alive());
        response_->prepare_payload();
        serializer_.emplace(*response_);
        http::async_write(sock_, *serializer_, [this](error_code ec, std::size_t) { on_write(ec); });
    }

    void on_write(error_code ec) {
        if (ec) return finish(ec);
        if (!response_->keep_alive()) return finish({});
        read_request();
    }

    void finish(error_code ec) {
        if (ec && !normal_end(ec)) home_.failures.set("beast/callbacks connection: " + ec.message());
        error_code ignored;
        sock_.shutdown(tcp::socket::shutdown_both, ignored);
        sock_.close(ignored);
        serializer_.reset();
        response_.reset();
        parser_.reset();
        buffer_.clear();
        home_.release(this);
    }

    loop& home_;
    tcp::socket sock_;
    beast::flat_static_buffer<read_buffer_size> buffer_;
    field_arena arena_;  // before the parser and response, whose fields it holds: destroyed after them
    std::optional<parser_type> parser_;
    std::optional<response_type> response_;
    std::optional<serializer_type> serializer_;
    ping::answer answer_;
};

void loop::start(tcp::socket sock) {
    connection* c;
    if (idle.empty()) {
        connections.push_back(std::make_unique<connection>(*this));
        c = connections.back().get();
    } else {
        c = idle.back();
        idle.pop_back();
    }
    c->start(std::move(sock));
}

class beast_server final : public ping::server {
public:
    explicit beast_server(int threads) {
        for (int i = 0; i < threads; ++i) loops_.push_back(std::make_unique<loop>(failures_));
        acceptor_.emplace(loops_.front()->ctx);
        acceptor_->open(tcp::v4());
        acceptor_->set_option(asio::socket_base::reuse_address(true));
        acceptor_->bind(tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), 0));
        acceptor_->listen(asio::socket_base::max_listen_connections);
        port_ = acceptor_->local_endpoint().port();
        accept();
        for (auto& l : loops_)
            l->thread = std::thread([this, l = l.get()] {
                try {
                    l->ctx.run();
                } catch (const std::exception& e) {
                    failures_.set(std::string("beast/callbacks thread: ") + e.what());
                }
            });
    }
    ~beast_server() override { stop(); }

    std::uint16_t port() const override { return port_; }

    ping::server_stats stats() const override {
        ping::server_stats s;
        for (auto& l : loops_) {
            s.answered += l->service.answered();
            s.refused += l->service.refused();
        }
        s.failure = failures_.get();
        return s;
    }

    void stop() override {
        if (stopped_) return;
        stopped_ = true;
        for (auto& l : loops_) l->ctx.stop();
        for (auto& l : loops_)
            if (l->thread.joinable()) l->thread.join();
        acceptor_.reset();  // on this thread: no loop runs any more
    }

private:
    // Accepts into the next thread's context and hands the socket to that thread.
    void accept() {
        loop& target = *loops_[next_++ % loops_.size()];
        acceptor_->async_accept(target.ctx, [this, &target](error_code ec, tcp::socket sock) {
            if (ec == asio::error::operation_aborted) return;
            if (ec) {
                // Out of descriptors or memory: the run fails, and accepting again at once would spin.
                failures_.set("beast/callbacks accept: " + ec.message());
                return;
            }
            asio::dispatch(target.ctx, [&target, s = std::move(sock)]() mutable { target.start(std::move(s)); });
            accept();
        });
    }

    ping::failure_slot failures_;
    std::vector<std::unique_ptr<loop>> loops_;
    std::optional<tcp::acceptor> acceptor_;  // after loops_: destroyed before the context it uses
    std::uint16_t port_ = 0;
    std::size_t next_ = 0;
    bool stopped_ = false;
};

std::unique_ptr<ping::server> start_beast_server(session& s, int threads) {
    s.info("boost", BOOST_LIB_VERSION);
    return std::make_unique<beast_server>(threads);
}

}  // namespace
}  // namespace http_beast_ping

void http_ping_json_beast(session& s) { ping::run_ping_json(s, http_beast_ping::start_beast_server); }

}  // namespace tern_bench::http_impl
