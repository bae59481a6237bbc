// tern/http/fields.hpp
//
// Header fields: names compared without regard to ASCII case (RFC 9110 §5.1), kept in the order they came or
// were added, duplicates allowed (several Set-Cookie, say).
//
// Two forms with the same lookups:
// - field_list: the fields of a parsed message, as views into the connection's buffer. The parser fills it; it
//   is valid while the message is (a server handler's request, until the handler returns). Copying nothing is
//   what makes a parsed request free of allocations.
// - fields: fields a program builds (a response, a client's request), owning their bytes. Up to 12 fields of 320
//   bytes in all live inside the object, so the usual response allocates nothing for its fields; clear() keeps
//   any memory that had to be taken beyond that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

class field_list {
 public:
  field_list() noexcept = default;
  explicit field_list(std::span<const field> fields) noexcept : fields_(fields) {}

  // The value of the first field named name, or "" (a field may also be present with an empty value: contains()).
  std::string_view get(std::string_view name) const noexcept;
  bool contains(std::string_view name) const noexcept;
  std::size_t count(std::string_view name) const noexcept;

  std::size_t size() const noexcept { return fields_.size(); }
  bool empty() const noexcept { return fields_.empty(); }
  const field& operator[](std::size_t i) const noexcept { return fields_[i]; }
  auto begin() const noexcept { return fields_.begin(); }
  auto end() const noexcept { return fields_.end(); }

 private:
  std::span<const field> fields_;
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
  void add(std::string_view name, std::string_view value);
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
  void grow_entries(std::size_t need);
  void grow_bytes(std::size_t need);
  void copy_from(const fields& o);

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
