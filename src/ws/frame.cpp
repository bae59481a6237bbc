// RFC 6455 framing: headers, masking, UTF-8 validation and the frame decoder (see tern/ws/detail/frame.hpp).
#include "tern/ws/detail/frame.hpp"

#include <cstring>

#include "tern/ws/error.hpp"

namespace tern::ws::detail {

namespace {

std::uint32_t load32(const unsigned char* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The key rotated so that its byte `offset` comes first, as a native word.
std::uint32_t rotate_key(std::uint32_t key, std::size_t offset) noexcept {
  unsigned char k[4];
  std::memcpy(k, &key, 4);
  unsigned char r[4] = {k[offset & 3], k[(offset + 1) & 3], k[(offset + 2) & 3], k[(offset + 3) & 3]};
  return load32(r);
}

bool known_opcode(unsigned op) noexcept { return op <= 2 || (op >= 8 && op <= 10); }

}  // namespace

std::size_t parse_header(const unsigned char* p, std::size_t size, frame_header& out, std::error_code& ec) noexcept {
  if (size < 2) return 0;
  const unsigned b0 = p[0], b1 = p[1];
  out.fin = (b0 & 0x80u) != 0;
  out.rsv1 = (b0 & 0x40u) != 0;
  const unsigned op = b0 & 0x0fu;
  out.masked = (b1 & 0x80u) != 0;
  if ((b0 & 0x30u) != 0 || !known_opcode(op)) {  // RSV2, RSV3: no extension of tern's uses them
    ec = error::protocol_violation;
    return 0;
  }
  out.op = static_cast<opcode>(op);
  std::size_t at = 2;
  std::uint64_t length = b1 & 0x7fu;
  if (length == 126) {
    if (size < 4) return 0;
    length = (std::uint64_t{p[2]} << 8) | p[3];
    at = 4;
    if (length < 126) {
      ec = error::protocol_violation;  // not the minimal encoding
      return 0;
    }
  } else if (length == 127) {
    if (size < 10) return 0;
    length = 0;
    for (int i = 2; i < 10; ++i) length = (length << 8) | p[i];
    at = 10;
    if ((length >> 63) != 0 || length <= 0xffff) {
      ec = error::protocol_violation;  // the top bit set, or not the minimal encoding
      return 0;
    }
  }
  if (is_control(out.op) && (!out.fin || length > max_control_payload)) {
    ec = error::protocol_violation;
    return 0;
  }
  if (out.masked) {
    if (size < at + 4) return 0;
    out.mask_key = load32(p + at);
    at += 4;
  } else {
    out.mask_key = 0;
  }
  out.length = length;
  out.header_size = at;
  return at;
}

std::size_t write_header(unsigned char* out, opcode op, bool fin, bool rsv1, std::uint64_t length, bool masked,
                         std::uint32_t mask_key) noexcept {
  out[0] = static_cast<unsigned char>((fin ? 0x80u : 0u) | (rsv1 ? 0x40u : 0u) | static_cast<unsigned>(op));
  const unsigned char mask_bit = masked ? 0x80 : 0;
  std::size_t at;
  if (length < 126) {
    out[1] = static_cast<unsigned char>(mask_bit | length);
    at = 2;
  } else if (length <= 0xffff) {
    out[1] = mask_bit | 126;
    out[2] = static_cast<unsigned char>(length >> 8);
    out[3] = static_cast<unsigned char>(length);
    at = 4;
  } else {
    out[1] = mask_bit | 127;
    for (int i = 0; i < 8; ++i) out[2 + i] = static_cast<unsigned char>(length >> (56 - 8 * i));
    at = 10;
  }
  if (masked) {
    std::memcpy(out + at, &mask_key, 4);
    at += 4;
  }
  return at;
}

std::size_t apply_mask(unsigned char* data, std::size_t size, std::uint32_t key, std::size_t offset) noexcept {
  copy_masked(data, data, size, key, offset);
  return (offset + size) & 3;
}

void copy_masked(unsigned char* dst, const unsigned char* src, std::size_t size, std::uint32_t key,
                 std::size_t offset) noexcept {
  const std::uint32_t k = rotate_key(key, offset);
  const std::uint64_t k8 = (std::uint64_t{k} << 32) | k;
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    std::uint64_t v;
    std::memcpy(&v, src + i, 8);
    v ^= k8;
    std::memcpy(dst + i, &v, 8);
  }
  unsigned char kb[4];
  std::memcpy(kb, &k, 4);
  for (; i < size; ++i) dst[i] = src[i] ^ kb[i & 3];
}

// A UTF-8 DFA in the shape of Bjoern Hoehrmann's: a class per byte (lead bytes by the length and range of what
// may follow them), then transitions between states that are multiples of 12 (0 accepts, 12 rejects).
namespace {
struct utf8_classes {
  unsigned char of[256];
  constexpr utf8_classes() : of() {
    for (int b = 0; b < 256; ++b) {
      unsigned char c = 0;
      if (b >= 0x80 && b <= 0x8f) c = 1;
      else if (b >= 0x90 && b <= 0x9f) c = 9;
      else if (b >= 0xa0 && b <= 0xbf) c = 7;
      else if (b == 0xc0 || b == 0xc1) c = 8;
      else if (b >= 0xc2 && b <= 0xdf) c = 2;
      else if (b == 0xe0) c = 10;
      else if (b == 0xed) c = 4;
      else if (b >= 0xe1 && b <= 0xef) c = 3;
      else if (b == 0xf0) c = 11;
      else if (b >= 0xf1 && b <= 0xf3) c = 6;
      else if (b == 0xf4) c = 5;
      else if (b >= 0xf5) c = 8;
      of[b] = c;
    }
  }
};
constexpr utf8_classes utf8_class_table;
constexpr const unsigned char* utf8_class = utf8_class_table.of;
constexpr unsigned char utf8_transition[108] = {
    0,  12, 24, 36, 60, 96, 84, 12, 12, 12, 48, 72, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
    12, 0,  12, 12, 12, 12, 12, 0,  12, 0,  12, 12, 12, 24, 12, 12, 12, 12, 12, 24, 12, 24, 12, 12,
    12, 12, 12, 12, 12, 12, 12, 24, 12, 12, 12, 12, 12, 24, 12, 12, 12, 12, 12, 12, 12, 24, 12, 12,
    12, 12, 12, 12, 12, 12, 12, 36, 12, 36, 12, 12, 12, 36, 12, 12, 12, 12, 12, 36, 12, 36, 12, 12,
    12, 36, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
};
}  // namespace

bool utf8_validator::feed(const unsigned char* data, std::size_t size) noexcept {
  unsigned state = state_;
  std::size_t i = 0;
  while (i < size) {
    // ASCII runs, 8 bytes at a time, while between characters.
    if (state == 0) {
      while (i + 8 <= size) {
        std::uint64_t v;
        std::memcpy(&v, data + i, 8);
        if ((v & 0x8080808080808080ull) != 0) break;
        i += 8;
      }
      if (i == size) break;
    }
    state = utf8_transition[state + utf8_class[data[i]]];
    if (state == 12) {
      state_ = 12;
      return false;
    }
    ++i;
  }
  state_ = state;
  return true;
}

bool valid_utf8(const unsigned char* data, std::size_t size) noexcept {
  utf8_validator v;
  return v.feed(data, size) && v.complete();
}

frame_decoder::result frame_decoder::next(unsigned char* data, std::size_t size) noexcept {
  result r;
  if (failed_) {
    r.what = event::failed;
    r.ec = failure_;
    return r;
  }
  auto fail = [&](std::error_code ec) {
    failed_ = true;
    failure_ = ec;
    r.what = event::failed;
    r.ec = ec;
    return r;
  };
  if (!in_frame_) {
    frame_header h;
    std::error_code ec;
    const std::size_t n = parse_header(data, size, h, ec);
    if (ec) return fail(ec);
    if (n == 0) return r;  // need_more
    if (h.masked != opts_.server) return fail(error::protocol_violation);
    if (is_control(h.op)) {
      if (h.rsv1) return fail(error::protocol_violation);
      if (size - n < h.length) return r;  // the whole control frame first
      r.what = event::control;
      r.op = h.op;
      r.payload = data + n;
      r.size = static_cast<std::size_t>(h.length);
      if (h.masked) apply_mask(r.payload, r.size, h.mask_key, 0);
      r.consumed = n + r.size;
      return r;
    }
    if (h.op == opcode::continuation) {
      if (!in_message_ || h.rsv1) return fail(error::protocol_violation);
    } else {
      if (in_message_) return fail(error::protocol_violation);
      if (h.rsv1 && !opts_.deflate) return fail(error::protocol_violation);
      in_message_ = true;
      message_op_ = h.op;
      compressed_ = h.rsv1;
      message_length_ = 0;
    }
    message_length_ += h.length;
    if (opts_.max_message != 0) {
      // A compressed message is held to its inflated size by the stream; its compressed bytes get the slack of
      // deflate's stored blocks and flush markers.
      const std::uint64_t limit = compressed_ ? opts_.max_message + opts_.max_message / 64 + 1024 : opts_.max_message;
      if (message_length_ > limit || h.length > limit) return fail(error::message_too_big);
    }
    frame_ = h;
    in_frame_ = true;
    remaining_ = h.length;
    unmasked_ahead_ = 0;
    mask_offset_ = 0;
    r.consumed = n;
    data += n;
    size -= n;
  }
  const std::size_t offered = remaining_ < size ? static_cast<std::size_t>(remaining_) : size;
  // Payload due and none here: more input is needed (unless a header was just taken, which is reported first).
  if (offered == 0 && remaining_ != 0 && r.consumed == 0) return r;
  if (frame_.masked && unmasked_ahead_ < offered) {
    const std::size_t from = static_cast<std::size_t>(unmasked_ahead_);
    apply_mask(data + from, offered - from, frame_.mask_key, (mask_offset_ + from) & 3);
    unmasked_ahead_ = offered;
  }
  r.what = event::data;
  r.op = message_op_;
  r.payload = data;
  r.size = offered;
  r.message_end = frame_.fin && offered == remaining_;
  if (remaining_ == 0) {  // an empty frame: nothing to consume, so it ends here
    in_frame_ = false;
    if (frame_.fin) in_message_ = false;
  }
  return r;
}

void frame_decoder::consume_payload(std::size_t n) noexcept {
  if (!in_frame_ || n == 0) return;
  remaining_ -= n;
  unmasked_ahead_ = unmasked_ahead_ > n ? unmasked_ahead_ - n : 0;
  mask_offset_ = (mask_offset_ + n) & 3;
  if (remaining_ == 0) {
    in_frame_ = false;
    if (frame_.fin) in_message_ = false;
  }
}

}  // namespace tern::ws::detail
