// tern/redis/tls.hpp
//
// Redis over TLS with tern::tls. Header only, so that tern::redis links no TLS library: a program that includes
// this links tern::redis and tern::tls.
//
//   tls::context tls_ctx(tls::role::client);
//   (void)tls_ctx.load_verify_file("ca.pem");              // or the system's CAs
//   redis::config cfg{.host = "cache.example.com", .port = 6380};
//   cfg.tls = redis::tls_transport(std::move(tls_ctx));    // every connection shakes hands first
//
// The host name is sent in SNI and checked against the server's certificate (as the context's settings say).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "tern/redis/transport.hpp"
#include "tern/tls/context.hpp"
#include "tern/tls/stream.hpp"

namespace tern::redis {

namespace detail {

class tls_stream_transport final : public transport {
 public:
  tls_stream_transport(net::tcp_socket socket, const tls::context& ctx, std::string_view host,
                       tls::stream_options opts)
      : stream_(std::move(socket), ctx, opts), host_(host) {}

  task<std::error_code> handshake() override {
    if (std::error_code ec = stream_.set_host_name(host_)) return failed(ec);
    return stream_.handshake();
  }
  task<io_result<std::size_t>> read_some(mutable_buffer b) override { return stream_.read_some(b); }
  task<io_result<std::size_t>> write_all(const_buffer b) override { return stream_.write_all(b); }
  net::tcp_socket& socket() noexcept override { return stream_.next_layer(); }

 private:
  static task<std::error_code> failed(std::error_code ec) { co_return ec; }

  tls::stream<net::tcp_socket> stream_;
  std::string host_;
};

}  // namespace detail

// A factory for config::tls: each connection becomes a TLS stream of ctx (a client context) for the configured
// host.
inline transport_factory tls_transport(tls::context ctx, tls::stream_options opts = {}) {
  return [ctx = std::move(ctx), opts](net::tcp_socket socket, std::string_view host) -> std::unique_ptr<transport> {
    return std::make_unique<detail::tls_stream_transport>(std::move(socket), ctx, host, opts);
  };
}

}  // namespace tern::redis
