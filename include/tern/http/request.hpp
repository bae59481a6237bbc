// tern/http/request.hpp
//
// http::request: a request as a server's handler sees it.
//
// Everything in it is a view: the method, target, header fields and (for a body that came with the request in
// one piece) the body point into the connection's own buffers, so handing a request to a handler copies nothing.
// The views are valid until the handler's task completes; a handler that keeps anything longer copies it
// (std::string(request.header("x-id"))). The body is whole when the handler runs (the streaming form of a route,
// router::stream, reads it piece by piece instead).
#pragma once

#include <cstddef>
#include <new>
#include <string_view>
#include <utility>

#include "tern/http/fields.hpp"
#include "tern/http/message.hpp"
#include "tern/http/parser.hpp"
#include "tern/net/endpoint.hpp"

namespace tern::http {

class request {
 public:
  http::method method() const noexcept { return head_->method; }
  // The method as sent ("GET", or an extension method such as "PURGE").
  std::string_view method_name() const noexcept { return head_->method_name; }
  // The request target as sent: "/items/7?full=1" (origin form), or "http://host/items/7" (absolute form).
  std::string_view target() const noexcept { return head_->target; }
  // The target's path, without the query ("/items/7"); for an absolute-form target, the path after the authority.
  // Not percent-decoded (percent_decode()).
  std::string_view path() const noexcept { return path_; }
  // What follows '?' in the target ("full=1"), or "".
  std::string_view query() const noexcept { return query_; }
  http::version version() const noexcept { return head_->version; }
  const field_list& headers() const noexcept { return head_->headers; }
  // The first value of a header field, or "".
  std::string_view header(std::string_view name) const noexcept { return head_->headers.get(name); }
  std::string_view body() const noexcept { return body_; }
  // A {name} segment of the route's pattern that matched, or "" (not percent-decoded).
  std::string_view param(std::string_view name) const noexcept;
  // Whether the connection stays open after the response (HTTP/1.1 without Connection: close, ...).
  bool keep_alive() const noexcept { return head_->keep_alive; }
  const net::endpoint& remote_endpoint() const noexcept { return *remote_; }
  const request_head& head() const noexcept { return *head_; }

  // Internal: the server fills a request per message.
  static constexpr std::size_t max_params = 8;
  request(const request_head& head, const net::endpoint& remote) noexcept;
  void set_body(std::string_view body) noexcept { body_ = body; }
  void set_param(std::size_t i, std::string_view name, std::string_view value) noexcept {
    ::new (static_cast<void*>(&params_.at[i])) std::pair<std::string_view, std::string_view>(name, value);
    if (i >= param_count_) param_count_ = i + 1;
  }
  void clear_params() noexcept { param_count_ = 0; }

 private:
  const request_head* head_;
  const net::endpoint* remote_;
  std::string_view path_;
  std::string_view query_;
  std::string_view body_;
  // The captures, [0, param_count_) set: left unwritten otherwise (zeroing eight pairs cost a memset per request,
  // and a route without captures sets none).
  union param_slots {
    param_slots() noexcept {}
    std::pair<std::string_view, std::string_view> at[max_params];
  } params_;
  std::size_t param_count_ = 0;
};

// Decodes %XX escapes (and, with plus_as_space, '+' as a space, as form data does) into out; false if an escape
// is malformed. out is cleared first.
bool percent_decode(std::string_view in, std::string& out, bool plus_as_space = false);

}  // namespace tern::http
