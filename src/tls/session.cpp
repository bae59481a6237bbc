// tls::session: a reference to an SSL_SESSION.
#include "tern/tls/session.hpp"

#include <openssl/ssl.h>

namespace tern::tls {

session::session(const session& o) noexcept : s_(o.s_) {
  if (s_ != nullptr) SSL_SESSION_up_ref(s_);
}

session::~session() { SSL_SESSION_free(s_); }

bool session::resumable() const noexcept { return s_ != nullptr && SSL_SESSION_is_resumable(s_) == 1; }

}  // namespace tern::tls
