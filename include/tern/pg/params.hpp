// tern/pg/params.hpp
//
// Query parameters: the C++ values a query's $1, $2, ... take, and how each one travels.
//
//   co_await conn.query("SELECT * FROM items WHERE id = $1 AND name = $2", 42, "lamp");
//
// | C++ type                                        | sent as                                  | type (OID)     |
// |-------------------------------------------------|------------------------------------------|----------------|
// | bool                                            | binary                                   | bool           |
// | signed integers of 16, 32 and 64 bits           | binary, big-endian                       | int2/int4/int8 |
// | unsigned integers of 8 and 16 bits, 32 bits     | binary, widened                          | int4, int8     |
// | float, double                                   | binary IEEE 754                          | float4, float8 |
// | std::string, const char*, std::string_view      | text                                     | unknown        |
// | pg::bytes_view, std::vector<std::byte>          | binary                                   | bytea          |
// | std::chrono::system_clock::time_point           | binary, microseconds since 2000-01-01 UTC | timestamptz   |
// | std::chrono::sys_days                           | binary, days since 2000-01-01            | date           |
// | std::optional<T> (empty: NULL), std::nullopt, nullptr | as T, or NULL                      |                |
//
// Numbers go in binary, which spares the server parsing them and this side printing them. Strings go as text of
// type "unknown", so the server gives them the type their place in the query asks for ('42' where an int4 is
// wanted is an int4), as it does with a literal. A string_view that is not a whole std::string is copied (text
// parameters end with a NUL), into the parameter block itself when it is short.
//
// The encoded block (params<N>) lives where the query is awaited, so encoding allocates nothing but for long
// string_views; libpq copies the values into its output buffer when the query is sent.
#pragma once

#include <array>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tern::pg {

// A PostgreSQL type OID.
using oid = std::uint32_t;

// The OIDs of the built-in types tern::pg reads and writes.
namespace oids {
inline constexpr oid unspecified = 0;  // the server infers the type ("unknown" for a text parameter)
inline constexpr oid boolean = 16, bytea = 17, name = 19, int8 = 20, int2 = 21, int4 = 23, text = 25, oid_type = 26;
inline constexpr oid json = 114, float4 = 700, float8 = 701, unknown = 705, bpchar = 1042, varchar = 1043;
inline constexpr oid date = 1082, timestamp = 1114, timestamptz = 1184, numeric = 1700, jsonb = 3802;
}  // namespace oids

// Bytes to send or read as bytea.
using bytes_view = std::span<const std::byte>;

// Whether a query's result comes as text or binary (every column alike, as libpq asks for it).
enum class format : std::uint8_t { text = 0, binary = 1 };

// One encoded parameter, as libpq takes it.
struct param_value {
  const char* data = nullptr;  // null: NULL
  int length = 0;              // bytes (binary format only; text is NUL-terminated)
  format fmt = format::text;
  oid type = oids::unspecified;
};

namespace detail {

// Microseconds and days between 1970-01-01 and PostgreSQL's epoch, 2000-01-01.
inline constexpr std::int64_t pg_epoch_us = 946'684'800'000'000;
inline constexpr std::int32_t pg_epoch_days = 10'957;

template <class T>
void put_big_endian(char* out, T v) noexcept {
  using U = std::make_unsigned_t<T>;
  U u = static_cast<U>(v);
  for (std::size_t i = sizeof(T); i-- > 0;) {
    out[i] = static_cast<char>(u & 0xff);
    u = static_cast<U>(u >> 8);
  }
}

// Where a parameter's bytes go when it cannot point into its own value: 8 bytes of scratch per parameter, and for a
// string_view to be NUL-terminated, a shared block of short strings or a heap copy.
class param_storage {
 public:
  param_storage(char* scratch, std::size_t scratch_size) noexcept : pool_(scratch), pool_left_(scratch_size) {}
  // A NUL-terminated copy of s.
  const char* terminated(std::string_view s) {
    if (s.size() + 1 <= pool_left_) {
      char* p = pool_;
      std::memcpy(p, s.data(), s.size());
      p[s.size()] = '\0';
      pool_ += s.size() + 1;
      pool_left_ -= s.size() + 1;
      return p;
    }
    heap_.emplace_back(s);
    return heap_.back().c_str();
  }

 private:
  char* pool_;
  std::size_t pool_left_;
  std::vector<std::string> heap_;
};

}  // namespace detail

// How a C++ type is sent; specialise it to send types of your own (encode fills v, using scratch's 8 bytes or
// pointing into the value itself).
template <class T, class Enable = void>
struct param_traits;

template <>
struct param_traits<bool> {
  static void encode(bool b, param_value& v, char* scratch, detail::param_storage&) noexcept {
    scratch[0] = b ? 1 : 0;
    v = {scratch, 1, format::binary, oids::boolean};
  }
};

template <class T>
struct param_traits<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                                        !std::is_same_v<T, char>>> {
  static_assert(std::is_signed_v<T> ? sizeof(T) >= 2 && sizeof(T) <= 8 : sizeof(T) <= 4,
                "integers are sent as int2/int4/int8: signed of 16 to 64 bits, unsigned up to 32 bits");
  static void encode(T n, param_value& v, char* scratch, detail::param_storage&) noexcept {
    if constexpr (std::is_signed_v<T> && sizeof(T) == 2) {
      detail::put_big_endian(scratch, static_cast<std::int16_t>(n));
      v = {scratch, 2, format::binary, oids::int2};
    } else if constexpr (sizeof(T) <= 2 || (std::is_signed_v<T> && sizeof(T) == 4)) {
      detail::put_big_endian(scratch, static_cast<std::int32_t>(n));
      v = {scratch, 4, format::binary, oids::int4};
    } else {
      detail::put_big_endian(scratch, static_cast<std::int64_t>(n));
      v = {scratch, 8, format::binary, oids::int8};
    }
  }
};

template <class T>
struct param_traits<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "floating point parameters are float or double");
  static void encode(T x, param_value& v, char* scratch, detail::param_storage&) noexcept {
    if constexpr (sizeof(T) == 4) {
      detail::put_big_endian(scratch, std::bit_cast<std::uint32_t>(x));
      v = {scratch, 4, format::binary, oids::float4};
    } else {
      detail::put_big_endian(scratch, std::bit_cast<std::uint64_t>(x));
      v = {scratch, 8, format::binary, oids::float8};
    }
  }
};

template <>
struct param_traits<std::string> {
  static void encode(const std::string& s, param_value& v, char*, detail::param_storage&) noexcept {
    v = {s.c_str(), static_cast<int>(s.size()), format::text, oids::unspecified};
  }
};

template <>
struct param_traits<const char*> {
  static void encode(const char* s, param_value& v, char*, detail::param_storage&) noexcept {
    v = {s, 0, format::text, oids::unspecified};
    if (s == nullptr) v.data = nullptr;  // a null pointer is NULL
  }
};
template <>
struct param_traits<char*> : param_traits<const char*> {};

template <>
struct param_traits<std::string_view> {
  static void encode(std::string_view s, param_value& v, char*, detail::param_storage& storage) {
    v = {storage.terminated(s), static_cast<int>(s.size()), format::text, oids::unspecified};
  }
};

template <>
struct param_traits<bytes_view> {
  static void encode(bytes_view b, param_value& v, char*, detail::param_storage&) noexcept {
    // A non-null pointer even for no bytes: null would be NULL.
    static const char empty = 0;
    v = {b.empty() ? &empty : reinterpret_cast<const char*>(b.data()), static_cast<int>(b.size()), format::binary,
         oids::bytea};
  }
};
template <>
struct param_traits<std::vector<std::byte>> {
  static void encode(const std::vector<std::byte>& b, param_value& v, char* s, detail::param_storage& st) noexcept {
    param_traits<bytes_view>::encode(bytes_view(b), v, s, st);
  }
};

template <class Duration>
struct param_traits<std::chrono::time_point<std::chrono::system_clock, Duration>> {
  static void encode(std::chrono::time_point<std::chrono::system_clock, Duration> t, param_value& v, char* scratch,
                     detail::param_storage&) noexcept {
    const std::int64_t us =
        std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() - detail::pg_epoch_us;
    detail::put_big_endian(scratch, us);
    v = {scratch, 8, format::binary, oids::timestamptz};
  }
};

template <>
struct param_traits<std::chrono::sys_days> {
  static void encode(std::chrono::sys_days d, param_value& v, char* scratch, detail::param_storage&) noexcept {
    detail::put_big_endian(scratch, static_cast<std::int32_t>(d.time_since_epoch().count() - detail::pg_epoch_days));
    v = {scratch, 4, format::binary, oids::date};
  }
};

template <>
struct param_traits<std::nullptr_t> {
  static void encode(std::nullptr_t, param_value& v, char*, detail::param_storage&) noexcept { v = {}; }
};
template <>
struct param_traits<std::nullopt_t> {
  static void encode(std::nullopt_t, param_value& v, char*, detail::param_storage&) noexcept { v = {}; }
};

template <class T>
struct param_traits<std::optional<T>> {
  static void encode(const std::optional<T>& o, param_value& v, char* scratch, detail::param_storage& storage) {
    if (o) {
      param_traits<T>::encode(*o, v, scratch, storage);
    } else {
      v = {};
    }
  }
};

// What a parameter of type A is encoded as: string literals and arrays of char as const char*, spans of bytes as
// bytes_view, the rest as itself.
template <class A>
using param_type_t = std::conditional_t<
    std::is_array_v<std::remove_cvref_t<A>> || std::is_same_v<std::decay_t<A>, char*>, const char*,
    std::conditional_t<std::is_convertible_v<const std::remove_cvref_t<A>&, bytes_view> &&
                           !std::is_same_v<std::remove_cvref_t<A>, std::vector<std::byte>>,
                       bytes_view, std::remove_cvref_t<A>>>;

namespace detail {

// Whether a parameter of type P (a param_type_t) is encoded into its 8 bytes of scratch or points into its own
// value, never into a block's string storage: tern::pg's own types but strings. A type of the caller's may use the
// storage, so it is not one of these.
template <class P>
struct scratch_only : std::bool_constant<std::is_arithmetic_v<P> && !std::is_same_v<P, char>> {};
template <>
struct scratch_only<bytes_view> : std::true_type {};
template <>
struct scratch_only<std::vector<std::byte>> : std::true_type {};
template <class Duration>
struct scratch_only<std::chrono::time_point<std::chrono::system_clock, Duration>> : std::true_type {};
template <>
struct scratch_only<std::nullptr_t> : std::true_type {};
template <>
struct scratch_only<std::nullopt_t> : std::true_type {};
template <class T>
struct scratch_only<std::optional<T>> : scratch_only<T> {};

// A parameter block's storage for strings: a buffer for short ones and the heap copies of longer ones.
template <std::size_t N, bool Strings>
struct param_strings {
  param_strings() noexcept : storage(buffer, sizeof buffer) {}
  param_strings(const param_strings&) = delete;
  param_strings& operator=(const param_strings&) = delete;
  param_storage storage;
  char buffer[N == 0 ? 1 : 64];
};
// None, for parameters that do not use it.
template <std::size_t N>
struct param_strings<N, false> {};

}  // namespace detail

// The parameters of one query, encoded: what libpq's PQsendQueryParams takes, as parallel arrays.
struct param_list {
  int count = 0;
  const char* const* values = nullptr;
  const int* lengths = nullptr;
  const int* formats = nullptr;
  const oid* types = nullptr;
};

// N encoded parameters, with the bytes they need. Made where the query is awaited (it refers to the values,
// which must outlive it, as the arguments of an awaited call do). Strings false: without the storage for strings
// (72 bytes, and a destructor that reads it), for arguments that are all scratch_only (detail::params_for).
template <std::size_t N, bool Strings = true>
class params {
 public:
  template <class... A>
  explicit params(const A&... args) {
    static_assert(sizeof...(A) == N);
    std::size_t i = 0;
    if constexpr (Strings) {
      (encode_one<param_type_t<A>>(args, i++, strings_.storage), ...);
    } else {
      static_assert((detail::scratch_only<param_type_t<A>>::value && ...));
      detail::param_storage none(nullptr, 0);  // which these types' encoders do not touch
      (encode_one<param_type_t<A>>(args, i++, none), ...);
    }
  }
  params(const params&) = delete;
  params& operator=(const params&) = delete;

  param_list list() const noexcept {
    return {static_cast<int>(N), values_.data(), lengths_.data(), formats_.data(), types_.data()};
  }

 private:
  template <class P, class A>
  void encode_one(const A& arg, std::size_t i, detail::param_storage& storage) {
    param_value v;
    if constexpr (std::is_same_v<P, A>) {
      param_traits<P>::encode(arg, v, scratch_[i].data(), storage);
    } else {
      const P view = arg;  // a view of arg (a pointer, a span): nothing is copied
      param_traits<P>::encode(view, v, scratch_[i].data(), storage);
    }
    values_[i] = v.data;
    lengths_[i] = v.length;
    formats_[i] = static_cast<int>(v.fmt);
    types_[i] = v.type;
  }

  std::array<const char*, N> values_{};
  std::array<int, N> lengths_{};
  std::array<int, N> formats_{};
  std::array<oid, N> types_{};
  std::array<std::array<char, 8>, N> scratch_{};
  // Last: most queries' parameters never touch it, and hundreds of queries' frames are alive at once, so the cache
  // lines a query touches count (docs/design.md, tern::pg).
  [[no_unique_address]] detail::param_strings<N, Strings> strings_;
};

namespace detail {
// The parameter block of a query whose arguments are A...
template <class... A>
using params_for = params<sizeof...(A), !(scratch_only<param_type_t<A>>::value && ...)>;
}  // namespace detail

}  // namespace tern::pg
