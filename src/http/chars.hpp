// Character classes of HTTP/1.1 syntax, shared by the head parsers and the chunked decoder (internal).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace tern::http::detail {

enum char_class : std::uint8_t {
  token_char = 1,   // tchar (RFC 9110 §5.6.2)
  target_char = 2,  // a visible ASCII character, allowed in a request target
  value_char = 4,   // field value: HTAB, SP, VCHAR, obs-text (no control character, no CR)
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
  return t;
}
inline constexpr std::array<std::uint8_t, 256> classes = make_classes();

inline bool is(char c, char_class k) noexcept { return (classes[static_cast<unsigned char>(c)] & k) != 0; }

}  // namespace tern::http::detail
