// Character classes of HTTP/1.1 syntax, shared by the head parsers and the chunked decoder (internal).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

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

// Whether a token (a field name, whose bytes are tchars) is the lowercase name given, ignoring ASCII case. For
// tchars, setting bit 0x20 maps exactly the capital letters to small ones (no other tchar lands on a letter or on
// '-'), so the comparison is one OR and one compare per byte, unrolled for the literal's length.
template <std::size_t N>
inline bool token_is(std::string_view token, const char (&lower)[N]) noexcept {
  if (token.size() != N - 1) return false;
  for (std::size_t i = 0; i + 1 < N; ++i) {
    if ((static_cast<unsigned char>(token[i]) | 0x20) != static_cast<unsigned char>(lower[i])) return false;
  }
  return true;
}

}  // namespace tern::http::detail
