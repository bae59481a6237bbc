// tls::context: an SSL_CTX with tern's defaults, its setters, and the handshake callbacks for ALPN and SNI.
#include "tern/tls/context.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "context_state.hpp"
#include "tern/tls/detail/engine.hpp"
#include "tern/tls/error.hpp"

namespace tern::tls {

namespace detail {

void context_state::prepare_stream() {
  if (role != tls::role::client || verify == verify_mode::none || trust_chosen) return;
  std::call_once(default_trust, [this] {
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) ERR_clear_error();  // then nothing is trusted: handshakes say so
  });
}

const std::shared_ptr<context_state>& state_of(const context& c) noexcept { return c.state_; }

}  // namespace detail

namespace {

// Encrypted keys are refused rather than asked for on a terminal (OpenSSL's default without a callback).
int refuse_password(char*, int, int, void*) { return 0; }

struct bio_deleter {
  void operator()(BIO* b) const noexcept { BIO_free(b); }
};
struct x509_deleter {
  void operator()(X509* x) const noexcept { X509_free(x); }
};
using x509_ptr = std::unique_ptr<X509, x509_deleter>;

std::unique_ptr<BIO, bio_deleter> memory_bio(std::string_view pem) {
  return std::unique_ptr<BIO, bio_deleter>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Every certificate of pem, in order; an error if there is none or one is malformed.
std::error_code read_certificates(std::string_view pem, std::vector<x509_ptr>& out) {
  ERR_clear_error();
  auto bio = memory_bio(pem);
  if (!bio) return detail::take_openssl_error();
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, refuse_password, nullptr)) out.emplace_back(x);
  const unsigned long last = ERR_peek_last_error();
  // The end of the text ends the loop with "no start line"; after at least one certificate that is no error.
  if (!out.empty() && ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE) {
    ERR_clear_error();
    return {};
  }
  return detail::take_openssl_error();
}

// The result of an OpenSSL call that returns 1 on success.
std::error_code check(int ret) { return ret == 1 ? std::error_code{} : detail::take_openssl_error(); }

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

int select_alpn(SSL*, const unsigned char** out, unsigned char* out_size, const unsigned char* offered,
                unsigned int offered_size, void* arg) {
  const auto* state = static_cast<const detail::context_state*>(arg);
  unsigned char* chosen = nullptr;
  unsigned char chosen_size = 0;
  // The first of the server's protocols that the client offered (server preference).
  if (SSL_select_next_proto(&chosen, &chosen_size, reinterpret_cast<const unsigned char*>(state->alpn.data()),
                            static_cast<unsigned int>(state->alpn.size()), offered,
                            offered_size) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // no_application_protocol
  }
  *out = chosen;
  *out_size = chosen_size;
  return SSL_TLSEXT_ERR_OK;
}

int on_server_name(SSL* ssl, int* alert, void* arg) {
  auto* state = static_cast<detail::context_state*>(arg);
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (name == nullptr) return SSL_TLSEXT_ERR_OK;
  auto* engine = static_cast<detail::engine*>(SSL_get_app_data(ssl));
  try {
    for (const auto& [known, other] : state->names) {
      if (same_name(known, name)) {
        if (engine != nullptr) engine->select_context(other);
        return SSL_TLSEXT_ERR_OK;
      }
    }
    if (state->on_name) {
      if (std::optional<context> other = state->on_name(name)) {
        if (detail::state_of(*other)->role != role::server || engine == nullptr) {
          *alert = SSL_AD_INTERNAL_ERROR;
          return SSL_TLSEXT_ERR_ALERT_FATAL;
        }
        engine->select_context(*other);
      }
    }
  } catch (...) {
    *alert = SSL_AD_INTERNAL_ERROR;
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  return SSL_TLSEXT_ERR_OK;
}

int verify_flags(role r, verify_mode m) {
  switch (m) {
    case verify_mode::none: return SSL_VERIFY_NONE;
    case verify_mode::peer: return SSL_VERIFY_PEER;
    case verify_mode::peer_required:
      return r == role::server ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER;
  }
  return SSL_VERIFY_PEER;
}

int protocol_of(version v) { return v == version::tls1_3 ? TLS1_3_VERSION : TLS1_2_VERSION; }

}  // namespace

context::context(tls::role r) : state_(std::make_shared<detail::context_state>()) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(r == role::client ? TLS_client_method() : TLS_server_method());
  if (ctx == nullptr) {
    throw std::runtime_error("tern::tls::context: OpenSSL cannot make a context: " +
                             detail::take_openssl_error().message());
  }
  state_->ctx = ctx;
  state_->role = r;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE);
  SSL_CTX_set_default_passwd_cb(ctx, refuse_password);
  if (r == role::server) {
    // Clients offering a session for resumption are checked against this id, which OpenSSL requires once client
    // certificates are verified; one value for every context, so a context chosen by SNI accepts the same tickets.
    static constexpr unsigned char id[] = {'t', 'e', 'r', 'n'};
    SSL_CTX_set_session_id_context(ctx, id, sizeof id);
  }
  set_verify_mode(r == role::client ? verify_mode::peer : verify_mode::none);
}

tls::role context::role() const noexcept { return state_->role; }

std::error_code context::use_certificate_chain_file(const std::string& path) {
  ERR_clear_error();
  return check(SSL_CTX_use_certificate_chain_file(state_->ctx, path.c_str()));
}

std::error_code context::use_certificate_chain(std::string_view pem) {
  std::vector<x509_ptr> chain;
  if (std::error_code ec = read_certificates(pem, chain)) return ec;
  ERR_clear_error();
  if (SSL_CTX_use_certificate(state_->ctx, chain.front().get()) != 1) return detail::take_openssl_error();
  SSL_CTX_clear_chain_certs(state_->ctx);
  for (std::size_t i = 1; i < chain.size(); ++i) {
    if (SSL_CTX_add0_chain_cert(state_->ctx, chain[i].get()) != 1) return detail::take_openssl_error();
    (void)chain[i].release();  // owned by the context now
  }
  return {};
}

std::error_code context::use_private_key_file(const std::string& path) {
  ERR_clear_error();
  return check(SSL_CTX_use_PrivateKey_file(state_->ctx, path.c_str(), SSL_FILETYPE_PEM));
}

std::error_code context::use_private_key(std::string_view pem) {
  ERR_clear_error();
  auto bio = memory_bio(pem);
  if (!bio) return detail::take_openssl_error();
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, refuse_password, nullptr);
  if (key == nullptr) return detail::take_openssl_error();
  const int ret = SSL_CTX_use_PrivateKey(state_->ctx, key);
  EVP_PKEY_free(key);
  return check(ret);
}

std::error_code context::use_default_verify_paths() {
  ERR_clear_error();
  if (std::error_code ec = check(SSL_CTX_set_default_verify_paths(state_->ctx))) return ec;
  state_->trust_chosen = true;
  return {};
}

std::error_code context::load_verify_file(const std::string& path) {
  ERR_clear_error();
  if (std::error_code ec = check(SSL_CTX_load_verify_file(state_->ctx, path.c_str()))) return ec;
  state_->trust_chosen = true;
  return {};
}

std::error_code context::load_verify_dir(const std::string& path) {
  ERR_clear_error();
  if (std::error_code ec = check(SSL_CTX_load_verify_dir(state_->ctx, path.c_str()))) return ec;
  state_->trust_chosen = true;
  return {};
}

std::error_code context::add_certificate_authority(std::string_view pem) {
  std::vector<x509_ptr> certificates;
  if (std::error_code ec = read_certificates(pem, certificates)) return ec;
  X509_STORE* store = SSL_CTX_get_cert_store(state_->ctx);
  for (const x509_ptr& x : certificates) {
    if (X509_STORE_add_cert(store, x.get()) != 1) return detail::take_openssl_error();
  }
  state_->trust_chosen = true;
  return {};
}

void context::set_verify_mode(verify_mode m) {
  state_->verify = m;
  SSL_CTX_set_verify(state_->ctx, verify_flags(state_->role, m), nullptr);
}

verify_mode context::get_verify_mode() const noexcept { return state_->verify; }

void context::set_verify_host_name(bool on) noexcept { state_->verify_host_name = on; }

std::error_code context::set_min_version(version v) {
  ERR_clear_error();
  return check(SSL_CTX_set_min_proto_version(state_->ctx, protocol_of(v)));
}

std::error_code context::set_max_version(version v) {
  ERR_clear_error();
  return check(SSL_CTX_set_max_proto_version(state_->ctx, protocol_of(v)));
}

std::error_code context::set_cipher_list(const std::string& ciphers) {
  ERR_clear_error();
  return check(SSL_CTX_set_cipher_list(state_->ctx, ciphers.c_str()));
}

std::error_code context::set_ciphersuites(const std::string& suites) {
  ERR_clear_error();
  return check(SSL_CTX_set_ciphersuites(state_->ctx, suites.c_str()));
}

std::error_code context::set_alpn_protocols(std::span<const std::string_view> protocols) {
  std::string wire;
  for (std::string_view p : protocols) {
    if (p.empty() || p.size() > 255) return std::make_error_code(std::errc::invalid_argument);
    wire.push_back(static_cast<char>(p.size()));
    wire.append(p);
  }
  ERR_clear_error();
  if (state_->role == role::client) {
    // SSL_CTX_set_alpn_protos returns 0 on success.
    if (SSL_CTX_set_alpn_protos(state_->ctx, reinterpret_cast<const unsigned char*>(wire.data()),
                                static_cast<unsigned int>(wire.size())) != 0) {
      return detail::take_openssl_error(std::make_error_code(std::errc::not_enough_memory));
    }
  } else {
    SSL_CTX_set_alpn_select_cb(state_->ctx, wire.empty() ? nullptr : select_alpn, state_.get());
  }
  state_->alpn = std::move(wire);
  return {};
}

std::error_code context::add_server_name(std::string_view name, const context& other) {
  if (state_->role != role::server || other.state_->role != role::server || other.state_ == state_ || name.empty()) {
    return std::make_error_code(std::errc::invalid_argument);
  }
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  state_->names.emplace_back(std::move(lower), other);
  SSL_CTX_set_tlsext_servername_callback(state_->ctx, on_server_name);
  SSL_CTX_set_tlsext_servername_arg(state_->ctx, state_.get());
  return {};
}

void context::set_server_name_callback(server_name_callback f) {
  state_->on_name = std::move(f);
  SSL_CTX_set_tlsext_servername_callback(state_->ctx, on_server_name);
  SSL_CTX_set_tlsext_servername_arg(state_->ctx, state_.get());
}

void context::set_session_tickets(bool on, std::size_t count) {
  SSL_CTX* ctx = state_->ctx;
  if (on) {
    SSL_CTX_clear_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(ctx, count);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
  } else {
    // No tickets, and no session cache either (TLS 1.3 without tickets would fall back to stateful ones).
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  }
}

std::error_code context::enable_ktls() {
  if (!ktls_available()) return make_error_code(error::ktls_unavailable);
#ifdef SSL_OP_ENABLE_KTLS
  SSL_CTX_set_options(state_->ctx, SSL_OP_ENABLE_KTLS);
#endif
  return {};
}

ssl_ctx_st* context::native_handle() const noexcept { return state_->ctx; }

bool ktls_available() noexcept {
#if defined(OPENSSL_NO_KTLS) || !defined(SSL_OP_ENABLE_KTLS)
  return false;
#else
  std::FILE* f = std::fopen("/proc/sys/net/ipv4/tcp_available_ulp", "re");
  if (f == nullptr) return false;
  char text[256];
  const std::size_t n = std::fread(text, 1, sizeof text - 1, f);
  std::fclose(f);
  // A space-separated list of names ("mptcp tls").
  std::string_view names(text, n);
  while (!names.empty()) {
    const std::size_t end = std::min(names.find_first_of(" \n"), names.size());
    if (names.substr(0, end) == "tls") return true;
    names.remove_prefix(std::min(end + 1, names.size()));
  }
  return false;
#endif
}

}  // namespace tern::tls
