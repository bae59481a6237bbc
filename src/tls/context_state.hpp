// What a tls::context shares with its copies and its streams: the SSL_CTX, and what OpenSSL's callbacks read
// during handshakes (ALPN list, server names). Private to src/tls/.
#pragma once

#include <openssl/ssl.h>

#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "tern/tls/context.hpp"

namespace tern::tls::detail {

struct context_state {
  SSL_CTX* ctx = nullptr;
  tls::role role = tls::role::client;
  tls::verify_mode verify = tls::verify_mode::none;
  bool verify_host_name = true;
  bool trust_chosen = false;                           // a load_verify_* or add_certificate_authority call was made
  std::once_flag default_trust;                        // the system's CAs, loaded for the first client stream
  std::string alpn;                                    // the protocol list in ALPN's wire format
  std::vector<std::pair<std::string, context>> names;  // add_server_name, names in lower case
  context::server_name_callback on_name;

  context_state() = default;
  context_state(const context_state&) = delete;
  context_state& operator=(const context_state&) = delete;
  ~context_state() { SSL_CTX_free(ctx); }

  // Called for every new stream: a verifying client that chose no CAs trusts the system's.
  void prepare_stream();
};

// The first error on OpenSSL's queue of this thread as a std::error_code (the queue is then cleared): a system
// error as std::system_category, anything else in openssl_category(). fallback if the queue is empty.
std::error_code take_openssl_error(std::error_code fallback = std::make_error_code(std::errc::protocol_error));

}  // namespace tern::tls::detail
