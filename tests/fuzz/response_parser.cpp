// libFuzzer target: http::response_parser given arbitrary bytes the way a client's connection gives them, with the
// same checks as the request target (see request_parser.cpp): the same answer whole, a byte at a time, in pieces,
// after reset() and from a reused parser; a complete head within the input, its status line and fields as the
// bytes say, its framing as RFC 9112 §6.3 derives it from the request method, the status and the fields; and, where
// the limits on line and section sizes cannot be reached, accepted exactly when a plain judge of the rules accepts
// it.
//
// The first byte of an input is the method of the request answered, as (byte - '0') mod 10 in the order of
// http::method: '0' other, '1' GET, '2' HEAD, '3' POST, '4' PUT, '5' DELETE, '6' CONNECT, '7' OPTIONS, '8' TRACE,
// '9' PATCH (any byte means one). The rest is the responses: interim (1xx) ones, a final one, its body, the next.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "head_checks.hpp"

namespace {

namespace http = tern::http;
using namespace tern::fuzz;

using result = outcome<http::response_head>;

http::method request_method = http::method::get;  // of the input being run

result parse(http::response_parser& p, std::string_view bytes) {
  std::error_code ec;
  const bool done = p.parse(bytes, request_method, ec);
  return take(p.head(), done, ec, bytes);
}

bool same(const result& a, const result& b) {
  if (a.done != b.done || a.ec != b.ec) return false;
  if (!a.done) return true;
  const http::response_head& x = a.head;
  const http::response_head& y = b.head;
  return x.status == y.status && same_view(x.reason, a.buffer, y.reason, b.buffer) && x.version == y.version &&
         x.framing == y.framing && x.content_length == y.content_length && x.keep_alive == y.keep_alive &&
         x.size == y.size && same_fields(a, b);
}

void print(const char* label, const result& r) {
  std::fprintf(stderr, "%s: done=%d error=%s", label, r.done, r.ec ? r.ec.message().c_str() : "none");
  if (r.done) {
    const http::response_head& h = r.head;
    std::fprintf(stderr, " status=%d reason=%.*s version=%u.%u framing=%d content_length=%llu keep_alive=%d"
                 " size=%zu fields=%zu",
                 h.status, static_cast<int>(h.reason.size()), h.reason.data(), h.version.major, h.version.minor,
                 static_cast<int>(h.framing), static_cast<unsigned long long>(h.content_length), h.keep_alive,
                 h.size, r.fields.size());
  }
  std::fprintf(stderr, " (request method %d)\n", static_cast<int>(request_method));
}

void check_complete(const result& r, const http::parser_limits& limits) {
  const std::string_view buffer = r.buffer;
  const http::response_head& h = r.head;
  check_head_end(buffer, 0, h.size);  // no empty lines are skipped before a status line
  const std::string_view head = buffer.substr(0, h.size);
  TERN_FUZZ_CHECK(inside(h.reason, head));
  for (const http::field& f : r.fields) TERN_FUZZ_CHECK(inside(f.name, head) && inside(f.value, head));

  // The status line is "HTTP/1.d SP 3DIGIT [SP reason]", status and reason where the head says.
  const std::size_t eol = buffer.find("\r\n");
  const std::string_view line = buffer.substr(0, eol);
  TERN_FUZZ_CHECK(line.size() <= limits.max_request_line);
  TERN_FUZZ_CHECK(line.size() >= 12 && line.substr(0, 7) == "HTTP/1." && line[7] >= '0' && line[7] <= '9' &&
                  line[8] == ' ');
  TERN_FUZZ_CHECK(h.version == (line[7] == '0' ? http::http10 : http::http11));
  int status = 0;
  for (char c : line.substr(9, 3)) {
    TERN_FUZZ_CHECK(c >= '0' && c <= '9');
    status = status * 10 + (c - '0');
  }
  TERN_FUZZ_CHECK(h.status == status && status >= 100);
  if (line.size() == 12) {
    TERN_FUZZ_CHECK(h.reason.empty());
  } else {
    TERN_FUZZ_CHECK(line[12] == ' ' && h.reason == line.substr(13));
    TERN_FUZZ_CHECK(h.reason.empty() || offset_in(h.reason, buffer) == 13);
    for (char c : h.reason) TERN_FUZZ_CHECK(value_char(c));
  }

  check_fields(buffer, eol + 2, h.size, r.fields, limits);

  // The framing (RFC 9112 §6.3, in its order) and whether the connection may be reused.
  const bool http11 = h.version == http::http11;
  const auto codings = list_elements(r.fields, "transfer-encoding");
  const bool has_te = count_fields(r.fields, "transfer-encoding") != 0;
  const bool has_cl = count_fields(r.fields, "content-length") != 0;
  std::uint64_t length = 0;
  TERN_FUZZ_CHECK(!has_cl || content_length_value(r.fields, length));  // refused even where it frames nothing
  std::size_t chunked = 0;
  for (std::string_view c : codings) chunked += same_ignoring_case(c, "chunked") ? 1 : 0;
  TERN_FUZZ_CHECK(chunked <= 1);
  const bool chunked_last = !codings.empty() && same_ignoring_case(codings.back(), "chunked");
  const bool close = list_has(r.fields, "connection", "close");
  const bool keep_alive = list_has(r.fields, "connection", "keep-alive");

  if (http::has_no_body(request_method, status)) {
    TERN_FUZZ_CHECK(h.framing == http::body_framing::none);
  } else if (has_te) {
    TERN_FUZZ_CHECK(h.framing == (chunked_last ? http::body_framing::chunked : http::body_framing::until_close));
    if (chunked_last) TERN_FUZZ_CHECK(codings.size() == 1);  // tern decodes no other coding before chunked
    if (has_cl || !chunked_last || !http11) TERN_FUZZ_CHECK(!h.keep_alive);
  } else if (has_cl) {
    TERN_FUZZ_CHECK(h.framing == http::body_framing::content_length && h.content_length == length &&
                    length <= limits.max_body);
  } else {
    TERN_FUZZ_CHECK(h.framing == http::body_framing::until_close);
  }
  TERN_FUZZ_CHECK(h.framing == http::body_framing::content_length || h.content_length == 0);
  TERN_FUZZ_CHECK(h.framing != http::body_framing::until_close || !h.keep_alive);
  if (h.keep_alive) TERN_FUZZ_CHECK(!close && (http11 || keep_alive));
}

// The plain judge (head_checks.hpp) of a response.
verdict judge(std::string_view buffer, const http::parser_limits& limits, std::size_t& size) {
  const verdict end = plain_head_end(buffer, 0, size);
  if (end != verdict::accepted) return end;
  // HTTP/1.d SP 3DIGIT, a status from 100, then nothing or SP and a reason of value characters
  const std::size_t eol = buffer.find("\r\n");
  const std::string_view line = buffer.substr(0, eol);
  if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[7] < '0' || line[7] > '9' || line[8] != ' ') {
    return verdict::refused;
  }
  for (char c : line.substr(9, 3)) {
    if (c < '0' || c > '9') return verdict::refused;
  }
  if (line[9] == '0') return verdict::refused;
  if (line.size() > 12) {
    if (line[12] != ' ') return verdict::refused;
    for (char c : line.substr(13)) {
      if (!value_char(c)) return verdict::refused;
    }
  }
  const int status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
  std::vector<http::field> fields;
  if (!plain_fields(buffer, eol + 2, size - 2, fields) || fields.size() > limits.max_headers) return verdict::refused;
  // Content-Length well formed and chunked at most once, whatever the response; the rest only where they frame it.
  if (!plain_content_lengths(fields)) return verdict::refused;
  const auto codings = list_elements(fields, "transfer-encoding");
  std::size_t chunked = 0;
  for (std::string_view c : codings) chunked += same_ignoring_case(c, "chunked") ? 1 : 0;
  if (chunked > 1) return verdict::refused;
  if (http::has_no_body(request_method, status)) return verdict::accepted;
  if (count_fields(fields, "transfer-encoding") != 0) {
    // chunked last is decoded, after another coding it is not (tern decodes none); without it, until close.
    const bool chunked_last = !codings.empty() && same_ignoring_case(codings.back(), "chunked");
    return chunked_last && codings.size() > 1 ? verdict::refused : verdict::accepted;
  }
  std::uint64_t length = 0;
  if (content_length_value(fields, length) && length > limits.max_body) return verdict::refused;
  return verdict::accepted;
}

void check(const result& r, const http::parser_limits& limits) {
  if (r.done) {
    check_complete(r, limits);
  } else if (!r.ec) {
    check_incomplete(r.buffer, 0, limits);
  }
  if (r.buffer.size() <= limits.max_request_line && r.buffer.size() <= limits.max_header_bytes) {
    std::size_t size = 0;
    const verdict expected = judge(r.buffer, limits, size);
    check_verdict(r, expected, size, __FILE__, __LINE__);
  }
}

http::parser_limits small_limits(choices& pick) {
  http::parser_limits l;
  if (pick.one_in(2)) l.max_request_line = pick.below(60);
  if (pick.one_in(2)) l.max_header_bytes = pick.below(300);
  if (pick.one_in(2)) l.max_headers = pick.below(10);
  if (pick.one_in(2)) l.max_body = pick.below(2000);
  return l;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  if (size == 0) return 0;
  request_method = static_cast<http::method>((bytes[0] + 2u) % 10u);  // (byte - '0') mod 10: '0' is 48
  const std::string_view data(reinterpret_cast<const char*>(bytes) + 1, size - 1);
  choices pick(data);
  const http::parser_limits limits = pick.one_in(4) ? small_limits(pick) : http::parser_limits{};
  const auto check_with_limits = [&](const result& r) { check(r, limits); };

  // Interim responses, the final one and its body, the next response on the connection, ...
  http::response_parser connection(limits);
  std::string_view rest = data;
  for (int i = 0; i < 8 && !rest.empty(); ++i) {
    const message_end end = check_message(rest, limits, pick, connection, parse, check_with_limits, same, print);
    if (!end.done) break;
    rest.remove_prefix(end.size);
    const std::size_t body = body_bytes(end.framing, end.content_length, rest, limits.max_body);
    if (body == std::string_view::npos) break;
    rest.remove_prefix(body);
  }
  return 0;
}
