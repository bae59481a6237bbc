// tern/ws/detail/handshake.hpp
//
// What the opening handshake computes and checks: SHA-1 (only for Sec-WebSocket-Accept, where RFC 6455 fixes it;
// tern::ws links no crypto library, see docs/design.md), base64, the accept value of a key, and the
// permessage-deflate negotiation of RFC 7692.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tern::ws::detail {

// Text without the spaces and tabs around it (a field value's or a parameter's optional whitespace).
inline std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// SHA-1 of data (FIPS 180-4).
std::array<unsigned char, 20> sha1(const void* data, std::size_t size) noexcept;

// Base64 (RFC 4648, with padding) of size bytes into out (4 * ceil(size / 3) chars); returns the length written.
std::size_t base64_encode(const unsigned char* data, std::size_t size, char* out) noexcept;
// Decodes text (padded base64) into out (room for max bytes); the decoded length, or -1 if text is not base64 or
// does not fit.
long base64_decode(std::string_view text, unsigned char* out, std::size_t max) noexcept;

// Sec-WebSocket-Accept for key: base64(SHA-1(key + the RFC's GUID)), 28 characters.
std::array<char, 28> accept_value(std::string_view key) noexcept;

// permessage-deflate parameters, as offered or agreed.
struct deflate_params {
  bool server_no_context_takeover = false;
  bool client_no_context_takeover = false;
  int server_max_window_bits = 15;    // 8..15
  int client_max_window_bits = 15;    // 8..15
  bool server_max_window_bits_given = false;
  bool client_max_window_bits_given = false;  // present (with or without a value)
  bool client_max_window_bits_value = false;  // present with a value
};

// Parses one element of Sec-WebSocket-Extensions (the text between commas): true if it is permessage-deflate with
// valid parameters (each at most once, window bits 8..15, client_max_window_bits possibly without a value).
bool parse_deflate_offer(std::string_view element, deflate_params& out) noexcept;

// Calls f(element) for each comma-separated element of a header value, trimmed; stops when f returns false.
template <class F>
void for_each_element(std::string_view value, F&& f) {
  // Quoted strings may hold commas: split outside them only.
  std::size_t start = 0;
  bool quoted = false;
  for (std::size_t i = 0; i <= value.size(); ++i) {
    if (i < value.size()) {
      if (value[i] == '"') quoted = !quoted;
      if (quoted || value[i] != ',') continue;
    }
    std::string_view e = value.substr(start, i - start);
    while (!e.empty() && (e.front() == ' ' || e.front() == '\t')) e.remove_prefix(1);
    while (!e.empty() && (e.back() == ' ' || e.back() == '\t')) e.remove_suffix(1);
    if (!e.empty() && !f(e)) return;
    start = i + 1;
  }
}

}  // namespace tern::ws::detail
