// tern/http/error.hpp
//
// What tern::http refuses, in one category ("tern.http"), and the status a server answers each with.
//
// The parser names exactly what was wrong with a message (a bare CR, an obs-fold, two different Content-Lengths,
// ...), so that a log line says why a request was refused; status_of() maps each to the response status RFC 9110
// and RFC 9112 call for. Every code is also equal to the std::errc of its kind (protocol_error for a malformed
// message, message_size for one over a limit, timed_out for a timeout), so code that only asks "was the peer at
// fault" can test that.
//
// | http::error                          | status | std::errc          |
// |--------------------------------------|--------|--------------------|
// | bad_method, bad_target, bad_version  | 400    | protocol_error     |
// | bad_line_ending (a bare CR or LF)    | 400    | protocol_error     |
// | bad_header_name, bad_header_value    | 400    | protocol_error     |
// | obs_fold                             | 400    | protocol_error     |
// | missing_host, duplicate_host         | 400    | protocol_error     |
// | bad_host                             | 400    | protocol_error     |
// | bad_content_length                   | 400    | protocol_error     |
// | conflicting_content_length           | 400    | protocol_error     |
// | content_length_with_chunked          | 400    | protocol_error     |
// | bad_transfer_encoding                | 400    | protocol_error     |
// | bad_chunk_size, bad_chunk_extension  | 400    | protocol_error     |
// | bad_chunk_end, bad_trailer           | 400    | protocol_error     |
// | request_line_too_long                | 414    | message_size       |
// | headers_too_large, too_many_headers  | 431    | message_size       |
// | body_too_large                       | 413    | message_size       |
// | unsupported_transfer_encoding        | 501    | not_supported      |
// | version_not_supported                | 505    | not_supported      |
// | unsupported_expectation              | 417    | not_supported      |
// | header_timeout, body_timeout         | 408    | timed_out          |
// | bad_status_line, bad_response        | (client side)  | protocol_error |
// | partial_message                      | (the peer closed inside a message) | (none) |
// | unprocessed (safe to send again)     | (client side, HTTP/2)  | (none)   |
// | stream_reset                         | (client side, HTTP/2)  | protocol_error |
//
// partial_message also compares equal to tern::condition::end_of_stream (tern/error.hpp), with tern::error::eof and
// the other libraries' ends of a stream.
#pragma once

#include <string>
#include <system_error>
#include <type_traits>

#include "tern/error.hpp"

namespace tern::http {

enum class error {
  bad_method = 1,                  // the method is not a token
  bad_target,                      // the request target is empty or holds a space, a control or a non-ASCII byte
  bad_version,                     // not HTTP/<digit>.<digit>
  version_not_supported,           // a major version other than 1
  bad_line_ending,                 // a CR not followed by LF, or an LF not preceded by CR
  bad_header_name,                 // a field name that is not a token, or whitespace before the colon
  bad_header_value,                // a control character in a field value
  obs_fold,                        // a field line continued on the next line (obsolete line folding)
  missing_host,                    // an HTTP/1.1 request without Host
  duplicate_host,                  // more than one Host
  bad_host,                        // a Host that is not uri-host [":" port] (RFC 3986 host, digits for the port)
  bad_content_length,              // a Content-Length that is not a decimal number
  conflicting_content_length,      // Content-Lengths that differ
  content_length_with_chunked,     // both Content-Length and Transfer-Encoding (a request smuggling shape)
  bad_transfer_encoding,           // chunked not last, chunked twice, or Transfer-Encoding in HTTP/1.0
  unsupported_transfer_encoding,   // a transfer coding other than chunked (gzip, ...)
  unsupported_expectation,         // an Expect other than 100-continue
  request_line_too_long,           // the request line is longer than the parser's limit
  headers_too_large,               // the header section is longer than the parser's limit
  too_many_headers,                // more header fields than the parser's limit
  body_too_large,                  // a body longer than the limit (by its Content-Length, or as it arrives)
  bad_chunk_size,                  // a chunk size that is not hexadecimal, or too large
  bad_chunk_extension,             // a control character in a chunk extension, or extensions over their limit
  bad_chunk_end,                   // chunk data not followed by CRLF
  bad_trailer,                     // a malformed trailer field, or trailers over their limit
  bad_status_line,                 // a response's first line is not HTTP/1.x <3 digits> [reason]
  bad_response,                    // a response that cannot be framed (a 1xx the client did not ask for, ...)
  header_timeout,                  // the header section did not arrive in time
  body_timeout,                    // the body arrived slower than the server's minimum rate
  partial_message,                 // the connection ended inside a message
  unprocessed,                     // the server did not process the request (HTTP/2 GOAWAY, REFUSED_STREAM)
  stream_reset,                    // the server reset the request's stream (HTTP/2 RST_STREAM)
};

namespace detail {
class error_category_impl final : public std::error_category {
 public:
  constexpr error_category_impl() noexcept = default;
  const char* name() const noexcept override { return "tern.http"; }
  std::string message(int value) const override;
  std::error_condition default_error_condition(int value) const noexcept override;
  bool equivalent(int value, const std::error_condition& cond) const noexcept override;
};
extern const error_category_impl error_category_instance;
}  // namespace detail

// The category of tern::http::error.
inline const std::error_category& category() noexcept { return detail::error_category_instance; }

inline std::error_code make_error_code(error e) noexcept {
  return {static_cast<int>(e), detail::error_category_instance};
}

// The status a server answers a request refused with e (400 for anything without a more precise one).
int status_of(error e) noexcept;
// The same for any error code: an http::error's status, else 400.
int status_of(const std::error_code& ec) noexcept;

}  // namespace tern::http

template <>
struct std::is_error_code_enum<tern::http::error> : std::true_type {};
