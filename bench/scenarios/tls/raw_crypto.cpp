// tls/handshake's two floors, raw/crypto and raw/openssl.
//
// raw/crypto: the floor that the public-key work of a TLS 1.3 handshake puts under every stack,
// measured in-process with OpenSSL's EVP API on the same library the stacks use (what `openssl speed ecdhp256
// ecdsap256` measures, plus the key generation that speed leaves out).
//
// A full handshake with an ECDSA P-256 certificate and a P-256 key share costs the server one ephemeral key
// generation, one ECDH derivation and one ECDSA signature (CertificateVerify), and the client one key generation,
// one derivation and one ECDSA verification of that signature (the self-signed certificate is a trust anchor:
// OpenSSL does not check its own signature). A resumed one (psk_dhe_ke, OpenSSL's default) drops the signature
// and its verification and keeps the key exchange. Each phase loops over one server side and one client side,
// timing each (one thread, pinned to CPU 0):
//   handshakes_per_s = handshakes / max(server time, client time) when concurrent > 1, the client and the server
//                      being on their own CPUs and the slower one setting the pace;
//                    = handshakes / (server time + client time) when concurrent = 1, one handshake at a time
//                      waiting for both in turn;
//   mean_us          = (server time + client time) / handshakes: the crypto in one handshake's latency.
// Everything else a handshake does (hashing, HKDF, AES-GCM of the records, certificate parsing, chain checks,
// tickets, system calls) comes on top, so no stack can reach these figures.
//
// raw/openssl: OpenSSL's whole work for a connection of the scenario (the same settings, certificate check, one byte
// each way, close_notify both ways), both ends in one thread over a BIO pair, no socket: its figures are computed
// from each side's time the same way. What a stack adds to them is its I/O, its loop and its record buffering.
#include "tls_common.hpp"
#include "../two_threads.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <openssl/core_names.h>

#include <algorithm>
#include <array>
#include <vector>

namespace tern_bench::raw_impl {

using namespace tern_bench::tls_bench;

namespace tls_raw_crypto {  // this file's own (see bench/CMakeLists.txt)
namespace {

struct pkey_free {
    void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_free>;

pkey_ptr p256_key() {
    pkey_ptr k(EVP_EC_gen(group));
    if (!k) throw bench_failure("P-256 key: " + openssl_errors());
    return k;
}

// One ECDHE: a fresh key pair and the shared secret with the peer's public key.
void key_exchange(EVP_PKEY* peer) {
    pkey_ptr mine = p256_key();
    EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new(mine.get(), nullptr);
    std::array<unsigned char, 32> secret{};
    std::size_t n = secret.size();
    const bool ok = ctx != nullptr && EVP_PKEY_derive_init(ctx) == 1 && EVP_PKEY_derive_set_peer(ctx, peer) == 1 &&
                    EVP_PKEY_derive(ctx, secret.data(), &n) == 1 && n == 32;
    EVP_PKEY_CTX_free(ctx);
    if (!ok) throw bench_failure("ECDH: " + openssl_errors());
}

// TLS 1.3's CertificateVerify input: 64 spaces, the context string, a zero byte, the transcript hash (RFC 8446 4.4.3).
std::vector<unsigned char> certificate_verify_input() {
    std::vector<unsigned char> in(64, 0x20);
    const std::string context = "TLS 1.3, server CertificateVerify";
    in.insert(in.end(), context.begin(), context.end());
    in.push_back(0);
    for (int i = 0; i < 32; ++i) in.push_back(static_cast<unsigned char>(i * 37 + 11));
    return in;
}

std::vector<unsigned char> sign(EVP_PKEY* key, const std::vector<unsigned char>& in) {
    EVP_MD_CTX* md = EVP_MD_CTX_new();
    std::vector<unsigned char> sig(80);
    std::size_t n = sig.size();
    const bool ok = md != nullptr && EVP_DigestSignInit(md, nullptr, EVP_sha256(), nullptr, key) == 1 &&
                    EVP_DigestSign(md, sig.data(), &n, in.data(), in.size()) == 1;
    EVP_MD_CTX_free(md);
    if (!ok) throw bench_failure("ECDSA sign: " + openssl_errors());
    sig.resize(n);
    return sig;
}

void verify(EVP_PKEY* key, const std::vector<unsigned char>& in, const std::vector<unsigned char>& sig) {
    EVP_MD_CTX* md = EVP_MD_CTX_new();
    const bool ok = md != nullptr && EVP_DigestVerifyInit(md, nullptr, EVP_sha256(), nullptr, key) == 1 &&
                    EVP_DigestVerify(md, sig.data(), sig.size(), in.data(), in.size()) == 1;
    EVP_MD_CTX_free(md);
    if (!ok) throw bench_failure("ECDSA verify: " + openssl_errors());
}

// raw/openssl: both ends of every connection in this one thread, over an OpenSSL BIO pair: OpenSSL's whole work for
// the scenario's exchange (handshake, one byte each way, close_notify both ways) with the scenario's contexts, and
// no socket, loop or coroutine. Each SSL call is timed for its side.
struct memory_pair {
    openssl_contexts contexts;
    SSL_CTX* server = contexts.server;
    SSL_CTX* client = contexts.client;
    SSL_SESSION* kept = nullptr;
    bool resume;
    std::uint64_t server_ns = 0, client_ns = 0;

    explicit memory_pair(bool r) : contexts(r), resume(r) {}
    memory_pair(const memory_pair&) = delete;
    memory_pair& operator=(const memory_pair&) = delete;
    ~memory_pair() { SSL_SESSION_free(kept); }

    // One SSL call of a side, timed.
    template <class F>
    int timed(bool server_side, F f) {
        const auto t0 = bench_clock::now();
        const int ret = f();
        (server_side ? server_ns : client_ns) += elapsed_ns(t0, bench_clock::now());
        return ret;
    }

    void connection(unsigned char byte) {
        SSL* cs = SSL_new(client);
        SSL* ss = SSL_new(server);
        BIO* cb = nullptr;
        BIO* sb = nullptr;
        if (cs == nullptr || ss == nullptr || BIO_new_bio_pair(&cb, 0, &sb, 0) != 1)
            throw bench_failure("SSL_new: " + openssl_errors());
        SSL_set_bio(cs, cb, cb);
        SSL_set_bio(ss, sb, sb);
        SSL_set_connect_state(cs);
        SSL_set_accept_state(ss);
        check_ssl(static_cast<int>(SSL_set_tlsext_host_name(cs, host_name)), "SNI");
        SSL_set_hostflags(cs, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        check_ssl(SSL_set1_host(cs, host_name), "SSL_set1_host");
        const bool offered = resume && kept != nullptr;
        if (offered) check_ssl(SSL_set_session(cs, kept), "SSL_set_session");
        auto step = [](SSL* ssl, int ret, const char* what) {
            if (ret == 1) return true;
            const int e = SSL_get_error(ssl, ret);
            if (e != SSL_ERROR_WANT_READ) throw bench_failure(std::string(what) + ": " + openssl_errors());
            return false;
        };
        for (int round = 0;; ++round) {
            if (round > 10) throw bench_failure("the in-memory handshake does not end");
            const bool c_done = step(cs, timed(false, [&] { return SSL_do_handshake(cs); }), "client handshake");
            const bool s_done = step(ss, timed(true, [&] { return SSL_do_handshake(ss); }), "server handshake");
            if (c_done && s_done) break;
        }
        if ((SSL_session_reused(cs) == 1) != offered)
            throw bench_failure(offered ? "the server did not resume the session" : "a session was resumed unasked");
        check_agreed(cs);
        std::size_t n = 0;
        unsigned char got = 0;
        auto io = [&](bool server_side, SSL* ssl, bool write, unsigned char* b, const char* what) {
            const int ret =
                timed(server_side, [&] { return write ? SSL_write_ex(ssl, b, 1, &n) : SSL_read_ex(ssl, b, 1, &n); });
            if (ret != 1 || n != 1) throw bench_failure(std::string(what) + ": " + openssl_errors());
        };
        unsigned char sent = byte;
        io(false, cs, true, &sent, "client write");
        io(true, ss, false, &got, "server read");
        io(true, ss, true, &got, "server write");
        got = 0;
        io(false, cs, false, &got, "client read");
        if (got != byte) throw bench_failure("client: the echoed byte differs from the one sent");
        if (resume) {
            SSL_SESSION* fresh = SSL_get1_session(cs);
            if (fresh != nullptr && SSL_SESSION_is_resumable(fresh) == 1) {
                SSL_SESSION_free(kept);
                kept = fresh;
            } else {
                SSL_SESSION_free(fresh);
            }
        }
        // close_notify both ways: the client's, the server reading it and answering, the client reading that.
        if (timed(false, [&] { return SSL_shutdown(cs); }) < 0) throw bench_failure("client close_notify");
        unsigned char b = 0;
        const int r = timed(true, [&] { return SSL_read_ex(ss, &b, 1, &n); });
        if (r == 1 || SSL_get_error(ss, r) != SSL_ERROR_ZERO_RETURN)
            throw bench_failure("server: expected the client's close_notify");
        if (timed(true, [&] { return SSL_shutdown(ss); }) != 1) throw bench_failure("server close_notify");
        if (timed(false, [&] { return SSL_shutdown(cs); }) != 1) throw bench_failure("client shutdown");
        SSL_free(cs);
        SSL_free(ss);
    }
};

}  // namespace
}  // namespace tls_raw_crypto

void tls_handshake_openssl(session& s) {
    pin_single_thread(s);
    const bool one_at_a_time = s.param_int("concurrent") <= 1;
    tls_raw_crypto::memory_pair pair(resumption(s));
    pair.connection(0);  // the first session to offer
    std::uint64_t lap = 1;
    for (const phase& p : s.phases()) {
        const auto start = bench_clock::now();
        const auto end = start + to_duration(p.seconds);
        pair.server_ns = pair.client_ns = 0;
        std::uint64_t n = 0;
        for (auto now = start; now < end; now = bench_clock::now(), ++n)
            pair.connection(static_cast<unsigned char>(lap++));
        const double both_s = static_cast<double>(pair.server_ns + pair.client_ns) / 1e9;
        const double pace_s =
            one_at_a_time ? both_s : static_cast<double>(std::max(pair.server_ns, pair.client_ns)) / 1e9;
        if (!p.warmup) {
            s.info("openssl_us", "server " + std::to_string(static_cast<double>(pair.server_ns) / 1e3 / n) +
                                     ", client " + std::to_string(static_cast<double>(pair.client_ns) / 1e3 / n) +
                                     " per connection");
        }
        s.report(p, {{handshakes_metric, static_cast<double>(n) / pace_s}, {"mean_us", both_s * 1e6 / n}});
    }
}

void tls_handshake_crypto(session& s) {
    pin_single_thread(s);
    const bool resume = resumption(s);
    const bool one_at_a_time = s.param_int("concurrent") <= 1;
    const tls_raw_crypto::pkey_ptr certificate_key = tls_raw_crypto::p256_key();
    // the peers' public shares (their generation is timed separately)
    const tls_raw_crypto::pkey_ptr server_share = tls_raw_crypto::p256_key();
    const tls_raw_crypto::pkey_ptr client_share = tls_raw_crypto::p256_key();
    const std::vector<unsigned char> to_sign = tls_raw_crypto::certificate_verify_input();
    std::vector<unsigned char> signature = tls_raw_crypto::sign(certificate_key.get(), to_sign);
    for (const phase& p : s.phases()) {
        const auto start = bench_clock::now();
        const auto end = start + to_duration(p.seconds);
        std::uint64_t n = 0;
        std::uint64_t server_ns = 0, client_ns = 0;
        for (auto now = start; now < end; ++n) {
            const auto t0 = now;
            tls_raw_crypto::key_exchange(client_share.get());
            if (!resume) signature = tls_raw_crypto::sign(certificate_key.get(), to_sign);
            const auto t1 = bench_clock::now();
            tls_raw_crypto::key_exchange(server_share.get());
            if (!resume) tls_raw_crypto::verify(certificate_key.get(), to_sign, signature);
            now = bench_clock::now();
            server_ns += elapsed_ns(t0, t1);
            client_ns += elapsed_ns(t1, now);
        }
        const double both_s = static_cast<double>(server_ns + client_ns) / 1e9;
        const double pace_s =
            one_at_a_time ? both_s : static_cast<double>(std::max(server_ns, client_ns)) / 1e9;
        if (!p.warmup) {
            s.info("crypto_us", "server " + std::to_string(static_cast<double>(server_ns) / 1e3 / n) + ", client " +
                                    std::to_string(static_cast<double>(client_ns) / 1e3 / n) + " per handshake");
        }
        s.report(p, {{handshakes_metric, static_cast<double>(n) / pace_s}, {"mean_us", both_s * 1e6 / n}});
    }
}

}  // namespace tern_bench::raw_impl
