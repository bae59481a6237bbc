// SHA-1, base64, Sec-WebSocket-Accept and permessage-deflate offers (see tern/ws/detail/handshake.hpp).
//
// SHA-1 is here because RFC 6455 computes Sec-WebSocket-Accept with it, over 60 bytes per handshake; it is not used
// for anything that needs collision resistance. tern::ws therefore links no crypto library (tests/ws/frame_test.cpp
// checks it against FIPS 180's vectors).
#include "tern/ws/detail/handshake.hpp"

#include <cstring>

namespace tern::ws::detail {

namespace {

constexpr std::uint32_t rotl(std::uint32_t x, int n) noexcept { return (x << n) | (x >> (32 - n)); }

void sha1_block(std::uint32_t h[5], const unsigned char* p) noexcept {
  std::uint32_t w[80];
  for (int i = 0; i < 16; ++i) {
    w[i] = (std::uint32_t{p[4 * i]} << 24) | (std::uint32_t{p[4 * i + 1]} << 16) | (std::uint32_t{p[4 * i + 2]} << 8) |
           p[4 * i + 3];
  }
  for (int i = 16; i < 80; ++i) w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
  for (int i = 0; i < 80; ++i) {
    std::uint32_t f, k;
    if (i < 20) {
      f = (b & c) | (~b & d);
      k = 0x5a827999;
    } else if (i < 40) {
      f = b ^ c ^ d;
      k = 0x6ed9eba1;
    } else if (i < 60) {
      f = (b & c) | (b & d) | (c & d);
      k = 0x8f1bbcdc;
    } else {
      f = b ^ c ^ d;
      k = 0xca62c1d6;
    }
    const std::uint32_t t = rotl(a, 5) + f + e + k + w[i];
    e = d;
    d = c;
    c = rotl(b, 30);
    b = a;
    a = t;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
}

constexpr char base64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_value(char c) noexcept {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool iequal(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// 8..15 from a parameter's value (quoted or not); -1 if it is anything else.
int window_bits(std::string_view v) noexcept {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  if (v.empty() || v.size() > 2) return -1;
  int n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  if (v.size() == 2 && v[0] == '0') return -1;
  return n >= 8 && n <= 15 ? n : -1;
}

}  // namespace

std::array<unsigned char, 20> sha1(const void* data, std::size_t size) noexcept {
  std::uint32_t h[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
  const auto* p = static_cast<const unsigned char*>(data);
  std::size_t left = size;
  for (; left >= 64; left -= 64, p += 64) sha1_block(h, p);
  unsigned char last[128] = {};
  std::memcpy(last, p, left);
  last[left] = 0x80;
  const std::size_t blocks = left + 9 <= 64 ? 1 : 2;
  const std::uint64_t bits = static_cast<std::uint64_t>(size) * 8;
  for (int i = 0; i < 8; ++i) last[blocks * 64 - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  for (std::size_t b = 0; b < blocks; ++b) sha1_block(h, last + 64 * b);
  std::array<unsigned char, 20> out;
  for (int i = 0; i < 5; ++i) {
    out[4 * i] = static_cast<unsigned char>(h[i] >> 24);
    out[4 * i + 1] = static_cast<unsigned char>(h[i] >> 16);
    out[4 * i + 2] = static_cast<unsigned char>(h[i] >> 8);
    out[4 * i + 3] = static_cast<unsigned char>(h[i]);
  }
  return out;
}

std::size_t base64_encode(const unsigned char* data, std::size_t size, char* out) noexcept {
  std::size_t o = 0, i = 0;
  for (; i + 3 <= size; i += 3) {
    const std::uint32_t v = (std::uint32_t{data[i]} << 16) | (std::uint32_t{data[i + 1]} << 8) | data[i + 2];
    out[o++] = base64_alphabet[v >> 18];
    out[o++] = base64_alphabet[(v >> 12) & 63];
    out[o++] = base64_alphabet[(v >> 6) & 63];
    out[o++] = base64_alphabet[v & 63];
  }
  if (size - i == 1) {
    const std::uint32_t v = std::uint32_t{data[i]} << 16;
    out[o++] = base64_alphabet[v >> 18];
    out[o++] = base64_alphabet[(v >> 12) & 63];
    out[o++] = '=';
    out[o++] = '=';
  } else if (size - i == 2) {
    const std::uint32_t v = (std::uint32_t{data[i]} << 16) | (std::uint32_t{data[i + 1]} << 8);
    out[o++] = base64_alphabet[v >> 18];
    out[o++] = base64_alphabet[(v >> 12) & 63];
    out[o++] = base64_alphabet[(v >> 6) & 63];
    out[o++] = '=';
  }
  return o;
}

long base64_decode(std::string_view text, unsigned char* out, std::size_t max) noexcept {
  if (text.size() % 4 != 0) return -1;
  std::size_t o = 0;
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int v[4];
    int pad = 0;
    for (int j = 0; j < 4; ++j) {
      const char c = text[i + j];
      if (c == '=' && last && j >= 2) {
        v[j] = 0;
        ++pad;
        continue;
      }
      if (pad != 0) return -1;  // data after padding
      v[j] = base64_value(c);
      if (v[j] < 0) return -1;
    }
    const std::uint32_t w = (std::uint32_t(v[0]) << 18) | (std::uint32_t(v[1]) << 12) | (std::uint32_t(v[2]) << 6) |
                            std::uint32_t(v[3]);
    const std::size_t n = 3 - static_cast<std::size_t>(pad);
    if (o + n > max) return -1;
    out[o++] = static_cast<unsigned char>(w >> 16);
    if (n > 1) out[o++] = static_cast<unsigned char>(w >> 8);
    if (n > 2) out[o++] = static_cast<unsigned char>(w);
  }
  return static_cast<long>(o);
}

std::array<char, 28> accept_value(std::string_view key) noexcept {
  static constexpr std::string_view guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  char joined[128];
  std::array<char, 28> out{};
  if (key.size() > sizeof joined - guid.size()) return out;
  std::memcpy(joined, key.data(), key.size());
  std::memcpy(joined + key.size(), guid.data(), guid.size());
  const auto digest = sha1(joined, key.size() + guid.size());
  base64_encode(digest.data(), digest.size(), out.data());
  return out;
}

bool parse_deflate_offer(std::string_view element, deflate_params& out) noexcept {
  out = deflate_params{};
  std::size_t semi = element.find(';');
  if (!iequal(trim(element.substr(0, semi)), "permessage-deflate")) return false;
  bool seen_snct = false, seen_cnct = false;
  while (semi != std::string_view::npos) {
    element.remove_prefix(semi + 1);
    semi = element.find(';');
    const std::string_view param = trim(element.substr(0, semi));
    const std::size_t eq = param.find('=');
    const std::string_view name = trim(param.substr(0, eq));
    const bool has_value = eq != std::string_view::npos;
    const std::string_view value = has_value ? trim(param.substr(eq + 1)) : std::string_view();
    if (iequal(name, "server_no_context_takeover")) {
      if (seen_snct || has_value) return false;
      seen_snct = out.server_no_context_takeover = true;
    } else if (iequal(name, "client_no_context_takeover")) {
      if (seen_cnct || has_value) return false;
      seen_cnct = out.client_no_context_takeover = true;
    } else if (iequal(name, "server_max_window_bits")) {
      if (out.server_max_window_bits_given || !has_value) return false;
      const int bits = window_bits(value);
      if (bits < 0) return false;
      out.server_max_window_bits = bits;
      out.server_max_window_bits_given = true;
    } else if (iequal(name, "client_max_window_bits")) {
      if (out.client_max_window_bits_given) return false;
      out.client_max_window_bits_given = true;
      if (has_value) {
        const int bits = window_bits(value);
        if (bits < 0) return false;
        out.client_max_window_bits = bits;
        out.client_max_window_bits_value = true;
      }
    } else {
      return false;  // an unknown parameter: the offer is declined
    }
  }
  return true;
}

}  // namespace tern::ws::detail
