// tern/http/message.hpp
//
// The vocabulary of HTTP/1.1 messages: methods, status codes and their reason phrases, versions.
#pragma once

#include <cstdint>
#include <string_view>

namespace tern::http {

// The methods of RFC 9110 and PATCH; other is any other token (its name is in the parsed head).
enum class method : std::uint8_t { other, get, head, post, put, delete_, connect, options, trace, patch };

// "GET", "HEAD", ...; "" for other.
std::string_view to_string(method m) noexcept;
// The method of a token (case-sensitive, as RFC 9110 §9.1 says), or other.
method method_from(std::string_view token) noexcept;

// Status codes with a name; a status is an int, so any three-digit code can be used.
namespace status {
inline constexpr int continue_ = 100;
inline constexpr int switching_protocols = 101;
inline constexpr int ok = 200;
inline constexpr int created = 201;
inline constexpr int accepted = 202;
inline constexpr int no_content = 204;
inline constexpr int partial_content = 206;
inline constexpr int moved_permanently = 301;
inline constexpr int found = 302;
inline constexpr int see_other = 303;
inline constexpr int not_modified = 304;
inline constexpr int temporary_redirect = 307;
inline constexpr int permanent_redirect = 308;
inline constexpr int bad_request = 400;
inline constexpr int unauthorized = 401;
inline constexpr int forbidden = 403;
inline constexpr int not_found = 404;
inline constexpr int method_not_allowed = 405;
inline constexpr int request_timeout = 408;
inline constexpr int conflict = 409;
inline constexpr int length_required = 411;
inline constexpr int content_too_large = 413;
inline constexpr int uri_too_long = 414;
inline constexpr int unsupported_media_type = 415;
inline constexpr int expectation_failed = 417;
inline constexpr int too_many_requests = 429;
inline constexpr int request_header_fields_too_large = 431;
inline constexpr int internal_server_error = 500;
inline constexpr int not_implemented = 501;
inline constexpr int bad_gateway = 502;
inline constexpr int service_unavailable = 503;
inline constexpr int gateway_timeout = 504;
inline constexpr int http_version_not_supported = 505;
}  // namespace status

// The reason phrase of RFC 9110 for a status ("OK", "Not Found"); "" for a code it does not name.
std::string_view reason_phrase(int status) noexcept;

// Now as an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), the Date field's value; formatted once a second per
// thread, and valid until the calling thread's next call.
std::string_view date_now() noexcept;

// Whether a response with this status to a request with this method has no body whatever its headers say
// (RFC 9112 §6.3: HEAD, 1xx, 204, 304; a 2xx to CONNECT).
bool has_no_body(method request_method, int status) noexcept;

// HTTP/1.0 or HTTP/1.1 (a later 1.x is handled as 1.1, RFC 9112 §2.3), or HTTP/2 (a request served by tern::http2).
struct version {
  std::uint8_t major = 1;
  std::uint8_t minor = 1;
  friend bool operator==(version, version) = default;
};
inline constexpr version http10{1, 0};
inline constexpr version http11{1, 1};
inline constexpr version http2{2, 0};

// How the body of a message is delimited (RFC 9112 §6.3).
enum class body_framing : std::uint8_t {
  none,            // no body
  content_length,  // exactly content_length bytes
  chunked,         // Transfer-Encoding: chunked
  until_close,     // a response read until the connection closes
};

}  // namespace tern::http
