// The three error categories of tern::tls (see tern/tls/error.hpp), and the translation of OpenSSL's error queue.
#include "tern/tls/error.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstdio>

#include "context_state.hpp"

namespace tern::tls {

namespace detail {

constinit const error_category_impl error_category_instance;
constinit const openssl_category_impl openssl_category_instance;
constinit const verify_category_impl verify_category_instance;

std::string error_category_impl::message(int value) const {
  switch (static_cast<error>(value)) {
    case error::truncated: return "the peer closed the connection without close_notify (the data may be truncated)";
    case error::ktls_unavailable:
      return "kernel TLS offload is not available (no tls ULP in the kernel, or OpenSSL built without kTLS)";
    case error::no_session: return "the session is empty or cannot be resumed";
  }
  return "unknown TLS error";
}

bool error_category_impl::equivalent(int value, const std::error_condition& cond) const noexcept {
  if (cond == tern::condition::end_of_stream) return static_cast<error>(value) == error::truncated;
  return default_error_condition(value) == cond;
}

std::string openssl_category_impl::message(int value) const {
  // Loads the error strings, in case nothing else of OpenSSL ran yet in this process.
  OPENSSL_init_ssl(OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS, nullptr);
  const unsigned long code = static_cast<unsigned int>(value);
  if (const char* reason = ERR_reason_error_string(code)) return reason;
  char text[64];
  std::snprintf(text, sizeof text, "OpenSSL error %#lx", code);
  return text;
}

std::string verify_category_impl::message(int value) const { return X509_verify_cert_error_string(value); }

std::error_code take_openssl_error(std::error_code fallback) {
  const unsigned long code = ERR_peek_error();
  ERR_clear_error();
  if (code == 0) return fallback;
  if (ERR_SYSTEM_ERROR(code)) return {ERR_GET_REASON(code), std::system_category()};
  return {static_cast<int>(code), openssl_category()};
}

}  // namespace detail

}  // namespace tern::tls
