// The RESP3 reply parser (see tern/redis/resp.hpp).
//
// Each call looks at one node: the type byte, the line up to CRLF (searched for only within max_line), and for
// blob types the payload and its CRLF. Nothing is consumed until the whole node is there, so the only state kept
// between calls is the stack of open aggregates (how many values each still expects), bounded by max_depth and
// allocated once.
#include "tern/redis/resp.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>

namespace tern::redis::resp {

namespace {

constexpr std::uint32_t depth_cap = 1024;

// A decimal integer with an optional sign, nothing else; false on junk or overflow.
bool parse_integer(std::string_view s, std::int64_t& out) noexcept {
  if (s.empty()) return false;
  bool negative = false;
  std::size_t i = 0;
  if (s[0] == '-' || s[0] == '+') {
    negative = s[0] == '-';
    i = 1;
    if (s.size() == 1) return false;
  }
  std::uint64_t v = 0;
  if (s.size() - i <= 18) {
    // Up to 18 digits cannot overflow: no bound test per digit (lengths and counts are one to a few digits).
    for (; i < s.size(); ++i) {
      const unsigned d = static_cast<unsigned char>(s[i]) - '0';
      if (d > 9) return false;
      v = v * 10 + d;
    }
    out = negative ? static_cast<std::int64_t>(0 - v) : static_cast<std::int64_t>(v);
    return true;
  }
  const std::uint64_t bound = negative ? std::uint64_t{1} << 63 : (std::uint64_t{1} << 63) - 1;
  for (; i < s.size(); ++i) {
    const unsigned d = static_cast<unsigned char>(s[i]) - '0';
    if (d > 9) return false;
    if (v > (bound - d) / 10) return false;
    v = v * 10 + d;
  }
  out = negative ? static_cast<std::int64_t>(0 - v) : static_cast<std::int64_t>(v);
  return true;
}

bool parse_double(std::string_view s, double& out) noexcept {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  // from_chars takes "inf", "-inf" and "nan", which RESP3 uses, and decimal or exponent forms; but also
  // "infinity" and hexadecimal-free spellings only, so what it takes whole is a number.
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

bool is_big_number(std::string_view s) noexcept {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

const char* to_string(type t) noexcept {
  switch (t) {
    case type::simple_string: return "simple_string";
    case type::simple_error: return "simple_error";
    case type::blob_string: return "blob_string";
    case type::blob_error: return "blob_error";
    case type::verbatim_string: return "verbatim_string";
    case type::integer: return "integer";
    case type::double_type: return "double";
    case type::big_number: return "big_number";
    case type::boolean: return "boolean";
    case type::null: return "null";
    case type::array: return "array";
    case type::map: return "map";
    case type::set: return "set";
    case type::push: return "push";
    case type::attribute: return "attribute";
  }
  return "unknown";
}

parser::parser(const resp::limits& l) : limits_(l) {
  limits_.max_depth = std::clamp<std::uint32_t>(limits_.max_depth, 1, depth_cap);
  stack_.resize(limits_.max_depth);
}

void parser::reset() noexcept {
  depth_ = 0;
  attribute_levels_ = 0;
  pending_attribute_ = false;
  failed_.clear();
}

parser::result parser::fail(error e) noexcept {
  failed_ = make_error_code(e);
  result r;
  r.what = status::failed;
  r.ec = failed_;
  return r;
}

void parser::value_done() noexcept {
  pending_attribute_ = false;
  while (depth_ > 0) {
    level& top = stack_[depth_ - 1];
    if (--top.left > 0) return;
    --depth_;
    if (top.attribute) {
      // An attribute is not a value of its parent: the value it annotates comes next.
      --attribute_levels_;
      if (depth_ == 0) pending_attribute_ = true;
      return;
    }
  }
}

// Inline in next(): the result is built where next() returns it, not copied out of a call.
[[gnu::always_inline]] inline parser::result parser::scalar(resp::type t, std::size_t consumed,
                                                            std::string_view text) noexcept {
  result r;
  r.what = status::node;
  r.consumed = consumed;
  r.n.type = t;
  r.n.depth = depth_;
  r.n.in_attribute = attribute_levels_ != 0;
  r.n.value = text;
  r.n.size = text.size();
  value_done();
  return r;
}

parser::result parser::aggregate(resp::type t, std::size_t consumed, std::uint64_t count) noexcept {
  const bool attribute = t == type::attribute;
  if (count > limits_.max_elements) return fail(error::aggregate_too_large);
  result r;
  r.what = status::node;
  r.consumed = consumed;
  r.n.type = t;
  r.n.depth = depth_;
  r.n.in_attribute = attribute || attribute_levels_ != 0;
  r.n.size = count;
  const std::uint64_t values = (t == type::map || attribute) ? count * 2 : count;
  if (values == 0) {
    if (!attribute) {
      value_done();
    } else if (depth_ == 0) {
      pending_attribute_ = true;  // even an empty attribute is followed by the value it annotates
    }
    return r;
  }
  if (depth_ == limits_.max_depth) return fail(error::nesting_too_deep);
  stack_[depth_++] = level{values, attribute};
  if (attribute) ++attribute_levels_;
  return r;
}

parser::result parser::next(const char* data, std::size_t size) {
  if (failed_) {
    result r;
    r.what = status::failed;
    r.ec = failed_;
    return r;
  }
  if (size < 3) {
    // The shortest node is three bytes ("_\r\n"); a longer line is checked below.
    if (size > 0 && std::memchr(data, '\n', size) != nullptr) return fail(error::protocol_error);
    return {};
  }
  // The line: the type byte, then up to CR LF, looked for only as far as max_line allows. Most lines are a few
  // bytes ("$32", ":1", "+OK"): a short scan finds their CR before a call to memchr would have started.
  const std::size_t window = std::min(size - 1, limits_.max_line + 1);
  // The scan notes a bare LF on its way, so that a short simple string needs no second pass.
  const char* cr = nullptr;
  bool lf = false;
  const std::size_t near = std::min<std::size_t>(window, 16);
  for (std::size_t i = 1; i <= near; ++i) {
    if (data[i] == '\r') {
      cr = data + i;
      break;
    }
    lf |= data[i] == '\n';
  }
  if (cr == nullptr && window > near) cr = static_cast<const char*>(std::memchr(data + 1 + near, '\r', window - near));
  if (cr == nullptr) {
    if (std::memchr(data, '\n', std::min(size, window + 1)) != nullptr) return fail(error::protocol_error);
    if (size - 1 > limits_.max_line) return fail(error::line_too_long);
    return {};
  }
  const std::size_t line_size = static_cast<std::size_t>(cr - data) - 1;
  if (line_size > limits_.max_line) return fail(error::line_too_long);
  if (static_cast<std::size_t>(cr - data) + 1 == size) {
    // CR is the last byte: LF may follow. A bare LF before it fails the line now, as it does while no CR has come.
    if (std::memchr(data, '\n', static_cast<std::size_t>(cr - data)) != nullptr) return fail(error::protocol_error);
    return {};
  }
  if (cr[1] != '\n') return fail(error::protocol_error);
  const std::string_view line(data + 1, line_size);
  const std::size_t header = line_size + 3;

  // A bare LF can hide only in a simple string or error: every other line is a number or a fixed word, whose
  // parse refuses it.
  const char kind = data[0];
  switch (kind) {
    case '+':
    case '-':
      if (cr <= data + near ? lf : std::memchr(line.data(), '\n', line.size()) != nullptr) {
        return fail(error::protocol_error);
      }
      return scalar(kind == '+' ? type::simple_string : type::simple_error, header, line);
    case ':': {
      std::int64_t v;
      if (!parse_integer(line, v)) return fail(error::protocol_error);
      result r = scalar(type::integer, header, line);
      r.n.integer = v;
      return r;
    }
    case ',': {
      double v;
      if (!parse_double(line, v)) return fail(error::protocol_error);
      result r = scalar(type::double_type, header, line);
      r.n.number = v;
      return r;
    }
    case '(':
      if (!is_big_number(line)) return fail(error::protocol_error);
      return scalar(type::big_number, header, line);
    case '#': {
      if (line != "t" && line != "f") return fail(error::protocol_error);
      result r = scalar(type::boolean, header, line);
      r.n.integer = line[0] == 't' ? 1 : 0;
      return r;
    }
    case '_':
      if (!line.empty()) return fail(error::protocol_error);
      return scalar(type::null, header, {});
    case '$':
    case '!':
    case '=': {
      if (line == "?") return fail(error::protocol_error);  // streamed strings: not supported
      std::int64_t length;
      if (!parse_integer(line, length) || line[0] == '+') return fail(error::protocol_error);
      if (length == -1 && kind == '$') return scalar(type::null, header, {});  // RESP2's null bulk string
      if (length < 0) return fail(error::protocol_error);
      const auto n = static_cast<std::uint64_t>(length);
      if (n > limits_.max_bulk) return fail(error::bulk_too_large);
      if (kind == '=' && n < 4) return fail(error::protocol_error);
      const std::size_t total = header + static_cast<std::size_t>(n) + 2;
      if (size < total) {
        result r;
        r.need = total;
        return r;
      }
      const char* payload = data + header;
      if (payload[n] != '\r' || payload[n + 1] != '\n') return fail(error::protocol_error);
      std::string_view text(payload, static_cast<std::size_t>(n));
      if (kind == '=') {
        if (text[3] != ':') return fail(error::protocol_error);
        result r = scalar(type::verbatim_string, total, text.substr(4));
        r.n.format = text.substr(0, 3);
        return r;
      }
      return scalar(kind == '$' ? type::blob_string : type::blob_error, total, text);
    }
    case '*':
    case '%':
    case '~':
    case '>':
    case '|': {
      if (line == "?") return fail(error::protocol_error);  // streamed aggregates: not supported
      std::int64_t count;
      if (!parse_integer(line, count) || line[0] == '+') return fail(error::protocol_error);
      if (count == -1 && kind == '*') return scalar(type::null, header, {});  // RESP2's null array
      if (count < 0) return fail(error::protocol_error);
      const type t = kind == '*'   ? type::array
                     : kind == '%' ? type::map
                     : kind == '~' ? type::set
                     : kind == '>' ? type::push
                                   : type::attribute;
      return aggregate(t, header, static_cast<std::uint64_t>(count));
    }
    default: return fail(error::protocol_error);
  }
}

}  // namespace tern::redis::resp
