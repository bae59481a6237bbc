// The "tern.http" error category and the status of each error (see tern/http/error.hpp).
#include "tern/http/error.hpp"

namespace tern::http {

namespace detail {

constinit const error_category_impl error_category_instance;

std::string error_category_impl::message(int value) const {
  switch (static_cast<error>(value)) {
    case error::bad_method: return "bad request: the method is not a token";
    case error::bad_target: return "bad request: malformed request target";
    case error::bad_version: return "bad request: malformed HTTP version";
    case error::version_not_supported: return "HTTP version not supported";
    case error::bad_line_ending: return "bad message: a bare CR or LF (lines end with CRLF)";
    case error::bad_header_name: return "bad message: malformed header field name";
    case error::bad_header_value: return "bad message: a control character in a header field value";
    case error::obs_fold: return "bad message: obsolete line folding in the header section";
    case error::missing_host: return "bad request: HTTP/1.1 request without Host";
    case error::duplicate_host: return "bad request: more than one Host";
    case error::bad_host: return "bad request: the Host field is not a host name or address and a port";
    case error::bad_content_length: return "bad message: malformed Content-Length";
    case error::conflicting_content_length: return "bad message: Content-Length values that differ";
    case error::content_length_with_chunked: return "bad message: both Content-Length and Transfer-Encoding";
    case error::bad_transfer_encoding:
      return "bad message: Transfer-Encoding without chunked last, chunked twice, or in HTTP/1.0";
    case error::unsupported_transfer_encoding: return "not implemented: a transfer coding other than chunked";
    case error::unsupported_expectation: return "expectation failed: only 100-continue is supported";
    case error::request_line_too_long: return "the request line is longer than the limit";
    case error::headers_too_large: return "the header section is larger than the limit";
    case error::too_many_headers: return "more header fields than the limit";
    case error::body_too_large: return "the body is larger than the limit";
    case error::bad_chunk_size: return "bad message: malformed chunk size";
    case error::bad_chunk_extension: return "bad message: malformed or oversized chunk extension";
    case error::bad_chunk_end: return "bad message: chunk data not followed by CRLF";
    case error::bad_trailer: return "bad message: malformed or oversized trailer section";
    case error::bad_status_line: return "bad response: malformed status line";
    case error::bad_response: return "bad response: the message cannot be framed";
    case error::header_timeout: return "the header section did not arrive in time";
    case error::body_timeout: return "the body arrived slower than the minimum rate";
    case error::partial_message: return "the connection ended inside a message";
    case error::unprocessed: return "the server did not process the request";
    case error::stream_reset: return "the server reset the request's stream";
  }
  return "unknown HTTP error";
}

std::error_condition error_category_impl::default_error_condition(int value) const noexcept {
  switch (static_cast<error>(value)) {
    case error::request_line_too_long:
    case error::headers_too_large:
    case error::too_many_headers:
    case error::body_too_large: return std::errc::message_size;
    case error::unsupported_transfer_encoding:
    case error::version_not_supported:
    case error::unsupported_expectation: return std::errc::not_supported;
    case error::header_timeout:
    case error::body_timeout: return std::errc::timed_out;
    case error::partial_message:
    case error::unprocessed: return {value, *this};
    default: return std::errc::protocol_error;
  }
}

bool error_category_impl::equivalent(int value, const std::error_condition& cond) const noexcept {
  if (cond == tern::condition::end_of_stream) return static_cast<error>(value) == error::partial_message;
  return default_error_condition(value) == cond;
}

}  // namespace detail

int status_of(error e) noexcept {
  switch (e) {
    case error::request_line_too_long: return 414;
    case error::headers_too_large:
    case error::too_many_headers: return 431;
    case error::body_too_large: return 413;
    case error::unsupported_transfer_encoding: return 501;
    case error::version_not_supported: return 505;
    case error::unsupported_expectation: return 417;
    case error::header_timeout:
    case error::body_timeout: return 408;
    default: return 400;
  }
}

int status_of(const std::error_code& ec) noexcept {
  return ec.category() == category() ? status_of(static_cast<error>(ec.value())) : 400;
}

}  // namespace tern::http
