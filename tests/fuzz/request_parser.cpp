// libFuzzer target: http::request_parser given arbitrary bytes the way a server's connection gives them (a growing
// buffer, pipelined requests one after the other), checking what it answers and not only that it survives:
// - the answer is the same whether the bytes come whole, a byte at a time or in pieces, after reset(), and from a
//   parser reused for the connection: the same error, or the same head with every view at the same place;
// - a complete head lies within the input and ends at its first empty line; its request line is method, target
//   and version as the head says; its fields are exactly the lines before the empty line; the framing, Host (a
//   host and port by RFC 3986), Expect, keep-alive and upgrade agree with those fields; every limit holds;
// - an incomplete head without an error has no empty line yet and is within the limits;
// - a head accepted with small limits is accepted, the same, with the default ones;
// - where the limits on line and section sizes cannot be reached, the parser accepts exactly what a plain judge
//   of the rules accepts (written here without the parser's structure: split at CRLFs, spaces and colons).
// One input in four is parsed with small limits (chosen from its bytes), so that every limit is reached.
#include <arpa/inet.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "head_checks.hpp"

namespace {

namespace http = tern::http;
using namespace tern::fuzz;

using result = outcome<http::request_head>;

result parse(http::request_parser& p, std::string_view bytes) {
  std::error_code ec;
  const bool done = p.parse(bytes, ec);
  return take(p.head(), done, ec, bytes);
}

bool same(const result& a, const result& b) {
  if (a.done != b.done || a.ec != b.ec) return false;
  if (!a.done) return true;
  const http::request_head& x = a.head;
  const http::request_head& y = b.head;
  return x.method == y.method && same_view(x.method_name, a.buffer, y.method_name, b.buffer) &&
         same_view(x.target, a.buffer, y.target, b.buffer) && x.version == y.version && x.framing == y.framing &&
         x.content_length == y.content_length && x.keep_alive == y.keep_alive &&
         x.expect_continue == y.expect_continue && x.upgrade == y.upgrade &&
         same_view(x.host, a.buffer, y.host, b.buffer) && x.size == y.size && same_fields(a, b);
}

void print(const char* label, const result& r) {
  std::fprintf(stderr, "%s: done=%d error=%s", label, r.done, r.ec ? r.ec.message().c_str() : "none");
  if (r.done) {
    const http::request_head& h = r.head;
    std::fprintf(stderr,
                 " method=%.*s target=%.*s version=%u.%u framing=%d content_length=%llu keep_alive=%d"
                 " expect_continue=%d upgrade=%d size=%zu fields=%zu",
                 static_cast<int>(h.method_name.size()), h.method_name.data(), static_cast<int>(h.target.size()),
                 h.target.data(), h.version.major, h.version.minor, static_cast<int>(h.framing),
                 static_cast<unsigned long long>(h.content_length), h.keep_alive, h.expect_continue, h.upgrade,
                 h.size, r.fields.size());
  }
  std::fprintf(stderr, "\n");
}

// A Host value as RFC 3986 has it, judged without the parser's structure: uri-host [":" port], where uri-host is
// "[" IPv6address or IPvFuture "]" (the IPv6 address judged by the C library's inet_pton, whose grammar is the
// RFC's) or a reg-name (unreserved, sub-delims, %HH), and port is digits.
bool judge_host(std::string_view v) {
  const auto in = [](char c, std::string_view set) { return set.find(c) != std::string_view::npos; };
  const std::string_view alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const std::string_view hex = "0123456789abcdefABCDEF";
  const std::string_view unreserved_or_sub_delims = "-._~!$&'()*+,;=";
  std::string_view host = v, port;
  if (!v.empty() && v[0] == '[') {
    const std::size_t close = v.find(']');
    if (close == std::string_view::npos) return false;
    host = v.substr(1, close - 1);
    if (close + 1 < v.size()) {
      if (v[close + 1] != ':') return false;
      port = v.substr(close + 2);
    }
    unsigned char address[16];
    const bool v6 = host.size() < 64 && host.find('\0') == std::string_view::npos &&
                    inet_pton(AF_INET6, std::string(host).c_str(), address) == 1;
    bool future = host.size() >= 4 && (host[0] == 'v' || host[0] == 'V');
    std::size_t dot = future ? host.find('.') : 0;
    future = future && dot != std::string_view::npos && dot > 1 && dot + 1 < host.size();
    for (std::size_t i = 1; future && i < host.size(); ++i) {
      const char c = host[i];
      future = i < dot ? in(c, hex) : i == dot || in(c, alnum) || in(c, unreserved_or_sub_delims) || c == ':';
    }
    if (!v6 && !future) return false;
  } else {
    const std::size_t colon = v.find(':');
    if (colon != std::string_view::npos) {
      host = v.substr(0, colon);
      port = v.substr(colon + 1);
    }
    for (std::size_t i = 0; i < host.size(); ++i) {
      const char c = host[i];
      if (c == '%') {
        if (host.size() - i < 3 || !in(host[i + 1], hex) || !in(host[i + 2], hex)) return false;
        i += 2;
      } else if (!in(c, alnum) && !in(c, unreserved_or_sub_delims)) {
        return false;
      }
    }
  }
  for (char c : port) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Empty lines before a request line are skipped (RFC 9112 §2.2).
std::size_t first_line_at(std::string_view bytes) {
  std::size_t at = 0;
  while (bytes.substr(at, 2) == "\r\n") at += 2;
  return at;
}

void check_complete(const result& r, const http::parser_limits& limits) {
  const std::string_view buffer = r.buffer;
  const http::request_head& h = r.head;
  const std::size_t start = first_line_at(buffer);
  check_head_end(buffer, start, h.size);
  const std::string_view head = buffer.substr(0, h.size);
  TERN_FUZZ_CHECK(inside(h.method_name, head) && inside(h.target, head) && inside(h.host, head));
  for (const http::field& f : r.fields) TERN_FUZZ_CHECK(inside(f.name, head) && inside(f.value, head));

  // The request line is "method SP target SP HTTP/1.d", method and target where the head says.
  TERN_FUZZ_CHECK(start <= limits.max_request_line);
  const std::size_t eol = buffer.find("\r\n", start);
  const std::string_view line = buffer.substr(start, eol - start);
  TERN_FUZZ_CHECK(line.size() <= limits.max_request_line);
  TERN_FUZZ_CHECK(!h.method_name.empty() && offset_in(h.method_name, buffer) == start);
  for (char c : h.method_name) TERN_FUZZ_CHECK(token_char(c));
  TERN_FUZZ_CHECK(h.method == http::method_from(h.method_name));
  const std::size_t m = h.method_name.size();
  TERN_FUZZ_CHECK(line.size() == m + 1 + h.target.size() + 1 + 8);
  TERN_FUZZ_CHECK(line[m] == ' ' && !h.target.empty() && offset_in(h.target, buffer) == start + m + 1);
  for (char c : h.target) TERN_FUZZ_CHECK(c > 0x20 && c < 0x7f);
  const std::string_view version = line.substr(line.size() - 8);
  TERN_FUZZ_CHECK(line[line.size() - 9] == ' ');
  TERN_FUZZ_CHECK(version.substr(0, 7) == "HTTP/1." && version[7] >= '0' && version[7] <= '9');
  TERN_FUZZ_CHECK(h.version == (version[7] == '0' ? http::http10 : http::http11));

  check_fields(buffer, eol + 2, h.size, r.fields, limits);

  // What the fields say about the message and the connection.
  const bool http11 = h.version == http::http11;
  const std::size_t hosts = count_fields(r.fields, "host");
  TERN_FUZZ_CHECK(hosts <= 1 && (hosts == 1 || !http11));
  const http::field_list fields(r.fields);
  TERN_FUZZ_CHECK(h.host == fields.get("host") && (h.host.empty() || h.host.data() == fields.get("host").data()));
  TERN_FUZZ_CHECK(hosts == 0 || judge_host(h.host));

  const bool has_te = count_fields(r.fields, "transfer-encoding") != 0;
  const bool has_cl = count_fields(r.fields, "content-length") != 0;
  std::uint64_t length = 0;
  TERN_FUZZ_CHECK(!has_cl || content_length_value(r.fields, length));
  switch (h.framing) {
    case http::body_framing::none:
      TERN_FUZZ_CHECK(!has_te && length == 0 && h.content_length == 0);
      break;
    case http::body_framing::content_length:
      TERN_FUZZ_CHECK(!has_te && has_cl && h.content_length == length && length != 0 && length <= limits.max_body);
      break;
    case http::body_framing::chunked: {
      // Exactly one coding, chunked, and no Content-Length beside it.
      const auto codings = list_elements(r.fields, "transfer-encoding");
      TERN_FUZZ_CHECK(http11 && !has_cl && h.content_length == 0 && codings.size() == 1 &&
                      same_ignoring_case(codings[0], "chunked"));
      break;
    }
    case http::body_framing::until_close:  // a request's body is never delimited by the end of the connection
      TERN_FUZZ_CHECK(h.framing != http::body_framing::until_close);
      break;
  }

  bool only_100_continue = true;
  for (const http::field& f : r.fields) {
    if (same_ignoring_case(f.name, "expect") && !same_ignoring_case(f.value, "100-continue")) {
      only_100_continue = false;
    }
  }
  TERN_FUZZ_CHECK(!http11 || only_100_continue);
  TERN_FUZZ_CHECK(h.expect_continue == (http11 && count_fields(r.fields, "expect") != 0));

  const bool close = list_has(r.fields, "connection", "close");
  const bool keep_alive = list_has(r.fields, "connection", "keep-alive");
  TERN_FUZZ_CHECK(h.keep_alive == (http11 ? !close : keep_alive && !close));
  TERN_FUZZ_CHECK(h.upgrade ==
                  (list_has(r.fields, "connection", "upgrade") && count_fields(r.fields, "upgrade") != 0));
}

// The plain judge (head_checks.hpp) of a request.
verdict judge(std::string_view buffer, const http::parser_limits& limits, std::size_t& size) {
  const std::size_t start = first_line_at(buffer);
  const verdict end = plain_head_end(buffer, start, size);
  if (end != verdict::accepted) return end;
  // method SP target SP HTTP/d.d, the major version 1
  const std::size_t eol = buffer.find("\r\n", start);
  const std::string_view line = buffer.substr(start, eol - start);
  const std::size_t sp1 = line.find(' ');
  if (sp1 == 0 || sp1 == std::string_view::npos) return verdict::refused;
  for (char c : line.substr(0, sp1)) {
    if (!token_char(c)) return verdict::refused;
  }
  const std::string_view rest = line.substr(sp1 + 1);
  const std::size_t sp2 = rest.find(' ');
  if (sp2 == 0 || sp2 == std::string_view::npos) return verdict::refused;
  for (char c : rest.substr(0, sp2)) {
    if (c <= 0x20 || c >= 0x7f) return verdict::refused;
  }
  const std::string_view version = rest.substr(sp2 + 1);
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9' || version[5] != '1') {
    return verdict::refused;
  }
  const bool http11 = version[7] != '0';
  std::vector<http::field> fields;
  if (!plain_fields(buffer, eol + 2, size - 2, fields) || fields.size() > limits.max_headers) return verdict::refused;
  // Framing: Content-Length well formed and within max_body; Transfer-Encoding only in HTTP/1.1, without
  // Content-Length, and exactly "chunked".
  if (!plain_content_lengths(fields)) return verdict::refused;
  const bool has_te = count_fields(fields, "transfer-encoding") != 0;
  const bool has_cl = count_fields(fields, "content-length") != 0;
  if (has_te) {
    const auto codings = list_elements(fields, "transfer-encoding");
    if (has_cl || !http11 || codings.size() != 1 || !same_ignoring_case(codings[0], "chunked")) {
      return verdict::refused;
    }
  } else if (has_cl) {
    std::uint64_t length = 0;
    content_length_value(fields, length);
    if (length > limits.max_body) return verdict::refused;
  }
  // One Host (none allowed in HTTP/1.0), a host and port; in HTTP/1.1, no expectation but 100-continue.
  const std::size_t hosts = count_fields(fields, "host");
  if (hosts > 1 || (http11 && hosts == 0)) return verdict::refused;
  if (hosts == 1 && !judge_host(http::field_list(fields).get("host"))) return verdict::refused;
  if (http11) {
    for (const http::field& f : fields) {
      if (same_ignoring_case(f.name, "expect") && !same_ignoring_case(f.value, "100-continue")) {
        return verdict::refused;
      }
    }
  }
  return verdict::accepted;
}

void check(const result& r, const http::parser_limits& limits) {
  if (r.done) {
    check_complete(r, limits);
  } else if (!r.ec) {
    check_incomplete(r.buffer, first_line_at(r.buffer), limits);
  }
  if (r.buffer.size() <= limits.max_request_line && r.buffer.size() <= limits.max_header_bytes) {
    std::size_t size = 0;
    const verdict expected = judge(r.buffer, limits, size);
    check_verdict(r, expected, size, __FILE__, __LINE__);
  }
}

// Small limits, each one or left at its default, so that each limit's own refusal is reached with the others
// passing.
http::parser_limits small_limits(choices& pick) {
  http::parser_limits l;
  if (pick.one_in(2)) l.max_request_line = pick.below(80);
  if (pick.one_in(2)) l.max_header_bytes = pick.below(300);
  if (pick.one_in(2)) l.max_headers = pick.below(10);
  if (pick.one_in(2)) l.max_body = pick.below(2000);
  return l;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const std::string_view data(reinterpret_cast<const char*>(bytes), size);
  choices pick(data);
  const http::parser_limits limits = pick.one_in(4) ? small_limits(pick) : http::parser_limits{};
  const auto check_with_limits = [&](const result& r) { check(r, limits); };

  // Pipelined requests: each one's head, then its body skipped, then the next.
  http::request_parser connection(limits);
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
