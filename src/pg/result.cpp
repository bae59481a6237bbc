// Results, rows and fields, their copy out of libpq's PGresult, and the reading of fields into C++ types (see
// tern/pg/result.hpp).
//
// Why copy: libpq mallocs three blocks per result (the PGresult, its data block, its row array). A loop that frees
// each result before it reads the next gets them back from glibc's per-thread cache; tern holds a batch's results
// until their tasks run (a batch of 256 queries: 256 results alive at once), past that cache (7 blocks per size),
// and malloc then serves them from its bins at several times the cost. So a successful result up to
// largest_block bytes is copied into one block of tern's, taken from a per-thread free list by size class, and its
// PGresult freed at once: the next PGresult reuses the cached blocks, and the copy costs less than malloc's slow
// path did. Larger results keep their PGresult (copying them would cost more than it saves), and so do failed
// ones (their report has many fields; a failure is not the fast path).
//
// A block: its header, then one column entry per column, one cell per field (row-major), then the bytes (column
// names, values and the command tag, each NUL-terminated as libpq's are). Offsets are from the block's start.
#include "tern/pg/result.hpp"

#include "tern/detail/copy_short.hpp"

#include <libpq-fe.h>

#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>

#if defined(__has_include)
#if __has_include(<sanitizer/asan_interface.h>)
#include <sanitizer/asan_interface.h>
#endif
#endif

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

// Decimal text as std::from_chars reads it (an optional '-', then digits, nothing else), into out; false when it
// is not that or does not fit int64. By hand because from_chars tests for overflow at every digit, which costs
// several times this (a query's integer is read once per row), while up to 19 digits fit a uint64 anyway; eight
// digits at a time where the machine loads them in that order. Leading zeros are skipped only when there are more
// than 19 characters: below that they are digits like any other.
bool parse_decimal(const char* p, const char* end, std::int64_t& out) noexcept {
  const bool negative = p != end && *p == '-';
  p += negative;
  if (static_cast<std::size_t>(end - p) - 1 >= 19) {  // none, or more than 19
    if (p == end) return false;
    while (*p == '0' && end - p > 1) ++p;  // leading zeros, down to the last digit
    if (end - p > 19) return false;         // more significant digits than an int64 has (or not digits)
  }
  std::uint64_t v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    for (; end - p >= 8; p += 8) {
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

namespace {
std::error_code decode_binary_signed(const field_data& f, std::int64_t min, std::int64_t max,
                                     std::int64_t& out) noexcept {
  std::int64_t v = 0;
  if (std::error_code ec = binary_integer(f, v)) return ec;
  if (v < min || v > max) return bad_value();
  out = v;
  return {};
}
}  // namespace

std::error_code decode_signed(const field_data& f, std::int64_t min, std::int64_t max, std::int64_t& out) noexcept {
  // The binary form apart, so that the text form, the common one, keeps to few registers.
  if (f.fmt == format::binary) return decode_binary_signed(f, min, max, out);
  std::int64_t v = 0;
  if (!parse_decimal(f.data, f.data + f.length, v) || v < min || v > max) return bad_value();
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
    // From 2000 to 1970: PostgreSQL's last timestamp (294276 AD) is within a few days of int64's end since 2000,
    // and past it since 1970; a value no int64 of microseconds since 1970 holds is refused, not wrapped.
    if (__builtin_add_overflow(us, pg_epoch_us, &out)) return bad_value();
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
  // Years of up to seven digits: their seconds fit an int64, their microseconds not always.
  const std::int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  std::int64_t us = 0;
  if (__builtin_mul_overflow(seconds, std::int64_t{1'000'000}, &us) || __builtin_add_overflow(us, micros, &out)) {
    return bad_value();
  }
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
    // Days from 2000 to days from 1970, refused where an int32 no longer holds them (PostgreSQL's last date,
    // 5874897-12-31, is 2.4 million days short of that: only a value no server sends gets there).
    if (__builtin_add_overflow(d, pg_epoch_days, &out)) return bad_value();
    return {};
  }
  std::int64_t days = 0;
  std::size_t used = 0;
  const std::string_view t = text_of(f);
  if (!parse_date(t, days, used) || used != t.size()) return bad_value();
  // A year of seven digits may be past what an int32 of days holds: refused, not wrapped.
  if (days < std::numeric_limits<std::int32_t>::min() || days > std::numeric_limits<std::int32_t>::max()) {
    return bad_value();
  }
  out = static_cast<std::int32_t>(days);
  return {};
}

}  // namespace detail

namespace detail {

namespace {

// Size classes of 128 bytes to 8 KiB; a thread keeps up to 256 KiB of free blocks per class (2048 of the smallest:
// a batch of 256 results and more), so what a burst took is not held forever.
constexpr std::size_t smallest_block = 128;
constexpr std::size_t class_count = 7;
constexpr std::size_t largest_block = smallest_block << (class_count - 1);
static_assert(largest_block <= INT16_MAX, "a block's offsets and lengths are 16 bits (result_block)");
constexpr std::size_t kept_bytes_per_class = 256 * 1024;
constexpr auto kept_per_class = [] {
  std::array<std::uint32_t, class_count> kept{};
  for (std::size_t c = 0; c < class_count; ++c) kept[c] = kept_bytes_per_class / (smallest_block << c);
  return kept;
}();

// Under AddressSanitizer a block on a free list is poisoned, so a use after free is caught as it would be with
// operator delete (the pool is kept: the allocation tests run under ASan too).
#if defined(__SANITIZE_ADDRESS__)
#define TERN_PG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TERN_PG_ASAN 1
#endif
#endif
#ifdef TERN_PG_ASAN
void poison(void* p, std::size_t n) noexcept { __asan_poison_memory_region(p, n); }
void unpoison(void* p, std::size_t n) noexcept { __asan_unpoison_memory_region(p, n); }
#else
void poison(void*, std::size_t) noexcept {}
void unpoison(void*, std::size_t) noexcept {}
#endif

// Blocks are aligned to a cache line (result_block).
constexpr std::align_val_t block_alignment{64};

struct free_block {
  free_block* next;
};

// Trivially destructible, so a result destroyed after the thread's cleanup below still finds it (then closed).
struct thread_blocks {
  free_block* head[class_count];
  std::uint32_t count[class_count];
  bool closed;
};
constinit thread_local thread_blocks blocks{};

// Frees a thread's blocks when it ends; a thread_local with a destructor is registered on first use, so it is
// touched only when a list starts from empty, off the fast path.
struct thread_blocks_cleanup {
  ~thread_blocks_cleanup() {
    blocks.closed = true;
    for (std::size_t c = 0; c < class_count; ++c) {
      while (free_block* b = blocks.head[c]) {
        unpoison(b, smallest_block << c);
        blocks.head[c] = b->next;
        ::operator delete(b, block_alignment);
      }
      blocks.count[c] = 0;
    }
  }
};

std::size_t class_of(std::size_t bytes) noexcept {
  std::size_t c = 0;
  for (std::size_t s = smallest_block; s < bytes; s <<= 1) ++c;
  return c;
}

void* take_block(std::size_t c) {
  if (free_block* b = blocks.head[c]) {
    unpoison(b, smallest_block << c);
    blocks.head[c] = b->next;
    --blocks.count[c];
    return b;
  }
  return ::operator new(smallest_block << c, block_alignment);
}

void give_block(const result_block* b) noexcept {
  const std::size_t c = b->size_class;
  void* p = const_cast<result_block*>(b);
  if (blocks.closed || blocks.count[c] >= kept_per_class[c]) {
    ::operator delete(p, block_alignment);
    return;
  }
  if (blocks.head[c] == nullptr) {
    // Registered by the first block a thread keeps (a thread may only free blocks others took).
    static thread_local thread_blocks_cleanup cleanup;
    (void)cleanup;
  }
  auto* f = static_cast<free_block*>(p);
  f->next = blocks.head[c];
  blocks.head[c] = f;
  ++blocks.count[c];
  poison(f, smallest_block << c);
}

using tern::detail::copy_short;  // a result's short strings (a name, a number, a tag), without a call

// Copies n bytes and a NUL to at, if they fit before limit; where the next go, or null.
inline char* put(char* at, const char* limit, const char* p, std::size_t n) noexcept {
  if (static_cast<std::size_t>(limit - at) <= n) return nullptr;
  copy_short(at, p, n);
  at[n] = '\0';
  return at + n + 1;
}

// Copies r into the block at memory, of capacity bytes; false, with the block left unfinished, when r does not fit.
// Inlined into copy_out, once per result: a call and the six registers it saved less.
[[gnu::always_inline]] inline bool fill(PGresult* r, void* memory, std::size_t capacity, const char* tag, std::size_t tag_length) noexcept {
  const int rows = PQntuples(r);
  const int columns = PQnfields(r);
  char* const base = static_cast<char*>(memory);
  const char* const limit = base + capacity;
  const std::size_t head = sizeof(result_block) + static_cast<std::size_t>(columns) * sizeof(column_entry) +
                           static_cast<std::size_t>(rows) * static_cast<std::size_t>(columns) * sizeof(cell);
  if (head > capacity) return false;
  auto* b = static_cast<result_block*>(memory);
  b->rows = rows;
  b->columns = static_cast<std::uint16_t>(columns);  // fewer than capacity / sizeof(column_entry)
  auto* entry = reinterpret_cast<column_entry*>(base + sizeof(result_block));
  auto* out = reinterpret_cast<cell*>(entry + columns);
  char* at = base + head;
  for (int c = 0; c < columns; ++c, ++entry) {
    const char* name = PQfname(r, c);
    char* next = put(at, limit, name, std::strlen(name));
    if (next == nullptr) return false;
    *entry = {PQftype(r, c), PQfmod(r, c), PQftable(r, c), static_cast<std::uint32_t>(at - base),
              static_cast<std::int16_t>(PQftablecol(r, c)), PQfformat(r, c) == 1 ? format::binary : format::text};
    at = next;
  }
  for (int i = 0; i < rows; ++i) {
    for (int c = 0; c < columns; ++c, ++out) {
      // libpq gives a NULL the length 0, so only an empty field is asked whether it is NULL: a call less for
      // every other.
      const int n = PQgetlength(r, i, c);
      if (n == 0 && PQgetisnull(r, i, c) != 0) {
        *out = {0, -1};
        continue;
      }
      char* next = put(at, limit, PQgetvalue(r, i, c), static_cast<std::size_t>(n));
      if (next == nullptr) return false;
      *out = {static_cast<std::uint16_t>(at - base), static_cast<std::int16_t>(n)};  // both below capacity
      at = next;
    }
  }
  if (put(at, limit, tag, tag_length) == nullptr) return false;
  b->tag = static_cast<std::uint16_t>(at - base);
  b->tag_length = static_cast<std::uint8_t>(tag_length);
  return true;
}

// The bytes a block of r takes.
std::size_t measure(PGresult* r, std::size_t tag_length) noexcept {
  const int rows = PQntuples(r);
  const int columns = PQnfields(r);
  std::size_t bytes = sizeof(result_block) + static_cast<std::size_t>(columns) * sizeof(column_entry) +
                      static_cast<std::size_t>(rows) * static_cast<std::size_t>(columns) * sizeof(cell) +
                      tag_length + 1;
  for (int c = 0; c < columns; ++c) bytes += std::strlen(PQfname(r, c)) + 1;
  for (int i = 0; i < rows && bytes <= largest_block; ++i) {
    for (int c = 0; c < columns; ++c) bytes += static_cast<std::size_t>(PQgetlength(r, i, c)) + 1;
  }
  return bytes;
}

// r copied into a block, or null when it is too large for one (or there is no memory for it). Tried first in the
// smallest block (most results of the fast path fit), measured and copied again only when it does not fit.
const result_block* copy_out(PGresult* r) noexcept {
  const char* tag = PQcmdStatus(r);
  const std::size_t tag_length = std::strlen(tag);
  if (tag_length > UINT8_MAX) return nullptr;  // not from libpq, which keeps a tag in 64 bytes
  try {
    void* memory = take_block(0);
    if (fill(r, memory, smallest_block, tag, tag_length)) {
      static_cast<result_block*>(memory)->size_class = 0;
      return static_cast<const result_block*>(memory);
    }
    static_cast<result_block*>(memory)->size_class = 0;
    give_block(static_cast<const result_block*>(memory));
    const std::size_t bytes = measure(r, tag_length);
    if (bytes > largest_block) return nullptr;
    const std::size_t size_class = class_of(bytes);
    memory = take_block(size_class);
    static_cast<result_block*>(memory)->size_class = static_cast<std::uint8_t>(size_class);
    fill(r, memory, smallest_block << size_class, tag, tag_length);
    return static_cast<const result_block*>(memory);
  } catch (...) {
    return nullptr;  // no memory: kept as it is
  }
}

}  // namespace

result_source adopt(pg_result* r) noexcept {
  if (r == nullptr) return {};
  const ExecStatusType st = PQresultStatus(r);
  if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) return adopt_successful(r);
  result_source s;
  s.pg = r;
  return s;
}

result_source adopt_successful(pg_result* r) noexcept {
  result_source s;
  s.block = copy_out(r);
  if (s.block != nullptr) {
    PQclear(r);
  } else {
    s.pg = r;
  }
  return s;
}

void dispose_held(result_source& s) noexcept {
  if (s.block != nullptr) give_block(s.block);
  if (s.pg != nullptr) PQclear(s.pg);
  s = {};
}

int pg_row_count(const pg_result* r) noexcept { return r != nullptr ? PQntuples(r) : 0; }

int pg_column_count(const pg_result* r) noexcept { return r != nullptr ? PQnfields(r) : 0; }

field_data pg_field(const pg_result* r, int row, int column) noexcept {
  field_data f;
  // Checked here: libpq reports a field out of range through the notice receiver, which may be a connection's
  // that is gone.
  if (r == nullptr || row < 0 || row >= PQntuples(r) || column < 0 || column >= PQnfields(r)) {
    f.data = "";
    return f;
  }
  f.null = PQgetisnull(r, row, column) != 0;
  f.data = PQgetvalue(r, row, column);
  f.length = PQgetlength(r, row, column);
  f.fmt = PQfformat(r, column) == 1 ? format::binary : format::text;
  f.type = PQftype(r, column);
  return f;
}

}  // namespace detail

namespace {

using detail::result_source;

int column_count(result_source r) noexcept {
  return r.block != nullptr ? r.block->columns : detail::pg_column_count(r.pg);
}

// The field at (row, column) of r, NULL for one r does not have (as libpq reads it).
detail::field_data field_of(result_source r, int row, int column) noexcept {
  if (r.block != nullptr) return r.block->field_at(row, column);
  return detail::pg_field(r.pg, row, column);
}

std::string_view name_of(result_source r, int i) noexcept {
  if (const detail::result_block* b = r.block) {
    const detail::column_entry* c = b->column_at(i);
    return c != nullptr ? std::string_view(b->base() + c->name) : std::string_view();
  }
  if (r.pg == nullptr || i < 0 || i >= PQnfields(r.pg)) return {};
  return PQfname(r.pg, i);
}

int find_column(result_source r, std::string_view name) noexcept {
  const int n = column_count(r);
  for (int i = 0; i < n; ++i) {
    if (name == name_of(r, i)) return i;
  }
  return -1;
}

}  // namespace

bool field::is_null() const noexcept { return !exists() || field_of(r_, row_, column_).null; }

std::string_view field::raw() const noexcept {
  if (!exists()) return {};
  const detail::field_data f = field_of(r_, row_, column_);
  if (f.null) return {};
  return {f.data, static_cast<std::size_t>(f.length)};
}

format field::fmt() const noexcept { return exists() ? field_of(r_, row_, column_).fmt : format::text; }

oid field::type() const noexcept { return exists() ? field_of(r_, row_, column_).type : oids::unspecified; }


void field::throw_error(std::error_code ec) const {
  std::string what = "tern::pg: column ";
  if (exists()) {
    what += name_of(r_, column_);
  } else {
    what += "(none)";
  }
  throw std::system_error(ec, what);
}

field row::operator[](std::string_view name) const noexcept { return {r_, index_, find_column(r_, name)}; }


result& result::operator=(result&& o) noexcept {
  if (this != &o) {
    detail::dispose(r_);
    r_ = std::exchange(o.r_, {});
  }
  return *this;
}


int result::columns() const noexcept { return column_count(r_); }

int result::column(std::string_view name) const noexcept { return find_column(r_, name); }

std::string_view result::column_name(int i) const noexcept { return name_of(r_, i); }

oid result::column_type(int i) const noexcept {
  if (r_.block != nullptr) {
    const detail::column_entry* c = r_.block->column_at(i);
    return c != nullptr ? c->type : oids::unspecified;
  }
  if (r_.pg == nullptr || i < 0 || i >= PQnfields(r_.pg)) return oids::unspecified;
  return PQftype(r_.pg, i);
}

int result::column_type_modifier(int i) const noexcept {
  if (r_.block != nullptr) {
    const detail::column_entry* c = r_.block->column_at(i);
    return c != nullptr ? c->modifier : -1;
  }
  return r_.pg != nullptr && i >= 0 && i < PQnfields(r_.pg) ? PQfmod(r_.pg, i) : -1;
}

format result::column_format(int i) const noexcept {
  if (r_.block != nullptr) {
    const detail::column_entry* c = r_.block->column_at(i);
    return c != nullptr ? c->fmt : format::text;
  }
  return r_.pg != nullptr && i >= 0 && i < PQnfields(r_.pg) && PQfformat(r_.pg, i) == 1 ? format::binary
                                                                                       : format::text;
}

oid result::column_table(int i) const noexcept {
  if (r_.block != nullptr) {
    const detail::column_entry* c = r_.block->column_at(i);
    return c != nullptr ? c->table : oids::unspecified;
  }
  return r_.pg != nullptr && i >= 0 && i < PQnfields(r_.pg) ? PQftable(r_.pg, i) : oids::unspecified;
}

int result::column_table_column(int i) const noexcept {
  if (r_.block != nullptr) {
    const detail::column_entry* c = r_.block->column_at(i);
    return c != nullptr ? c->table_column : 0;
  }
  return r_.pg != nullptr && i >= 0 && i < PQnfields(r_.pg) ? PQftablecol(r_.pg, i) : 0;
}

std::uint64_t result::affected_rows() const noexcept {
  // The tag's count, where libpq's PQcmdTuples finds it: "INSERT <oid> <rows>", "<command> <rows>" for the
  // commands that count rows; none for the others.
  std::string_view tag = command_tag();
  std::string_view rows;
  if (tag.starts_with("INSERT ")) {
    tag.remove_prefix(7);
    const std::size_t space = tag.find(' ');
    if (space == std::string_view::npos) return 0;
    rows = tag.substr(space + 1);
  } else {
    for (const std::string_view command : {"SELECT ", "UPDATE ", "DELETE ", "MERGE ", "FETCH ", "MOVE ", "COPY "}) {
      if (tag.starts_with(command)) {
        rows = tag.substr(command.size());
        break;
      }
    }
  }
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(rows.data(), rows.data() + rows.size(), v);
  return ec == std::errc() && end == rows.data() + rows.size() ? v : 0;
}

std::string_view result::command_tag() const noexcept {
  if (r_.block != nullptr) return {r_.block->base() + r_.block->tag, r_.block->tag_length};
  return r_.pg != nullptr ? PQcmdStatus(r_.pg) : "";
}

std::string_view result::error_message() const noexcept {
  if (r_.pg == nullptr) return {};
  if (const char* primary = PQresultErrorField(r_.pg, PG_DIAG_MESSAGE_PRIMARY)) return primary;
  std::string_view m = PQresultErrorMessage(r_.pg);
  while (!m.empty() && m.back() == '\n') m.remove_suffix(1);
  return m;
}

std::string_view result::sqlstate() const noexcept { return error_field(PG_DIAG_SQLSTATE); }

std::string_view result::error_field(int code) const noexcept {
  if (r_.pg == nullptr) return {};
  const char* v = PQresultErrorField(r_.pg, code);
  return v != nullptr ? v : "";
}

}  // namespace tern::pg
