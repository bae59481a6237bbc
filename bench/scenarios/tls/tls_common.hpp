// What every tls/* implementation shares, so that the stacks differ only in their I/O and their TLS stream code:
//   credentials     a P-256 key and a self-signed certificate for "localhost", made in memory with OpenSSL's API
//                   when the worker starts (valid from an hour ago for a day: nothing is kept on disk, nothing
//                   expires in the tree)
//   configure_*     the OpenSSL settings of both ends, applied to each stack's own SSL_CTX (tern::tls::context's
//                   and asio::ssl::context's native handles): TLS 1.3 only, the one cipher suite
//                   TLS_AES_128_GCM_SHA256, the one group P-256, no renegotiation or compression; session tickets
//                   (one per handshake) only when the point resumes sessions
//   throughput_run  the throughput stream's content and each direction's end (the writer's total, published before
//                   its last chunk), shared by the two loops of a run
//   stream_tally    what a throughput reader does with each chunk (the check, the count, the meter, the end)
//   openssl_contexts the raw floors' own SSL_CTX pair, made and configured the same way
// The client trusts the certificate (and nothing else), verifies the server's chain, and checks the name
// "localhost" (SNI + SSL_set1_host), the same on every stack.
#pragma once

#include "../../harness/traffic.hpp"
#include "../../harness/worker.hpp"

#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

namespace tern_bench::tls_bench {

inline constexpr const char* host_name = "localhost";
inline constexpr const char* cipher_suite = "TLS_AES_128_GCM_SHA256";
inline constexpr const char* group = "P-256";

// OpenSSL's error queue as text, for a failure message.
inline std::string openssl_errors() {
    std::string out;
    while (unsigned long e = ERR_get_error()) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof buf);
        if (!out.empty()) out += "; ";
        out += buf;
    }
    return out.empty() ? "no OpenSSL error queued" : out;
}

inline void check_ssl(int ok, const char* what) {
    if (ok != 1) throw bench_failure(std::string(what) + ": " + openssl_errors());
}

struct credentials {
    std::string certificate_pem;
    std::string key_pem;
};

// A fresh P-256 key and a self-signed certificate naming host_name (CN and subjectAltName), signed with
// ECDSA-SHA256.
inline credentials make_credentials() {
    struct pkey_free { void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); } };
    struct x509_free { void operator()(X509* x) const { X509_free(x); } };
    struct bio_free { void operator()(BIO* b) const { BIO_free(b); } };
    std::unique_ptr<EVP_PKEY, pkey_free> key(EVP_EC_gen(group));
    if (!key) throw bench_failure("P-256 key: " + openssl_errors());
    std::unique_ptr<X509, x509_free> cert(X509_new());
    if (!cert) throw bench_failure("X509_new: " + openssl_errors());
    check_ssl(X509_set_version(cert.get(), X509_VERSION_3), "X509_set_version");
    check_ssl(ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1), "serial number");
    if (!X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) ||
        !X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600))
        throw bench_failure("certificate validity: " + openssl_errors());
    check_ssl(X509_set_pubkey(cert.get(), key.get()), "X509_set_pubkey");
    X509_NAME* name = X509_get_subject_name(cert.get());
    check_ssl(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                         reinterpret_cast<const unsigned char*>(host_name), -1, -1, 0),
              "certificate name");
    check_ssl(X509_set_issuer_name(cert.get(), name), "X509_set_issuer_name");
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, cert.get(), cert.get(), nullptr, nullptr, 0);
    for (auto [nid, value] : {std::pair{NID_subject_alt_name, "DNS:localhost"},
                              std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
        X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, nid, value);
        if (ext == nullptr) throw bench_failure("certificate extension: " + openssl_errors());
        const int added = X509_add_ext(cert.get(), ext, -1);
        X509_EXTENSION_free(ext);
        check_ssl(added, "X509_add_ext");
    }
    if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) throw bench_failure("X509_sign: " + openssl_errors());

    auto to_pem = [](auto write) {
        std::unique_ptr<BIO, bio_free> bio(BIO_new(BIO_s_mem()));
        if (!bio || write(bio.get()) != 1) throw bench_failure("PEM: " + openssl_errors());
        char* data = nullptr;
        const long n = BIO_get_mem_data(bio.get(), &data);
        return std::string(data, static_cast<std::size_t>(n));
    };
    credentials c;
    c.certificate_pem = to_pem([&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); });
    c.key_pem = to_pem([&](BIO* b) {
        return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
    });
    return c;
}

// Both ends: TLS 1.3 only, TLS_AES_128_GCM_SHA256, P-256 for the key exchange.
inline void configure_common(SSL_CTX* ctx) {
    check_ssl(SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION), "min version");
    check_ssl(SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION), "max version");
    check_ssl(SSL_CTX_set_ciphersuites(ctx, cipher_suite), "ciphersuites");
    check_ssl(SSL_CTX_set1_groups_list(ctx, group), "groups");
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
}

// The server: with tickets (one per handshake) when clients resume, else neither tickets nor a session cache.
inline void configure_server(SSL_CTX* ctx, bool tickets) {
    configure_common(ctx);
    static constexpr unsigned char id[] = {'b', 'e', 'n', 'c', 'h'};
    check_ssl(SSL_CTX_set_session_id_context(ctx, id, sizeof id), "session id context");
    if (tickets) {
        SSL_CTX_clear_options(ctx, SSL_OP_NO_TICKET);
        check_ssl(SSL_CTX_set_num_tickets(ctx, 1), "num tickets");
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    } else {
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        check_ssl(SSL_CTX_set_num_tickets(ctx, 0), "num tickets");
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    }
}

// The client: verifies the server's certificate (trusted through the stack's own call that adds it as an
// authority); the name check is per connection (SSL_set1_host).
inline void configure_client(SSL_CTX* ctx) {
    configure_common(ctx);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
}

// What a connection must have agreed on; fails the run otherwise (a stack that negotiated something cheaper).
inline void check_agreed(SSL* ssl) {
    const char* version = SSL_get_version(ssl);
    const char* cipher = SSL_get_cipher_name(ssl);
    if (std::strcmp(version, "TLSv1.3") != 0 || cipher == nullptr || std::strcmp(cipher, cipher_suite) != 0)
        throw bench_failure(std::string("negotiated ") + version + " " + (cipher ? cipher : "(none)") +
                            ", expected TLSv1.3 " + cipher_suite);
    const int negotiated = SSL_get_negotiated_group(ssl);
    if (negotiated != NID_X9_62_prime256v1)
        throw bench_failure("negotiated group " + std::to_string(negotiated) + ", expected P-256");
}

// The raw floors' own pair of contexts (OpenSSL's API alone, no stack): fresh credentials, the server's certificate
// and key, the client trusting that certificate alone, both configured as above.
struct openssl_contexts {
    SSL_CTX* server = nullptr;
    SSL_CTX* client = nullptr;

    explicit openssl_contexts(bool tickets) {
        try {
            server = SSL_CTX_new(TLS_server_method());
            client = SSL_CTX_new(TLS_client_method());
            if (server == nullptr || client == nullptr) throw bench_failure("SSL_CTX_new: " + openssl_errors());
            const credentials c = make_credentials();
            BIO* cert_bio = BIO_new_mem_buf(c.certificate_pem.data(), static_cast<int>(c.certificate_pem.size()));
            BIO* key_bio = BIO_new_mem_buf(c.key_pem.data(), static_cast<int>(c.key_pem.size()));
            X509* cert = PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr);
            EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
            BIO_free(cert_bio);
            BIO_free(key_bio);
            const bool ok = cert != nullptr && key != nullptr && SSL_CTX_use_certificate(server, cert) == 1 &&
                            SSL_CTX_use_PrivateKey(server, key) == 1 &&
                            X509_STORE_add_cert(SSL_CTX_get_cert_store(client), cert) == 1;
            X509_free(cert);
            EVP_PKEY_free(key);
            if (!ok) throw bench_failure("the floor's credentials: " + openssl_errors());
            configure_server(server, tickets);
            configure_client(client);
        } catch (...) {
            free();
            throw;
        }
    }
    openssl_contexts(const openssl_contexts&) = delete;
    openssl_contexts& operator=(const openssl_contexts&) = delete;
    ~openssl_contexts() { free(); }

private:
    void free() {
        SSL_CTX_free(server);
        SSL_CTX_free(client);
    }
};

// The metric names of the scenarios (catalogue.cpp).
inline constexpr const char* handshakes_metric = "handshakes_per_s";
inline constexpr const char* throughput_metric = "mb_per_s";

// tls/throughput: one direction of the connection. The writer publishes the total it will have written before it
// writes its last chunk, so that the reader, which checks every byte at its offset, knows where the stream ends
// without a close_notify (Asio's ssl::stream has no one-way shutdown) and checks that exactly that many arrived.
struct direction {
    std::atomic<std::uint64_t> final_total{0};  // 0 until the writer stopped
    std::atomic<std::uint64_t> received{0};     // what the reader that does not drive the meter took so far
};

inline constexpr std::size_t stream_period = 4093;  // prime: 16 KiB chunks never line up with the pattern

// What the two loops of a tls/throughput run share: the stream's content, each direction's end and count, and the
// flag the metering reader raises after the last phase.
struct throughput_run {
    std::size_t size;
    bool both;
    stream_pattern pattern;
    direction up;    // client to server
    direction down;  // server to client
    std::atomic<bool> stop{false};

    throughput_run(std::size_t sz, bool b) : size(sz), both(b), pattern(sz, stream_period) {}
};

// A throughput reader's account of its direction: every chunk checked at its offset in the pattern, its count
// published in d.received, or, for the reader that drives the meter, added to it with what `other`'s reader counted
// meanwhile (raising stop after the last phase); and the end: exactly the writer's published total.
class stream_tally {
public:
    stream_tally(const stream_pattern& pattern, direction& d, throughput_meter* meter, const direction* other,
                 std::atomic<bool>& stop, const char* side)
        : pattern_(pattern), d_(d), meter_(meter), other_(other), stop_(stop), side_(side) {}

    // n bytes arrived at data: false once the writer's total has (more fails the run).
    bool took(const unsigned char* data, std::size_t n) {
        pattern_.verify(data, n, offset_, side_);
        offset_ += n;
        if (meter_ == nullptr) {
            d_.received.store(offset_, std::memory_order_relaxed);
        } else if (!stop_.load(std::memory_order_relaxed)) {
            const std::uint64_t o = other_ ? other_->received.load(std::memory_order_relaxed) : 0;
            const std::uint64_t added = n + (o - other_seen_);
            other_seen_ = o;
            if (!meter_->add(added)) stop_.store(true);
        }
        const std::uint64_t end = d_.final_total.load();
        if (end == 0 || offset_ < end) return true;
        if (offset_ > end) throw bench_failure(std::string(side_) + ": more bytes than the writer wrote");
        return false;
    }

private:
    const stream_pattern& pattern_;
    direction& d_;
    throughput_meter* meter_;
    const direction* other_;
    std::atomic<bool>& stop_;
    const char* side_;
    std::uint64_t offset_ = 0;
    std::uint64_t other_seen_ = 0;
};

// The parameters of tls/handshake and tls/throughput.
inline bool resumption(const session& s) {
    auto it = s.request().params.find("resumption");
    if (it == s.request().params.end() || (it->second != "on" && it->second != "off"))
        throw bench_failure("tls/handshake needs resumption=on or resumption=off");
    return it->second == "on";
}

inline bool both_ways(const session& s) {
    auto it = s.request().params.find("direction");
    if (it == s.request().params.end() || (it->second != "one_way" && it->second != "both_ways"))
        throw bench_failure("tls/throughput needs direction=one_way or direction=both_ways");
    return it->second == "both_ways";
}

}  // namespace tern_bench::tls_bench
