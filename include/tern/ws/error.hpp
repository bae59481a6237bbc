// tern/ws/error.hpp
//
// The errors of tern::ws, in one category, "tern.ws", whose values are of two kinds:
//
// - close codes (1000..4999, ws::close_code): how the peer ended the connection. A read that meets the peer's close
//   frame answers it and reports its code (close_code::normal, close_code::going_away, an application's 4000..);
//   stream::close_code() and stream::close_reason() give it again, with the reason text. no_status (1005) is a
//   close frame without a code; abnormal (1006) a connection that ended without any close frame.
// - tern's own (below 1000, ws::error): a handshake refused and why, or a rule of RFC 6455 the peer broke. For the
//   latter, the stream has already sent the close frame the RFC asks for (1002, 1007, 1009) before reporting it.
//
//   auto [ec, type] = co_await ws.read(message);
//   if (ec == ws::close_code::normal) ...          // the peer said goodbye
//   else if (ec == ws::error::invalid_utf8) ...    // the peer sent bad text; 1007 went back
//
// Every close code compares equal to tern::condition::end_of_stream (tern/error.hpp): the peer ended the stream,
// with a close frame or (abnormal) without one.
#pragma once

#include <cstdint>
#include <string>
#include <system_error>
#include <type_traits>

#include "tern/error.hpp"

namespace tern::ws {

// Close codes of RFC 6455 §7.4 (and IANA's registry); 3000..4999 are the applications' own, sent as they are.
enum class close_code : std::uint16_t {
  normal = 1000,               // the purpose of the connection is fulfilled
  going_away = 1001,           // a server going down, a browser leaving the page
  protocol_error = 1002,       // the peer broke the protocol
  unsupported_data = 1003,     // a type of message the endpoint cannot take (binary for a text-only one)
  no_status = 1005,            // (never sent) a close frame without a code
  abnormal = 1006,             // (never sent) the connection ended without a close frame
  invalid_payload = 1007,      // text that is not UTF-8, or data inconsistent with its type
  policy_violation = 1008,     // a message against the endpoint's policy
  message_too_big = 1009,      // a message over the endpoint's limit
  mandatory_extension = 1010,  // (client) the server did not agree an extension the client needs
  internal_error = 1011,       // the server met an unexpected condition
  service_restart = 1012,
  try_again_later = 1013,
  bad_gateway = 1014,
};

enum class error {
  // Handshake
  not_upgrade = 1,       // (server) the request is not a WebSocket upgrade (method, Upgrade, Connection)
  bad_version,           // (server) Sec-WebSocket-Version is not 13 (426 answered)
  bad_key,               // (server) Sec-WebSocket-Key is missing or not 16 bytes in base64
  bad_request,           // (server) the request head is malformed, or larger than the input buffer
  rejected,              // (client) the server answered with a status other than 101 (stream::handshake_status())
  bad_response,          // (client) a malformed response, or one without Upgrade: websocket / Connection: upgrade
  bad_accept,            // (client) Sec-WebSocket-Accept is not the one for our key
  bad_extension,         // (client) the server agreed an extension or parameter we did not offer or cannot honour
  bad_subprotocol,       // (client) the server chose a subprotocol we did not offer
  // Frames (the stream sent the close code in brackets before reporting them)
  protocol_violation,    // (1002) reserved bits or opcodes, a bad length, fragments out of order, masking wrong
  invalid_utf8,          // (1007) a text message or close reason that is not UTF-8
  message_too_big,       // (1009) a message over stream_options::max_message_size
  bad_compression,       // (1007) a compressed message that does not inflate
  // Use
  closed,                // the close handshake has started: no more messages can be sent (or read)
  bad_close_code,        // close() was given a code that may not be sent (1005, 1006, < 1000, ...)
  control_too_long,      // a ping, pong or close payload over 125 bytes
  not_open,              // read or write before the handshake (or after it failed)
};

namespace detail {
class error_category_impl final : public std::error_category {
 public:
  constexpr error_category_impl() noexcept = default;
  const char* name() const noexcept override { return "tern.ws"; }
  std::string message(int value) const override;
  bool equivalent(int value, const std::error_condition& cond) const noexcept override;
};
extern const error_category_impl error_category_instance;
}  // namespace detail

// The category of ws::error and ws::close_code ("tern.ws").
inline const std::error_category& category() noexcept { return detail::error_category_instance; }

inline std::error_code make_error_code(error e) noexcept { return {static_cast<int>(e), category()}; }
inline std::error_code make_error_code(close_code c) noexcept { return {static_cast<int>(c), category()}; }

// Whether ec is a close code (the peer's, as a read reports it).
inline bool is_close_code(const std::error_code& ec) noexcept {
  return ec.category() == category() && ec.value() >= 1000;
}

// Whether code may be sent in a close frame: 1000..1003, 1007..1014, 3000..4999 (RFC 6455 §7.4, IANA).
constexpr bool sendable_close_code(unsigned code) noexcept {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

}  // namespace tern::ws

template <>
struct std::is_error_code_enum<tern::ws::error> : std::true_type {};
template <>
struct std::is_error_code_enum<tern::ws::close_code> : std::true_type {};
