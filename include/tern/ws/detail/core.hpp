// tern/ws/detail/core.hpp
//
// core: one WebSocket connection's state without any I/O of its own; ws::stream<S> drives it and moves its bytes
// to and from S. Allocated once with the stream (its buffers included), so a stream moves by a pointer.
//
// Buffers: `in` holds what was read from S and not consumed yet (frames, or a handshake head), filled at its back
// by the one reading task and compacted only by it before a read; `out` holds one frame (or part of a large one)
// being written by the task that holds output_lock, except a server's large frame over a socket, whose header and
// payload leave together by a gather write without being copied (stream::send_gathered). A control frame the reader must send (a pong, the close
// answer) goes out from its own small buffer: at once, by the reader, when no write holds output_lock; else it is
// parked in `pending` and the writer sends it as soon as its current frame is complete (control frames may come
// between the fragments of a message, never inside a frame). So the reader never waits behind a stuck writer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "tern/buffer.hpp"
#include "tern/http/fields.hpp"
#include "tern/http/parser.hpp"
#include "tern/sync/mutex.hpp"
#include "tern/ws/detail/deflate.hpp"
#include "tern/ws/detail/frame.hpp"
#include "tern/ws/detail/handshake.hpp"
#include "tern/ws/error.hpp"

namespace tern::ws {

// A message's type.
enum class message_type : std::uint8_t { text = 1, binary = 2 };

// permessage-deflate (RFC 7692): used when both ends ask for it.
struct deflate_options {
  bool enabled = false;                     // a client offers it; a server accepts an offer
  bool client_no_context_takeover = false;  // the client's compressor resets after each message (asked for)
  bool server_no_context_takeover = false;  // the server's compressor resets after each message (asked for)
  int client_max_window_bits = 15;          // 9..15: the client's compressor window asked for (a server limits it)
  int server_max_window_bits = 15;          // 9..15: the server's compressor window asked for (a client limits it)
  int level = 6;                            // zlib's compression level, 1..9
  std::size_t threshold = 0;                // messages shorter than this go uncompressed
};

struct stream_options {
  std::size_t input_buffer_size = 64 * 1024;         // bytes read from the next layer at once (at least 1 KiB)
  std::size_t output_buffer_size = 64 * 1024;        // bytes written to it at once (at least 1 KiB)
  std::uint64_t max_message_size = 16 * 1024 * 1024;  // a longer message (inflated) is refused with 1009; 0: none
  ws::deflate_options deflate;
};

// The client's handshake, beyond host and target.
struct handshake_options {
  std::span<const std::string_view> subprotocols;  // Sec-WebSocket-Protocol, in preference order
  const http::fields* headers = nullptr;           // more request fields (Origin, Authorization, ...)
};

// The server's answer to an upgrade request.
struct accept_options {
  std::span<const std::string_view> subprotocols;  // those the server speaks; the client's first match is chosen
  const http::fields* headers = nullptr;           // more response fields
};

// What read_some delivered.
struct read_result {
  message_type type = message_type::binary;
  std::size_t size = 0;       // bytes put into the buffer
  bool message_done = false;  // they end the message
};

namespace detail {

enum class state : std::uint8_t { idle, open, closed };

class core {
 public:
  core(bool server, const stream_options& opts);
  core(const core&) = delete;
  core& operator=(const core&) = delete;

  bool server() const noexcept { return server_; }
  const stream_options& options() const noexcept { return opts_; }

  // ---- input --------------------------------------------------------------------------------------------------
  unsigned char* in_data() noexcept { return in_.get() + in_begin_; }
  std::size_t in_size() const noexcept { return in_end_ - in_begin_; }
  void in_consume(std::size_t n) noexcept { in_begin_ += n; }
  // Room at the back for one read (compacted first); empty when the buffer is full.
  mutable_buffer in_space() noexcept;
  void in_done(std::size_t n) noexcept { in_end_ += n; }
  // Puts bytes read by someone else (an HTTP server, after the head) in front of the input.
  bool in_prepend(const_buffer b) noexcept;

  // ---- handshake ----------------------------------------------------------------------------------------------
  // Client: writes the request into out (out_size() bytes); invalid_argument if it does not fit.
  std::error_code build_request(std::string_view host, std::string_view target, const handshake_options& o);
  // Client: checks the response head, agrees on extensions and subprotocol.
  std::error_code check_response(const http::response_head& head);
  // Server: checks a request head and writes the answer into out: 101, or the refusal (400, 426) when it returns
  // an error.
  std::error_code answer_request(const http::request_head& head, const accept_options& o);
  // Server: the fields of the answer answer_request() wrote into out (its status line left out).
  void answer_fields(http::fields& f) const;
  // Server: writes a refusal (400, or 426 naming version 13) into out, closes the state; returns why.
  std::error_code refuse(int status, error why);
  int handshake_status() const noexcept { return handshake_status_; }
  std::string_view subprotocol() const noexcept { return subprotocol_; }
  bool deflate_agreed() const noexcept { return static_cast<bool>(deflater_); }

  // ---- output -------------------------------------------------------------------------------------------------
  unsigned char* out() noexcept { return out_.get(); }
  std::size_t out_capacity() const noexcept { return opts_.output_buffer_size; }
  std::size_t out_size() const noexcept { return out_size_; }
  void set_out_size(std::size_t n) noexcept { out_size_ = n; }
  std::uint32_t next_mask_key() noexcept;

  // A control frame (ping, pong, close) ready to send, built into `control`.
  std::size_t build_control(opcode op, const unsigned char* payload, std::size_t size) noexcept;
  std::span<const unsigned char> control_frame() const noexcept { return {control_.data(), control_size_}; }
  // The close frame's payload for code and reason (code 0: none).
  static std::size_t close_payload(unsigned char* out, std::uint16_t code, std::string_view reason) noexcept;

  // A control frame the reader could not send because a write holds output_lock.
  struct pending_control {
    opcode op = opcode::pong;
    bool set = false;
    std::uint8_t size = 0;
    std::array<unsigned char, max_control_payload> payload;
  };
  pending_control pending;

  // ---- reading state ------------------------------------------------------------------------------------------
  frame_decoder decoder;
  utf8_validator utf8;
  std::uint64_t message_bytes = 0;  // delivered bytes of the current message (inflated)
  bool finishing = false;           // a compressed message's payload is all in: its tail is being inflated
  std::unique_ptr<inflater> inflater_;
  std::error_code read_error;       // kept and returned by every later read (a close, a violation)
  bool reading = false;             // a read is pending (close() then leaves the peer's close frame to it)

  // Checks a close frame's payload; records code and reason. Returns the error to report (a close code, or
  // protocol_violation / invalid_utf8 for a malformed one).
  std::error_code on_close_frame(const unsigned char* payload, std::size_t size) noexcept;
  std::uint16_t close_code_received = 0;
  std::string_view close_reason() const noexcept { return {close_reason_.data(), close_reason_size_}; }
  std::span<const unsigned char> last_pong() const noexcept { return {last_pong_.data(), last_pong_size_}; }
  void on_pong(const unsigned char* payload, std::size_t size) noexcept;
  std::uint64_t pongs = 0;

  // ---- writing state ------------------------------------------------------------------------------------------
  std::unique_ptr<deflater> deflater_;
  std::string compressed;        // a compressed message (or fragment), reused
  bool writing_message = false;  // a fragmented message is open
  bool writing_compressed = false;
  bool close_sent = false;
  std::error_code write_error;   // a failed send: a frame may have left in part, so nothing can follow
  state st = state::idle;

  sync::mutex output_lock;

 private:
  bool append(std::string_view s) noexcept;

  bool server_;
  stream_options opts_;
  std::unique_ptr<unsigned char[]> in_;
  std::unique_ptr<unsigned char[]> out_;
  std::size_t in_begin_ = 0, in_end_ = 0;
  std::size_t out_size_ = 0;
  std::uint64_t rng_;
  std::array<unsigned char, max_header_size + max_control_payload> control_;
  std::size_t control_size_ = 0;
  std::array<char, 24> client_key_{};
  int handshake_status_ = 0;
  std::string subprotocol_;
  std::array<char, 123> close_reason_{};
  std::size_t close_reason_size_ = 0;
  std::array<unsigned char, max_control_payload> last_pong_{};
  std::size_t last_pong_size_ = 0;
  deflate_params offered_;         // client: the permessage-deflate offer it made
  std::string offered_protocols_;  // client: the subprotocols it offered, as sent
};

}  // namespace detail
}  // namespace tern::ws
