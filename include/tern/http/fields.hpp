// tern/http/fields.hpp
//
// Header fields: names compared without regard to ASCII case (RFC 9110 §5.1), kept in the order they came or
// were added, duplicates allowed (several Set-Cookie, say).
//
// Two forms with the same lookups:
// - field_list: the fields of a parsed message, as views into the connection's buffer. The parser fills it; it
//   is valid while the message is (a server handler's request, until the handler returns). Copying nothing is
//   what makes a parsed request free of allocations. The parser also notes where the first of each well-known
//   field is (Host, Content-Type, Connection, the WebSocket handshake's, ...: known_field), so a lookup of one of
//   those is its name's classification and a load, not a walk over the fields.
// - fields: fields a program builds (a response, a client's request), owning their bytes. Up to 12 fields of 320
//   bytes in all live inside the object, so the usual response allocates nothing for its fields; clear() keeps
//   any memory that had to be taken beyond that.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/detail/copy_short.hpp"

namespace tern::http {

// One field line: name and value (the value without its surrounding whitespace).
struct field {
  std::string_view name;
  std::string_view value;
};

// ASCII case-insensitive equality, for field names and tokens.
bool iequals(std::string_view a, std::string_view b) noexcept;

// Whether the comma-separated list value holds token (case-insensitive; whitespace around elements ignored), as
// Connection: keep-alive, Upgrade.
bool list_contains(std::string_view value, std::string_view token) noexcept;

namespace detail {

// The fields whose first position a parser notes (their lowercase names in known_field_names).
enum class known_field : std::uint8_t {
  host, accept, cookie, expect, origin, upgrade, connection, user_agent, content_type, authorization,
  content_length, http2_settings, sec_websocket_key, transfer_encoding, sec_websocket_version,
  sec_websocket_protocol, sec_websocket_extensions, none
};
inline constexpr std::size_t known_field_count = static_cast<std::size_t>(known_field::none);

inline constexpr std::string_view known_field_names[known_field_count] = {
    "host", "accept", "cookie", "expect", "origin", "upgrade", "connection", "user-agent", "content-type",
    "authorization", "content-length", "http2-settings", "sec-websocket-key", "transfer-encoding",
    "sec-websocket-version", "sec-websocket-protocol", "sec-websocket-extensions"};

// The one known field a name of this size and first byte can be (none if no known name fits); the caller compares
// the whole name with known_field_names.
constexpr known_field known_candidate(std::size_t size, unsigned char first) noexcept {
  first |= 0x20;
  switch (size) {
    case 4: return known_field::host;
    case 6:
      switch (first) {
        case 'a': return known_field::accept;
        case 'c': return known_field::cookie;
        case 'e': return known_field::expect;
        case 'o': return known_field::origin;
        default: return known_field::none;
      }
    case 7: return known_field::upgrade;
    case 10: return first == 'c' ? known_field::connection : known_field::user_agent;
    case 12: return known_field::content_type;
    case 13: return known_field::authorization;
    case 14: return first == 'c' ? known_field::content_length : known_field::http2_settings;
    case 17: return first == 's' ? known_field::sec_websocket_key : known_field::transfer_encoding;
    case 21: return known_field::sec_websocket_version;
    case 22: return known_field::sec_websocket_protocol;
    case 24: return known_field::sec_websocket_extensions;
    default: return known_field::none;
  }
}

// Up to 8 bytes at p as a word.
inline std::uint64_t load_word(const char* p, std::size_t n) noexcept {
  std::uint64_t x = 0;
  std::memcpy(&x, p, n);
  return x;
}

using tern::detail::copy_short;  // tern/detail/copy_short.hpp: a field's name or short value, without a call

// Eight bytes at once, their ASCII capitals lowercased (bytes of 0x80 and above untouched).
constexpr std::uint64_t fold_word(std::uint64_t x) noexcept {
  constexpr std::uint64_t ones = 0x0101010101010101;
  const std::uint64_t low = x & (0x7f * ones);
  const std::uint64_t above_z = low + (0x7f - 'Z') * ones;  // high bit: the byte is above 'Z'
  const std::uint64_t from_a = low + (0x80 - 'A') * ones;   // high bit: the byte is 'A' or above
  const std::uint64_t upper = from_a & ~above_z & ~x & (0x80 * ones);
  return x | (upper >> 2);
}

// Whether the n bytes at p, ASCII case ignored, are lower (n bytes, already lowercase; n >= 4), a word at a time:
// any bytes at p, since only capitals are folded.
inline bool equals_lower(const char* p, std::size_t n, std::string_view lower) noexcept {
  const char* q = lower.data();
  if (n >= 8) {
    for (std::size_t i = 0; i + 8 < n; i += 8) {
      if (fold_word(load_word(p + i, 8)) != load_word(q + i, 8)) return false;
    }
    return fold_word(load_word(p + n - 8, 8)) == load_word(q + n - 8, 8);
  }
  const std::uint64_t x = load_word(p, 4) | load_word(p + n - 4, 4) << 32;
  const std::uint64_t y = load_word(q, 4) | load_word(q + n - 4, 4) << 32;
  return fold_word(x) == y;
}

// Which known field name is (ASCII case ignored); none for any other name. Inline, so that a lookup by a literal
// name (request.header("content-type")) is classified when it is compiled.
inline known_field known_field_of(std::string_view name) noexcept {
  if (name.size() < 4) return known_field::none;  // every known name has 4 bytes or more
  const known_field k = known_candidate(name.size(), static_cast<unsigned char>(name[0]));
  if (k == known_field::none ||
      !equals_lower(name.data(), name.size(), known_field_names[static_cast<std::size_t>(k)])) {
    return known_field::none;
  }
  return k;
}

// Per known field, 1 + the index of its first occurrence in a field list, or 0 when the list has none.
using known_positions = std::array<std::uint32_t, known_field_count>;

}  // namespace detail

class field_list {
 public:
  field_list() noexcept = default;
  explicit field_list(std::span<const field> fields) noexcept : fields_(fields) {}
  // A parser's list, with the positions of its known fields.
  field_list(std::span<const field> fields, const detail::known_positions& known) noexcept
      : fields_(fields), known_(known.data()) {}

  // The value of the first field named name, or "" (a field may also be present with an empty value: contains()).
  std::string_view get(std::string_view name) const noexcept {
    if (known_ != nullptr) {
      const detail::known_field k = detail::known_field_of(name);
      if (k != detail::known_field::none) {
        const std::uint32_t at = known_[static_cast<std::size_t>(k)];
        return at != 0 ? fields_[at - 1].value : std::string_view{};
      }
    }
    return find_first(name);
  }
  bool contains(std::string_view name) const noexcept;
  std::size_t count(std::string_view name) const noexcept;

  std::size_t size() const noexcept { return fields_.size(); }
  bool empty() const noexcept { return fields_.empty(); }
  const field& operator[](std::size_t i) const noexcept { return fields_[i]; }
  auto begin() const noexcept { return fields_.begin(); }
  auto end() const noexcept { return fields_.end(); }

 private:
  std::string_view find_first(std::string_view name) const noexcept;  // by a walk

  std::span<const field> fields_;
  const std::uint32_t* known_ = nullptr;
};

class fields {
 public:
  fields() noexcept {}
  fields(const fields& o);
  fields(fields&& o) noexcept;
  fields& operator=(const fields& o);
  fields& operator=(fields&& o) noexcept;
  ~fields() = default;

  // Appends a field (a name already present gets one more line).
  void add(std::string_view name, std::string_view value) {
    // Inline when it fits in the room the object has (the usual few fields of a response): nothing grows, so a
    // view of the object's own bytes stays valid and lies below the bytes written (no copy of it first).
    // Up to 32 bytes each, copied without a call (copy_short).
    const std::size_t size = name.size() + value.size();
    if ((name.size() | value.size()) <= 32 && count_ < entry_capacity_ && size <= byte_capacity_ - used_) [[likely]] {
      char* at = bytes() + used_;
      detail::copy_short(at, name.data(), name.size());
      detail::copy_short(at + name.size(), value.data(), value.size());
      entries()[count_++] = {used_, static_cast<std::uint32_t>(name.size()), static_cast<std::uint32_t>(value.size())};
      used_ += static_cast<std::uint32_t>(size);
      return;
    }
    add_grown(name, value);
  }
  // Replaces every field named name by one with value (appended if there was none).
  void set(std::string_view name, std::string_view value);
  // Removes every field named name; returns how many there were.
  std::size_t erase(std::string_view name) noexcept;
  // Removes every field, keeping the memory.
  void clear() noexcept;

  std::string_view get(std::string_view name) const noexcept;
  bool contains(std::string_view name) const noexcept;
  std::size_t count(std::string_view name) const noexcept;

  std::size_t size() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }
  field operator[](std::size_t i) const noexcept { return view(entries()[i]); }

  class iterator {
   public:
    using value_type = field;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    field operator*() const noexcept { return (*owner_)[i_]; }
    iterator& operator++() noexcept { ++i_; return *this; }
    iterator operator++(int) noexcept { iterator t = *this; ++i_; return t; }
    bool operator==(const iterator& o) const noexcept { return i_ == o.i_; }

   private:
    friend class fields;
    iterator(const fields* owner, std::size_t i) noexcept : owner_(owner), i_(i) {}
    const fields* owner_ = nullptr;
    std::size_t i_ = 0;
  };
  iterator begin() const noexcept { return {this, 0}; }
  iterator end() const noexcept { return {this, count_}; }

 private:
  // A few fields of a few hundred bytes live in the object itself, so a typical response's fields (a
  // Content-Type, a Cache-Control, a cookie) cost no allocation; more spill to the heap, once.
  static constexpr std::uint32_t inline_entries = 12;
  static constexpr std::uint32_t inline_bytes = 320;
  struct entry {
    std::uint32_t offset;  // into the bytes: name, then value
    std::uint32_t name_size;
    std::uint32_t value_size;
  };
  const entry* entries() const noexcept { return heap_entries_ ? heap_entries_.get() : inline_entries_; }
  entry* entries() noexcept { return heap_entries_ ? heap_entries_.get() : inline_entries_; }
  const char* bytes() const noexcept { return heap_bytes_ ? heap_bytes_.get() : inline_bytes_; }
  char* bytes() noexcept { return heap_bytes_ ? heap_bytes_.get() : inline_bytes_; }
  field view(const entry& e) const noexcept {
    return {std::string_view(bytes() + e.offset, e.name_size),
            std::string_view(bytes() + e.offset + e.name_size, e.value_size)};
  }
  void add_grown(std::string_view name, std::string_view value);
  void grow_entries(std::size_t need);
  void grow_bytes(std::size_t need);
  void copy_from(const fields& o);
  void take(fields& o) noexcept;

  entry inline_entries_[inline_entries];
  std::unique_ptr<entry[]> heap_entries_;
  std::uint32_t count_ = 0;
  std::uint32_t entry_capacity_ = inline_entries;
  char inline_bytes_[inline_bytes];
  std::unique_ptr<char[]> heap_bytes_;
  std::uint32_t used_ = 0;  // erased fields leave their bytes until clear()
  std::uint32_t byte_capacity_ = inline_bytes;
};

}  // namespace tern::http
