// tern/http/client.hpp
//
// http::client: HTTP/1.1 requests from one loop, over a pool of kept-alive connections per host and port (and
// HTTP/2, multiplexed, with client_options::http2).
//
//   http::client c(ctx);
//   auto [ec, r] = co_await c.get("http://127.0.0.1:8080/items/7");
//   if (!ec) std::printf("%d %s\n", r.status, r.body.c_str());
//
// A request takes an idle connection to its host and port from the pool, or connects (the name resolved with
// net::resolver, the addresses raced with Happy Eyeballs: net::connect), writes the request, reads the response
// (Content-Length, chunked, or to the end of the connection; 1xx interim responses skipped), and gives the
// connection back to the pool when the response allows it (keep-alive, body read whole). A request that fails on a
// kept-alive connection before any byte of the response arrived (the server had closed it meanwhile) is sent
// again once on a new connection when its method is idempotent (GET, HEAD, PUT, DELETE, OPTIONS, TRACE).
//
// Limits and timeouts (client_options): connecting, the response head after the request went out, each read of
// the body, each write, and the size of a response's head and body (parser_limits); each failure is an error
// code (timed_out, an http::error such as body_too_large or bad_status_line, the socket's own) and the connection
// is then closed, never pooled. Every operation takes the awaiting task's stop token (cancellation, with_timeout
// on the task) like any other.
//
// Responses are whole strings; exchange() gives the streaming form, for uploads and downloads of any size.
//
// A client belongs to its loop: its requests and exchanges are awaited by tasks of that loop (on another thread
// they complete at once with tern::error::wrong_loop, leaving the pool as it was). Any number of requests may run
// at once, to one host or many: each takes a connection of its own. The client's pool and options are shared
// with its running requests and its exchanges, so either may outlive the client object: they go on, and their
// connections are closed when they end instead of being pooled.
// An operation copies what it is given (URL, host, target, content type, fields), so a request task may be
// kept and awaited later.
//
// With client_options::http2 (tern::http2), a host that speaks HTTP/2 gets one connection, shared by every request
// to it at once (as many as the server's max concurrent streams; more wait their turn); a request the server did
// not process (beyond a GOAWAY's last stream, or refused) is sent again on a new connection, whatever its method.
//
// https:// URLs (and scheme::https) go through client_options::tls, which wraps each new connection: with
// <tern/http/tls.hpp>, http::tls_client(ctx) does it with tern::tls (the host name sent in SNI and checked against
// the server's certificate, sessions resumed per host). Its handshake is part of connecting (connect_timeout);
// without it, https requests fail with protocol_not_supported. Plain and TLS connections to one host and port
// are pooled apart.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "tern/buffer.hpp"
#include "tern/http/chunked.hpp"
#include "tern/http/fields.hpp"
#include "tern/http/message.hpp"
#include "tern/http/parser.hpp"
#include "tern/http/protocol.hpp"
#include "tern/http/response.hpp"
#include "tern/http/transport.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/net/resolver.hpp"
#include "tern/net/tcp.hpp"
#include "tern/sync/event.hpp"
#include "tern/task.hpp"
#include "tern/timer.hpp"

namespace tern::http {

struct client_options {
  std::chrono::milliseconds connect_timeout{10'000};   // name resolution and the TCP connect
  std::chrono::milliseconds response_timeout{30'000};  // from the request's last byte to the response head's last
  std::chrono::milliseconds read_timeout{30'000};      // each read of a response body
  std::chrono::milliseconds write_timeout{30'000};     // each write of a request
  std::chrono::milliseconds idle_timeout{30'000};      // a pooled connection unused this long is not reused
  std::size_t max_idle_per_host = 8;                   // pooled connections kept per host and port
  parser_limits limits{8 * 1024, 64 * 1024, 100, 64 * 1024 * 1024};  // a response's head and body
  std::string user_agent = "tern";                     // the User-Agent field ("" sends none)
  client_transport tls;                                // wraps https connections (http::tls_client)
  // HTTP/2 (http2::client_protocol() from <tern/http2/client.hpp>): an https connection whose ALPN agrees on "h2"
  // (the tls context offers {"h2", "http/1.1"}) carries every request to its host at once; HTTP/1.1 stays the
  // fallback. With http2_prior_knowledge, http:// connections speak HTTP/2 from the start (h2c).
  std::shared_ptr<const client_protocol> http2;
  bool http2_prior_knowledge = false;
};

enum class scheme { http, https };

// What the client sends. target is the origin form: path and query ("/items/7?full=1").
struct client_request {
  http::method method = method::get;
  std::string target = "/";
  fields headers;
  std::string body;
};

// An http:// or https:// URL taken apart; the port defaults to 80 or 443, the target to "/".
struct url {
  http::scheme scheme = http::scheme::http;
  std::string host;  // a name, an IPv4 address, or an IPv6 address without its brackets
  std::uint16_t port = 80;
  std::string target = "/";
  // nullopt for anything but a well-formed http:// or https:// URL.
  static std::optional<url> parse(std::string_view text);
};

namespace detail {
struct client_connection;
struct client_state;
}

class client;

// One request and its response, written and read piece by piece (client::exchange). The connection goes back to
// the pool when the exchange is destroyed after its response was read whole and may be reused; otherwise it is
// closed (as it is when the client is gone, or the exchange is destroyed on another thread than the client's
// loop). Its operations are awaited one at a time, by tasks of the client's loop.
class client_exchange {
 public:
  client_exchange() = default;
  client_exchange(client_exchange&&) noexcept;
  client_exchange& operator=(client_exchange&&) noexcept;
  ~client_exchange();

  // Awaitable: sends a piece of the request body (a chunk, when no length was given); std::error_code.
  task<std::error_code> write(const_buffer b);
  // Awaitable: ends the request body (the last chunk; refused when a given length was not reached), then reads
  // the response head (interim 1xx responses skipped); std::error_code.
  task<std::error_code> finish();
  // The response's status and fields, after finish(); views valid until the exchange is destroyed.
  const response_head& head() const noexcept;
  // Awaitable: up to b.size() bytes of the response body into b; io_result<size_t>, tern::error::eof at its end.
  task<io_result<std::size_t>> read_some(mutable_buffer b);

 private:
  friend struct detail::client_state;
  std::shared_ptr<detail::client_state> client_;  // the pool the connection goes back to, and the options
  std::unique_ptr<detail::client_connection> conn_;
  std::unique_ptr<client_stream> stream_;  // instead, over HTTP/2
};

class client {
 public:
  // Without opts: an overload, not a default argument, so that a client made inside an expression that co_awaits
  // (co_await http::client(ctx).get(url)) holds no aggregate temporary of it, which g++ 12 destroys twice or
  // relocates bitwise (docs/guide.md, "Compilers").
  explicit client(io_context& ctx);
  explicit client(io_context& ctx, client_options opts);
  client(const client&) = delete;
  client& operator=(const client&) = delete;
  // Closes the pooled connections. Requests still running and exchanges still alive go on (see above).
  ~client();

  // Awaitable: sends req to host:port and reads the whole response; io_result<response>.
  task<io_result<response>> send(http::scheme s, std::string host, std::uint16_t port, client_request req);
  task<io_result<response>> send(std::string host, std::uint16_t port, client_request req) {
    return send(http::scheme::http, std::move(host), port, std::move(req));
  }
  // Awaitable: GET of an http:// or https:// URL (invalid_argument for another).
  TERN_CORO_WRAPPER task<io_result<response>> get(std::string_view target_url);
  // Awaitable: POST of body to an http:// or https:// URL, with its Content-Type.
  TERN_CORO_WRAPPER task<io_result<response>> post(std::string_view target_url, std::string body,
                                                   std::string_view content_type = "application/octet-stream");
  // Awaitable: starts a request whose body is written piece by piece: with body_length, a body of that many bytes
  // (Content-Length); without, chunked. Yields the exchange once its head is sent. host, target and headers are
  // copied.
  TERN_CORO_WRAPPER task<io_result<client_exchange>> exchange(http::scheme s, std::string_view host,
                                                              std::uint16_t port, method m, std::string_view target,
                                                              const fields& headers = {},
                                                              std::optional<std::uint64_t> body_length = {});
  task<io_result<client_exchange>> exchange(std::string_view host, std::uint16_t port, method m,
                                            std::string_view target, const fields& headers = {},
                                            std::optional<std::uint64_t> body_length = {}) {
    return exchange(http::scheme::http, host, port, m, target, headers, body_length);
  }

  // Pooled connections now.
  std::size_t idle_connections() const noexcept;
  // Closes every pooled connection.
  void close_idle() noexcept;
  const client_options& options() const noexcept;

 private:
  std::shared_ptr<detail::client_state> state_;
};

}  // namespace tern::http
