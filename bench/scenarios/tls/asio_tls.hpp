// What asio/coroutines and asio/callbacks share for tls/*: the two ssl::contexts of a run, configured by
// tls_common.hpp through native_handle(); the per-connection name check; a client's kept session.
#pragma once

#include "tls_common.hpp"
#include "../sockets/asio_common.hpp"

#include <asio/ssl.hpp>

namespace tern_bench::asio_impl {

using namespace tern_bench::tls_bench;
using ssl_stream = asio::ssl::stream<tcp::socket>;

struct tls_contexts {
    asio::ssl::context server{asio::ssl::context::tls_server};
    asio::ssl::context client{asio::ssl::context::tls_client};

    explicit tls_contexts(bool tickets) {
        const credentials c = make_credentials();
        server.use_certificate_chain(asio::buffer(c.certificate_pem));
        server.use_private_key(asio::buffer(c.key_pem), asio::ssl::context::pem);
        configure_server(server.native_handle(), tickets);
        client.add_certificate_authority(asio::buffer(c.certificate_pem));
        configure_client(client.native_handle());
    }
};

// SNI and the name the certificate must carry, as tern::tls::stream::set_host_name sets them.
inline void set_host(ssl_stream& s) {
    SSL* ssl = s.native_handle();
    check_ssl(static_cast<int>(SSL_set_tlsext_host_name(ssl, host_name)), "SNI");
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    check_ssl(SSL_set1_host(ssl, host_name), "SSL_set1_host");
}

struct ssl_session_ref {
    SSL_SESSION* s = nullptr;
    ssl_session_ref() = default;
    ssl_session_ref(const ssl_session_ref&) = delete;
    ssl_session_ref& operator=(const ssl_session_ref&) = delete;
    ~ssl_session_ref() { SSL_SESSION_free(s); }
    void reset(SSL_SESSION* n) {
        SSL_SESSION_free(s);
        s = n;
    }
};

}  // namespace tern_bench::asio_impl
