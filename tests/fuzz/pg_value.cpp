// libFuzzer target: tern::pg's readers of field values (tern/pg/result.hpp's field_traits, src/pg/result.cpp), given a
// field's bytes as a server sent them: the input, in a heap block of exactly its size, read as text and as binary
// under each type a column may have, into every C++ type a field reads into. Checks:
// - no reader reads outside the field (AddressSanitizer) or overflows an integer (UndefinedBehaviorSanitizer);
// - a text integer is read as std::from_chars reads it, into every integer type: the same value where it fits,
//   bad_value where from_chars refuses it or it does not fit;
// - a bytea's hex form is read as its hex digits, two to a byte;
// - a date or a timestamp that would overflow what it is read into is refused, not wrapped.
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "tern/pg/result.hpp"

namespace {

namespace pg = tern::pg;
using namespace tern::fuzz;
using field = pg::detail::field_data;

template <class T>
std::error_code read(const field& f, T& out) {
  return pg::field_traits<T>::decode(f, out);
}

// A text integer, against std::from_chars, into T.
template <class T>
void text_integer(const field& f) {
  T got{};
  const std::error_code ec = read(f, got);
  T want{};
  const char* end = f.data + f.length;
  const auto [p, e] = std::from_chars(f.data, end, want);
  bool parsed = e == std::errc() && p == end;
  if constexpr (std::is_unsigned_v<T>) {
    // "-0" reads as 0 (PostgreSQL's integers are signed), which from_chars refuses for an unsigned type.
    if (!parsed && f.length >= 2 && f.data[0] == '-') {
      std::int64_t negative = 0;
      const auto [q, e2] = std::from_chars(f.data, end, negative);
      parsed = e2 == std::errc() && q == end && negative == 0;
      want = 0;
    }
    // Above int64's range PostgreSQL has no integer type: refused there.
    constexpr auto int64_max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (parsed && static_cast<std::uint64_t>(want) > int64_max) {
      parsed = false;
    }
  }
  if (parsed) {
    TERN_FUZZ_CHECK(!ec);
    TERN_FUZZ_CHECK(got == want);
  } else {
    TERN_FUZZ_CHECK(ec == pg::error::bad_value);
  }
}

int nibble(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void every_reader(const field& f) {
  if (f.fmt == pg::format::text) {
    text_integer<std::int16_t>(f);
    text_integer<std::int32_t>(f);
    text_integer<std::int64_t>(f);
    text_integer<std::uint16_t>(f);
    text_integer<std::uint32_t>(f);
    text_integer<std::uint64_t>(f);
  } else {
    std::int64_t i = 0;
    (void)read(f, i);
    std::uint32_t u = 0;
    (void)read(f, u);
  }
  double d = 0;
  (void)read(f, d);
  float fl = 0;
  (void)read(f, fl);
  bool b = false;
  (void)read(f, b);
  std::string_view sv;
  if (!read(f, sv)) TERN_FUZZ_CHECK(inside(sv, std::string_view(f.data, static_cast<std::size_t>(f.length))));
  std::string s;
  (void)read(f, s);

  std::vector<std::byte> bytes;
  if (!read(f, bytes) && f.fmt == pg::format::text) {
    const std::string_view t(f.data, static_cast<std::size_t>(f.length));
    TERN_FUZZ_CHECK(t.size() == 2 + 2 * bytes.size());
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      TERN_FUZZ_CHECK(static_cast<int>(bytes[i]) == (nibble(t[2 + 2 * i]) << 4 | nibble(t[3 + 2 * i])));
    }
  }

  std::chrono::sys_time<std::chrono::microseconds> ts;
  (void)read(f, ts);
  std::chrono::sys_seconds secs;
  (void)read(f, secs);
  std::chrono::sys_days day;
  (void)read(f, day);
}

constexpr pg::oid types[] = {pg::oids::unspecified, pg::oids::boolean, pg::oids::bytea,  pg::oids::name,
                             pg::oids::int8,        pg::oids::int2,    pg::oids::int4,   pg::oids::text,
                             pg::oids::oid_type,    pg::oids::json,    pg::oids::float4, pg::oids::float8,
                             pg::oids::unknown,     pg::oids::varchar, pg::oids::date,   pg::oids::timestamp,
                             pg::oids::timestamptz, pg::oids::numeric, pg::oids::jsonb};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;  // a field's length is an int; longer inputs only slow the search down
  const exact_copy bytes(std::string_view(reinterpret_cast<const char*>(data), size));
  choices pick(bytes.view());
  field f;
  f.data = bytes.view().data();
  f.length = static_cast<int>(size);
  f.null = false;
  // Text under the column type the hash picks, then binary under every type (a binary value's meaning is its type).
  f.fmt = pg::format::text;
  f.type = types[pick.below(std::size(types))];
  every_reader(f);
  f.fmt = pg::format::binary;
  for (pg::oid t : types) {
    f.type = t;
    every_reader(f);
  }
  return 0;
}
