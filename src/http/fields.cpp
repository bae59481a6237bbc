// Header field lists (see tern/http/fields.hpp).
#include "tern/http/fields.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "chars.hpp"

namespace tern::http {

namespace {

constexpr unsigned char lower(unsigned char c) noexcept { return c >= 'A' && c <= 'Z' ? c | 0x20 : c; }

template <class Fields>
std::string_view first_value(const Fields& f, std::string_view name) noexcept {
  for (field x : f) {
    if (iequals(x.name, name)) return x.value;
  }
  return {};
}

template <class Fields>
std::size_t count_of(const Fields& f, std::string_view name) noexcept {
  std::size_t n = 0;
  for (field x : f) n += iequals(x.name, name) ? 1 : 0;
  return n;
}

}  // namespace

using detail::equals_lower;
using detail::fold_word;
using detail::load_word;

bool iequals(std::string_view a, std::string_view b) noexcept {
  const std::size_t n = a.size();
  if (n != b.size()) return false;
  const char* p = a.data();
  const char* q = b.data();
  if (n >= 8) {
    // Whole words, the last one overlapping the one before it.
    for (std::size_t i = 0; i + 8 < n; i += 8) {
      if (fold_word(load_word(p + i, 8)) != fold_word(load_word(q + i, 8))) return false;
    }
    return fold_word(load_word(p + n - 8, 8)) == fold_word(load_word(q + n - 8, 8));
  }
  if (n >= 4) {
    const std::uint64_t x = load_word(p, 4) | load_word(p + n - 4, 4) << 32;
    const std::uint64_t y = load_word(q, 4) | load_word(q + n - 4, 4) << 32;
    return fold_word(x) == fold_word(y);
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (lower(static_cast<unsigned char>(p[i])) != lower(static_cast<unsigned char>(q[i]))) return false;
  }
  return true;
}

bool list_contains(std::string_view value, std::string_view token) noexcept {
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    std::string_view element = value.substr(0, comma);
    while (!element.empty() && (element.front() == ' ' || element.front() == '\t')) element.remove_prefix(1);
    while (!element.empty() && (element.back() == ' ' || element.back() == '\t')) element.remove_suffix(1);
    if (iequals(element, token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// ---- field_list ----

std::string_view field_list::find_first(std::string_view name) const noexcept { return first_value(*this, name); }

bool field_list::contains(std::string_view name) const noexcept {
  if (known_ != nullptr) {
    const detail::known_field k = detail::known_field_of(name);
    if (k != detail::known_field::none) return known_[static_cast<std::size_t>(k)] != 0;
  }
  return std::any_of(begin(), end(), [&](const field& f) { return iequals(f.name, name); });
}

std::size_t field_list::count(std::string_view name) const noexcept { return count_of(*this, name); }

// ---- fields ----

fields::fields(const fields& o) { copy_from(o); }

fields::fields(fields&& o) noexcept { take(o); }

fields& fields::operator=(const fields& o) {
  if (this != &o) {
    clear();
    copy_from(o);
  }
  return *this;
}

fields& fields::operator=(fields&& o) noexcept {
  if (this == &o) return *this;
  heap_entries_.reset();
  heap_bytes_.reset();
  take(o);
  return *this;
}

// Takes o's fields into this object, whose heap parts are empty. Heap parts move; inline parts are copied: the
// entries one by one (a response has one or two: a loop, not a call to memcpy), the bytes whole.
void fields::take(fields& o) noexcept {
  if (o.heap_entries_) {
    heap_entries_ = std::move(o.heap_entries_);
    entry_capacity_ = o.entry_capacity_;
  } else {
    entry_capacity_ = inline_entries;
    for (std::uint32_t i = 0; i < o.count_; ++i) inline_entries_[i] = o.inline_entries_[i];
  }
  if (o.heap_bytes_) {
    heap_bytes_ = std::move(o.heap_bytes_);
    byte_capacity_ = o.byte_capacity_;
  } else {
    byte_capacity_ = inline_bytes;
    // The usual response's few short fields without memcpy's call.
    if (o.used_ <= 32) detail::copy_short(inline_bytes_, o.inline_bytes_, o.used_);
    else std::memcpy(inline_bytes_, o.inline_bytes_, o.used_);
  }
  count_ = o.count_;
  used_ = o.used_;
  o.count_ = o.used_ = 0;
  o.entry_capacity_ = inline_entries;
  o.byte_capacity_ = inline_bytes;
}

void fields::copy_from(const fields& o) {
  grow_entries(o.count_);
  grow_bytes(o.used_);
  std::memcpy(entries(), o.entries(), o.count_ * sizeof(entry));
  std::memcpy(bytes(), o.bytes(), o.used_);
  count_ = o.count_;
  used_ = o.used_;
}

void fields::grow_entries(std::size_t need) {
  if (need <= entry_capacity_) return;
  const std::size_t capacity = std::max<std::size_t>(need, 2 * std::size_t{entry_capacity_});
  auto grown = std::make_unique<entry[]>(capacity);
  std::memcpy(grown.get(), entries(), count_ * sizeof(entry));
  heap_entries_ = std::move(grown);
  entry_capacity_ = static_cast<std::uint32_t>(capacity);
}

void fields::grow_bytes(std::size_t need) {
  if (need <= byte_capacity_) return;
  if (need > UINT32_MAX) throw std::length_error("http::fields: too large");
  const std::size_t capacity = std::min<std::size_t>(UINT32_MAX, std::max<std::size_t>(need, 2 * std::size_t{byte_capacity_}));
  auto grown = std::make_unique_for_overwrite<char[]>(capacity);
  std::memcpy(grown.get(), bytes(), used_);
  heap_bytes_ = std::move(grown);
  byte_capacity_ = static_cast<std::uint32_t>(capacity);
}

// add() past the room the object has: it grows first.
void fields::add_grown(std::string_view name, std::string_view value) {
  const auto inside = [this](std::string_view v) {
    return !v.empty() && v.data() >= bytes() && v.data() < bytes() + byte_capacity_;
  };
  if (inside(name) || inside(value)) {
    // A view of this object's own bytes (f.add("B", f.get("A"))), which growing may move: copy first.
    const std::string copy = std::string(name) + std::string(value);
    add(std::string_view(copy).substr(0, name.size()), std::string_view(copy).substr(name.size()));
    return;
  }
  grow_entries(std::size_t{count_} + 1);
  grow_bytes(std::size_t{used_} + name.size() + value.size());
  char* at = bytes() + used_;
  // An empty view may have no storage at all (std::string_view{}, or a field an HTTP/2 peer sent empty), and
  // memcpy takes no null pointer, whatever the size.
  if (!name.empty()) std::memcpy(at, name.data(), name.size());
  if (!value.empty()) std::memcpy(at + name.size(), value.data(), value.size());
  entries()[count_++] = {used_, static_cast<std::uint32_t>(name.size()), static_cast<std::uint32_t>(value.size())};
  used_ += static_cast<std::uint32_t>(name.size() + value.size());
}

void fields::set(std::string_view name, std::string_view value) {
  if (count(name) == 1) {
    // One field of that name: replaced in place when the new value fits where the old one was.
    entry* e = entries();
    for (std::uint32_t i = 0; i < count_; ++i) {
      if (!iequals(view(e[i]).name, name)) continue;
      if (value.size() <= e[i].value_size && !(value.data() >= bytes() && value.data() < bytes() + byte_capacity_)) {
        if (!value.empty()) std::memmove(bytes() + e[i].offset + e[i].name_size, value.data(), value.size());
        e[i].value_size = static_cast<std::uint32_t>(value.size());
        return;
      }
      break;
    }
  }
  erase(name);
  add(name, value);
}

std::size_t fields::erase(std::string_view name) noexcept {
  entry* e = entries();
  std::uint32_t kept = 0;
  for (std::uint32_t i = 0; i < count_; ++i) {
    if (!iequals(view(e[i]).name, name)) e[kept++] = e[i];
  }
  const std::size_t erased = count_ - kept;
  count_ = kept;
  return erased;
}

void fields::clear() noexcept {
  count_ = 0;
  used_ = 0;
}

std::string_view fields::get(std::string_view name) const noexcept { return first_value(*this, name); }

bool fields::contains(std::string_view name) const noexcept { return count_of(*this, name) != 0; }

std::size_t fields::count(std::string_view name) const noexcept { return count_of(*this, name); }

}  // namespace tern::http
