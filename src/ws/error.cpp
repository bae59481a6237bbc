// The "tern.ws" error category: close codes and tern::ws's own errors (see tern/ws/error.hpp).
#include "tern/ws/error.hpp"

namespace tern::ws::detail {

constinit const error_category_impl error_category_instance;

std::string error_category_impl::message(int value) const {
  if (value >= 1000) {
    switch (static_cast<close_code>(value)) {
      case close_code::normal: return "closed by the peer: normal closure (1000)";
      case close_code::going_away: return "closed by the peer: going away (1001)";
      case close_code::protocol_error: return "closed by the peer: protocol error (1002)";
      case close_code::unsupported_data: return "closed by the peer: unsupported data (1003)";
      case close_code::no_status: return "closed by the peer without a status code (1005)";
      case close_code::abnormal: return "the connection ended without a close frame (1006)";
      case close_code::invalid_payload: return "closed by the peer: invalid payload data (1007)";
      case close_code::policy_violation: return "closed by the peer: policy violation (1008)";
      case close_code::message_too_big: return "closed by the peer: message too big (1009)";
      case close_code::mandatory_extension: return "closed by the peer: mandatory extension missing (1010)";
      case close_code::internal_error: return "closed by the peer: internal error (1011)";
      case close_code::service_restart: return "closed by the peer: service restart (1012)";
      case close_code::try_again_later: return "closed by the peer: try again later (1013)";
      case close_code::bad_gateway: return "closed by the peer: bad gateway (1014)";
    }
    return "closed by the peer with code " + std::to_string(value);
  }
  switch (static_cast<error>(value)) {
    case error::not_upgrade: return "the request is not a WebSocket upgrade";
    case error::bad_version: return "unsupported Sec-WebSocket-Version (13 is required)";
    case error::bad_key: return "missing or malformed Sec-WebSocket-Key";
    case error::bad_request: return "malformed or oversized WebSocket upgrade request";
    case error::rejected: return "the server refused the WebSocket upgrade";
    case error::bad_response: return "malformed WebSocket upgrade response";
    case error::bad_accept: return "wrong Sec-WebSocket-Accept in the upgrade response";
    case error::bad_extension: return "the server agreed an extension that was not offered or cannot be honoured";
    case error::bad_subprotocol: return "the server chose a subprotocol that was not offered";
    case error::protocol_violation: return "WebSocket protocol violation by the peer (closed with 1002)";
    case error::invalid_utf8: return "invalid UTF-8 from the peer (closed with 1007)";
    case error::message_too_big: return "message over the size limit (closed with 1009)";
    case error::bad_compression: return "compressed message does not inflate (closed with 1007)";
    case error::closed: return "the WebSocket is closing or closed";
    case error::bad_close_code: return "a close code that may not be sent";
    case error::control_too_long: return "a control frame payload over 125 bytes";
    case error::not_open: return "the WebSocket handshake has not completed";
  }
  return "unknown WebSocket error";
}

bool error_category_impl::equivalent(int value, const std::error_condition& cond) const noexcept {
  if (cond == tern::condition::end_of_stream) return value >= 1000;  // a close code
  return default_error_condition(value) == cond;
}

}  // namespace tern::ws::detail
