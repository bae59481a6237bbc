// tern/ws/detail/frame.hpp
//
// RFC 6455 framing without I/O: frame headers read and written, masking, UTF-8 validation that can stop anywhere
// in a character, and frame_decoder, the state machine a ws::stream reads with. It is pure (bytes in, events out),
// so the libFuzzer target (tests/fuzz/ws_frame.cpp) drives exactly the code a connection runs.
//
// frame_decoder is given the bytes that have arrived and not been consumed, from where it stopped, and says what
// comes next:
// - need_more: the next header, or a control frame (whose payload is handled whole: at most 125 bytes) has not
//   arrived completely; nothing was consumed.
// - control: a complete ping, pong or close frame, payload unmasked in place; consumed.
// - data: payload of the current data message, unmasked in place: `size` bytes at `payload` (possibly 0, for an
//   empty frame), of which the caller takes any number with consume_payload(n). `message_end` says whether the
//   bytes offered end the message (the frame is final and nothing of it remains beyond them).
// - failed: a violation of the protocol (reserved bits or opcodes, a control frame fragmented or over 125 bytes, a
//   non-minimal or 64-bit-overflowing length, a continuation without a message, a new message inside a fragmented
//   one, a frame masked or not against the role, RSV1 without permessage-deflate or on a continuation), or a
//   message whose declared length passes the limit; `ec` says which.
// Invariant: the events and their bytes are the same however the input is split between calls (the fuzz target
// checks it). Headers are validated before any of their payload is offered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <system_error>

namespace tern::ws::detail {

enum class opcode : std::uint8_t { continuation = 0, text = 1, binary = 2, close = 8, ping = 9, pong = 10 };

inline constexpr bool is_control(opcode op) noexcept { return (static_cast<unsigned>(op) & 8u) != 0; }

// A frame's header, as sent. header_size counts the mask key.
struct frame_header {
  bool fin = false;
  bool rsv1 = false;  // permessage-deflate: the message is compressed (first frame only)
  opcode op = opcode::continuation;
  bool masked = false;
  std::uint32_t mask_key = 0;  // the four key bytes in wire order, as a native-endian word (what apply_mask takes)
  std::uint64_t length = 0;
  std::size_t header_size = 0;
};

inline constexpr std::size_t max_header_size = 14;
inline constexpr std::size_t max_control_payload = 125;

// The result of parse_header: 0 while incomplete, the header's size when done, or an error in ec.
std::size_t parse_header(const unsigned char* data, std::size_t size, frame_header& out, std::error_code& ec) noexcept;

// Writes a header into out (max_header_size bytes of room); returns its size.
std::size_t write_header(unsigned char* out, opcode op, bool fin, bool rsv1, std::uint64_t length, bool masked,
                         std::uint32_t mask_key) noexcept;

// XORs data with key, starting at byte `offset` of the key's cycle; returns the offset after it (mod 4).
std::size_t apply_mask(unsigned char* data, std::size_t size, std::uint32_t key, std::size_t offset) noexcept;
// Copies src to dst masked with key (from offset 0 of its cycle).
void copy_masked(unsigned char* dst, const unsigned char* src, std::size_t size, std::uint32_t key,
                 std::size_t offset) noexcept;

// Incremental UTF-8 validation (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF).
class utf8_validator {
 public:
  // Adds bytes; false once the text cannot be UTF-8 (whatever follows).
  bool feed(const unsigned char* data, std::size_t size) noexcept;
  // True when the bytes so far end on a character boundary.
  bool complete() const noexcept { return state_ == 0; }
  void reset() noexcept { state_ = 0; }

 private:
  unsigned state_ = 0;  // the DFA's state: 0 accept, 12 reject, others inside a character
};

// Whether the whole of data is UTF-8.
bool valid_utf8(const unsigned char* data, std::size_t size) noexcept;

struct decoder_options {
  bool server = true;          // frames from a client must be masked, from a server must not
  bool deflate = false;        // permessage-deflate was agreed: RSV1 may mark a message compressed
  std::uint64_t max_message = 0;  // the declared lengths of a message's frames may not pass it (0: no limit)
};

class frame_decoder {
 public:
  enum class event : std::uint8_t { need_more, control, data, failed };

  struct result {
    event what = event::need_more;
    std::size_t consumed = 0;  // bytes taken from the input by this call (a header, a control frame)
    // control: the frame's opcode and payload; data: the offered payload.
    opcode op = opcode::continuation;
    unsigned char* payload = nullptr;
    std::size_t size = 0;
    bool message_end = false;  // data: consuming all of `size` ends the message
    std::error_code ec;        // failed
  };

  explicit frame_decoder(decoder_options o = {}) noexcept : opts_(o) {}
  void set_options(decoder_options o) noexcept { opts_ = o; }

  // What comes next in data (the unconsumed input, starting where the decoder stopped). After `failed` the decoder
  // stays failed.
  result next(unsigned char* data, std::size_t size) noexcept;
  // Takes n bytes (at most the `size` offered by the last data result) of the current frame's payload.
  void consume_payload(std::size_t n) noexcept;

  // The current message: its opcode (text or binary), whether it is compressed, whether one is open.
  opcode message_opcode() const noexcept { return message_op_; }
  bool message_compressed() const noexcept { return compressed_; }
  bool in_message() const noexcept { return in_message_; }

 private:
  decoder_options opts_;
  frame_header frame_;
  bool in_frame_ = false;       // inside a data frame's payload
  bool in_message_ = false;     // a data message has started and not ended
  bool compressed_ = false;
  bool failed_ = false;
  std::error_code failure_;
  opcode message_op_ = opcode::continuation;
  std::uint64_t remaining_ = 0;       // payload bytes of the current frame not consumed
  std::uint64_t unmasked_ahead_ = 0;  // of those, already unmasked in place
  std::size_t mask_offset_ = 0;       // the key cycle's position at the first unconsumed byte
  std::uint64_t message_length_ = 0;  // declared payload bytes of the current message so far
};

}  // namespace tern::ws::detail
