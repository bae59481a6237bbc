// The HTTP/1.1 head parsers (see tern/http/parser.hpp).
//
// Two passes over a head, each cheap: the scanner finds its end with memchr on '\n' as bytes arrive (checking
// that each LF ends a CRLF and that the limits hold), and once the end is there one pass over the complete head
// validates and splits it with character-class tables. Splitting only complete heads keeps the parse itself free
// of resumable state, which is where incremental parsers get their bugs.
#include "tern/http/parser.hpp"

#include <cstring>
#include <memory>

#include "chars.hpp"

namespace tern::http {

namespace {

using detail::hex_char;
using detail::host_char;
using detail::is;
using detail::known_field;
using detail::target_char;
using detail::token_char;
using detail::value_char;

std::error_code fail(std::error_code& ec, error e) noexcept {
  ec = make_error_code(e);
  return ec;
}

inline bool is_space(char c) noexcept { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view v) noexcept {
  while (!v.empty() && is_space(v.front())) v.remove_prefix(1);
  while (!v.empty() && is_space(v.back())) v.remove_suffix(1);
  return v;
}

// Calls f(element) for each non-empty element of a comma-separated list, trimmed; stops when f returns false.
template <class F>
void for_each_element(std::string_view list, F&& f) {
  while (true) {
    const std::size_t comma = list.find(',');
    const std::string_view element = trim(list.substr(0, comma));
    if (!element.empty() && !f(element)) return;
    if (comma == std::string_view::npos) return;
    list.remove_prefix(comma + 1);
  }
}

// The known field the n bytes at p name (any bytes: a known name's are letters, digits and '-', all tchars), or none.
inline known_field known_name(const char* p, std::size_t n) noexcept {
  const known_field k = detail::known_candidate(n, static_cast<unsigned char>(*p));
  if (k == known_field::none ||
      !detail::equals_lower(p, n, detail::known_field_names[static_cast<std::size_t>(k)])) {
    return known_field::none;
  }
  return k;
}

// "HTTP/1.1" at p (8 bytes available): false if malformed; the version, with a later 1.x as 1.1.
bool parse_version(const char* p, version& v, bool& supported) noexcept {
  if (std::memcmp(p, "HTTP/", 5) != 0) return false;
  const char major = p[5], minor = p[7];
  if (major < '0' || major > '9' || p[6] != '.' || minor < '0' || minor > '9') return false;
  supported = major == '1';
  v = {static_cast<std::uint8_t>(major - '0'), static_cast<std::uint8_t>(minor == '0' ? 0 : 1)};
  return true;
}

// The Content-Length field value: one decimal number, or a list of equal ones.
bool parse_content_length(std::string_view value, detail::field_facts& facts, std::error_code& ec) noexcept {
  bool any = false;
  bool ok = true;
  for_each_element(value, [&](std::string_view e) {
    std::uint64_t n = 0;
    for (char c : e) {
      if (c < '0' || c > '9' || n > (UINT64_MAX - 9) / 10) {
        ok = false;
        return false;
      }
      n = n * 10 + static_cast<unsigned>(c - '0');
    }
    if (facts.has_content_length && n != facts.content_length) {
      fail(ec, error::conflicting_content_length);
      return false;
    }
    facts.has_content_length = true;
    facts.content_length = n;
    any = true;
    return true;
  });
  if (ec) return false;
  if (!ok || !any) {
    fail(ec, error::bad_content_length);
    return false;
  }
  return true;
}

// Whether every byte from p to end is a tchar.
bool all_token(const char* p, const char* end) noexcept {
  while (p != end && is(*p, token_char)) ++p;
  return p == end;
}

// The usual Content-Length: 1 to 19 digits alone (no list, no overflow possible).
bool plain_number(std::string_view v, std::uint64_t& out) noexcept {
  if (v.empty() || v.size() > 19) return false;
  std::uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<unsigned>(c - '0');
  }
  out = n;
  return true;
}

void note_transfer_encoding(std::string_view value, detail::field_facts& facts) noexcept {
  facts.has_transfer_encoding = true;
  for_each_element(value, [&](std::string_view coding) {
    // chunked takes no parameters: "chunked;x=y" is some other coding, which makes chunked not last.
    const bool chunked = iequals(coding, "chunked");
    if (chunked && facts.chunked_seen) facts.chunked_twice = true;
    if (chunked) facts.chunked_seen = true; else facts.other_coding = true;
    facts.chunked_last = chunked;
    return true;
  });
}

void note_connection(std::string_view value, detail::field_facts& facts) noexcept {
  for_each_element(value, [&](std::string_view e) {
    if (iequals(e, "close")) facts.close = true;
    else if (iequals(e, "keep-alive")) facts.keep_alive = true;
    else if (iequals(e, "upgrade")) facts.upgrade_token = true;
    return true;
  });
}

// RFC 3986 dec-octet: 0-255 without leading zeros.
bool dec_octet(std::string_view s) noexcept {
  if (s.empty() || s.size() > 3 || (s.size() > 1 && s[0] == '0')) return false;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  return v <= 255;
}

// RFC 3986 IPv4address: four dec-octets.
bool ipv4_address(std::string_view s) noexcept {
  for (int i = 0; i < 3; ++i) {
    const std::size_t dot = s.find('.');
    if (dot == std::string_view::npos || !dec_octet(s.substr(0, dot))) return false;
    s.remove_prefix(dot + 1);
  }
  return dec_octet(s);
}

// RFC 3986 IPv6address: groups of 1-4 hex digits separated by ':', eight of them, or fewer with one "::" standing
// for the rest; the last two may be an IPv4 address.
bool ipv6_address(std::string_view s) noexcept {
  const std::size_t n = s.size();
  std::size_t i = 0;
  int groups = 0;
  bool compressed = false;
  if (s.substr(0, 2) == "::") {
    compressed = true;
    i = 2;
    if (i == n) return true;
  }
  for (;;) {
    std::size_t j = i;
    while (j < n && j - i < 5 && is(s[j], hex_char)) ++j;
    if (j < n && s[j] == '.') {  // the IPv4 tail, which ends the address
      if (!ipv4_address(s.substr(i))) return false;
      groups += 2;
      break;
    }
    if (j == i || j - i > 4) return false;
    ++groups;
    if (j == n) break;
    if (s[j] != ':') return false;
    if (j + 1 < n && s[j + 1] == ':') {
      if (compressed) return false;
      compressed = true;
      i = j + 2;
      if (i == n) break;
    } else {
      i = j + 1;
      if (i == n) return false;
    }
  }
  return compressed ? groups <= 7 : groups == 8;
}

// RFC 3986 IPvFuture: "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" ).
bool ipv_future(std::string_view s) noexcept {
  if (s.size() < 4 || (s[0] != 'v' && s[0] != 'V')) return false;
  std::size_t i = 1;
  while (i < s.size() && is(s[i], hex_char)) ++i;
  if (i == 1 || i + 1 >= s.size() || s[i] != '.') return false;
  for (char c : s.substr(i + 1)) {
    if (!is(c, host_char) && c != ':') return false;
  }
  return true;
}

// A Host field value: uri-host [":" port] (RFC 9112 §3.2, RFC 3986 §3.2.2 and §3.2.3). One pass over the usual
// value, a reg-name (unreserved, sub-delims, percent-encoded octets; an IPv4 address is one too) that the first
// ':' ends, then the port's digits.
bool valid_host(std::string_view v) noexcept {
  const char* p = v.data();
  const char* const end = p + v.size();
  if (p != end && *p == '[') {
    const std::size_t close = v.find(']');
    if (close == std::string_view::npos) return false;
    const std::string_view literal = v.substr(1, close - 1);
    if (!ipv6_address(literal) && !ipv_future(literal)) return false;
    p += close + 1;
    if (p != end && *p != ':') return false;
  } else {
    // The plain characters in a loop of their own (a table load and a test each; every request has a Host), a
    // percent-encoded octet now and then.
    for (;;) {
      while (p != end && is(*p, host_char)) ++p;
      if (p == end || *p != '%') break;
      if (end - p < 3 || !is(p[1], hex_char) || !is(p[2], hex_char)) return false;
      p += 3;
    }
    if (p != end && *p != ':') return false;
  }
  if (p == end) return true;
  for (++p; p != end; ++p) {  // the port, after the ':'
    if (*p < '0' || *p > '9') return false;
  }
  return true;
}

// The usual Host value decided 16 bytes at a time: letters, digits, '-' and '.', then nothing or ':' and digits. 1:
// valid; 0: anything else (a percent-encoded octet, a sub-delim, an IP literal, a byte that is not allowed), which
// valid_host then decides. [lo, hi) is readable memory around v (the head); v has at most 16 bytes.
int plain_host(std::string_view v, const char* lo, const char* hi) noexcept {
#if defined(__SSE2__)
  const std::size_t n = v.size();
  if (n == 0 || n > 16) return 0;
  // The 16 bytes loaded start at v, or end with it when v is near the end of the head; lanes of v: bits
  // [at, at + n) of the masks.
  const char* from = v.data();
  if (hi - from < 16) {
    if (static_cast<std::size_t>(v.data() - lo) + n < 16) return 0;
    from = v.data() + n - 16;
  }
  const unsigned at = static_cast<unsigned>(v.data() - from);
  const unsigned lanes = ((1u << n) - 1) << at;
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from));
  const auto at_most = [](__m128i a, char limit) {  // a <= limit, unsigned
    const __m128i l = _mm_set1_epi8(limit);
    return _mm_cmpeq_epi8(_mm_max_epu8(a, l), l);
  };
  const __m128i digit = at_most(_mm_sub_epi8(x, _mm_set1_epi8('0')), 9);
  const __m128i letter = at_most(_mm_sub_epi8(_mm_or_si128(x, _mm_set1_epi8(0x20)), _mm_set1_epi8('a')), 25);
  const __m128i dot_dash = _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('.')), _mm_cmpeq_epi8(x, _mm_set1_epi8('-')));
  const unsigned digits = static_cast<unsigned>(_mm_movemask_epi8(digit));
  const unsigned plain =
      static_cast<unsigned>(_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(letter, dot_dash), digit)));
  const unsigned other = lanes & ~plain;
  if (other == 0) return 1;  // a reg-name alone
  const unsigned k = static_cast<unsigned>(__builtin_ctz(other));
  if (from[k] != ':') return 0;
  const unsigned port = lanes & ~((2u << k) - 1);  // the lanes after the ':'
  return (port & ~digits) == 0 ? 1 : 0;
#else
  (void)v, (void)lo, (void)hi;
  return 0;
#endif
}

// The shared checks of Content-Length and Transfer-Encoding. For a request (the server decides the framing from
// these alone); a response is framed by the caller.
bool check_codings(const detail::field_facts& facts, std::error_code& ec) noexcept {
  if (!facts.has_transfer_encoding) return true;
  if (facts.chunked_twice) return !fail(ec, error::bad_transfer_encoding);
  return true;
}

}  // namespace

namespace detail {

std::size_t head_scanner::scan(std::string_view data, const parser_limits& limits, error first_line_too_long,
                               bool skip_empty_lines, std::error_code& ec) noexcept {
  const char* p = data.data();
  const std::size_t n = data.size();
  while (pos_ < n) {
    const char* nl = find_lf(p + pos_, p + n);
    if (nl == p + n) {
      pos_ = n;
      break;
    }
    const std::size_t i = static_cast<std::size_t>(nl - p);
    const bool crlf = i > line_start_ && p[i - 1] == '\r';
    const std::size_t line_size = i - line_start_ - (crlf ? 1 : 0);  // without its line ending
    // The limits before the line ending: a line that arrives in two reads is refused as too long before its end
    // is seen, so the same bytes in one read must get the same answer.
    if (in_first_line_ ? line_size > limits.max_request_line : i + 1 - fields_start_ > limits.max_header_bytes) {
      fail(ec, in_first_line_ ? first_line_too_long : error::headers_too_large);
      return 0;
    }
    if (!crlf) {
      fail(ec, error::bad_line_ending);
      return 0;
    }
    pos_ = line_start_ = i + 1;
    if (in_first_line_) {
      if (line_size == 0 && skip_empty_lines) {
        start_ = pos_;
        if (start_ > limits.max_request_line) {  // a flood of empty lines
          fail(ec, first_line_too_long);
          return 0;
        }
        continue;
      }
      in_first_line_ = false;
      fields_start_ = pos_;
      continue;
    }
    if (line_size == 0) return pos_;  // the empty line: the head ends here
  }
  // Incomplete: the partial line counts against the limits as well (+1: its CR may be there already).
  if (in_first_line_ ? n - line_start_ > limits.max_request_line + 1 : n - fields_start_ > limits.max_header_bytes) {
    fail(ec, in_first_line_ ? first_line_too_long : error::headers_too_large);
  }
  return 0;
}

bool parse_fields(const char* p, const char* end, const parser_limits& limits, std::vector<field>& out,
                  known_positions& known, field_facts& facts, std::error_code& ec) noexcept {
  out.clear();
  known.fill(0);
  // Every line up to end ends with CRLF (the scanner checked the LFs); end points at the final empty line.
  while (p != end) {
    if (is_space(*p)) return !fail(ec, error::obs_fold);
    // The name runs to the first ':' (the line's CR first: no colon, a bad name). A known name is compared whole,
    // which validates it; any other is checked to be a token byte by byte.
    const char* name = p;
    p = detail::find_colon_or_cr(p, end + 2);
    const std::size_t name_size = static_cast<std::size_t>(p - name);
    if (name_size == 0 || *p != ':') return !fail(ec, error::bad_header_name);
    const known_field k = known_name(name, name_size);
    if (k == known_field::none && !all_token(name, p)) return !fail(ec, error::bad_header_name);
    ++p;
    while (is_space(*p)) ++p;
    const char* value = p;
    p = detail::skip(p, end + 2, value_char);
    if (*p != '\r') return !fail(ec, error::bad_header_value);
    if (p[1] != '\n') return !fail(ec, error::bad_line_ending);
    const char* value_end = p;
    while (value_end != value && is_space(value_end[-1])) --value_end;
    p += 2;
    if (out.size() == limits.max_headers) return !fail(ec, error::too_many_headers);
    const std::string_view n(name, name_size);
    const std::string_view v(value, static_cast<std::size_t>(value_end - value));
    out.push_back({n, v});
    // The fields that frame the message or steer the connection, and the others a lookup finds by position.
    if (k == known_field::none) continue;
    std::uint32_t& first = known[static_cast<std::size_t>(k)];
    if (first == 0) first = static_cast<std::uint32_t>(out.size());
    switch (k) {
      case known_field::host:
        facts.host = v;
        ++facts.hosts;
        break;
      case known_field::expect:
        if (iequals(v, "100-continue")) facts.expect_continue = true;
        else facts.other_expectation = true;
        break;
      case known_field::upgrade:
        facts.has_upgrade = true;
        break;
      case known_field::connection:
        note_connection(v, facts);
        break;
      case known_field::content_length:
        if (!facts.has_content_length && plain_number(v, facts.content_length)) {
          facts.has_content_length = true;
        } else if (!parse_content_length(v, facts, ec)) {
          return false;
        }
        break;
      case known_field::transfer_encoding:
        note_transfer_encoding(v, facts);
        break;
      default: break;
    }
  }
  return true;
}

}  // namespace detail

// ---- parser_state ----

template <class Head>
detail::parser_state<Head>::parser_state(parser_limits limits) : limits_(limits) {
  fields_.reserve(limits_.max_headers < 32 ? limits_.max_headers : 32);
}

template <class Head>
detail::parser_state<Head>::parser_state(const parser_state& o)
    : limits_(o.limits_), scanner_(o.scanner_), fields_(o.fields_), known_(o.known_), head_(o.head_) {
  rebind();
}

template <class Head>
detail::parser_state<Head>::parser_state(parser_state&& o) noexcept
    : limits_(o.limits_), scanner_(o.scanner_), fields_(std::move(o.fields_)), known_(o.known_), head_(o.head_) {
  rebind();
}

template <class Head>
detail::parser_state<Head>& detail::parser_state<Head>::operator=(const parser_state& o) {
  if (this != &o) *this = parser_state(o);
  return *this;
}

template <class Head>
detail::parser_state<Head>& detail::parser_state<Head>::operator=(parser_state&& o) noexcept {
  limits_ = o.limits_;
  scanner_ = o.scanner_;
  fields_ = std::move(o.fields_);
  known_ = o.known_;
  head_ = o.head_;
  rebind();
  return *this;
}

template <class Head>
void detail::parser_state<Head>::reset() noexcept {
  scanner_.reset();
  fields_.clear();
  // Made again in place: assigning a temporary built it on the stack and copied it with loads that straddled its
  // stores (failed store-to-load forwards, one per request).
  std::destroy_at(&head_);
  std::construct_at(&head_);
}

// The head copied from another parser views that parser's fields: point it at this one's, which hold the same.
template <class Head>
void detail::parser_state<Head>::rebind() noexcept {
  if (!head_.headers.empty()) {
    head_.headers = field_list(std::span<const field>(fields_.data(), head_.headers.size()), known_);
  }
}

template class detail::parser_state<request_head>;
template class detail::parser_state<response_head>;

// ---- request_parser ----

bool request_parser::parse(std::string_view data, std::error_code& ec) noexcept {
  ec.clear();
  // The usual request is whole in the first bytes given (one read). Its end is then found with one search for
  // CRLF CRLF instead of the scanner's walk from line to line, and the head is parsed at once: parse_head accepts
  // CR and LF only as CRLF at the end of each line, so a head it accepts has the scanner's line endings, and one
  // short enough for both limits has the scanner's end. Any other case (incomplete, an empty line first, over a
  // limit's reach, refused) is left to the scanner and parsed again from there, which gives every verdict.
  if (scanner_.fresh()) {
    const std::size_t whole = detail::find_head_end(data.data(), data.size());
    if (whole != 0 && whole <= limits_.max_request_line + 2 && whole <= limits_.max_header_bytes &&
        data[0] != '\r' && data[0] != '\n') {
      if (parse_head(data, whole, ec)) return true;
      ec.clear();
      std::destroy_at(&head_);
      std::construct_at(&head_);
    }
  }
  const std::size_t end = scanner_.scan(data, limits_, error::request_line_too_long, true, ec);
  if (end == 0) return false;
  return parse_head(data, end, ec);
}

bool request_parser::parse_head(std::string_view data, std::size_t end, std::error_code& ec) noexcept {
  const char* p = data.data() + scanner_.start();
  request_head& h = head_;

  // method SP request-target SP HTTP-version CRLF
  const char* m = p;
  while (is(*p, token_char)) ++p;
  if (p == m || *p != ' ') return !fail(ec, error::bad_method);
  h.method_name = {m, static_cast<std::size_t>(p - m)};
  h.method = method_from(h.method_name);
  const char* t = ++p;
  p = detail::skip(p, data.data() + end, target_char);
  if (p == t || *p != ' ') return !fail(ec, error::bad_target);
  h.target = {t, static_cast<std::size_t>(p - t)};
  ++p;
  // The scanner saw this line end with CRLF, so the 10 bytes of "HTTP/1.1\r\n" are there unless the line is shorter,
  // in which case a CR or LF among them fails the comparison first.
  bool supported = false;
  const std::size_t rest = static_cast<std::size_t>(data.data() + end - p);
  if (rest < 10 || !parse_version(p, h.version, supported) || p[8] != '\r' || p[9] != '\n') {
    return !fail(ec, error::bad_version);
  }
  if (!supported) return !fail(ec, error::version_not_supported);
  p += 10;

  detail::field_facts facts;
  if (!detail::parse_fields(p, data.data() + end - 2, limits_, fields_, known_, facts, ec)) return false;
  h.headers = field_list(fields_, known_);
  h.size = end;

  const bool is_http11 = h.version == http11;
  if (facts.has_transfer_encoding) {
    if (facts.has_content_length) return !fail(ec, error::content_length_with_chunked);
    if (!is_http11 || facts.chunked_twice || !facts.chunked_last) return !fail(ec, error::bad_transfer_encoding);
    // chunked last, but with other codings before it: ours to decode, and tern decodes none.
    if (facts.other_coding) return !fail(ec, error::unsupported_transfer_encoding);
    h.framing = body_framing::chunked;
  } else if (facts.has_content_length) {
    if (facts.content_length > limits_.max_body) return !fail(ec, error::body_too_large);
    h.content_length = facts.content_length;
    h.framing = facts.content_length != 0 ? body_framing::content_length : body_framing::none;
  }
  if (facts.hosts > 1) return !fail(ec, error::duplicate_host);
  if (is_http11 && facts.hosts == 0) return !fail(ec, error::missing_host);
  if (facts.hosts == 1 && !plain_host(facts.host, data.data(), data.data() + end) && !valid_host(facts.host)) {
    return !fail(ec, error::bad_host);
  }
  if (is_http11 && facts.other_expectation) return !fail(ec, error::unsupported_expectation);
  h.host = facts.host;
  h.expect_continue = is_http11 && facts.expect_continue;
  h.keep_alive = is_http11 ? !facts.close : facts.keep_alive && !facts.close;
  h.upgrade = facts.upgrade_token && facts.has_upgrade;
  return true;
}

// ---- response_parser ----

bool response_parser::parse(std::string_view data, method request_method, std::error_code& ec) noexcept {
  ec.clear();
  const std::size_t end = scanner_.scan(data, limits_, error::bad_status_line, false, ec);
  if (end == 0) return false;
  return parse_head(data, end, request_method, ec);
}

bool response_parser::parse_head(std::string_view data, std::size_t end, method request_method,
                                 std::error_code& ec) noexcept {
  const char* p = data.data();
  const char* const head_end = p + end;
  response_head& h = head_;

  // HTTP-version SP 3DIGIT [SP reason-phrase] CRLF (a missing SP before an empty reason is tolerated)
  bool supported = false;
  if (end < 14 || !parse_version(p, h.version, supported) || p[8] != ' ') return !fail(ec, error::bad_status_line);
  if (!supported) return !fail(ec, error::version_not_supported);
  p += 9;
  int status = 0;
  for (int i = 0; i < 3; ++i, ++p) {
    if (*p < '0' || *p > '9') return !fail(ec, error::bad_status_line);
    status = status * 10 + (*p - '0');
  }
  if (status < 100) return !fail(ec, error::bad_status_line);
  h.status = status;
  if (*p == ' ') {
    const char* r = ++p;
    p = detail::skip(p, head_end, value_char);
    h.reason = {r, static_cast<std::size_t>(p - r)};
  }
  if (p[0] != '\r' || p[1] != '\n') return !fail(ec, error::bad_status_line);
  p += 2;

  detail::field_facts facts;
  if (!detail::parse_fields(p, head_end - 2, limits_, fields_, known_, facts, ec)) return false;
  if (!check_codings(facts, ec)) return false;
  h.headers = field_list(fields_, known_);
  h.size = end;

  const bool is_http11 = h.version == http11;
  h.keep_alive = is_http11 ? !facts.close : facts.keep_alive && !facts.close;
  if (has_no_body(request_method, status)) {
    h.framing = body_framing::none;
  } else if (facts.has_transfer_encoding) {
    // RFC 9112 §6.3: Transfer-Encoding overrides Content-Length; a message with both is not reused. Without
    // chunked last, the body runs to the end of the connection.
    if (facts.chunked_last && facts.other_coding) return !fail(ec, error::unsupported_transfer_encoding);
    h.framing = facts.chunked_last ? body_framing::chunked : body_framing::until_close;
    if (facts.has_content_length || !facts.chunked_last || !is_http11) h.keep_alive = false;
  } else if (facts.has_content_length) {
    if (facts.content_length > limits_.max_body) return !fail(ec, error::body_too_large);
    h.content_length = facts.content_length;
    h.framing = body_framing::content_length;
  } else {
    h.framing = body_framing::until_close;
    h.keep_alive = false;
  }
  return true;
}

}  // namespace tern::http
