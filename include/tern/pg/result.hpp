// tern/pg/result.hpp
//
// result: what a query returned, rows and columns with typed reads. A small successful result is copied out of
// libpq's PGresult into a block of tern's (pooled per thread) and the PGresult freed at once; a large one, or a
// failed one, keeps its PGresult. Either way the reads below are the same, and rows and fields stay valid when the
// result is moved.
//
//   auto [ec, r] = co_await conn.query("SELECT id, name, born FROM people WHERE id < $1", 10);
//   for (pg::row row : r) {
//     auto id = row[0].as<std::int64_t>();                       // by index
//     auto name = row["name"].as<std::string_view>();            // by name (exact match); a view into r
//     auto born = row["born"].as<std::optional<std::chrono::sys_days>>();  // NULL as nullopt
//   }
//   auto [id, name] = r[0].as<int, std::string>();              // a row as a tuple
//
// Reads (field::to, which returns an error code, and field::as, which throws std::system_error with it):
//
// | C++ type                      | from text                          | from binary (by the column's type)      |
// |-------------------------------|------------------------------------|-----------------------------------------|
// | integers                      | decimal, range-checked             | int2, int4, int8, oid; range-checked    |
// | float, double                 | decimal, NaN, Infinity, -Infinity  | float4, float8                          |
// | bool                          | t, f                               | bool                                    |
// | std::string, std::string_view | the text as it is                  | text-like types (text, varchar, name, json, ...) |
// | std::vector<std::byte>        | bytea's hex form (\x0a1b...)       | bytea                                   |
// | system_clock::time_point      | ISO 8601 (timestamp: taken as UTC) | timestamp, timestamptz                  |
// | std::chrono::sys_days         | YYYY-MM-DD                         | date                                    |
// | std::optional<T>              | NULL as nullopt, else as T         |                                         |
//
// A NULL read as anything but std::optional is pg::error::unexpected_null; a value that does not fit or parse,
// bad_value; a binary column of a type with no conversion to the type asked for, unsupported; a column that does
// not exist, no_such_column. Views (string_view) point into the result and live as long as it.
//
// A result of a failed query holds the server's report: error_message(), sqlstate(), error_field() for the detail,
// hint, constraint and the rest (libpq's PG_DIAG_* codes). Columns say their name, type, type modifier, format and
// source table (column_*()); there is no PGresult to reach (see docs/design.md, PostgreSQL).
#pragma once

#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <ratio>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tern/error.hpp"
#include "tern/pg/error.hpp"
#include "tern/pg/params.hpp"

struct pg_result;  // libpq's PGresult

namespace tern::pg {

namespace detail {
struct result_block;  // a result copied out of its PGresult (below; filled by result.cpp)

// What a result holds: its copy, or the PGresult itself, or nothing (at most one is set).
struct result_source {
  const result_block* block = nullptr;
  pg_result* pg = nullptr;
  bool empty() const noexcept { return block == nullptr && pg == nullptr; }
};

// Takes over r (may be null): a successful result small enough is copied into a block of tern's and r freed at
// once, so that libpq's next result reuses its memory; any other is kept as it is.
result_source adopt(pg_result* r) noexcept;
// adopt() of a result whose status is known to be PGRES_TUPLES_OK or PGRES_COMMAND_OK (r not null): the
// connection has read the status already.
result_source adopt_successful(pg_result* r) noexcept;
// dispose() of a source that holds something (out of line: the empty case is the common one, inline).
void dispose_held(result_source& s) noexcept;
// Frees what s holds and empties it.
inline void dispose(result_source& s) noexcept {
  if (!s.empty()) dispose_held(s);
}

// One field as it came from the server.
struct field_data {
  const char* data = nullptr;
  int length = 0;
  bool null = true;
  format fmt = format::text;
  oid type = oids::unspecified;
};

// The layout of a copied result (result.cpp fills it): this header, one column_entry per column, one cell per field
// (row by row), then the column names, the values and the command tag, each NUL-terminated; offsets from the start
// of the block. Here rather than in result.cpp so that a field of a copied result is read inline (the common case:
// a call and the copy of a field_data less per read).
struct column_entry {
  oid type;
  std::int32_t modifier;
  oid table;
  std::uint32_t name;         // offset
  std::int16_t table_column;
  format fmt;
};

struct cell {
  std::uint16_t offset;       // a block is at most 8 KiB
  std::int16_t length;        // -1: NULL
};

// 12 bytes (and 4 a cell), in blocks aligned to a cache line, so that a result of a few short fields fits in the
// block's first line (a row of one int4 of ten digits, its column's name and the command tag: 61 bytes): it is
// written as libpq hands it over and read by a task that resumes after hundreds of others did, when it is no
// longer in the cache, so each line it spreads over is a miss both times.
struct result_block {
  std::int32_t rows;
  std::uint16_t columns;      // PostgreSQL allows 1664 at most
  std::uint16_t tag;          // offset of the command tag
  std::uint8_t tag_length;    // libpq keeps a tag in 64 bytes
  std::uint8_t size_class;

  const char* base() const noexcept { return reinterpret_cast<const char*>(this); }
  const column_entry* column_entries() const noexcept {
    return reinterpret_cast<const column_entry*>(base() + sizeof(result_block));
  }
  const cell* cells() const noexcept {
    return reinterpret_cast<const cell*>(column_entries() + columns);
  }
  const column_entry* column_at(int i) const noexcept {
    return i >= 0 && i < columns ? column_entries() + i : nullptr;
  }
  // The field at (row, column); NULL for one the block does not have (as libpq reads it).
  field_data field_at(int row, int column) const noexcept {
    field_data f;
    const column_entry* c = column_at(column);
    if (c == nullptr || row < 0 || row >= rows) {
      f.data = "";
      return f;
    }
    const cell& v = cells()[static_cast<std::size_t>(row) * static_cast<std::size_t>(columns) +
                            static_cast<std::size_t>(column)];
    f.null = v.length < 0;
    f.data = f.null ? "" : base() + v.offset;
    f.length = f.null ? 0 : v.length;
    f.fmt = c->fmt;
    f.type = c->type;
    return f;
  }
};
static_assert(alignof(column_entry) <= alignof(result_block) && alignof(cell) <= alignof(column_entry));

// The same reads of a result kept as a PGresult (out of line: they call libpq).
int pg_row_count(const pg_result* r) noexcept;
int pg_column_count(const pg_result* r) noexcept;
field_data pg_field(const pg_result* r, int row, int column) noexcept;

// Eight ASCII digits loaded little-endian (the first in the lowest byte) as their number; false when one is not
// a digit. A byte is a digit when its high nibble is 3 and stays 3 with 6 added (no lane carries into the next
// unless its own byte is 0xFA or more, which fails already); one test of both: the AND of the two high nibbles is
// 3 only when both are (n & (n + 1) never keeps bits 0 and 1). Each step then joins neighbouring lanes, the left
// one times its weight: bytes into pairs, pairs into fours, fours into the eight; no lane overflows into the next.
inline bool eight_digits(std::uint64_t chunk, std::uint64_t& out) noexcept {
  constexpr std::uint64_t zeros = 0x3030303030303030;
  constexpr std::uint64_t high = 0xF0F0F0F0F0F0F0F0;
  if ((chunk & (chunk + 0x0606060606060606) & high) != zeros) return false;
  chunk -= zeros;
  chunk = (chunk * 10 + (chunk >> 8)) & 0x00FF00FF00FF00FF;
  chunk = (chunk * 100 + (chunk >> 16)) & 0x0000FFFF0000FFFF;
  out = (chunk * 10000 + (chunk >> 32)) & 0xFFFFFFFF;
  return true;
}

// A text integer of the common form, an optional '-' and 1 to 18 digits (which cannot overflow an int64), read
// inline: reading a query's integer out of line (decode_signed, its checks and the call) cost about twice this.
// False for anything else (binary, longer, not digits), which decode_signed then reads or rejects.
inline bool short_decimal(const field_data& f, std::int64_t& out) noexcept {
  if (f.fmt != format::text) return false;
  const char* p = f.data;
  const char* const end = p + f.length;
  const bool negative = f.length > 0 && *p == '-';
  p += negative;
  if (static_cast<std::size_t>(end - p) - 1 >= 18) return false;  // none, or more than 18
  std::uint64_t v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    if (end - p >= 8) {
      std::uint64_t chunk = 0;
      std::memcpy(&chunk, p, 8);
      if (!eight_digits(chunk, v)) return false;
      p += 8;
    }
  }
  for (; p != end; ++p) {
    const unsigned d = static_cast<unsigned char>(*p) - unsigned{'0'};
    if (d > 9) return false;
    v = v * 10 + d;
  }
  out = negative ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
  return true;
}

std::error_code decode_signed(const field_data& f, std::int64_t min, std::int64_t max, std::int64_t& out) noexcept;
std::error_code decode_unsigned(const field_data& f, std::uint64_t max, std::uint64_t& out) noexcept;
std::error_code decode_double(const field_data& f, double& out) noexcept;
std::error_code decode_bool(const field_data& f, bool& out) noexcept;
std::error_code decode_text(const field_data& f, std::string_view& out) noexcept;
std::error_code decode_bytea(const field_data& f, std::vector<std::byte>& out);
// Microseconds since 1970-01-01 UTC.
std::error_code decode_timestamp(const field_data& f, std::int64_t& out) noexcept;
// Days since 1970-01-01.
std::error_code decode_date(const field_data& f, std::int32_t& out) noexcept;
}  // namespace detail

// How a field is read into a C++ type; specialise it for types of your own (decode gets a field that is not NULL).
template <class T, class Enable = void>
struct field_traits;

template <class T>
struct field_traits<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static std::error_code decode(const detail::field_data& f, T& out) noexcept {
    std::int64_t v = 0;
    if (detail::short_decimal(f, v)) {  // the common case, inline
      if constexpr (std::is_signed_v<T>) {
        if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
          return make_error_code(error::bad_value);
        }
      } else {
        if (v < 0 || static_cast<std::uint64_t>(v) > std::numeric_limits<T>::max()) {
          return make_error_code(error::bad_value);
        }
      }
      out = static_cast<T>(v);
      return tern::detail::success;  // a copy: a default-constructed one is a call
    }
    if constexpr (std::is_signed_v<T>) {
      std::error_code ec = detail::decode_signed(f, std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), v);
      if (!ec) out = static_cast<T>(v);
      return ec;
    } else {
      std::uint64_t v = 0;
      std::error_code ec = detail::decode_unsigned(f, std::numeric_limits<T>::max(), v);
      if (!ec) out = static_cast<T>(v);
      return ec;
    }
  }
};

template <class T>
struct field_traits<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  static std::error_code decode(const detail::field_data& f, T& out) noexcept {
    double v = 0;
    std::error_code ec = detail::decode_double(f, v);
    if (!ec) out = static_cast<T>(v);
    return ec;
  }
};

template <>
struct field_traits<bool> {
  static std::error_code decode(const detail::field_data& f, bool& out) noexcept { return detail::decode_bool(f, out); }
};

template <>
struct field_traits<std::string_view> {
  static std::error_code decode(const detail::field_data& f, std::string_view& out) noexcept {
    return detail::decode_text(f, out);
  }
};

template <>
struct field_traits<std::string> {
  static std::error_code decode(const detail::field_data& f, std::string& out) {
    std::string_view v;
    std::error_code ec = detail::decode_text(f, v);
    if (!ec) out.assign(v);
    return ec;
  }
};

template <>
struct field_traits<std::vector<std::byte>> {
  static std::error_code decode(const detail::field_data& f, std::vector<std::byte>& out) {
    return detail::decode_bytea(f, out);
  }
};

template <class Duration>
struct field_traits<std::chrono::time_point<std::chrono::system_clock, Duration>> {
  static std::error_code decode(const detail::field_data& f,
                                std::chrono::time_point<std::chrono::system_clock, Duration>& out) noexcept {
    std::int64_t us = 0;
    std::error_code ec = detail::decode_timestamp(f, us);
    if (ec) return ec;
    // A duration finer than a microsecond holds less time: system_clock's nanoseconds end in 2262, which a
    // timestamp may be past. Refused there rather than overflowed.
    using per_us = std::ratio_divide<std::micro, typename Duration::period>;
    if constexpr (per_us::den == 1 && per_us::num > 1) {
      using rep = typename Duration::rep;
      if constexpr (std::is_integral_v<rep>) {
        constexpr std::int64_t most = static_cast<std::int64_t>(std::numeric_limits<rep>::max() / per_us::num);
        constexpr std::int64_t least = static_cast<std::int64_t>(std::numeric_limits<rep>::min() / per_us::num);
        if (us > most || us < least) return make_error_code(error::bad_value);
      }
    }
    out = std::chrono::time_point<std::chrono::system_clock, Duration>(
        std::chrono::duration_cast<Duration>(std::chrono::microseconds(us)));
    return ec;
  }
};

template <>
struct field_traits<std::chrono::sys_days> {
  static std::error_code decode(const detail::field_data& f, std::chrono::sys_days& out) noexcept {
    std::int32_t days = 0;
    std::error_code ec = detail::decode_date(f, days);
    if (!ec) out = std::chrono::sys_days(std::chrono::days(days));
    return ec;
  }
};

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

// One field of a row: a view into its result.
class field {
 public:
  field(detail::result_source r, int row, int column) noexcept : r_(r), row_(row), column_(column) {}

  // False for a column the result does not have (a name it lacks): reads then fail with no_such_column.
  bool exists() const noexcept { return column_ >= 0; }
  bool is_null() const noexcept;
  // The bytes as they came (text, or binary when the query asked for binary results).
  std::string_view raw() const noexcept;
  format fmt() const noexcept;
  // The column's type.
  oid type() const noexcept;

  // Reads the field into out; an error (unexpected_null, bad_value, unsupported, no_such_column) leaves out alone.
  template <class T>
  std::error_code to(T& out) const {
    if (!exists()) return make_error_code(error::no_such_column);
    const detail::field_data f = data();
    if constexpr (is_optional<T>::value) {
      if (f.null) {
        out.reset();
        return {};
      }
      typename T::value_type v{};
      std::error_code ec = field_traits<typename T::value_type>::decode(f, v);
      if (!ec) out = std::move(v);
      return ec;
    } else {
      if (f.null) return make_error_code(error::unexpected_null);
      return field_traits<T>::decode(f, out);
    }
  }
  // The field read as T; throws std::system_error with to()'s error.
  template <class T>
  T as() const {
    T v{};
    if (std::error_code ec = to(v)) throw_error(ec);
    return v;
  }

 private:
  detail::field_data data() const noexcept {
    if (r_.block != nullptr) return r_.block->field_at(row_, column_);
    return detail::pg_field(r_.pg, row_, column_);
  }
  [[noreturn]] void throw_error(std::error_code ec) const;

  detail::result_source r_;
  int row_;
  int column_;
};

// One row of a result: a view into it.
class row {
 public:
  row(detail::result_source r, int index) noexcept : r_(r), index_(index) {}

  // The field in column i.
  field operator[](int column) const noexcept { return {r_, index_, column >= 0 && column < columns() ? column : -1}; }
  // The field of the column named name (exactly: no case folding); a field that does not exist if none is.
  field operator[](std::string_view name) const noexcept;
  int columns() const noexcept {
    return r_.block != nullptr ? r_.block->columns : detail::pg_column_count(r_.pg);
  }
  int index() const noexcept { return index_; }

  // The first sizeof...(T) fields, read into out...; the first error stops it.
  template <class... T>
  std::error_code to(T&... out) const {
    std::error_code ec;
    int i = 0;
    ((ec ? void() : void(ec = (*this)[i++].to(out))), ...);
    return ec;
  }
  // The first sizeof...(T) fields as a tuple; throws std::system_error.
  template <class... T>
  std::tuple<T...> as() const {
    return as_tuple<T...>(std::index_sequence_for<T...>{});
  }

 private:
  template <class... T, std::size_t... I>
  std::tuple<T...> as_tuple(std::index_sequence<I...>) const {
    return std::tuple<T...>((*this)[static_cast<int>(I)].template as<T>()...);
  }

  detail::result_source r_;
  int index_;
};

class result {
 public:
  result() noexcept = default;
  // Takes ownership of r (may be null), kept as it is.
  explicit result(pg_result* r) noexcept { r_.pg = r; }
  // Takes over what src holds (detail::adopt's).
  explicit result(detail::result_source src) noexcept : r_(src) {}
  result(result&& o) noexcept : r_(std::exchange(o.r_, {})) {}
  result& operator=(result&& o) noexcept;
  result(const result&) = delete;
  result& operator=(const result&) = delete;
  ~result() { detail::dispose(r_); }

  // The number of rows.
  std::size_t size() const noexcept {
    return static_cast<std::size_t>(r_.block != nullptr ? r_.block->rows : detail::pg_row_count(r_.pg));
  }
  bool empty() const noexcept { return size() == 0; }
  int columns() const noexcept;
  row operator[](std::size_t i) const noexcept { return {r_, static_cast<int>(i)}; }

  class iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = pg::row;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = pg::row;
    iterator() noexcept = default;
    iterator(detail::result_source r, int i) noexcept : r_(r), i_(i) {}
    pg::row operator*() const noexcept { return {r_, i_}; }
    iterator& operator++() noexcept {
      ++i_;
      return *this;
    }
    iterator operator++(int) noexcept { return {r_, i_++}; }
    difference_type operator-(const iterator& o) const noexcept { return i_ - o.i_; }
    bool operator==(const iterator& o) const noexcept { return i_ == o.i_; }

   private:
    detail::result_source r_;
    int i_ = 0;
  };
  iterator begin() const noexcept { return {r_, 0}; }
  iterator end() const noexcept { return {r_, static_cast<int>(size())}; }

  // The index of the column named name (exactly), or -1.
  int column(std::string_view name) const noexcept;
  // Column i's name, type, type modifier (varchar(n)'s n + 4, numeric's precision and scale; -1 for none: libpq's
  // PQfmod), format, and the table and column it comes from (oids::unspecified and 0 for a computed one). Empty,
  // unspecified, -1 or 0 for a column the result does not have.
  std::string_view column_name(int i) const noexcept;
  oid column_type(int i) const noexcept;
  int column_type_modifier(int i) const noexcept;
  format column_format(int i) const noexcept;
  oid column_table(int i) const noexcept;
  int column_table_column(int i) const noexcept;
  // Rows an INSERT, UPDATE, DELETE, MERGE, SELECT or COPY touched (from its command tag); 0 for others.
  std::uint64_t affected_rows() const noexcept;
  // The command tag: "INSERT 0 1", "SELECT 3", "CREATE TABLE".
  std::string_view command_tag() const noexcept;

  // A failed query's report: the server's primary message (or libpq's, for a connection error), its SQLSTATE
  // ("42P01"), and any field of it by libpq's PG_DIAG_* code ('D' detail, 'H' hint, 'n' constraint...). Empty
  // when the query did not fail.
  std::string_view error_message() const noexcept;
  std::string_view sqlstate() const noexcept;
  std::string_view error_field(int code) const noexcept;

 private:
  detail::result_source r_;
};

}  // namespace tern::pg
