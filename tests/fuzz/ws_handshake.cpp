// libFuzzer target: what tern::ws reads of a peer's opening handshake (tern/ws/detail/handshake.hpp,
// src/ws/handshake.cpp): the input as a Sec-WebSocket-Extensions value, split into its elements and each read as a
// permessage-deflate offer, and as a Sec-WebSocket-Key, decoded from base64. Checks:
// - the elements lie inside the value, and no element holds a comma outside a quoted string;
// - an offer accepted has its window bits within 8..15, each parameter at most once;
// - base64 decodes to three bytes per four characters less the padding, never more than the room given, and what
//   it decodes encodes to text that decodes to the same bytes (the last character's unused bits may differ);
// - the accept value of a key is 28 characters of base64, the same every time.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "fuzz_support.hpp"
#include "tern/ws/detail/handshake.hpp"

namespace {

namespace ws = tern::ws::detail;
using namespace tern::fuzz;

bool base64_char(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' ||
         c == '=';
}

void extensions(std::string_view value) {
  ws::for_each_element(value, [&](std::string_view element) {
    TERN_FUZZ_CHECK(inside(element, value));
    bool quoted = false;
    for (char c : element) {
      if (c == '"') quoted = !quoted;
      TERN_FUZZ_CHECK(quoted || c != ',');
    }
    ws::deflate_params p;
    if (ws::parse_deflate_offer(element, p)) {
      TERN_FUZZ_CHECK(p.server_max_window_bits >= 8 && p.server_max_window_bits <= 15);
      TERN_FUZZ_CHECK(p.client_max_window_bits >= 8 && p.client_max_window_bits <= 15);
      TERN_FUZZ_CHECK(!p.client_max_window_bits_value || p.client_max_window_bits_given);
    }
    return true;
  });
}

void key(std::string_view text, std::size_t room) {
  unsigned char out[96];
  const long n = ws::base64_decode(text, out, room);
  if (n >= 0) {
    std::size_t pad = 0;
    if (!text.empty() && text.back() == '=') ++pad;
    if (text.size() >= 2 && text[text.size() - 2] == '=') ++pad;
    TERN_FUZZ_CHECK(static_cast<std::size_t>(n) == text.size() / 4 * 3 - pad);
    TERN_FUZZ_CHECK(static_cast<std::size_t>(n) <= room);
    char again[128];
    const std::size_t m = ws::base64_encode(out, static_cast<std::size_t>(n), again);
    TERN_FUZZ_CHECK(m == text.size());
    unsigned char back[96];
    TERN_FUZZ_CHECK(ws::base64_decode(std::string_view(again, m), back, sizeof back) == n);
    TERN_FUZZ_CHECK(std::memcmp(back, out, static_cast<std::size_t>(n)) == 0);
  }
  const std::array<char, 28> a = ws::accept_value(text);
  const std::array<char, 28> b = ws::accept_value(text);
  TERN_FUZZ_CHECK(a == b);
  if (text.size() <= 64) {
    for (char c : a) TERN_FUZZ_CHECK(base64_char(c));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;  // a field value within the server's header limit; longer only slows the search
  const exact_copy bytes(std::string_view(reinterpret_cast<const char*>(data), size));
  choices pick(bytes.view());
  extensions(bytes.view());
  key(bytes.view(), pick.between(0, 96));
  return 0;
}
