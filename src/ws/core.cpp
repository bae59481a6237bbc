// A WebSocket connection's state without I/O: buffers, the opening handshake's request and answer, close frames
// (see tern/ws/detail/core.hpp).
#include "tern/ws/detail/core.hpp"

#include <sys/random.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace tern::ws::detail {

namespace {

void fill_random(void* p, std::size_t n) noexcept {
  auto* b = static_cast<unsigned char*>(p);
  while (n > 0) {
    const ssize_t got = ::getrandom(b, n, 0);
    if (got <= 0) continue;  // EINTR; getrandom does not fail otherwise once the pool is ready
    b += got;
    n -= static_cast<std::size_t>(got);
  }
}

}  // namespace

core::core(bool server, const stream_options& opts) : server_(server), opts_(opts) {
  opts_.input_buffer_size = std::max<std::size_t>(opts_.input_buffer_size, 1024);
  opts_.output_buffer_size = std::max<std::size_t>(opts_.output_buffer_size, 1024);
  in_ = std::make_unique<unsigned char[]>(opts_.input_buffer_size);
  out_ = std::make_unique<unsigned char[]>(opts_.output_buffer_size);
  fill_random(&rng_, sizeof rng_);
  decoder.set_options({server, false, opts_.max_message_size});
}

mutable_buffer core::in_space() noexcept {
  if (in_begin_ == in_end_) {
    in_begin_ = in_end_ = 0;
  } else if (in_begin_ != 0 && in_end_ == opts_.input_buffer_size) {
    std::memmove(in_.get(), in_.get() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  return {in_.get() + in_end_, opts_.input_buffer_size - in_end_};
}

bool core::in_prepend(const_buffer b) noexcept {
  if (b.size() > opts_.input_buffer_size - in_size()) return false;
  const std::size_t have = in_size();
  std::memmove(in_.get() + b.size(), in_.get() + in_begin_, have);
  if (b.size() != 0) std::memcpy(in_.get(), b.data(), b.size());
  in_begin_ = 0;
  in_end_ = b.size() + have;
  return true;
}

std::uint32_t core::next_mask_key() noexcept {
  // splitmix64 over a per-connection seed from getrandom.
  std::uint64_t z = (rng_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<std::uint32_t>(z ^ (z >> 31));
}

bool core::append(std::string_view s) noexcept {
  if (s.size() > opts_.output_buffer_size - out_size_) return false;
  if (!s.empty()) std::memcpy(out_.get() + out_size_, s.data(), s.size());
  out_size_ += s.size();
  return true;
}

std::error_code core::build_request(std::string_view host, std::string_view target, const handshake_options& o) {
  unsigned char key[16];
  fill_random(key, sizeof key);
  base64_encode(key, sizeof key, client_key_.data());
  out_size_ = 0;
  bool ok = append("GET ") && append(target.empty() ? "/" : target) && append(" HTTP/1.1\r\nHost: ") &&
            append(host) &&
            append("\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n") &&
            append("Sec-WebSocket-Key: ") &&
            append(std::string_view(client_key_.data(), client_key_.size())) && append("\r\n");
  offered_protocols_.clear();
  if (!o.subprotocols.empty()) {
    for (std::size_t i = 0; i < o.subprotocols.size(); ++i) {
      if (i != 0) offered_protocols_ += ", ";
      offered_protocols_ += o.subprotocols[i];
    }
    ok = ok && append("Sec-WebSocket-Protocol: ") && append(offered_protocols_) && append("\r\n");
  }
  const deflate_options& d = opts_.deflate;
  if (d.enabled) {
    char digits[2];
    auto number = [&](int v) {
      digits[0] = static_cast<char>('0' + v / 10);
      digits[1] = static_cast<char>('0' + v % 10);
      return v >= 10 ? std::string_view(digits, 2) : std::string_view(digits + 1, 1);
    };
    ok = ok && append("Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits");
    offered_ = deflate_params{};
    offered_.client_max_window_bits_given = true;
    if (d.client_max_window_bits < 15) {
      offered_.client_max_window_bits = std::clamp(d.client_max_window_bits, 9, 15);
      offered_.client_max_window_bits_value = true;
      ok = ok && append("=") && append(number(offered_.client_max_window_bits));
    }
    if (d.server_max_window_bits < 15) {
      offered_.server_max_window_bits = std::clamp(d.server_max_window_bits, 9, 15);
      offered_.server_max_window_bits_given = true;
      ok = ok && append("; server_max_window_bits=") && append(number(offered_.server_max_window_bits));
    }
    if (d.client_no_context_takeover) ok = ok && append("; client_no_context_takeover");
    if (d.server_no_context_takeover) ok = ok && append("; server_no_context_takeover");
    offered_.client_no_context_takeover = d.client_no_context_takeover;
    offered_.server_no_context_takeover = d.server_no_context_takeover;
    ok = ok && append("\r\n");
  }
  if (o.headers != nullptr) {
    for (const http::field f : *o.headers) {
      ok = ok && append(f.name) && append(": ") && append(f.value) && append("\r\n");
    }
  }
  ok = ok && append("\r\n");
  if (!ok) return std::make_error_code(std::errc::invalid_argument);
  return {};
}

std::error_code core::check_response(const http::response_head& head) {
  handshake_status_ = head.status;
  if (head.status != 101) return error::rejected;
  const http::field_list& h = head.headers;
  if (!http::list_contains(h.get("upgrade"), "websocket") || !http::list_contains(h.get("connection"), "upgrade")) {
    return error::bad_response;
  }
  const auto expected = accept_value(std::string_view(client_key_.data(), client_key_.size()));
  if (h.count("sec-websocket-accept") != 1 ||
      trim(h.get("sec-websocket-accept")) != std::string_view(expected.data(), expected.size())) {
    return error::bad_accept;
  }
  // Extensions: at most permessage-deflate, once, if offered, with parameters we can honour.
  bool agreed = false;
  deflate_params p;
  bool bad = false;
  for (const http::field& f : h) {
    if (!http::iequals(f.name, "sec-websocket-extensions")) continue;
    for_each_element(f.value, [&](std::string_view e) {
      if (agreed || !opts_.deflate.enabled || !parse_deflate_offer(e, p)) {
        bad = true;
        return false;
      }
      agreed = true;
      return true;
    });
  }
  if (bad) return error::bad_extension;
  if (agreed) {
    if (p.client_max_window_bits_given && !p.client_max_window_bits_value) return error::bad_extension;
    if (offered_.server_max_window_bits_given &&
        (!p.server_max_window_bits_given || p.server_max_window_bits > offered_.server_max_window_bits)) {
      return error::bad_extension;
    }
    if (offered_.server_no_context_takeover && !p.server_no_context_takeover) return error::bad_extension;
    int bits = offered_.client_max_window_bits_value ? offered_.client_max_window_bits : 15;
    if (p.client_max_window_bits_value) {
      if (p.client_max_window_bits < 9) return error::bad_extension;  // zlib's deflate has no 256-byte window
      bits = std::min(bits, p.client_max_window_bits);
    }
    const bool reset = p.client_no_context_takeover || opts_.deflate.client_no_context_takeover;
    deflater_ = std::make_unique<deflater>(bits, reset, opts_.deflate.level);
    inflater_ = std::make_unique<inflater>(false);
  }
  // Subprotocol: one of ours, or none.
  const std::size_t protocols = h.count("sec-websocket-protocol");
  if (protocols > 1) return error::bad_subprotocol;
  if (protocols == 1) {
    const std::string_view chosen = trim(h.get("sec-websocket-protocol"));
    if (offered_protocols_.empty()) return error::bad_subprotocol;
    bool found = false;
    for_each_element(offered_protocols_, [&](std::string_view e) {
      found = found || e == chosen;
      return !found;
    });
    if (!found) return error::bad_subprotocol;
    subprotocol_.assign(chosen);
  }
  decoder.set_options({false, agreed, opts_.max_message_size});
  st = state::open;
  return {};
}

std::error_code core::refuse(int status, error why) {
  handshake_status_ = status;
  out_size_ = 0;
  if (status == 426) {
    append("HTTP/1.1 426 Upgrade Required\r\nSec-WebSocket-Version: 13\r\n"
           "Connection: close\r\nContent-Length: 0\r\n\r\n");
  } else {
    append("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
  }
  st = state::closed;
  return why;
}

std::error_code core::answer_request(const http::request_head& head, const accept_options& o) {
  const http::field_list& h = head.headers;
  // Over HTTP/2 (RFC 8441) the server presents an extended CONNECT with :protocol websocket as this GET with
  // Upgrade: websocket; there is no key and no Sec-WebSocket-Accept (the stream itself is the agreement).
  const bool h2 = head.version.major == 2;
  if (head.method != http::method::get || (!h2 && (head.version.major != 1 || head.version.minor < 1)) ||
      !http::list_contains(h.get("connection"), "upgrade") || !http::list_contains(h.get("upgrade"), "websocket")) {
    return refuse(400, error::not_upgrade);
  }
  if (trim(h.get("sec-websocket-version")) != "13") return refuse(426, error::bad_version);
  unsigned char key[18];
  const std::string_view key_text = trim(h.get("sec-websocket-key"));
  if (!h2 && (h.count("sec-websocket-key") != 1 || base64_decode(key_text, key, sizeof key) != 16)) {
    return refuse(400, error::bad_key);
  }
  // Subprotocol: the client's first that the server speaks.
  std::string_view chosen;
  for (const http::field& f : h) {
    if (!chosen.empty() || !http::iequals(f.name, "sec-websocket-protocol")) continue;
    for_each_element(f.value, [&](std::string_view e) {
      for (std::string_view mine : o.subprotocols) {
        if (mine == e) chosen = mine;
      }
      return chosen.empty();
    });
  }
  // permessage-deflate: the first offer we can accept.
  bool agreed = false;
  deflate_params offer;
  if (opts_.deflate.enabled) {
    for (const http::field& f : h) {
      if (agreed || !http::iequals(f.name, "sec-websocket-extensions")) continue;
      for_each_element(f.value, [&](std::string_view e) {
        deflate_params p;
        if (parse_deflate_offer(e, p) && (!p.server_max_window_bits_given || p.server_max_window_bits >= 9)) {
          offer = p;
          agreed = true;
        }
        return !agreed;
      });
    }
  }
  out_size_ = 0;
  bool ok = append("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n");
  if (!h2) {
    const auto accept = accept_value(key_text);
    ok = ok && append("Sec-WebSocket-Accept: ") && append(std::string_view(accept.data(), accept.size())) &&
         append("\r\n");
  }
  if (!chosen.empty()) ok = ok && append("Sec-WebSocket-Protocol: ") && append(chosen) && append("\r\n");
  if (agreed) {
    const deflate_options& d = opts_.deflate;
    const bool server_nct = offer.server_no_context_takeover || d.server_no_context_takeover;
    const bool client_nct = offer.client_no_context_takeover || d.client_no_context_takeover;
    int server_bits = std::clamp(d.server_max_window_bits, 9, 15);
    if (offer.server_max_window_bits_given) server_bits = std::min(server_bits, offer.server_max_window_bits);
    const int client_bits = offer.client_max_window_bits_value
                                ? std::min(offer.client_max_window_bits, std::clamp(d.client_max_window_bits, 9, 15))
                                : std::clamp(d.client_max_window_bits, 9, 15);
    char digits[3] = {};
    auto number = [&](int v) {
      digits[0] = static_cast<char>('0' + v / 10);
      digits[1] = static_cast<char>('0' + v % 10);
      return v >= 10 ? std::string_view(digits, 2) : std::string_view(digits + 1, 1);
    };
    ok = ok && append("Sec-WebSocket-Extensions: permessage-deflate");
    if (server_nct) ok = ok && append("; server_no_context_takeover");
    if (client_nct) ok = ok && append("; client_no_context_takeover");
    if (offer.server_max_window_bits_given || server_bits < 15) {
      ok = ok && append("; server_max_window_bits=") && append(number(server_bits));
    }
    // The client's window can be limited only if it said it can be (the parameter in its offer).
    if (offer.client_max_window_bits_given && client_bits < 15) {
      ok = ok && append("; client_max_window_bits=") && append(number(client_bits));
    }
    ok = ok && append("\r\n");
    deflater_ = std::make_unique<deflater>(server_bits, server_nct, d.level);
    inflater_ = std::make_unique<inflater>(false);
  }
  if (o.headers != nullptr) {
    for (const http::field f : *o.headers) {
      ok = ok && append(f.name) && append(": ") && append(f.value) && append("\r\n");
    }
  }
  ok = ok && append("\r\n");
  if (!ok) return refuse(400, error::bad_request);
  subprotocol_.assign(chosen);
  handshake_status_ = 101;
  decoder.set_options({true, agreed, opts_.max_message_size});
  st = state::open;
  return {};
}

void core::answer_fields(http::fields& f) const {
  std::string_view text(reinterpret_cast<const char*>(out_.get()), out_size_);
  text.remove_prefix(text.find("\r\n") + 2);  // the status line
  for (std::size_t end; (end = text.find("\r\n")) != 0 && end != std::string_view::npos;) {
    const std::string_view line = text.substr(0, end);
    const std::size_t colon = line.find(':');
    f.add(line.substr(0, colon), trim(line.substr(colon + 1)));
    text.remove_prefix(end + 2);
  }
}

std::size_t core::build_control(opcode op, const unsigned char* payload, std::size_t size) noexcept {
  const bool masked = !server_;
  const std::uint32_t key = masked ? next_mask_key() : 0;
  const std::size_t h = write_header(control_.data(), op, true, false, size, masked, key);
  if (masked) {
    copy_masked(control_.data() + h, payload, size, key, 0);
  } else if (size != 0) {
    std::memcpy(control_.data() + h, payload, size);
  }
  control_size_ = h + size;
  return control_size_;
}

std::size_t core::close_payload(unsigned char* out, std::uint16_t code, std::string_view reason) noexcept {
  if (code == 0) return 0;
  out[0] = static_cast<unsigned char>(code >> 8);
  out[1] = static_cast<unsigned char>(code);
  if (!reason.empty()) std::memcpy(out + 2, reason.data(), reason.size());  // an empty view's data() may be null
  return 2 + reason.size();
}

std::error_code core::on_close_frame(const unsigned char* payload, std::size_t size) noexcept {
  if (size == 0) {
    close_code_received = static_cast<std::uint16_t>(close_code::no_status);
    close_reason_size_ = 0;
    return close_code::no_status;
  }
  if (size == 1) return error::protocol_violation;
  const unsigned code = (unsigned{payload[0]} << 8) | payload[1];
  if (!sendable_close_code(code)) return error::protocol_violation;
  if (!valid_utf8(payload + 2, size - 2)) return error::invalid_utf8;
  close_code_received = static_cast<std::uint16_t>(code);
  close_reason_size_ = size - 2;
  std::memcpy(close_reason_.data(), payload + 2, close_reason_size_);
  return {static_cast<int>(code), category()};
}

void core::on_pong(const unsigned char* payload, std::size_t size) noexcept {
  ++pongs;
  last_pong_size_ = size;
  if (size != 0) std::memcpy(last_pong_.data(), payload, size);
}

}  // namespace tern::ws::detail
