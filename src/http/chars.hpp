// Character classes of HTTP/1.1 syntax, shared by the head parsers and the chunked decoder (internal).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "tern/http/fields.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tern::http::detail {

enum char_class : std::uint8_t {
  token_char = 1,   // tchar (RFC 9110 §5.6.2)
  target_char = 2,  // a visible ASCII character, allowed in a request target
  value_char = 4,   // field value: HTAB, SP, VCHAR, obs-text (no control character, no CR)
  host_char = 8,    // a reg-name's own characters: unreserved and sub-delims (RFC 3986 §3.2.2; '%' apart)
  hex_char = 16,    // HEXDIG
};

constexpr std::array<std::uint8_t, 256> make_classes() {
  std::array<std::uint8_t, 256> t{};
  for (int c = 0x21; c <= 0x7e; ++c) t[c] |= target_char | value_char;
  for (int c = 0x80; c <= 0xff; ++c) t[c] |= value_char;
  t[' '] |= value_char;
  t['\t'] |= value_char;
  for (int c = '0'; c <= '9'; ++c) t[c] |= token_char;
  for (int c = 'a'; c <= 'z'; ++c) t[c] |= token_char;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] |= token_char;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] |= token_char;
  for (int c = '0'; c <= '9'; ++c) t[c] |= host_char | hex_char;
  for (int c = 'a'; c <= 'z'; ++c) t[c] |= host_char;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] |= host_char;
  for (char c : std::string_view("-._~!$&'()*+,;=")) t[static_cast<unsigned char>(c)] |= host_char;
  for (char c : std::string_view("abcdefABCDEF")) t[static_cast<unsigned char>(c)] |= hex_char;
  return t;
}
inline constexpr std::array<std::uint8_t, 256> classes = make_classes();

inline bool is(char c, char_class k) noexcept { return (classes[static_cast<unsigned char>(c)] & k) != 0; }

// The first byte from p on (before end) that is not of class k (value_char or target_char), or end. Field values
// and targets are the long runs of a head (a User-Agent, a cookie, a path with its query), so they are scanned 16
// bytes at a time where SSE2 is there: a value byte is anything but a control character other than HTAB (below
// 0x20, or 0x7F); a target byte is 0x21 to 0x7E. The caller knows a delimiter of another class (the CR of the line)
// comes before end, so the result is the same as a byte-by-byte scan.
inline const char* skip(const char* p, const char* end, char_class k) noexcept {
#if defined(__SSE2__)
  const __m128i space_or_below = _mm_set1_epi8(k == value_char ? 0x1f : 0x20);
  const __m128i del = _mm_set1_epi8(0x7f);
  const __m128i tab = _mm_set1_epi8('\t');
  while (end - p >= 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // x <= limit, unsigned: max(x, limit) == limit
    __m128i bad = _mm_cmpeq_epi8(_mm_max_epu8(x, space_or_below), space_or_below);
    if (k == value_char) {
      bad = _mm_andnot_si128(_mm_cmpeq_epi8(x, tab), bad);  // HTAB is allowed in a value
      bad = _mm_or_si128(bad, _mm_cmpeq_epi8(x, del));
    } else {
      bad = _mm_or_si128(bad, _mm_cmpeq_epi8(_mm_min_epu8(x, del), del));  // 0x7F and above
    }
    const int mask = _mm_movemask_epi8(bad);
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (p != end && is(*p, k)) ++p;
  return p;
}

// The first '\n' from p on (before end), or end: memchr without the call, since a head's lines are short.
inline const char* find_lf(const char* p, const char* end) noexcept {
#if defined(__SSE2__)
  const __m128i lf = _mm_set1_epi8('\n');
  while (end - p >= 16) {
    const int mask =
        _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), lf));
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (p != end && *p != '\n') ++p;
  return p;
}

// The first ':' or CR from p on (before end), or end: where a field name ends, 16 bytes at a time where SSE2 is
// there. The caller knows the line's CR comes before end.
inline const char* find_colon_or_cr(const char* p, const char* end) noexcept {
#if defined(__SSE2__)
  const __m128i colon = _mm_set1_epi8(':');
  const __m128i cr = _mm_set1_epi8('\r');
  while (end - p >= 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const int mask = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, colon), _mm_cmpeq_epi8(x, cr)));
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (p != end && *p != ':' && *p != '\r') ++p;
  return p;
}

// The size of the head that the first CRLF CRLF in the n bytes at p ends (after it), or 0 when there is none. Where
// SSE2 is there, 16 bytes at a time: the LFs two apart in a block (14 starts per block, so that a pair across
// blocks is seen in the next one), each such pair then checked for its CRs.
inline std::size_t find_head_end(const char* p, std::size_t n) noexcept {
  std::size_t i = 0;
#if defined(__SSE2__)
  const __m128i lf = _mm_set1_epi8('\n');
  for (; i + 16 <= n; i += 14) {
    const unsigned m = static_cast<unsigned>(
        _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)), lf)));
    for (unsigned pairs = m & (m >> 2) & 0x3fff; pairs != 0; pairs &= pairs - 1) {
      const std::size_t at = i + static_cast<std::size_t>(__builtin_ctz(pairs));  // LF ? LF
      if (at != 0 && p[at - 1] == '\r' && p[at + 1] == '\r') return at + 3;
    }
  }
#endif
  for (; i + 2 < n; ++i) {
    if (p[i] == '\n' && p[i + 2] == '\n' && i != 0 && p[i - 1] == '\r' && p[i + 1] == '\r') return i + 3;
  }
  return 0;
}

// load_word, fold_word and equals_lower are in tern/http/fields.hpp (a known field's lookup is inline).

}  // namespace tern::http::detail
