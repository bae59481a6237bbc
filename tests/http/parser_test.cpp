// The HTTP/1.1 head parsers and the chunked decoder, without I/O: what a well-formed request or response yields,
// that every smuggling shape and every limit is refused with its own error and status, and that bytes arriving in
// any split (one at a time included) parse the same as all at once.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "tern/http/chunked.hpp"
#include "tern/http/parser.hpp"

// A named namespace, not an anonymous one: the test sources are compiled in unity batches (tests/CMakeLists.txt),
// where this file's helpers would meet server_test.cpp's of the same names.
namespace parser_tests {

namespace http = tern::http;
using namespace std::literals;

// Parses a whole request; the error, or none.
std::error_code parse_request(std::string_view text, http::request_parser& p) {
  std::error_code ec;
  const bool done = p.parse(text, ec);
  if (!ec && !done) ec = make_error_code(http::error::partial_message);
  return ec;
}

std::error_code parse_request(std::string_view text, http::parser_limits limits = {}) {
  http::request_parser p(limits);
  return parse_request(text, p);
}

TEST(http_request_parser, a_get_with_fields) {
  const std::string text =
      "GET /items/42?full=1 HTTP/1.1\r\n"
      "Host: example.com\r\n"
      "User-Agent:  tern-test \t\r\n"
      "Accept: */*\r\n"
      "X-Empty:\r\n"
      "\r\n"
      "left over";
  http::request_parser p;
  std::error_code ec;
  ASSERT_TRUE(p.parse(text, ec)) << ec.message();
  const http::request_head& h = p.head();
  EXPECT_EQ(h.method, http::method::get);
  EXPECT_EQ(h.method_name, "GET");
  EXPECT_EQ(h.target, "/items/42?full=1");
  EXPECT_EQ(h.version, http::http11);
  EXPECT_EQ(h.host, "example.com");
  EXPECT_EQ(h.headers.size(), 4u);
  EXPECT_EQ(h.headers.get("user-agent"), "tern-test") << "whitespace around a value is not part of it";
  EXPECT_EQ(h.headers.get("ACCEPT"), "*/*");
  EXPECT_TRUE(h.headers.contains("x-empty"));
  EXPECT_EQ(h.headers.get("x-empty"), "");
  EXPECT_FALSE(h.headers.contains("content-length"));
  EXPECT_EQ(h.framing, http::body_framing::none);
  EXPECT_TRUE(h.keep_alive);
  EXPECT_FALSE(h.expect_continue);
  EXPECT_EQ(h.size, text.size() - "left over"sv.size());
  // Views into the input, no copies.
  EXPECT_EQ(h.target.data(), text.data() + 4);
}

// The parser notes where the first of each well-known field is; a lookup of one finds the first occurrence in any
// case, one that is absent finds nothing, and names near a known one (same length, same first letter) are not
// taken for it. A copied or moved parser's head views its own list.
TEST(http_request_parser, known_fields_are_found_by_position) {
  const std::string text =
      "POST /x HTTP/1.1\r\n"
      "X-Other: 1\r\n"
      "CONTENT-type: text/first\r\n"
      "Host: h\r\n"
      "Content-Type: text/second\r\n"
      "Content-Typo: typo\r\n"
      "Cookie: a=1\r\n"
      "Cookie: b=2\r\n"
      "Sec-WebSocket-Key: k\r\n"
      "\r\n";
  http::request_parser p;
  std::error_code ec;
  ASSERT_TRUE(p.parse(text, ec)) << ec.message();
  const http::field_list& f = p.head().headers;
  EXPECT_EQ(f.get("content-type"), "text/first");
  EXPECT_EQ(f.get("Content-Type"), "text/first");
  EXPECT_EQ(f.count("content-type"), 2u);
  EXPECT_EQ(f.get("content-typo"), "typo");
  EXPECT_EQ(f.get("cookie"), "a=1");
  EXPECT_EQ(f.get("sec-websocket-key"), "k");
  EXPECT_EQ(f.get("x-other"), "1");
  EXPECT_TRUE(f.contains("HOST"));
  EXPECT_FALSE(f.contains("accept"));
  EXPECT_EQ(f.get("accept"), "");
  EXPECT_FALSE(f.contains("content-length"));
  EXPECT_FALSE(f.contains("upgrade"));

  http::request_parser copy(p);
  http::request_parser moved(std::move(p));
  for (const http::request_parser* q : {&copy, &moved}) {
    const http::field_list& g = q->head().headers;
    ASSERT_EQ(g.size(), 8u);
    EXPECT_EQ(g[0].name.data(), text.data() + text.find("X-Other")) << "still views into the input";
    EXPECT_EQ(g.get("content-type"), "text/first");
    EXPECT_EQ(g.get("cookie"), "a=1");
    EXPECT_FALSE(g.contains("accept"));
  }
  http::request_parser assigned;
  assigned = copy;
  EXPECT_EQ(assigned.head().headers.get("host"), "h");
  copy.reset();
  const std::string other = "GET / HTTP/1.1\r\nSec-WebSocket-Version: 13\r\nHost: other\r\n\r\n";
  ASSERT_TRUE(copy.parse(other, ec)) << ec.message();
  EXPECT_EQ(copy.head().headers.get("host"), "other");
  EXPECT_EQ(assigned.head().headers.get("host"), "h") << "its own positions, not the parser's it was copied from";
  EXPECT_EQ(assigned.head().headers.get("sec-websocket-key"), "k");
}

TEST(http_request_parser, framing_and_connection) {
  struct expectation {
    std::string text;
    http::body_framing framing;
    std::uint64_t length;
    bool keep_alive;
  };
  const std::vector<expectation> cases = {
      {"POST /ping HTTP/1.1\r\nHost: h\r\nContent-Length: 15\r\n\r\n", http::body_framing::content_length, 15, true},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", http::body_framing::none, 0, true},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 7, 7\r\nContent-Length: 7\r\n\r\n",
       http::body_framing::content_length, 7, true},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", http::body_framing::chunked, 0, true},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: ,Chunked\r\n\r\n", http::body_framing::chunked, 0, true},
      {"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", http::body_framing::none, 0, false},
      {"GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, CLOSE\r\n\r\n", http::body_framing::none, 0, false},
      {"GET / HTTP/1.0\r\n\r\n", http::body_framing::none, 0, false},
      {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", http::body_framing::none, 0, true},
      {"GET / HTTP/1.9\r\nHost: h\r\n\r\n", http::body_framing::none, 0, true},
  };
  for (const auto& c : cases) {
    http::request_parser p;
    ASSERT_FALSE(parse_request(c.text, p)) << c.text;
    EXPECT_EQ(p.head().framing, c.framing) << c.text;
    EXPECT_EQ(p.head().content_length, c.length) << c.text;
    EXPECT_EQ(p.head().keep_alive, c.keep_alive) << c.text;
  }
}

TEST(http_request_parser, expect_upgrade_and_leading_empty_lines) {
  http::request_parser p;
  ASSERT_FALSE(parse_request("\r\n\r\nPUT /f HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n", p));
  EXPECT_EQ(p.head().method, http::method::put);
  EXPECT_TRUE(p.head().expect_continue);

  http::request_parser u;
  ASSERT_FALSE(parse_request("GET /ws HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n", u));
  EXPECT_TRUE(u.head().upgrade);

  http::request_parser o;
  ASSERT_FALSE(parse_request("BREW /pot HTTP/1.1\r\nHost: h\r\n\r\n", o));
  EXPECT_EQ(o.head().method, http::method::other);
  EXPECT_EQ(o.head().method_name, "BREW");
}

struct refusal {
  std::string name;
  std::string text;
  http::error error;
  int status;
};

// Every shape RFC 9112 says to refuse, and the request smuggling shapes in particular: each with the exact error
// and the exact status.
TEST(http_request_parser, malformed_and_smuggling_shapes_are_refused) {
  const std::vector<refusal> cases = {
      {"content-length and chunked", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
       http::error::content_length_with_chunked, 400},
      {"chunked and content-length", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
       http::error::content_length_with_chunked, 400},
      {"differing content-lengths", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
       http::error::conflicting_content_length, 400},
      {"differing content-length list", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 6\r\n\r\n",
       http::error::conflicting_content_length, 400},
      {"signed content-length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\n", http::error::bad_content_length, 400},
      {"hex content-length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x5\r\n\r\n", http::error::bad_content_length, 400},
      {"empty content-length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \r\n\r\n", http::error::bad_content_length, 400},
      {"content-length overflow", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999\r\n\r\n",
       http::error::bad_content_length, 400},
      {"chunked not last", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
       http::error::bad_transfer_encoding, 400},
      {"chunked twice", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
       http::error::bad_transfer_encoding, 400},
      {"chunked with a parameter", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked;q=1\r\n\r\n",
       http::error::bad_transfer_encoding, 400},
      {"chunked in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", http::error::bad_transfer_encoding, 400},
      {"unknown coding", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
       http::error::unsupported_transfer_encoding, 501},
      {"obs-fold", "GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n 2\r\n\r\n", http::error::obs_fold, 400},
      {"obs-fold with tab", "GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\t2\r\n\r\n", http::error::obs_fold, 400},
      {"space before colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", http::error::bad_header_name, 400},
      {"no colon", "GET / HTTP/1.1\r\nHost h\r\n\r\n", http::error::bad_header_name, 400},
      {"empty name", "GET / HTTP/1.1\r\n: h\r\nHost: h\r\n\r\n", http::error::bad_header_name, 400},
      {"bare CR in a value", "GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r2\r\n\r\n", http::error::bad_line_ending, 400},
      {"bare LF", "GET / HTTP/1.1\r\nHost: h\nX-A: 1\r\n\r\n", http::error::bad_line_ending, 400},
      {"LF-only head", "GET / HTTP/1.1\n\n", http::error::bad_line_ending, 400},
      {"NUL in a value", "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\0b\r\n\r\n"s, http::error::bad_header_value, 400},
      {"control in a value", "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x01" "b\r\n\r\n", http::error::bad_header_value, 400},
      {"missing host", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", http::error::missing_host, 400},
      {"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", http::error::duplicate_host, 400},
      {"method not a token", "G(ET / HTTP/1.1\r\nHost: h\r\n\r\n", http::error::bad_method, 400},
      {"two spaces", "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", http::error::bad_target, 400},
      {"space in target", "GET /a b HTTP/1.1\r\nHost: h\r\n\r\n", http::error::bad_version, 400},
      {"non-ASCII target", "GET /\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n", http::error::bad_target, 400},
      {"HTTP/0.9 shape", "GET /\r\n\r\n", http::error::bad_target, 400},
      {"lowercase version", "GET / http/1.1\r\nHost: h\r\n\r\n", http::error::bad_version, 400},
      {"version with trailing space", "GET / HTTP/1.1 \r\nHost: h\r\n\r\n", http::error::bad_version, 400},
      {"HTTP/2.0", "GET / HTTP/2.0\r\nHost: h\r\n\r\n", http::error::version_not_supported, 505},
      {"other expectation", "GET / HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\n\r\n", http::error::unsupported_expectation, 417},
  };
  for (const auto& c : cases) {
    const std::error_code ec = parse_request(c.text);
    EXPECT_EQ(ec, make_error_code(c.error)) << c.name << ": got " << ec.message();
    EXPECT_EQ(http::status_of(ec), c.status) << c.name;
  }
}

// RFC 9112 §3.2: a Host whose value is not uri-host [":" port] (RFC 3986: a reg-name, an IPv4 address, or an
// IPv6 or IPvFuture literal in brackets; the port digits only) is answered with 400, as a missing or repeated
// Host is. The empty value is what a client sends for a target without an authority.
TEST(http_request_parser, host_must_be_a_uri_host_and_port) {
  const std::vector<std::string> accepted = {
      "example.com", "Example.COM:8080", "localhost:", "127.0.0.1", "127.0.0.1:80", "[::1]", "[::1]:8080",
      "[2001:db8::7]", "[2001:DB8:0:0:8:800:200C:417A]", "[::ffff:192.0.2.1]", "[1:2:3:4:5:6:7::]",
      "[::1:2:3:4:5:6:7]", "[1:2:3:4:5:6:1.2.3.4]", "[::]", "[v1.fe80::a+en1]", "xn--bcher-kva.example",
      "a%20b", "sub_domain.ex~ample-", "!$&'()*+,;=", "", "999.999.999.999", ":80"};
  for (const std::string& host : accepted) {
    http::request_parser p;
    const std::string request = "GET / HTTP/1.1\r\nHost: " + host + "\r\n\r\n";  // the head's views point into it
    EXPECT_FALSE(parse_request(request, p)) << "Host: " << host;
    EXPECT_EQ(p.head().host, host);
  }
  const std::vector<std::string> refused = {
      "a b", "a/b", "a@b", "user@example.com:80", "a:b", "a:80:90", "a:8 0", "::1", "[::1", "[::1]x", "[::1]:a",
      "[1:2:3:4:5:6:7:8:9]", "[1:2:3:4:5:6:7:8::]", "[::1::2]", "[12345::]", "[g::]", "[:1]", "[1:]", "[:::]",
      "[::1.2.3]", "[::256.1.1.1]", "[::01.1.1.1]", "[1:2:3:4:5:6:7:1.2.3.4]", "[]", "[v1.]", "[v.a]", "[vx.a]",
      "[fe80::1%25eth0]", "a%2", "a%zz", "http://a", "a?b", "a#b", "a\\b", "a\"b", "a<b", "\xc3\xbc", "a\tb"};
  for (const std::string& host : refused) {
    const std::error_code ec = parse_request("GET / HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
    EXPECT_EQ(ec, http::error::bad_host) << "Host: " << host << ": " << ec.message();
    EXPECT_EQ(http::status_of(ec), 400) << "Host: " << host;
    // HTTP/1.0 need not send Host, but one it sends must be valid too.
    EXPECT_EQ(parse_request("GET / HTTP/1.0\r\nHost: " + host + "\r\n\r\n"), http::error::bad_host)
        << "HTTP/1.0, Host: " << host;
  }
}

// The usual Host (letters, digits, '-', '.', then ":port") is decided 16 bytes at a time, loaded from the value's
// start or ending at its end: every length up to and past 16, a bad byte or a bad port byte at every place, the
// field last (near the head's end) and first (more fields after it), give the byte-by-byte verdicts.
TEST(http_request_parser, host_checked_16_bytes_at_a_time_as_byte_by_byte) {
  const auto verdict = [](const std::string& host, bool last) {
    const std::string request = last ? "GET / HTTP/1.1\r\nAccept: */*\r\nHost: " + host + "\r\n\r\n"
                                     : "GET / HTTP/1.1\r\nHost: " + host + "\r\nAccept: */*\r\nUser-Agent: t\r\n\r\n";
    return parse_request(request);
  };
  for (bool last : {true, false}) {
    for (std::size_t n = 1; n <= 20; ++n) {
      std::string name(n, 'a');
      for (std::size_t i = 0; i < n; ++i) name[i] = "aZ9.-"[i % 5];
      EXPECT_FALSE(verdict(name, last)) << name;
      for (std::size_t port = 0; port <= 5 && n + 1 + port <= 20; ++port) {
        const std::string with_port = name + ":" + std::string(port, '8');
        EXPECT_FALSE(verdict(with_port, last)) << with_port;
        for (std::size_t i = n + 1; i < with_port.size(); ++i) {
          std::string bad = with_port;
          bad[i] = 'x';
          EXPECT_EQ(verdict(bad, last), http::error::bad_host) << bad;
        }
      }
      for (std::size_t i = 0; i < n; ++i) {
        for (char c : {'"', '/', '@', '[', '\x80'}) {  // (a space would be trimmed at the ends)
          std::string bad = name;
          bad[i] = c;
          EXPECT_EQ(verdict(bad, last), http::error::bad_host) << bad;
        }
        for (char c : {'_', '~', '!', '='}) {  // host characters the plain check leaves to the full one
          std::string other = name;
          other[i] = c;
          EXPECT_FALSE(verdict(other, last)) << other;
        }
      }
    }
  }
}

TEST(http_errors, a_message_cut_short_is_an_end_of_stream_and_nothing_else_is) {
  const std::error_code partial = http::error::partial_message;
  EXPECT_TRUE(partial == tern::condition::end_of_stream);
  EXPECT_FALSE(partial == std::errc::protocol_error);
  for (http::error e : {http::error::bad_method, http::error::body_too_large, http::error::header_timeout,
                        http::error::bad_response}) {
    const std::error_code ec = e;
    EXPECT_FALSE(ec == tern::condition::end_of_stream) << ec.message();
  }
  // The standard conditions still hold.
  EXPECT_TRUE(std::error_code(http::error::header_timeout) == std::errc::timed_out);
  EXPECT_TRUE(std::error_code(http::error::body_too_large) == std::errc::message_size);
  EXPECT_TRUE(std::error_code(http::error::bad_method) == std::errc::protocol_error);
}

TEST(http_request_parser, limits_are_refused_with_their_status) {
  http::parser_limits limits;
  limits.max_request_line = 64;
  limits.max_header_bytes = 128;
  limits.max_headers = 4;
  limits.max_body = 1000;
  const std::string long_target = "GET /" + std::string(100, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n";
  EXPECT_EQ(parse_request(long_target, limits), http::error::request_line_too_long);
  EXPECT_EQ(http::status_of(parse_request(long_target, limits)), 414);
  const std::string big_field = "GET / HTTP/1.1\r\nHost: h\r\nX-A: " + std::string(200, 'a') + "\r\n\r\n";
  EXPECT_EQ(parse_request(big_field, limits), http::error::headers_too_large);
  EXPECT_EQ(http::status_of(parse_request(big_field, limits)), 431);
  const std::string many = "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n";
  EXPECT_EQ(parse_request(many, limits), http::error::too_many_headers);
  EXPECT_EQ(http::status_of(parse_request(many, limits)), 431);
  const std::string big_body = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1001\r\n\r\n";
  EXPECT_EQ(parse_request(big_body, limits), http::error::body_too_large);
  EXPECT_EQ(http::status_of(parse_request(big_body, limits)), 413);
  EXPECT_EQ(parse_request("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n", limits), std::error_code{});

  // A limit is enforced before the head is complete: an endless request line or header section is refused as soon
  // as it passes its limit, not buffered for ever.
  http::request_parser p(limits);
  std::error_code ec;
  EXPECT_FALSE(p.parse("GET /" + std::string(70, 'a'), ec));
  EXPECT_EQ(ec, http::error::request_line_too_long);
  http::request_parser q(limits);
  EXPECT_FALSE(q.parse("GET / HTTP/1.1\r\nX: " + std::string(130, 'a'), ec));
  EXPECT_EQ(ec, http::error::headers_too_large);
  // Empty lines before a request line are skipped, but not without end.
  http::request_parser r(limits);
  std::string empty_lines;
  for (int i = 0; i < 40; ++i) empty_lines += "\r\n";
  EXPECT_FALSE(r.parse(empty_lines, ec));
  EXPECT_EQ(ec, http::error::request_line_too_long);
}

// The same request, cut at every possible point and fed the way a server's buffer grows: the result is the same
// as parsing it whole, and no call before the last reports it complete.
TEST(http_request_parser, every_split_parses_the_same) {
  const std::string text =
      "\r\nPOST /upload?x=1 HTTP/1.1\r\nHost: example.org:8080\r\nContent-Length: 12\r\nX-Long: "
      "abcdefghijklmnopqrstuvwxyz\r\n\r\n";
  for (std::size_t cut = 0; cut < text.size(); ++cut) {
    http::request_parser p;
    std::error_code ec;
    EXPECT_FALSE(p.parse(std::string_view(text).substr(0, cut), ec)) << cut;
    ASSERT_FALSE(ec) << cut << ": " << ec.message();
    ASSERT_TRUE(p.parse(text, ec)) << cut;
    EXPECT_EQ(p.head().target, "/upload?x=1");
    EXPECT_EQ(p.head().content_length, 12u);
    EXPECT_EQ(p.head().headers.get("x-long"), "abcdefghijklmnopqrstuvwxyz");
    EXPECT_EQ(p.head().size, text.size());
  }
  // One byte at a time.
  http::request_parser p;
  std::error_code ec;
  for (std::size_t n = 1; n < text.size(); ++n) ASSERT_FALSE(p.parse(std::string_view(text).substr(0, n), ec));
  EXPECT_TRUE(p.parse(text, ec));
}

TEST(http_request_parser, reset_parses_the_next_request_with_the_same_memory) {
  http::request_parser p;
  std::error_code ec;
  ASSERT_TRUE(p.parse("GET /a HTTP/1.1\r\nHost: h\r\nX-1: 1\r\n\r\n", ec));
  EXPECT_EQ(p.head().headers.size(), 2u);
  p.reset();
  ASSERT_TRUE(p.parse("GET /b HTTP/1.1\r\nHost: h\r\n\r\n", ec));
  EXPECT_EQ(p.head().target, "/b");
  EXPECT_EQ(p.head().headers.size(), 1u);
  EXPECT_FALSE(p.head().headers.contains("x-1"));
}

// ---- responses ----

std::error_code parse_response(std::string_view text, http::response_parser& p,
                               http::method m = http::method::get) {
  std::error_code ec;
  const bool done = p.parse(text, m, ec);
  if (!ec && !done) ec = make_error_code(http::error::partial_message);
  return ec;
}

TEST(http_response_parser, status_line_and_framing) {
  http::response_parser p;
  ASSERT_FALSE(parse_response("HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\n", p));
  EXPECT_EQ(p.head().status, 200);
  EXPECT_EQ(p.head().reason, "OK");
  EXPECT_EQ(p.head().framing, http::body_framing::content_length);
  EXPECT_EQ(p.head().content_length, 13u);
  EXPECT_TRUE(p.head().keep_alive);

  struct expectation {
    std::string text;
    http::method m;
    http::body_framing framing;
    bool keep_alive;
  };
  const std::vector<expectation> cases = {
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", http::method::get, http::body_framing::chunked, true},
      {"HTTP/1.1 200 OK\r\n\r\n", http::method::get, http::body_framing::until_close, false},
      {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", http::method::head, http::body_framing::none, true},
      {"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", http::method::get, http::body_framing::none, true},
      {"HTTP/1.1 304 Not Modified\r\n\r\n", http::method::get, http::body_framing::none, true},
      {"HTTP/1.1 100 Continue\r\n\r\n", http::method::post, http::body_framing::none, true},
      {"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", http::method::get, http::body_framing::content_length, true},
      {"HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n", http::method::get, http::body_framing::content_length, true},
      {"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n", http::method::get, http::body_framing::content_length, false},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n", http::method::get,
       http::body_framing::chunked, false},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", http::method::get, http::body_framing::until_close, false},
  };
  for (const auto& c : cases) {
    http::response_parser q;
    ASSERT_FALSE(parse_response(c.text, q, c.m)) << c.text;
    EXPECT_EQ(q.head().framing, c.framing) << c.text;
    EXPECT_EQ(q.head().keep_alive, c.keep_alive) << c.text;
  }
}

TEST(http_response_parser, malformed_responses_are_refused) {
  const std::vector<std::pair<std::string, http::error>> cases = {
      {"HTTP/1.1 20 OK\r\n\r\n", http::error::bad_status_line},
      {"HTTP/1.1 2000 OK\r\n\r\n", http::error::bad_status_line},
      {"HTTP/1.1 099 Odd\r\n\r\n", http::error::bad_status_line},
      {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", http::error::conflicting_content_length},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", http::error::bad_transfer_encoding},
      {"HTTP/1.1 200 OK\r\nX: 1\r\n 2\r\n\r\n", http::error::obs_fold},
      {"ICY 200 OK\r\n\r\n", http::error::bad_status_line},
      {"HTTP/2 200\r\n\r\n", http::error::bad_status_line},
      {"HTTP/3.0 200 OK\r\n\r\n", http::error::version_not_supported},
  };
  for (const auto& [text, error] : cases) {
    http::response_parser p;
    EXPECT_EQ(parse_response(text, p), make_error_code(error)) << text;
  }
}

// ---- chunked ----

// Decodes a whole chunked body fed in pieces of `piece` bytes; the body, or the error.
std::pair<std::string, std::error_code> decode_chunked(std::string_view in, std::size_t piece,
                                                       http::chunked_decoder::limits limits = {}) {
  http::chunked_decoder d(limits);
  std::string body;
  std::string pending;  // what has arrived and not been consumed
  std::size_t fed = 0;
  std::error_code ec;
  while (!d.done()) {
    const auto s = d.decode(pending, ec);
    if (ec) return {body, ec};
    body.append(s.data);
    pending.erase(0, s.consumed);
    if (d.done()) break;
    if (s.consumed == 0 || pending.empty()) {
      if (fed == in.size()) return {body, make_error_code(http::error::partial_message)};
      const std::size_t n = std::min(piece, in.size() - fed);
      pending.append(in.substr(fed, n));
      fed += n;
    }
  }
  return {body, pending.empty() && fed == in.size() ? std::error_code{} : make_error_code(http::error::bad_chunk_end)};
}

TEST(http_chunked_decoder, decodes_in_any_split) {
  const std::string in =
      "5\r\nhello\r\n"
      "1A;name=value;flag\r\nabcdefghijklmnopqrstuvwxyz\r\n"
      "0003  ;x\r\n, !\r\n"
      "0\r\nTrailer-A: 1\r\nTrailer-B:\r\n\r\n";
  for (std::size_t piece = 1; piece <= in.size(); ++piece) {
    auto [body, ec] = decode_chunked(in, piece);
    ASSERT_FALSE(ec) << piece << ": " << ec.message();
    EXPECT_EQ(body, "helloabcdefghijklmnopqrstuvwxyz, !") << piece;
  }
}

TEST(http_chunked_decoder, bad_framing_is_refused) {
  const std::vector<std::pair<std::string, http::error>> cases = {
      {"g\r\n", http::error::bad_chunk_size},
      {"\r\n", http::error::bad_chunk_size},
      {" 5\r\nhello\r\n0\r\n\r\n", http::error::bad_chunk_size},
      {"5 \r\nhello\r\n0\r\n\r\n", http::error::bad_chunk_size},
      {"-5\r\n", http::error::bad_chunk_size},
      {"0x5\r\n", http::error::bad_chunk_size},
      {"10000000000000000\r\n", http::error::bad_chunk_size},
      {"5\nhello\r\n", http::error::bad_chunk_size},
      {"5\r\nhelloX\r\n0\r\n\r\n", http::error::bad_chunk_end},
      {"5\r\nhello\n0\r\n\r\n", http::error::bad_chunk_end},
      {"5;a\x01\r\nhello\r\n", http::error::bad_chunk_extension},
      {"0\r\nBad Trailer: 1\r\n\r\n", http::error::bad_trailer},
      {"0\r\n folded: 1\r\n\r\n", http::error::bad_trailer},
      {"0\r\nA: 1\n\r\n", http::error::bad_trailer},
      {"0\r\n\rX", http::error::bad_line_ending},
  };
  for (const auto& [in, error] : cases) {
    auto [body, ec] = decode_chunked(in, in.size());
    EXPECT_EQ(ec, make_error_code(error)) << in << ": got " << ec.message();
  }
}

TEST(http_chunked_decoder, limits) {
  http::chunked_decoder::limits limits;
  limits.max_body = 10;
  limits.max_extensions = 8;
  limits.max_trailers = 16;
  EXPECT_FALSE(decode_chunked("5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", 3, limits).second);
  auto [b1, e1] = decode_chunked("5\r\nhello\r\n6\r\nworld!\r\n0\r\n\r\n", 3, limits);
  EXPECT_EQ(e1, http::error::body_too_large);
  EXPECT_EQ(http::status_of(e1), 413);
  EXPECT_EQ(b1, "hello") << "refused before any of the chunk that passes the limit";
  EXPECT_EQ(decode_chunked("5;abcdefghij\r\nhello\r\n0\r\n\r\n", 4, limits).second, http::error::bad_chunk_extension);
  EXPECT_EQ(decode_chunked("0\r\nA-Long-Trailer: 1234567890\r\n\r\n", 4, limits).second, http::error::bad_trailer);
}

TEST(http_chunked_decoder, data_is_a_view_of_the_input) {
  http::chunked_decoder d;
  const std::string in = "4\r\nwxyz\r\n";
  std::error_code ec;
  const auto s = d.decode(in, ec);
  ASSERT_FALSE(ec);
  EXPECT_EQ(s.data, "wxyz");
  EXPECT_EQ(s.data.data(), in.data() + 3);
  EXPECT_EQ(s.consumed, 7u);
  EXPECT_EQ(d.body_size(), 4u);
}

// ---- found by the fuzz targets (tests/fuzz/) ----

// A line over its limit, ended by a bare LF: when the bytes before the LF arrive first, the scanner refuses the
// partial line as too long (it must not wait for the rest); when the LF comes in the same read, the LF is checked
// first and the line is refused as a bare LF. The error, and the status answered (414 or 431, else 400), then
// depend on how TCP cut the bytes. The split parse cannot see the LF coming, so the whole parse must give the limit
// error too.
TEST(http_request_parser, a_line_over_its_limit_is_refused_alike_in_any_split) {
  http::parser_limits limits;
  limits.max_request_line = 16;
  limits.max_header_bytes = 32;
  const std::vector<std::pair<std::string, http::error>> cases = {
      {"GET /" + std::string(20, 'a') + "\n", http::error::request_line_too_long},
      {"GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(40, 'a') + "\n", http::error::headers_too_large},
  };
  for (const auto& [text, error] : cases) {
    EXPECT_EQ(parse_request(text, limits), error) << text << "whole: " << parse_request(text, limits).message();
    std::size_t otherwise = 0;  // cuts after which it is refused with another error
    std::error_code other;
    for (std::size_t cut = 1; cut < text.size(); ++cut) {
      http::request_parser p(limits);
      std::error_code ec;
      if (!p.parse(std::string_view(text).substr(0, cut), ec) && !ec) p.parse(text, ec);
      if (ec != error) {
        ++otherwise;
        other = ec;
      }
    }
    EXPECT_EQ(otherwise, 0u) << text << "cut in two, refused otherwise: " << other.message();
  }
}

// The same for a response's status line (over max_request_line: bad_status_line).
TEST(http_response_parser, a_status_line_over_its_limit_is_refused_alike_in_any_split) {
  http::parser_limits limits;
  limits.max_request_line = 16;
  const std::string text = "HTTP/1.1 200 OK" + std::string(20, 'x') + "\n";
  http::response_parser whole(limits);
  const std::error_code ec = parse_response(text, whole);
  EXPECT_EQ(ec, http::error::bad_status_line) << "whole: " << ec.message();
  std::size_t otherwise = 0;
  std::error_code other;
  for (std::size_t cut = 1; cut < text.size(); ++cut) {
    http::response_parser p(limits);
    std::error_code e;
    if (!p.parse(std::string_view(text).substr(0, cut), http::method::get, e) && !e) {
      p.parse(text, http::method::get, e);
    }
    if (e != http::error::bad_status_line) {
      ++otherwise;
      other = e;
    }
  }
  EXPECT_EQ(otherwise, 0u) << "cut in two, refused otherwise: " << other.message();
}

}  // namespace
