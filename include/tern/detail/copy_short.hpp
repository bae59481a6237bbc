// tern/detail/copy_short.hpp
//
// A copy of a few bytes without a call: the names and values of HTTP fields, a result's short strings (a column's
// name, a number, a command tag). For those memcpy's call and its dispatch on the size cost more than the copy
// itself. Used by tern's libraries; not API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tern::detail {

// n bytes from `from` to `to` (not overlapping): up to 32 as two loads and two stores of the widest size that fits,
// overlapping in the middle, never touching a byte outside [from, from + n) or [to, to + n); more through memcpy.
inline void copy_short(char* to, const char* from, std::size_t n) noexcept {
  if (n > 32) {
    std::memcpy(to, from, n);
  } else if (n >= 16) {  // two 16-byte halves
    std::uint64_t a[2], b[2];
    std::memcpy(a, from, 16);
    std::memcpy(b, from + n - 16, 16);
    std::memcpy(to, a, 16);
    std::memcpy(to + n - 16, b, 16);
  } else if (n >= 8) {
    std::uint64_t a, b;
    std::memcpy(&a, from, 8);
    std::memcpy(&b, from + n - 8, 8);
    std::memcpy(to, &a, 8);
    std::memcpy(to + n - 8, &b, 8);
  } else if (n >= 4) {
    std::uint32_t a, b;
    std::memcpy(&a, from, 4);
    std::memcpy(&b, from + n - 4, 4);
    std::memcpy(to, &a, 4);
    std::memcpy(to + n - 4, &b, 4);
  } else if (n != 0) {  // 1 to 3: the first, the middle and the last
    to[0] = from[0];
    to[n / 2] = from[n / 2];
    to[n - 1] = from[n - 1];
  }
}

}  // namespace tern::detail
