// engine: an SSL object whose records go through a BIO of tern's over two buffers (see tern/tls/detail/engine.hpp).
#include "tern/tls/detail/engine.hpp"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "context_state.hpp"
#include "tern/error.hpp"
#include "tern/tls/error.hpp"

namespace tern::tls::detail {

namespace {
// Empties this thread's OpenSSL error queue, so that SSL_get_error judges the next call alone. Looked at first:
// ERR_clear_error walks and frees all sixteen slots even when the queue is empty, and the queue is empty on almost
// every record (about 0.9% of tls/throughput's samples when it was called unconditionally).
void forget_errors() noexcept {
  if (ERR_peek_error() != 0) ERR_clear_error();
}
}  // namespace

// The BIO's callbacks. They never do I/O: reads take from the input buffer and ask to be retried when it is
// empty (unless the next layer has ended: then OpenSSL sees the end); writes append to the output buffer and ask
// to be retried when it is full.
struct bio_access {
  static engine& of(BIO* b) noexcept { return *static_cast<engine*>(BIO_get_data(b)); }

  static int read(BIO* b, char* out, std::size_t size, std::size_t* done) {
    engine& e = of(b);
    BIO_clear_retry_flags(b);
    const std::size_t have = e.in_end_ - e.in_begin_;
    if (have == 0) {
      *done = 0;
      if (!e.in_eof_) BIO_set_retry_read(b);
      return 0;
    }
    const std::size_t n = std::min(have, size);
    std::memcpy(out, e.in_ + e.in_begin_, n);
    e.in_begin_ += n;
    *done = n;
    return 1;
  }

  static int write(BIO* b, const char* in, std::size_t size, std::size_t* done) {
    engine& e = of(b);
    BIO_clear_retry_flags(b);
    // Compacted only with nothing in flight, and early enough that answer_room stays free at the back.
    if (e.out_size_ - e.out_end_ < size + engine::answer_room && !e.sending_ && e.out_begin_ != 0) {
      std::memmove(e.out_, e.out_ + e.out_begin_, e.out_end_ - e.out_begin_);
      e.out_end_ -= e.out_begin_;
      e.out_begin_ = 0;
    }
    const std::size_t n = std::min(e.out_size_ - e.out_end_, size);
    if (n == 0) {
      *done = 0;
      BIO_set_retry_write(b);
      return 0;
    }
    std::memcpy(e.out_ + e.out_end_, in, n);
    e.out_end_ += n;
    *done = n;
    return 1;
  }

  static long ctrl(BIO* b, int cmd, long, void*) {
    engine& e = of(b);
    switch (cmd) {
      case BIO_CTRL_FLUSH: return 1;  // the stream sends the output buffer whenever a step stops for I/O
      case BIO_CTRL_PENDING: return static_cast<long>(e.in_end_ - e.in_begin_);
      case BIO_CTRL_WPENDING: return static_cast<long>(e.out_end_ - e.out_begin_);
      case BIO_CTRL_EOF: return e.in_eof_ && e.in_end_ == e.in_begin_ ? 1 : 0;
      default: return 0;  // among others BIO_CTRL_SET_KTLS: the keys stay in user space (context::enable_ktls)
    }
  }

  static int create(BIO* b) {
    BIO_set_init(b, 1);
    return 1;
  }
  static int destroy(BIO*) { return 1; }

  static BIO_METHOD* make_method() {
    const int index = BIO_get_new_index();
    BIO_METHOD* m = BIO_meth_new((index == -1 ? 0 : index) | BIO_TYPE_SOURCE_SINK, "tern::tls buffers");
    if (m == nullptr) return nullptr;
    BIO_meth_set_read_ex(m, read);
    BIO_meth_set_write_ex(m, write);
    BIO_meth_set_ctrl(m, ctrl);
    BIO_meth_set_create(m, create);
    BIO_meth_set_destroy(m, destroy);
    return m;
  }
  // One method for the process, never freed (streams may live until exit).
  static const BIO_METHOD* method() {
    static BIO_METHOD* const m = make_method();
    return m;
  }
};

engine::engine(const context& ctx, std::size_t input_size, std::size_t output_size)
    : ctx_(ctx),
      in_size_(std::max<std::size_t>(input_size, 4096)),
      out_size_(std::max(output_size, record_room + answer_room)) {
  memory_ = std::make_unique_for_overwrite<char[]>(in_size_ + out_size_);
  in_ = memory_.get();
  out_ = in_ + in_size_;
  context_state& state = *state_of(ctx_);
  state.prepare_stream();
  ERR_clear_error();
  const BIO_METHOD* method = bio_access::method();
  ssl_ = method != nullptr ? SSL_new(state.ctx) : nullptr;
  BIO* bio = ssl_ != nullptr ? BIO_new(method) : nullptr;
  if (bio == nullptr) {
    SSL_free(ssl_);
    throw std::runtime_error("tern::tls::stream: OpenSSL cannot make a connection: " +
                             take_openssl_error().message());
  }
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);  // one reference, for both directions
  SSL_set_app_data(ssl_, this);
  // OpenSSL takes ciphertext from the input buffer as a whole chunk, not a record's header and then its body: half
  // the BIO calls, and a read step decrypts every record that has arrived.
  SSL_set_read_ahead(ssl_, 1);
  if (state.role == role::client) {
    SSL_set_connect_state(ssl_);
  } else {
    SSL_set_accept_state(ssl_);
  }
}

engine::~engine() {
  // OpenSSL spoils the session of a connection freed without close_notify sent, so that it cannot be resumed. tern
  // keeps that only for connections that failed (a fatal error, a truncation): one that is simply dropped after it
  // did its work leaves a session the client may still offer.
  if (!fatal_) SSL_set_shutdown(ssl_, SSL_get_shutdown(ssl_) | SSL_SENT_SHUTDOWN);
  SSL_free(ssl_);
}

std::error_code engine::set_host_name(std::string_view host) {
  const context_state& state = *state_of(ctx_);
  if (state.role != role::client || host.empty() || host.find('\0') != std::string_view::npos) {
    return std::make_error_code(std::errc::invalid_argument);
  }
  const std::string name(host);
  unsigned char address[16];
  const bool literal =
      inet_pton(AF_INET, name.c_str(), address) == 1 || inet_pton(AF_INET6, name.c_str(), address) == 1;
  const bool check = state.verify != verify_mode::none && state.verify_host_name;
  ERR_clear_error();
  if (literal) {
    // No SNI for an address (RFC 6066); the certificate must name the address instead.
    if (check && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), name.c_str()) != 1) return take_openssl_error();
    return {};
  }
  if (SSL_set_tlsext_host_name(ssl_, name.c_str()) != 1) return take_openssl_error();
  if (check) {
    SSL_set_hostflags(ssl_, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (SSL_set1_host(ssl_, name.c_str()) != 1) return take_openssl_error();
  }
  return {};
}

std::error_code engine::set_session(const session& s) {
  if (state_of(ctx_)->role != role::client) return std::make_error_code(std::errc::invalid_argument);
  if (!s.resumable()) return make_error_code(error::no_session);
  ERR_clear_error();
  if (SSL_set_session(ssl_, s.native_handle()) != 1) return take_openssl_error();
  return {};
}

void engine::select_context(const context& other) {
  const std::shared_ptr<context_state>& state = state_of(other);
  selected_ = state;
  SSL_set_SSL_CTX(ssl_, state->ctx);
  // SSL_set_SSL_CTX takes the certificate and key; the check of a client certificate follows the new context too.
  SSL_set_verify(ssl_, SSL_CTX_get_verify_mode(state->ctx), SSL_CTX_get_verify_callback(state->ctx));
}

step engine::after(int ret, std::size_t bytes) {
  switch (SSL_get_error(ssl_, ret)) {
    case SSL_ERROR_WANT_READ: return {want::input, bytes, {}};
    case SSL_ERROR_WANT_WRITE: return {want::output, bytes, {}};
    case SSL_ERROR_ZERO_RETURN: return {want::nothing, bytes, make_error_code(tern::error::eof)};
    default: break;
  }
  // Fatal. OpenSSL's reason for an end without close_notify and for a refused certificate are made more precise:
  // tern's truncated, and the verification result's own words.
  const unsigned long first = ERR_peek_error();
  const unsigned long last = ERR_peek_last_error();
  auto is = [&](int reason) {
    return (ERR_GET_LIB(first) == ERR_LIB_SSL && ERR_GET_REASON(first) == reason) ||
           (ERR_GET_LIB(last) == ERR_LIB_SSL && ERR_GET_REASON(last) == reason);
  };
  if (is(SSL_R_UNEXPECTED_EOF_WHILE_READING) || (first == 0 && in_eof_)) {
    fatal_ = make_error_code(error::truncated);
  } else if (const long verified = SSL_get_verify_result(ssl_);
             is(SSL_R_CERTIFICATE_VERIFY_FAILED) && verified != X509_V_OK) {
    fatal_ = {static_cast<int>(verified), verify_category()};
  } else {
    fatal_ = take_openssl_error();
  }
  ERR_clear_error();
  return {want::nothing, bytes, fatal_};
}

step engine::handshake() {
  if (fatal_) return {want::nothing, 0, fatal_};
  forget_errors();
  const int ret = SSL_do_handshake(ssl_);
  if (ret == 1) return {};
  return after(ret, 0);
}

step engine::read(mutable_buffer b) {
  if (fatal_) return {want::nothing, 0, fatal_};
  auto* out = static_cast<char*>(b.data());
  std::size_t total = 0;
  for (;;) {
    std::size_t got = 0;
    forget_errors();
    const int ret = SSL_read_ex(ssl_, out + total, b.size() - total, &got);
    if (ret == 1) {
      total += got;
      // Another record may be complete already: take it too, as long as there is room and nothing must wait.
      // (SSL_has_pending: with read-ahead, records may wait in OpenSSL's buffer with the input buffer empty.)
      if (total == b.size() || (in_end_ == in_begin_ && SSL_has_pending(ssl_) == 0)) return {want::nothing, total, {}};
      continue;
    }
    if (total == 0) return after(ret, 0);
    // Bytes first; what stopped the loop (more input needed, the peer's close_notify, an error) is met again, or
    // kept in fatal_, by the next read.
    if (SSL_get_error(ssl_, ret) != SSL_ERROR_WANT_READ && SSL_get_error(ssl_, ret) != SSL_ERROR_ZERO_RETURN) {
      (void)after(ret, 0);
    }
    forget_errors();
    return {want::nothing, total, {}};
  }
}

std::size_t engine::output_room() const noexcept { return out_size_ - out_end_ + (sending_ ? 0 : out_begin_); }

step engine::write(const_buffer b) {
  if (fatal_) return {want::nothing, 0, fatal_};
  if (output_error_) return {want::nothing, 0, output_error_};
  const auto* in = static_cast<const char*>(b.data());
  std::size_t total = 0;
  while (total < b.size()) {
    if (output_room() < record_room + answer_room) {
      if (total != 0) break;
      return {want::output, 0, {}};
    }
    std::size_t written = 0;
    forget_errors();
    const int ret = SSL_write_ex(ssl_, in + total, std::min(b.size() - total, max_plaintext), &written);
    if (ret != 1) {
      if (total == 0) return after(ret, 0);
      (void)after(ret, 0);  // a fatal error is kept for the next step; what was taken is reported now
      break;
    }
    total += written;
  }
  return {want::nothing, total, {}};
}

step engine::shutdown() {
  if (fatal_) return {want::nothing, 0, fatal_};
  if (close_notify_queued_) return {};
  ERR_clear_error();
  const int ret = SSL_shutdown(ssl_);
  // 0: sent, the peer's not received yet; 1: both. -1 with WANT_READ: sent, and OpenSSL would now wait for the
  // peer's, which is the stream's to do (a read), not this step's.
  if (ret >= 0 || SSL_get_error(ssl_, ret) == SSL_ERROR_WANT_READ) {
    close_notify_queued_ = true;
    ERR_clear_error();
    return {};
  }
  return after(ret, 0);
}

mutable_buffer engine::input_space() noexcept {
  if (in_begin_ == in_end_) {
    in_begin_ = in_end_ = 0;
  } else if (in_begin_ != 0) {
    std::memmove(in_, in_ + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  return {in_ + in_end_, in_size_ - in_end_};
}

void engine::input_done(std::size_t n, bool eof) noexcept {
  in_end_ += n;
  if (eof) in_eof_ = true;
  if (n != 0 || eof) ++input_generation_;
}

const_buffer engine::output() noexcept {
  sending_ = true;
  return {out_ + out_begin_, out_end_ - out_begin_};
}

void engine::output_done(std::size_t n, const std::error_code& ec) noexcept {
  sending_ = false;
  out_begin_ += n;
  if (out_begin_ == out_end_) out_begin_ = out_end_ = 0;
  if (ec && ec != tern::error::operation_canceled && !output_error_) output_error_ = ec;
}

bool engine::handshake_done() const noexcept { return SSL_is_init_finished(ssl_) == 1; }

bool engine::session_reused() const noexcept { return SSL_session_reused(ssl_) == 1; }

session engine::current_session() const noexcept { return session::adopt(SSL_get1_session(ssl_)); }

std::string_view engine::alpn_protocol() const noexcept {
  const unsigned char* p = nullptr;
  unsigned int n = 0;
  SSL_get0_alpn_selected(ssl_, &p, &n);
  return {reinterpret_cast<const char*>(p), p != nullptr ? n : 0};
}

std::string_view engine::server_name() const noexcept {
  const char* name = SSL_get_servername(ssl_, TLSEXT_NAMETYPE_host_name);
  return name != nullptr ? std::string_view(name) : std::string_view();
}

std::string_view engine::protocol_version() const noexcept { return SSL_get_version(ssl_); }

std::string_view engine::cipher() const noexcept {
  const char* name = SSL_get_cipher_name(ssl_);
  return name != nullptr ? std::string_view(name) : std::string_view();
}

bool engine::ktls_send() const noexcept { return BIO_get_ktls_send(SSL_get_wbio(ssl_)) != 0; }

bool engine::ktls_receive() const noexcept { return BIO_get_ktls_recv(SSL_get_rbio(ssl_)) != 0; }

}  // namespace tern::tls::detail
