// Header field lists (see tern/http/fields.hpp).
#include "tern/http/fields.hpp"

#include <algorithm>
#include <stdexcept>

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

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(static_cast<unsigned char>(a[i])) != lower(static_cast<unsigned char>(b[i]))) return false;
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

std::string_view field_list::get(std::string_view name) const noexcept { return first_value(*this, name); }

bool field_list::contains(std::string_view name) const noexcept {
  return std::any_of(begin(), end(), [&](const field& f) { return iequals(f.name, name); });
}

std::size_t field_list::count(std::string_view name) const noexcept { return count_of(*this, name); }

// ---- fields ----

void fields::add(std::string_view name, std::string_view value) {
  if (storage_.size() + name.size() + value.size() > UINT32_MAX) throw std::length_error("http::fields: too large");
  const auto inside = [this](std::string_view v) {
    return !v.empty() && v.data() >= storage_.data() && v.data() < storage_.data() + storage_.size();
  };
  if (inside(name) || inside(value)) {
    // A view of this object's own bytes (f.add("B", f.get("A"))), which the append below may move: copy first.
    const std::string copy = std::string(name) + std::string(value);
    add(std::string_view(copy).substr(0, name.size()), std::string_view(copy).substr(name.size()));
    return;
  }
  entries_.push_back({static_cast<std::uint32_t>(storage_.size()), static_cast<std::uint32_t>(name.size()),
                      static_cast<std::uint32_t>(value.size())});
  storage_.append(name);
  storage_.append(value);
}

void fields::set(std::string_view name, std::string_view value) {
  erase(name);
  add(name, value);
}

std::size_t fields::erase(std::string_view name) noexcept {
  const std::size_t before = entries_.size();
  std::erase_if(entries_, [&](const entry& e) { return iequals(view(e).name, name); });
  return before - entries_.size();
}

void fields::clear() noexcept {
  storage_.clear();
  entries_.clear();
}

std::string_view fields::get(std::string_view name) const noexcept { return first_value(*this, name); }

bool fields::contains(std::string_view name) const noexcept { return count_of(*this, name) != 0; }

std::size_t fields::count(std::string_view name) const noexcept { return count_of(*this, name); }

}  // namespace tern::http
