// tern/tls/error.hpp
//
// The errors of tern::tls, in three categories, so that a log line says what OpenSSL or the certificate check
// said rather than a number:
//
// | category           | values                             | message                                        |
// |--------------------|------------------------------------|------------------------------------------------|
// | "tern.tls"         | tls::error (below)                 | tern's own text                                |
// | "tern.tls.openssl" | OpenSSL's codes (ERR_get_error)    | OpenSSL's reason string: "no start line",      |
// |                    |                                    | "wrong version number", "tlsv1 alert unknown ca" |
// | "tern.tls.verify"  | X509_V_ERR_* verification results  | X509_verify_cert_error_string's: "hostname     |
// |                    |                                    | mismatch", "unable to get local issuer certificate" |
//
// A handshake refused because this side could not verify the peer's certificate reports the verification result
// ("tern.tls.verify"), not OpenSSL's generic "certificate verify failed"; the side that was refused sees the
// alert the verifier sent ("tlsv1 alert unknown ca"). Errors OpenSSL reports for the operating system (a missing
// certificate file) are std::system_category codes (std::errc::no_such_file_or_directory). The next layer's own
// errors (connection_reset, operation_canceled, timed_out) pass through unchanged, and a clean end of the peer's
// data, after its close_notify, is tern::error::eof as on any tern stream. Both eof and truncated compare equal to
// tern::condition::end_of_stream (tern/error.hpp).
#pragma once

#include <string>
#include <system_error>
#include <type_traits>

#include "tern/error.hpp"

namespace tern::tls {

enum class error {
  truncated = 1,     // the connection ended without the peer's close_notify: what arrived may be cut short
  ktls_unavailable,  // kernel TLS offload asked for where the kernel or OpenSSL does not offer it
  no_session,        // a session that is empty or cannot be resumed was offered
};

namespace detail {
class error_category_impl final : public std::error_category {
 public:
  constexpr error_category_impl() noexcept = default;
  const char* name() const noexcept override { return "tern.tls"; }
  std::string message(int value) const override;
  bool equivalent(int value, const std::error_condition& cond) const noexcept override;
};
class openssl_category_impl final : public std::error_category {
 public:
  constexpr openssl_category_impl() noexcept = default;
  const char* name() const noexcept override { return "tern.tls.openssl"; }
  std::string message(int value) const override;
};
class verify_category_impl final : public std::error_category {
 public:
  constexpr verify_category_impl() noexcept = default;
  const char* name() const noexcept override { return "tern.tls.verify"; }
  std::string message(int value) const override;
};
extern const error_category_impl error_category_instance;
extern const openssl_category_impl openssl_category_instance;
extern const verify_category_impl verify_category_instance;
}  // namespace detail

// The category of tls::error ("tern.tls").
inline const std::error_category& category() noexcept { return detail::error_category_instance; }
// OpenSSL's errors: values are ERR_get_error() codes, messages OpenSSL's reason strings.
inline const std::error_category& openssl_category() noexcept { return detail::openssl_category_instance; }
// Certificate verification results: values are X509_V_ERR_* codes, messages X509_verify_cert_error_string's.
inline const std::error_category& verify_category() noexcept { return detail::verify_category_instance; }

inline std::error_code make_error_code(error e) noexcept { return {static_cast<int>(e), category()}; }

}  // namespace tern::tls

template <>
struct std::is_error_code_enum<tern::tls::error> : std::true_type {};
