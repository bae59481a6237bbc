// Results, rows and fields over libpq's PGresult, and the reading of fields into C++ types (see
// tern/pg/result.hpp).
#include "tern/pg/result.hpp"

#include <libpq-fe.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

namespace tern::pg {

namespace detail {

namespace {

std::error_code bad_value() noexcept { return make_error_code(error::bad_value); }
std::error_code unsupported() noexcept { return make_error_code(error::unsupported); }

template <class T>
T get_big_endian(const char* p) noexcept {
  using U = std::make_unsigned_t<T>;
  U u = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) u = static_cast<U>((u << 8) | static_cast<unsigned char>(p[i]));
  return static_cast<T>(u);
}

std::string_view text_of(const field_data& f) noexcept { return {f.data, static_cast<std::size_t>(f.length)}; }

// Eight ASCII digits loaded little-endian (the first in the lowest byte) as their number; false when one is not
// a digit. Each step joins neighbouring lanes, the left one times its weight: bytes into pairs, pairs into fours,
// fours into the eight; no lane overflows into the next.
bool eight_digits(std::uint64_t chunk, std::uint64_t& out) noexcept {
  constexpr std::uint64_t zeros = 0x3030303030303030;
  constexpr std::uint64_t high = 0xF0F0F0F0F0F0F0F0;
  if ((chunk & high) != zeros || ((chunk + 0x0606060606060606) & high) != zeros) return false;
  chunk -= zeros;
  chunk = (chunk * 10 + (chunk >> 8)) & 0x00FF00FF00FF00FF;
  chunk = (chunk * 100 + (chunk >> 16)) & 0x0000FFFF0000FFFF;
  out = (chunk * 10000 + (chunk >> 32)) & 0xFFFFFFFF;
  return true;
}

// Decimal text as std::from_chars reads it (an optional '-', then digits, nothing else), into out; false when it
// is not that or does not fit int64. By hand because from_chars tests for overflow at every digit, which costs
// several times this (a query's integer is read once per row), while up to 19 digits fit a uint64 anyway; eight
// digits at a time where the machine loads them in that order.
bool parse_decimal(const char* p, const char* end, std::int64_t& out) noexcept {
  const bool negative = p != end && *p == '-';
  if (negative) ++p;
  const char* start = p;
  while (p != end && *p == '0') ++p;
  const char* significant = p;
  std::uint64_t v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    for (; end - p >= 8 && end - significant <= 19; p += 8) {
      std::uint64_t chunk = 0;
      std::memcpy(&chunk, p, 8);
      std::uint64_t eight = 0;
      if (!eight_digits(chunk, eight)) return false;
      v = v * 100000000 + eight;
    }
  }
  for (; p != end; ++p) {
    const unsigned d = static_cast<unsigned char>(*p) - unsigned{'0'};
    if (d > 9) return false;
    v = v * 10 + d;
  }
  if (p == start || p - significant > 19) return false;
  const std::uint64_t limit = std::uint64_t{1} << 63;
  if (negative ? v > limit : v >= limit) return false;
  out = negative ? static_cast<std::int64_t>(std::uint64_t{0} - v) : static_cast<std::int64_t>(v);
  return true;
}

// A binary integer column (int2, int4, int8, oid) read whole.
std::error_code binary_integer(const field_data& f, std::int64_t& out) noexcept {
  switch (f.type) {
    case oids::int2:
      if (f.length != 2) return bad_value();
      out = get_big_endian<std::int16_t>(f.data);
      return {};
    case oids::int4:
      if (f.length != 4) return bad_value();
      out = get_big_endian<std::int32_t>(f.data);
      return {};
    case oids::oid_type:
      if (f.length != 4) return bad_value();
      out = get_big_endian<std::uint32_t>(f.data);
      return {};
    case oids::int8:
      if (f.length != 8) return bad_value();
      out = get_big_endian<std::int64_t>(f.data);
      return {};
    default: return unsupported();
  }
}

bool text_like(oid type) noexcept {
  switch (type) {
    case oids::text: case oids::varchar: case oids::bpchar: case oids::name: case oids::json: case oids::unknown:
    case oids::unspecified: return true;
    default: return false;
  }
}

// Parses exactly n digits at p.
bool digits(std::string_view s, std::size_t at, std::size_t n, int& out) noexcept {
  if (at + n > s.size()) return false;
  int v = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  out = v;
  return true;
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

// "YYYY-MM-DD" at the start of s; the days since 1970-01-01 and the length read.
bool parse_date(std::string_view s, std::int64_t& days, std::size_t& used) noexcept {
  std::size_t i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  if (i < 4 || i > 7 || i + 6 > s.size() || s[i] != '-' || s[i + 3] != '-') return false;
  int year = 0, month = 0, day = 0;
  if (!digits(s, 0, i, year) || !digits(s, i + 1, 2, month) || !digits(s, i + 4, 2, day)) return false;
  if (month < 1 || month > 12 || day < 1 || day > 31) return false;
  days = days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  used = i + 6;
  if (s.size() >= used + 3 && s.substr(used, 3) == " BC") return false;  // before the common era: not supported
  return true;
}

}  // namespace

std::error_code decode_signed(const field_data& f, std::int64_t min, std::int64_t max, std::int64_t& out) noexcept {
  std::int64_t v = 0;
  if (f.fmt == format::binary) {
    if (std::error_code ec = binary_integer(f, v)) return ec;
  } else {
    if (!parse_decimal(f.data, f.data + f.length, v)) return bad_value();
  }
  if (v < min || v > max) return bad_value();
  out = v;
  return {};
}

std::error_code decode_unsigned(const field_data& f, std::uint64_t max, std::uint64_t& out) noexcept {
  std::int64_t v = 0;
  if (std::error_code ec = decode_signed(f, 0, std::numeric_limits<std::int64_t>::max(), v)) return ec;
  if (static_cast<std::uint64_t>(v) > max) return bad_value();
  out = static_cast<std::uint64_t>(v);
  return {};
}

std::error_code decode_double(const field_data& f, double& out) noexcept {
  if (f.fmt == format::binary) {
    if (f.type == oids::float8 && f.length == 8) {
      out = std::bit_cast<double>(get_big_endian<std::uint64_t>(f.data));
      return {};
    }
    if (f.type == oids::float4 && f.length == 4) {
      out = std::bit_cast<float>(get_big_endian<std::uint32_t>(f.data));
      return {};
    }
    std::int64_t i = 0;
    if (binary_integer(f, i)) return unsupported();
    out = static_cast<double>(i);
    return {};
  }
  const std::string_view t = text_of(f);
  if (t == "NaN") {
    out = std::numeric_limits<double>::quiet_NaN();
    return {};
  }
  if (t == "Infinity" || t == "-Infinity") {
    out = t[0] == '-' ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return {};
  }
  const char* end = f.data + f.length;
  auto [p, e] = std::from_chars(f.data, end, out);
  if (e != std::errc() || p != end) return bad_value();
  return {};
}

std::error_code decode_bool(const field_data& f, bool& out) noexcept {
  if (f.fmt == format::binary) {
    if (f.type != oids::boolean) return unsupported();
    if (f.length != 1) return bad_value();
    out = f.data[0] != 0;
    return {};
  }
  if (f.length == 1 && (f.data[0] == 't' || f.data[0] == 'f')) {
    out = f.data[0] == 't';
    return {};
  }
  return bad_value();
}

std::error_code decode_text(const field_data& f, std::string_view& out) noexcept {
  if (f.fmt == format::binary && !text_like(f.type) && f.type != oids::bytea && f.type != oids::jsonb) {
    return unsupported();
  }
  out = text_of(f);
  if (f.fmt == format::binary && f.type == oids::jsonb) {  // a version byte, then the text
    if (out.empty()) return bad_value();
    out.remove_prefix(1);
  }
  return {};
}

std::error_code decode_bytea(const field_data& f, std::vector<std::byte>& out) {
  if (f.fmt == format::binary) {
    if (f.type != oids::bytea && !text_like(f.type)) return unsupported();
    out.assign(reinterpret_cast<const std::byte*>(f.data), reinterpret_cast<const std::byte*>(f.data) + f.length);
    return {};
  }
  // The hex form ("\x" and two digits per byte), bytea_output's default since PostgreSQL 9.0.
  const std::string_view t = text_of(f);
  if (t.size() < 2 || t[0] != '\\' || t[1] != 'x' || t.size() % 2 != 0) return bad_value();
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::vector<std::byte> bytes((t.size() - 2) / 2);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const int hi = nibble(t[2 + 2 * i]), lo = nibble(t[3 + 2 * i]);
    if (hi < 0 || lo < 0) return bad_value();
    bytes[i] = static_cast<std::byte>(hi << 4 | lo);
  }
  out = std::move(bytes);
  return {};
}

std::error_code decode_timestamp(const field_data& f, std::int64_t& out) noexcept {
  if (f.fmt == format::binary) {
    if (f.type != oids::timestamptz && f.type != oids::timestamp) return unsupported();
    if (f.length != 8) return bad_value();
    const std::int64_t us = get_big_endian<std::int64_t>(f.data);
    if (us == std::numeric_limits<std::int64_t>::max() || us == std::numeric_limits<std::int64_t>::min()) {
      return bad_value();  // infinity and -infinity
    }
    out = us + pg_epoch_us;
    return {};
  }
  // ISO 8601 as DateStyle ISO prints it: "2024-05-06 07:08:09[.123456][+02[:30[:15]]]"
  const std::string_view t = text_of(f);
  std::int64_t days = 0;
  std::size_t i = 0;
  if (!parse_date(t, days, i)) return bad_value();
  if (i >= t.size() || (t[i] != ' ' && t[i] != 'T')) return bad_value();
  int hour = 0, minute = 0, second = 0;
  if (!digits(t, i + 1, 2, hour) || t.size() < i + 9 || t[i + 3] != ':' || !digits(t, i + 4, 2, minute) ||
      t[i + 6] != ':' || !digits(t, i + 7, 2, second)) {
    return bad_value();
  }
  i += 9;
  std::int64_t micros = 0;
  if (i < t.size() && t[i] == '.') {
    ++i;
    int scale = 100000;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
      micros += (t[i] - '0') * scale;
      scale /= 10;
      ++i;
    }
  }
  std::int64_t offset_s = 0;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) {
    const int sign = t[i] == '-' ? -1 : 1;
    int oh = 0, om = 0, os = 0;
    if (!digits(t, i + 1, 2, oh)) return bad_value();
    i += 3;
    if (i < t.size() && t[i] == ':') {
      if (!digits(t, i + 1, 2, om)) return bad_value();
      i += 3;
      if (i < t.size() && t[i] == ':') {
        if (!digits(t, i + 1, 2, os)) return bad_value();
        i += 3;
      }
    }
    offset_s = sign * (oh * 3600 + om * 60 + os);
  }
  if (i != t.size()) return bad_value();
  const std::int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  out = seconds * 1'000'000 + micros;
  return {};
}

std::error_code decode_date(const field_data& f, std::int32_t& out) noexcept {
  if (f.fmt == format::binary) {
    if (f.type != oids::date) return unsupported();
    if (f.length != 4) return bad_value();
    const std::int32_t d = get_big_endian<std::int32_t>(f.data);
    if (d == std::numeric_limits<std::int32_t>::max() || d == std::numeric_limits<std::int32_t>::min()) {
      return bad_value();
    }
    out = d + pg_epoch_days;
    return {};
  }
  std::int64_t days = 0;
  std::size_t used = 0;
  const std::string_view t = text_of(f);
  if (!parse_date(t, days, used) || used != t.size()) return bad_value();
  out = static_cast<std::int32_t>(days);
  return {};
}

}  // namespace detail

bool field::is_null() const noexcept { return !exists() || PQgetisnull(r_, row_, column_) != 0; }

std::string_view field::raw() const noexcept {
  if (!exists() || PQgetisnull(r_, row_, column_) != 0) return {};
  return {PQgetvalue(r_, row_, column_), static_cast<std::size_t>(PQgetlength(r_, row_, column_))};
}

format field::fmt() const noexcept {
  return exists() && PQfformat(r_, column_) == 1 ? format::binary : format::text;
}

oid field::type() const noexcept { return exists() ? PQftype(r_, column_) : oids::unspecified; }

detail::field_data field::data() const noexcept {
  detail::field_data f;
  f.null = PQgetisnull(r_, row_, column_) != 0;
  f.data = PQgetvalue(r_, row_, column_);
  f.length = PQgetlength(r_, row_, column_);
  f.fmt = PQfformat(r_, column_) == 1 ? format::binary : format::text;
  f.type = PQftype(r_, column_);
  return f;
}

void field::throw_error(std::error_code ec) const {
  std::string what = "tern::pg: column ";
  if (exists()) {
    what += PQfname(r_, column_);
  } else {
    what += "(none)";
  }
  throw std::system_error(ec, what);
}

namespace {
int find_column(const PGresult* r, std::string_view name) noexcept {
  if (r == nullptr) return -1;
  const int n = PQnfields(r);
  for (int i = 0; i < n; ++i) {
    if (name == PQfname(r, i)) return i;
  }
  return -1;
}
}  // namespace

field row::operator[](std::string_view name) const noexcept { return {r_, index_, find_column(r_, name)}; }

int row::columns() const noexcept { return r_ != nullptr ? PQnfields(r_) : 0; }

result& result::operator=(result&& o) noexcept {
  if (this != &o) {
    if (r_ != nullptr) PQclear(r_);
    r_ = std::exchange(o.r_, nullptr);
  }
  return *this;
}

result::~result() {
  if (r_ != nullptr) PQclear(r_);
}

std::size_t result::size() const noexcept {
  return r_ != nullptr ? static_cast<std::size_t>(PQntuples(r_)) : 0;
}

int result::columns() const noexcept { return r_ != nullptr ? PQnfields(r_) : 0; }

int result::column(std::string_view name) const noexcept { return find_column(r_, name); }

std::string_view result::column_name(int i) const noexcept {
  if (r_ == nullptr || i < 0 || i >= PQnfields(r_)) return {};
  return PQfname(r_, i);
}

oid result::column_type(int i) const noexcept {
  if (r_ == nullptr || i < 0 || i >= PQnfields(r_)) return oids::unspecified;
  return PQftype(r_, i);
}

std::uint64_t result::affected_rows() const noexcept {
  if (r_ == nullptr) return 0;
  const char* n = PQcmdTuples(r_);
  std::uint64_t v = 0;
  std::from_chars(n, n + std::strlen(n), v);
  return v;
}

std::string_view result::command_tag() const noexcept { return r_ != nullptr ? PQcmdStatus(r_) : ""; }

std::string_view result::error_message() const noexcept {
  if (r_ == nullptr) return {};
  if (const char* primary = PQresultErrorField(r_, PG_DIAG_MESSAGE_PRIMARY)) return primary;
  std::string_view m = PQresultErrorMessage(r_);
  while (!m.empty() && m.back() == '\n') m.remove_suffix(1);
  return m;
}

std::string_view result::sqlstate() const noexcept { return error_field(PG_DIAG_SQLSTATE); }

std::string_view result::error_field(int code) const noexcept {
  if (r_ == nullptr) return {};
  const char* v = PQresultErrorField(r_, code);
  return v != nullptr ? v : "";
}

}  // namespace tern::pg
