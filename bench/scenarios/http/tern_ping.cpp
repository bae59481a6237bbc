// http/ping_json for tern: tern::http's server, one io_context per server thread, each listening on the same port
// with SO_REUSEPORT (the kernel spreads wrk's connections over them), each with its own ping::service behind the
// route POST /ping. The /ping work itself is ping_service.hpp's, the same on every stack; tern::http does the
// HTTP (its parser, keep-alive, the Date field, the connection's buffers) and tern the I/O.
#include "tern_ping.hpp"
#include "../served.hpp"
#include "../tern_setup.hpp"
#include "../registry.hpp"

#include <tern/http/server.hpp>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tern_bench::tern_impl {

namespace http = tern::http;

// POST /ping answered by the service, the same on every server thread.
http::router ping_routes(ping::service& service) {
    http::router routes;
    routes.post(ping::path, [&service](http::request& req) -> tern::task<http::response> {
        ping::answer a;
        service.handle(req.method_name(), req.path(), req.header("content-type"), req.body(), a);
        if (a.status != 200) co_return http::response(a.status);
        co_return http::response(200, std::string(a.text()), ping::json_type);
    });
    return routes;
}

http::server_options ping_options() {
    http::server_options opts;
    opts.max_connections = 20000;
    return opts;
}

namespace http_tern_ping {  // this file's own (see bench/CMakeLists.txt)
namespace {

// One server thread: its loop, its service and its server, made and destroyed on the thread itself.
class ping_loop {
public:
    ping_loop(session& s, ping::failure_slot& failures, routes_for routes, const http::server_options& opts)
        : s_(s), failures_(failures), routes_(routes), opts_(opts) {}

    // Starts the thread; returns once it listens (its port), or throws what went wrong.
    std::uint16_t start(std::uint16_t port) {
        thread_ = std::thread([this, port] { body(port); });
        std::unique_lock<std::mutex> lock(mutex_);
        ready_cv_.wait(lock, [this] { return ready_; });
        if (!error_.empty()) throw bench_failure(error_);
        return port_;
    }
    void stop() {
        if (!thread_.joinable()) return;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (ctx_ != nullptr) {
                tern::io_context* ctx = ctx_;
                http::server* server = server_;
                ctx->post([ctx, server] { tern::spawn(*ctx, server->shutdown(std::chrono::seconds(1))).detach(); });
            }
        }
        thread_.join();
    }
    std::uint64_t answered() const { return service_ ? service_->answered() : 0; }
    std::uint64_t refused() const { return service_ ? service_->refused() : 0; }

private:
    void body(std::uint16_t port) {
        try {
            tern::io_context ctx(options_for(s_));
            announce(s_, ctx);
            service_ = std::make_unique<ping::service>();
            http::server server(ctx, routes_(*service_), opts_);
            tern::net::acceptor_options listen_opts;
            listen_opts.reuse_port = true;
            expect_ok(server.listen(tern::net::endpoint::loopback_v4(port), listen_opts), "listen");
            {
                std::lock_guard<std::mutex> lock(mutex_);
                port_ = server.local_endpoint().value.port();
                ctx_ = &ctx;
                server_ = &server;
                ready_ = true;
            }
            ready_cv_.notify_all();
            ctx.block_on(server.run());
            std::lock_guard<std::mutex> lock(mutex_);
            ctx_ = nullptr;
            server_ = nullptr;
        } catch (const std::exception& e) {
            failures_.set(e.what());
            std::lock_guard<std::mutex> lock(mutex_);
            if (!ready_) error_ = e.what();
            ready_ = true;
            ready_cv_.notify_all();
        }
    }

    session& s_;
    ping::failure_slot& failures_;
    routes_for routes_;
    http::server_options opts_;
    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable ready_cv_;
    bool ready_ = false;
    std::string error_;
    std::uint16_t port_ = 0;
    tern::io_context* ctx_ = nullptr;
    http::server* server_ = nullptr;
    std::unique_ptr<ping::service> service_;
};

class tern_ping_server final : public ping::server {
public:
    tern_ping_server(session& s, int threads, routes_for routes, const http::server_options& opts) {
        for (int i = 0; i < threads; ++i) loops_.push_back(std::make_unique<ping_loop>(s, failures_, routes, opts));
        port_ = loops_[0]->start(0);
        for (std::size_t i = 1; i < loops_.size(); ++i) loops_[i]->start(port_);
    }
    ~tern_ping_server() override { stop(); }

    std::uint16_t port() const override { return port_; }
    ping::server_stats stats() const override {
        ping::server_stats st;
        for (const auto& l : loops_) {
            st.answered += l->answered();
            st.refused += l->refused();
        }
        st.failure = failures_.get();
        return st;
    }
    void stop() override {
        for (auto& l : loops_) l->stop();
    }

private:
    ping::failure_slot failures_;
    std::vector<std::unique_ptr<ping_loop>> loops_;
    std::uint16_t port_ = 0;
};

}  // namespace
}  // namespace http_tern_ping

std::unique_ptr<ping::server> start_tern_server(session& s, int threads, routes_for routes,
                                                const http::server_options& opts) {
    return std::make_unique<http_tern_ping::tern_ping_server>(s, threads, routes, opts);
}

std::unique_ptr<ping::server> start_tern_ping_server(session& s, int threads) {
    return start_tern_server(s, threads, ping_routes, ping_options());
}

namespace http_tern_ping {  // this file's own (see bench/CMakeLists.txt)
namespace {

// Instruction mode: the same server on the worker's own thread (no harness thread beside it: ../served.hpp says
// why), driven by tern-bench-client. The last request stops it: answered with Connection: close, then run()
// returns.
void count_ping(session& s) {
    if (s.param_int("conns") != 1 || s.param_int("threads") != 1)
        throw bench_failure("http/ping_json's instructions are counted with conns=1 and threads=1");
    pin_to_cpu(0);
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ping::service service;
    http::server server(ctx, ping_routes(service), ping_options());
    expect_ok(server.listen(tern::net::endpoint::loopback_v4(0)), "listen");
    served::client client(s, server.local_endpoint().value.port(), served::protocol::http_ping, 0,
                          [&server] { server.stop(); });
    ctx.block_on(server.run());
    client.finish();
    if (service.refused() != 0) throw bench_failure("the server refused " + std::to_string(service.refused()) + " requests");
}

}  // namespace
}  // namespace http_tern_ping

void http_ping_json(session& s) {
    if (s.instructions()) return http_tern_ping::count_ping(s);
    ping::run_ping_json(s, start_tern_ping_server);
}

}  // namespace tern_bench::tern_impl
