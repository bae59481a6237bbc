// tern/tls/session.hpp
//
// tls::session: what a client keeps from one connection to resume the next one with an abbreviated handshake
// (no certificate exchange, no signature): an OpenSSL SSL_SESSION, shared by reference count.
//
//   tls::session kept = first.session();        // after a read: TLS 1.3 tickets arrive after the handshake
//   ...
//   if (auto ec = second.set_session(kept)) ... // before second.handshake()
//   co_await second.handshake();
//   second.session_reused();                    // true if the server accepted it
//
// A server that issues tickets (the default) accepts a session it issued until the ticket expires (OpenSSL's
// default lifetime is two hours); a refused session costs nothing but the full handshake the client would have
// made anyway. A session stays resumable after its connection is dropped without close_notify, but not after one
// that failed (a fatal error, a truncation): someone may have cut it. Copies share one SSL_SESSION; any thread.
#pragma once

#include <utility>

struct ssl_session_st;

namespace tern::tls {

class session {
 public:
  // No session.
  session() noexcept = default;
  // Shares o's session.
  session(const session& o) noexcept;
  // Takes o's session (o is left empty).
  session(session&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  // Lets go of the session held, and shares (or takes) o's.
  session& operator=(session o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  // Lets go of the session (OpenSSL frees it with its last reference).
  ~session();

  // True if a session is held.
  explicit operator bool() const noexcept { return s_ != nullptr; }
  // True if the session can be offered for resumption (it has a ticket or an id, and has not expired).
  bool resumable() const noexcept;
  // The OpenSSL session (null when empty).
  ssl_session_st* native_handle() const noexcept { return s_; }

  // Takes over a reference to s (SSL_get1_session's).
  static session adopt(ssl_session_st* s) noexcept {
    session out;
    out.s_ = s;
    return out;
  }

 private:
  ssl_session_st* s_ = nullptr;
};

}  // namespace tern::tls
