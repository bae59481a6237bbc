// tern/http/parser.hpp
//
// The HTTP/1.1 message head parsers: request_parser for servers, response_parser for clients. Body decoding
// (chunked) is in chunked.hpp.
//
// Zero-copy and incremental. A parser is given the bytes that have arrived of a message so far, from its first
// byte, and again with more appended until the head is complete; it never copies them: the head it describes
// (method, target, every header field) is views into that buffer, valid while the buffer is unchanged. It keeps
// how far it has looked for the end of the head, so a head that arrives a byte at a time costs linear time, not
// quadratic (a slowloris client cannot make the server rescan), and the one full parse happens once the end is
// there. The memory for the field list is the parser's own, reserved once: parsing allocates nothing after the
// first message of a connection.
//
// Strict, per RFC 9112, because a parser that faces the network is where request smuggling and desync attacks
// live. Refused, each with its own http::error and the status a server answers (status_of()):
// - lines not ended by CRLF: a bare CR, a bare LF (400);
// - a field line folded onto the next (obs-fold), whitespace between a field name and its colon, a field name
//   that is not a token, a control character in a value (400);
// - both Content-Length and Transfer-Encoding; Content-Lengths that differ (equal duplicates are accepted, as RFC
//   9110 §8.6 allows); a Content-Length that is not a decimal number or overflows (400);
// - Transfer-Encoding whose last coding is not chunked, with chunked twice, or in an HTTP/1.0 message (400); a
//   coding other than chunked, which tern does not decode (501);
// - an HTTP/1.1 request without Host, or with two, or a Host whose value is not uri-host [":" port] of RFC 3986
//   (a reg-name, an IPv4 address, an IPv6 or IPvFuture literal in brackets; the port digits only) (400); a major
//   version other than 1 (505);
// - an Expect other than 100-continue (417);
// - a request line over max_request_line (414), a header section over max_header_bytes or with more than
//   max_headers fields (431), a Content-Length over max_body (413).
// Accepted as RFC 9112 says a recipient should: empty lines before a request line, a later HTTP/1.x as 1.1,
// whitespace around field values (trimmed), an empty reason phrase.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <system_error>
#include <vector>

#include "tern/http/error.hpp"
#include "tern/http/fields.hpp"
#include "tern/http/message.hpp"

namespace tern::http {

struct parser_limits {
  std::size_t max_request_line = 8 * 1024;   // the request line (or a response's status line), CRLF excluded
  std::size_t max_header_bytes = 32 * 1024;  // the field lines after it, their CRLFs included
  std::size_t max_headers = 100;             // field lines
  std::uint64_t max_body = 8 * 1024 * 1024;  // a body's bytes (a Content-Length above it is refused at once)
};

struct request_head {
  http::method method = method::other;
  std::string_view method_name;  // the method token as sent
  std::string_view target;       // the request target as sent: origin-form "/path?query", or absolute-form, ...
  http::version version;
  field_list headers;
  body_framing framing = body_framing::none;  // none, content_length or chunked (a request has no until_close)
  std::uint64_t content_length = 0;           // with framing content_length
  bool keep_alive = true;        // the connection may carry another request after this one
  bool expect_continue = false;  // Expect: 100-continue (HTTP/1.1)
  bool upgrade = false;          // Connection: upgrade and an Upgrade field (the protocol is its value)
  std::string_view host;         // the Host field ("" for an HTTP/1.0 request without one)
  std::size_t size = 0;          // the head's bytes, empty lines before it included
};

struct response_head {
  int status = 0;
  std::string_view reason;
  http::version version;
  field_list headers;
  body_framing framing = body_framing::none;
  std::uint64_t content_length = 0;  // with framing content_length
  bool keep_alive = true;            // the connection may carry another request after this response
  std::size_t size = 0;
};

namespace detail {

// The search for the end of a head (the empty line), kept across calls as data grows, with the limits on the
// first line and the field lines checked as it goes.
class head_scanner {
 public:
  // 0 while the head is incomplete; else its size. Sets ec on a bare LF or a limit passed.
  std::size_t scan(std::string_view data, const parser_limits& limits, error first_line_too_long,
                   bool skip_empty_lines, std::error_code& ec) noexcept;
  std::size_t start() const noexcept { return start_; }  // where the first line starts
  bool fresh() const noexcept { return pos_ == 0; }        // nothing examined yet
  void reset() noexcept {
    // In place, not from a temporary (whose copy's loads straddle its stores: a failed store-to-load forward).
    std::destroy_at(this);
    std::construct_at(this);
  }

 private:
  std::size_t pos_ = 0;         // bytes examined
  std::size_t line_start_ = 0;  // the current line
  std::size_t start_ = 0;       // the first line, after the empty lines before it
  std::size_t fields_start_ = 0;
  bool in_first_line_ = true;
};

// What the field lines say about framing and the connection, gathered while they are parsed.
struct field_facts {
  std::string_view host;
  std::uint64_t content_length = 0;
  unsigned hosts = 0;
  bool has_content_length = false;
  bool has_transfer_encoding = false;
  bool chunked_last = false;   // the last transfer coding seen is chunked
  bool chunked_seen = false;
  bool chunked_twice = false;
  bool other_coding = false;   // a coding other than chunked
  bool close = false, keep_alive = false, upgrade_token = false;
  bool has_upgrade = false;
  bool expect_continue = false, other_expectation = false;
};

// Parses the field lines from p up to the head's final CRLF at end, into out; fills facts, and known with where
// the first of each known field is.
bool parse_fields(const char* p, const char* end, const parser_limits& limits, std::vector<field>& out,
                  known_positions& known, field_facts& facts, std::error_code& ec) noexcept;

// What a request or a response parser holds: its limits, the scanner, the field list and the head that views it.
// A copy or a moved state's head views its own field list, with the same positions of the known fields.
template <class Head>
class parser_state {
 public:
  explicit parser_state(parser_limits limits);
  parser_state(const parser_state& o);
  parser_state(parser_state&& o) noexcept;
  parser_state& operator=(const parser_state& o);
  parser_state& operator=(parser_state&& o) noexcept;

  // Forgets the message, for the next one (keeping the memory).
  void reset() noexcept;

 protected:
  parser_limits limits_;
  head_scanner scanner_;
  std::vector<field> fields_;
  known_positions known_{};
  Head head_;

 private:
  void rebind() noexcept;
};

extern template class parser_state<request_head>;
extern template class parser_state<response_head>;

}  // namespace detail

class request_parser : private detail::parser_state<request_head> {
 public:
  // A copy or a moved parser's head views its own field list.
  explicit request_parser(parser_limits limits = {}) : parser_state(limits) {}

  // Parses the request head at the start of data: what has arrived of the message so far (on the next call the
  // same bytes again, with more after them). True once the head is complete: head() then describes it, with views
  // into data. False while it needs more bytes, or when ec is set: a head that is malformed or over a limit
  // (status_of(ec) is the status to answer). Once complete or failed, call reset() before the next message.
  bool parse(std::string_view data, std::error_code& ec) noexcept;

  const request_head& head() const noexcept { return head_; }
  const parser_limits& limits() const noexcept { return limits_; }
  // Forgets the message, for the next one (keeping the memory).
  using parser_state::reset;

 private:
  bool parse_head(std::string_view data, std::size_t end, std::error_code& ec) noexcept;
};

class response_parser : private detail::parser_state<response_head> {
 public:
  // A copy or a moved parser's head views its own field list.
  explicit response_parser(parser_limits limits = {}) : parser_state(limits) {}

  // As request_parser::parse, for the response to a request made with request_method (a response to HEAD has no
  // body whatever its headers say). A 1xx response is a complete head of its own, with framing none; the final
  // response follows it.
  bool parse(std::string_view data, method request_method, std::error_code& ec) noexcept;

  const response_head& head() const noexcept { return head_; }
  const parser_limits& limits() const noexcept { return limits_; }
  using parser_state::reset;

 private:
  bool parse_head(std::string_view data, std::size_t end, method request_method, std::error_code& ec) noexcept;
};

}  // namespace tern::http
