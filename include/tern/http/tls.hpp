// tern/http/tls.hpp
//
// HTTPS: tern::http's server and client over tern::tls streams. Header only, so that tern::http itself links no
// TLS library: a program that includes this links tern::http and tern::tls.
//
//   tls::context server_tls(tls::role::server);
//   (void)server_tls.use_certificate_chain_file("cert.pem");
//   (void)server_tls.use_private_key_file("key.pem");
//   http::server_options so;
//   so.transport = http::tls_server(server_tls);          // every accepted connection shakes hands first
//
//   http::client_options co;
//   co.tls = http::tls_client(tls::context(tls::role::client));  // the system's CAs, names checked
//   http::client c(ctx, co);
//   auto [ec, r] = co_await c.get("https://example.com/");
//
// The contexts are used as given: ALPN, if wanted, is the context's: {"h2", "http/1.1"} on a server that also
// speaks HTTP/2 (server_options::http2, <tern/http2/server.hpp>), which then serves each connection in the protocol
// its handshake agreed on. The client keeps each host's last TLS session and offers it on the next connection to
// that host (an abbreviated handshake where the server agrees).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "tern/http/transport.hpp"
#include "tern/net/tcp.hpp"
#include "tern/tls/context.hpp"
#include "tern/tls/session.hpp"
#include "tern/tls/stream.hpp"

namespace tern::http {

namespace detail {

// The sessions a client's TLS maker keeps, one per host, shared by its copies (which may serve clients of
// several loops: hence the lock, taken once per new connection).
struct tls_session_cache {
  std::mutex lock;
  std::unordered_map<std::string, tls::session> by_host;

  tls::session find(const std::string& host) {
    std::lock_guard<std::mutex> g(lock);
    auto it = by_host.find(host);
    return it == by_host.end() ? tls::session() : it->second;
  }
  void keep(const std::string& host, tls::session s) {
    std::lock_guard<std::mutex> g(lock);
    if (by_host.size() >= 1024 && !by_host.contains(host)) by_host.clear();  // a bound, not an LRU
    by_host[host] = std::move(s);
  }
};

class tls_transport final : public transport {
 public:
  tls_transport(net::tcp_socket socket, const tls::context& ctx, tls::stream_options opts)
      : stream_(std::move(socket), ctx, opts) {}
  // A client's, for host: its name is sent and checked, and its kept session offered.
  tls_transport(net::tcp_socket socket, const tls::context& ctx, tls::stream_options opts, std::string_view host,
                std::shared_ptr<tls_session_cache> sessions)
      : stream_(std::move(socket), ctx, opts), host_(host), sessions_(std::move(sessions)) {}
  ~tls_transport() override {
    // The session as it ends: in TLS 1.3 the server's tickets come after the handshake, with the first response.
    if (sessions_) {
      tls::session s = stream_.session();
      if (s.resumable()) sessions_->keep(host_, std::move(s));
    }
  }

  task<std::error_code> handshake() override {
    if (sessions_) {
      if (std::error_code ec = stream_.set_host_name(host_)) return failed(ec);
      if (tls::session s = sessions_->find(host_); s.resumable()) (void)stream_.set_session(s);
    }
    return stream_.handshake();
  }
  task<io_result<std::size_t>> read_some(mutable_buffer b) override { return stream_.read_some(b); }
  task<io_result<std::size_t>> write_all(const_buffer b) override { return stream_.write_all(b); }
  task<std::error_code> shutdown_send() override { return stream_.shutdown_send(); }
  net::tcp_socket& socket() noexcept override { return stream_.next_layer(); }
  std::string_view application_protocol() const noexcept override { return stream_.alpn_protocol(); }

  tls::stream<net::tcp_socket>& stream() noexcept { return stream_; }

 private:
  static task<std::error_code> failed(std::error_code ec) { co_return ec; }

  tls::stream<net::tcp_socket> stream_;
  std::string host_;
  std::shared_ptr<tls_session_cache> sessions_;
};

}  // namespace detail

// A server's transport: each accepted connection becomes a TLS stream of ctx (a server context: certificate and
// key set), with stream options opts.
inline server_transport tls_server(tls::context ctx, tls::stream_options opts = {}) {
  return [ctx = std::move(ctx), opts](net::tcp_socket socket) -> std::unique_ptr<transport> {
    return std::make_unique<detail::tls_transport>(std::move(socket), ctx, opts);
  };
}

// A client's transport: each https connection becomes a TLS stream of ctx (a client context) for the request's
// host, offering the session kept from that host's last connection.
inline client_transport tls_client(tls::context ctx, tls::stream_options opts = {}) {
  auto sessions = std::make_shared<detail::tls_session_cache>();
  return [ctx = std::move(ctx), opts, sessions](net::tcp_socket socket,
                                                std::string_view host) -> std::unique_ptr<transport> {
    return std::make_unique<detail::tls_transport>(std::move(socket), ctx, opts, host, sessions);
  };
}

}  // namespace tern::http
