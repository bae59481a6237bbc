// tern/tls/context.hpp
//
// tls::context: what the TLS connections of one role have in common (an OpenSSL SSL_CTX): the certificate and key
// a side presents, the certificate authorities it trusts, how it checks its peer, the protocol versions, cipher
// lists, ALPN protocols, session tickets, and, for a server, other contexts to answer with by server name (SNI).
//
//   tls::context server(tls::role::server);
//   if (auto ec = server.use_certificate_chain_file("cert.pem")) ...;   // "no start line", "No such file ..."
//   if (auto ec = server.use_private_key_file("key.pem")) ...;          // "key values mismatch"
//   tls::context client(tls::role::client);                             // trusts the system's CAs, verifies
//   tls::stream<net::tcp_socket> s(std::move(socket), client);
//   s.set_host_name("example.com");                                     // SNI and the name check
//
// Defaults: TLS 1.2 at least; a client verifies its peer against the system's certificate authorities (loaded when
// its first stream is made, unless a load_verify_* or add_certificate_authority call chose others before) and
// checks the host name it was given; a server asks for no client certificate and issues session tickets. TLS 1.2
// renegotiation is refused on both sides (it would make a write wait for a read). Every setter reports a failure
// as a std::error_code (tls/error.hpp) and leaves the context as it was.
//
// A context is a handle: copies share one configuration, and every stream made from it keeps it alive. Configure
// it first, on one thread; from then on it may serve streams of any loop and thread at once (OpenSSL's SSL_CTX is
// safe to share once configured). A setter called while streams use the context races them.
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

struct ssl_ctx_st;

namespace tern::tls {

// Which end of the connection a context's streams are.
enum class role { client, server };

// How a side checks its peer's certificate.
enum class verify_mode {
  none,           // no check (a server asks for no client certificate; a client accepts any server)
  peer,           // a client verifies the server; a server asks for a client certificate and verifies one if sent
  peer_required,  // as peer, and a server refuses a client that sends none
};

// A protocol version, for the minimum and maximum a context accepts.
enum class version { tls1_2, tls1_3 };

class context;

namespace detail {
struct context_state;
class engine;
// The shared state of a context (for the stream's engine).
const std::shared_ptr<context_state>& state_of(const context& c) noexcept;
}  // namespace detail

class context {
 public:
  // Chooses another context by the server name a client sent (SNI): the one to answer with, or nullopt to keep
  // this one. Called during handshakes, on the handshaking stream's thread.
  using server_name_callback = std::function<std::optional<context>(std::string_view name)>;

  // A context for clients or servers, with the defaults above. Throws std::runtime_error if OpenSSL cannot make
  // one (out of memory).
  explicit context(tls::role r);

  // The role of the context's streams.
  tls::role role() const noexcept;

  // The certificate this side presents, with its chain, from a PEM file (the leaf first, then intermediates).
  [[nodiscard]] std::error_code use_certificate_chain_file(const std::string& path);
  // The same from PEM text in memory.
  [[nodiscard]] std::error_code use_certificate_chain(std::string_view pem);
  // The private key of the certificate, from an unencrypted PEM file; refused if it does not match the
  // certificate set before ("key values mismatch").
  [[nodiscard]] std::error_code use_private_key_file(const std::string& path);
  // The same from PEM text in memory.
  [[nodiscard]] std::error_code use_private_key(std::string_view pem);

  // Trusts the system's certificate authorities (Debian: /etc/ssl/certs).
  [[nodiscard]] std::error_code use_default_verify_paths();
  // Trusts the certificates of a PEM file (instead of the system's, if called before the first stream).
  [[nodiscard]] std::error_code load_verify_file(const std::string& path);
  // Trusts the certificates of a directory prepared with `openssl rehash` (or c_rehash).
  [[nodiscard]] std::error_code load_verify_dir(const std::string& path);
  // Trusts the certificates of PEM text in memory (one or more).
  [[nodiscard]] std::error_code add_certificate_authority(std::string_view pem);
  // How the peer's certificate is checked (clients: peer; servers: none).
  void set_verify_mode(verify_mode m);
  verify_mode get_verify_mode() const noexcept;
  // Clients: whether a verified certificate must also name the host given to stream::set_host_name (on).
  void set_verify_host_name(bool on) noexcept;

  // The oldest protocol version accepted (TLS 1.2).
  [[nodiscard]] std::error_code set_min_version(version v);
  // The newest protocol version offered or accepted (TLS 1.3).
  [[nodiscard]] std::error_code set_max_version(version v);
  // TLS 1.2 cipher list in OpenSSL's syntax ("ECDHE+AESGCM:!aNULL"); "no cipher match" if it names none.
  [[nodiscard]] std::error_code set_cipher_list(const std::string& ciphers);
  // TLS 1.3 cipher suites in OpenSSL's syntax ("TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256").
  [[nodiscard]] std::error_code set_ciphersuites(const std::string& suites);

  // ALPN: a client offers these protocols in this order; a server picks the first of its own list that the
  // client offered, and refuses a client whose offers it has none of (no_application_protocol, RFC 7301). Each
  // name is 1 to 255 bytes (invalid_argument otherwise). A server context chosen by SNI answers with its own list.
  [[nodiscard]] std::error_code set_alpn_protocols(std::span<const std::string_view> protocols);
  [[nodiscard]] std::error_code set_alpn_protocols(std::initializer_list<std::string_view> protocols) {
    return set_alpn_protocols(std::span<const std::string_view>(protocols.begin(), protocols.size()));
  }

  // Servers: answers a client that asks for name (exactly, ignoring case) with other, a server context, which this
  // one keeps alive (so two contexts must not name each other). invalid_argument for a client context on either
  // side, or for other being this context.
  [[nodiscard]] std::error_code add_server_name(std::string_view name, const context& other);
  // Servers: asks f for names add_server_name does not know.
  void set_server_name_callback(server_name_callback f);

  // Servers: whether session tickets are issued, and how many after each full handshake (TLS 1.3; OpenSSL's
  // default is 2). Off: clients cannot resume. On by default.
  void set_session_tickets(bool on, std::size_t count = 2);

  // Asks OpenSSL to hand record encryption to the kernel (SSL_OP_ENABLE_KTLS). ktls_unavailable, and the context
  // unchanged, where ktls_available() is false. Where it is true the streams still encrypt in user space today:
  // the hand-over needs TLS control records (alerts, close_notify) sent and received with a record type, which
  // tern's stream operations do not carry yet; stream::ktls_send() tells whether the kernel took the keys.
  [[nodiscard]] std::error_code enable_ktls();

  // The OpenSSL context, for settings this class does not cover.
  ssl_ctx_st* native_handle() const noexcept;

 private:
  friend const std::shared_ptr<detail::context_state>& detail::state_of(const context& c) noexcept;

  std::shared_ptr<detail::context_state> state_;
};

// Whether the kernel offers the "tls" upper-layer protocol (/proc/sys/net/ipv4/tcp_available_ulp) and OpenSSL was
// built with kTLS support: the condition for context::enable_ktls().
bool ktls_available() noexcept;

}  // namespace tern::tls
