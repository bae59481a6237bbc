// What the request and response targets check alike: where a head ends and what its field lines are, worked out
// here the plain way (by looking for CRLFs in the whole input) and compared with the parser's answer; the pieces of
// a plain judge of whether a head is to be accepted; and the one driver that feeds a message to a parser whole,
// after reset(), a byte at a time and in pieces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string_view>
#include <system_error>
#include <vector>

#include "fuzz_support.hpp"
#include "tern/http/chunked.hpp"
#include "tern/http/parser.hpp"

namespace tern::fuzz {

namespace http = tern::http;

// The character classes of RFC 9110, written out again here rather than taken from the library, so that a wrong
// table there shows as a difference.
inline bool token_char(char c) noexcept {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return c != '\0' && std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}
inline bool value_char(char c) noexcept {  // HTAB, SP, VCHAR, obs-text
  const auto u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7f);
}
inline bool blank(char c) noexcept { return c == ' ' || c == '\t'; }

inline std::string_view trim(std::string_view v) noexcept {
  while (!v.empty() && blank(v.front())) v.remove_prefix(1);
  while (!v.empty() && blank(v.back())) v.remove_suffix(1);
  return v;
}

inline bool same_ignoring_case(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// The non-empty elements of a comma-separated list, trimmed, over every field of that name, in order.
inline std::vector<std::string_view> list_elements(const std::vector<http::field>& fields, std::string_view name) {
  std::vector<std::string_view> out;
  for (const http::field& f : fields) {
    if (!same_ignoring_case(f.name, name)) continue;
    std::string_view list = f.value;
    for (;;) {
      const std::size_t comma = list.find(',');
      const std::string_view element = trim(list.substr(0, comma));
      if (!element.empty()) out.push_back(element);
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  return out;
}

inline bool list_has(const std::vector<http::field>& fields, std::string_view name, std::string_view token) {
  for (std::string_view e : list_elements(fields, name)) {
    if (same_ignoring_case(e, token)) return true;
  }
  return false;
}

inline std::size_t count_fields(const std::vector<http::field>& fields, std::string_view name) {
  std::size_t n = 0;
  for (const http::field& f : fields) n += same_ignoring_case(f.name, name) ? 1 : 0;
  return n;
}

// The one value every Content-Length element states (decimal digits, no overflow), or false if they are not all
// such a number and the same one.
inline bool content_length_value(const std::vector<http::field>& fields, std::uint64_t& value) {
  bool any = false;
  for (std::string_view e : list_elements(fields, "content-length")) {
    std::uint64_t n = 0;
    for (char c : e) {
      if (c < '0' || c > '9' || n > (UINT64_MAX - 9) / 10) return false;
      n = n * 10 + static_cast<unsigned>(c - '0');
    }
    if (any && n != value) return false;
    value = n;
    any = true;
  }
  return any;
}

// A parser's answer, kept apart from the parser: its head's field list is the parser's own memory, which the next
// parse reuses.
template <class Head>
struct outcome {
  bool done = false;
  std::error_code ec;
  Head head{};                      // when done; head.headers is left empty: the fields are below
  std::vector<http::field> fields;
  std::string_view buffer;          // the bytes parsed, which the views point into
};

// An error the parsers report: one of tern::http's, with a status a server can answer.
inline void check_error(std::error_code ec) {
  if (!ec) return;
  TERN_FUZZ_CHECK(&ec.category() == &http::category() && !ec.message().empty());
  const int status = http::status_of(ec);
  TERN_FUZZ_CHECK(status == 400 || status == 413 || status == 414 || status == 417 || status == 431 ||
                  status == 501 || status == 505);
}

template <class Head>
outcome<Head> take(const Head& head, bool done, std::error_code ec, std::string_view buffer) {
  TERN_FUZZ_CHECK(!(done && ec));  // complete, or failed, never both
  check_error(ec);
  outcome<Head> o;
  o.done = done;
  o.ec = ec;
  o.buffer = buffer;
  if (done) {
    o.head = head;
    o.head.headers = {};
    o.fields.assign(head.headers.begin(), head.headers.end());
  }
  return o;
}

template <class Head>
bool same_fields(const outcome<Head>& a, const outcome<Head>& b) noexcept {
  if (a.fields.size() != b.fields.size()) return false;
  for (std::size_t i = 0; i < a.fields.size(); ++i) {
    if (!same_view(a.fields[i].name, a.buffer, b.fields[i].name, b.buffer) ||
        !same_view(a.fields[i].value, a.buffer, b.fields[i].value, b.buffer)) {
      return false;
    }
  }
  return true;
}

// Every LF in bytes ends a CRLF: a head parsed or waited on has no bare LF.
inline bool lf_only_after_cr(std::string_view bytes) noexcept {
  for (std::size_t i = bytes.find('\n'); i != std::string_view::npos; i = bytes.find('\n', i + 1)) {
    if (i == 0 || bytes[i - 1] != '\r') return false;
  }
  return true;
}

// A complete head: it ends at the first empty line after its first line, within the input, and holds no bare LF.
inline void check_head_end(std::string_view buffer, std::size_t first_line_at, std::size_t size) {
  TERN_FUZZ_CHECK(size > 0 && size <= buffer.size());
  const std::size_t empty_line = buffer.find("\r\n\r\n", first_line_at);
  TERN_FUZZ_CHECK(empty_line != std::string_view::npos && empty_line + 4 == size);
  TERN_FUZZ_CHECK(lf_only_after_cr(buffer.substr(0, size)));
}

// An incomplete head without an error: no empty line after the first line yet, no bare LF, and nothing over a
// limit (the parser must refuse a head as soon as it passes one, not wait for the rest).
inline void check_incomplete(std::string_view buffer, std::size_t first_line_at, const http::parser_limits& limits) {
  TERN_FUZZ_CHECK(buffer.find("\r\n\r\n", first_line_at) == std::string_view::npos);
  TERN_FUZZ_CHECK(lf_only_after_cr(buffer));
  TERN_FUZZ_CHECK(first_line_at <= limits.max_request_line);
  const std::size_t eol = buffer.find("\r\n", first_line_at);
  if (eol == std::string_view::npos) {
    // The +1: the line's CR may be there already.
    TERN_FUZZ_CHECK(buffer.size() - first_line_at <= limits.max_request_line + 1);
  } else {
    TERN_FUZZ_CHECK(eol - first_line_at <= limits.max_request_line);
    TERN_FUZZ_CHECK(buffer.size() - (eol + 2) <= limits.max_header_bytes);
  }
}

// The field lines of a complete head, from fields_at to its final empty line, split the plain way: one field per
// line, the name up to the first colon, the value the rest without the blanks around it. The parser's list must be
// exactly that, field for field, at the same places, and within the limits.
inline void check_fields(std::string_view buffer, std::size_t fields_at, std::size_t size,
                         const std::vector<http::field>& fields, const http::parser_limits& limits) {
  TERN_FUZZ_CHECK(fields_at + 2 <= size);
  TERN_FUZZ_CHECK(size - fields_at <= limits.max_header_bytes);
  TERN_FUZZ_CHECK(fields.size() <= limits.max_headers);
  const std::size_t end = size - 2;  // the final empty line
  std::size_t at = fields_at;
  std::size_t i = 0;
  while (at < end) {
    const std::size_t eol = buffer.find("\r\n", at);
    TERN_FUZZ_CHECK(eol != std::string_view::npos && eol < end);
    const std::string_view line = buffer.substr(at, eol - at);
    const std::size_t colon = line.find(':');
    TERN_FUZZ_CHECK(colon != std::string_view::npos && colon > 0);
    TERN_FUZZ_CHECK(i < fields.size());
    const http::field& f = fields[i];
    TERN_FUZZ_CHECK(f.name == line.substr(0, colon) && offset_in(f.name, buffer) == at);
    for (char c : f.name) TERN_FUZZ_CHECK(token_char(c));
    const std::string_view raw_value = line.substr(colon + 1);
    const std::string_view value = trim(raw_value);
    TERN_FUZZ_CHECK(f.value == value);
    if (!value.empty()) {
      TERN_FUZZ_CHECK(offset_in(f.value, buffer) == offset_in(raw_value, buffer) + (value.data() - raw_value.data()));
    }
    for (char c : f.value) TERN_FUZZ_CHECK(value_char(c));
    ++i;
    at = eol + 2;
  }
  TERN_FUZZ_CHECK(at == end && i == fields.size());
}

// ---- a second judge of heads, for comparison ----
// Whether a head should be accepted, decided from the bytes the plain way (split at CRLFs and colons, the rules of
// RFC 9112 as parser.hpp lists them), to compare with the parser's answer. Only where the limits on the first line
// and the header section cannot be reached (the input is shorter than both); max_headers and max_body it applies.

enum class verdict { incomplete, accepted, refused };

// The field lines from at to end (the final empty line): each a token, a colon, then value characters (no CR, no
// control but HTAB) with optional whitespace around the value; none starts with whitespace (obs-fold). Gives the
// fields, values trimmed.
inline bool plain_fields(std::string_view buffer, std::size_t at, std::size_t end, std::vector<http::field>& out) {
  while (at < end) {
    const std::size_t eol = buffer.find("\r\n", at);
    const std::string_view line = buffer.substr(at, eol - at);
    const std::size_t colon = line.find(':');
    if (colon == 0 || colon == std::string_view::npos) return false;
    for (char c : line.substr(0, colon)) {
      if (!token_char(c)) return false;
    }
    for (char c : line.substr(colon + 1)) {
      if (!value_char(c)) return false;
    }
    out.push_back({line.substr(0, colon), trim(line.substr(colon + 1))});
    at = eol + 2;
  }
  return true;
}

// Every Content-Length field holds a list of one or more decimal numbers, all the same over every field.
inline bool plain_content_lengths(const std::vector<http::field>& fields) {
  std::uint64_t value = 0;
  for (const http::field& f : fields) {
    if (!same_ignoring_case(f.name, "content-length")) continue;
    if (!content_length_value({f}, value)) return false;
  }
  return count_fields(fields, "content-length") == 0 || content_length_value(fields, value);
}

// The start of a head's first line, the end of the head: incomplete without its empty line; refused on a bare LF
// before that (or anywhere, while incomplete).
inline verdict plain_head_end(std::string_view buffer, std::size_t first_line_at, std::size_t& size) {
  const std::size_t empty_line = buffer.find("\r\n\r\n", first_line_at);
  size = empty_line == std::string_view::npos ? buffer.size() : empty_line + 4;
  if (!lf_only_after_cr(buffer.substr(0, size))) return verdict::refused;
  return empty_line == std::string_view::npos ? verdict::incomplete : verdict::accepted;
}

// Compares a parser's answer with the judge's.
template <class Outcome>
void check_verdict(const Outcome& r, verdict expected, std::size_t size, const char* judge_file, int judge_line) {
  const verdict got = r.done ? verdict::accepted : r.ec ? verdict::refused : verdict::incomplete;
  if (got == expected && (!r.done || r.head.size == size)) return;
  std::fprintf(stderr, "the parser: %s (%s), size %zu; the plain judge (%s:%d): %s, size %zu\n",
               got == verdict::accepted ? "accepted" : got == verdict::refused ? "refused" : "incomplete",
               r.ec ? r.ec.message().c_str() : "no error", r.done ? r.head.size : 0, judge_file, judge_line,
               expected == verdict::accepted ? "accepted" : expected == verdict::refused ? "refused" : "incomplete",
               size);
  invariant_failed("the parser and the plain judge disagree", __FILE__, __LINE__);
}

// The bytes of the body after a complete head, when the body ends within rest and is well formed (the next message
// starts after them); npos otherwise.
inline std::size_t body_bytes(http::body_framing framing, std::uint64_t content_length, std::string_view rest,
                              std::uint64_t max_body) {
  switch (framing) {
    case http::body_framing::none: return 0;
    case http::body_framing::content_length:
      return content_length <= rest.size() ? static_cast<std::size_t>(content_length) : std::string_view::npos;
    case http::body_framing::chunked: {
      http::chunked_decoder::limits limits;
      limits.max_body = max_body;
      http::chunked_decoder d(limits);
      std::size_t at = 0;
      while (!d.done()) {
        std::error_code ec;
        const auto s = d.decode(rest.substr(at), ec);
        at += s.consumed;
        if (ec || s.consumed == 0) return std::string_view::npos;
      }
      return at;
    }
    case http::body_framing::until_close: break;
  }
  return std::string_view::npos;
}

// Reports two answers that should have been the same and stops. print(label, outcome) describes one.
template <class Outcome, class Print>
[[noreturn]] void differ(const Outcome& expected, const Outcome& got, const char* how, Print print) {
  print("whole input", expected);
  print(how, got);
  invariant_failed(how, __FILE__, __LINE__);
}

// Where a complete message's head ends and how its body is framed: where the next pipelined message starts.
struct message_end {
  bool done = false;  // the head is complete (and accepted)
  std::size_t size = 0;
  http::body_framing framing = http::body_framing::none;
  std::uint64_t content_length = 0;
};

// Every check of one message at the start of data, for either parser:
// - parse(parser, bytes) gives an outcome; check(outcome) checks one answer on its own (complete or not);
// - same(a, b) compares two answers over buffers with the same bytes; print describes one when they differ.
// The answer to the whole input is the reference: the same bytes after reset(), a byte at a time, in pieces, with
// the connection's parser (reset after the previous message), and with the default limits (when it was accepted
// with smaller ones) must give the same. Leaves the connection's parser reset, for the next message.
template <class Parser, class Parse, class Check, class Same, class Print>
message_end check_message(std::string_view data, const http::parser_limits& limits, choices& pick,
                          Parser& connection, Parse parse, Check check, Same same, Print print) {
  const exact_copy whole(data);
  Parser parser(limits);
  const auto answer = parse(parser, whole.view());
  check(answer);
  const auto expect_same = [&](const auto& got, const char* how) {
    if (!same(answer, got)) differ(answer, got, how, print);
  };

  // reset() forgets the message: the same bytes give the same answer, and a reused connection parser gives the
  // answer a new one gives.
  parser.reset();
  expect_same(parse(parser, whole.view()), "the same bytes after reset()");
  expect_same(parse(connection, whole.view()), "the connection's parser, reset after the previous message");

  // A byte more at a time, as the slowest client sends it. Views into the one buffer: a copy per byte would be
  // quadratic.
  {
    Parser slow(limits);
    auto got = parse(slow, whole.view().substr(0, data.empty() ? 0 : 1));
    for (std::size_t n = 1; n < data.size() && !got.done && !got.ec;) got = parse(slow, whole.view().substr(0, ++n));
    check(got);
    expect_same(got, "fed a byte at a time");
  }

  // Cut at places derived from the input, each prefix in a buffer of its own of exactly its size (so that a read
  // past the bytes given so far is caught, as is a view kept into an earlier, freed, buffer).
  {
    const std::vector<std::size_t> cuts = cut_points(data, pick);
    const bool copy = cuts.size() <= 64;  // beyond that, copying would cost more than the parsing
    Parser cut(limits);
    std::unique_ptr<exact_copy> prefix;
    decltype(parse(cut, data)) got;
    for (std::size_t n : cuts) {
      std::string_view bytes = whole.view().substr(0, n);
      if (copy) {
        prefix = std::make_unique<exact_copy>(bytes);
        bytes = prefix->view();
      }
      got = parse(cut, bytes);
      if (got.done || got.ec) break;
    }
    check(got);
    expect_same(got, "fed in pieces");
  }

  // Limits only refuse: what smaller limits accept, the default ones accept the same.
  if (answer.done) {
    Parser roomy;
    expect_same(parse(roomy, whole.view()), "with the default limits");
  }
  connection.reset();
  if (!answer.done) return message_end{};
  return message_end{true, answer.head.size, answer.head.framing, answer.head.content_length};
}

}  // namespace tern::fuzz
