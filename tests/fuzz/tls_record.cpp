// libFuzzer target: the TLS record path of tern::tls, through its engine (tern/tls/detail/engine.hpp), which does no
// I/O of its own: the input is the peer's ciphertext, handed to the engine in pieces the way tls::stream hands it
// what a socket read brought, and what the engine writes is taken away as a socket write would.
//
// The first byte of an input chooses what it is (the rest is the payload):
//   0  server: the payload is what a client sends (a ClientHello, then anything), to a server engine
//   1  client: a client engine sends its ClientHello; the payload is what the server answers
//   2  records: a client and a server engine complete a real handshake (TLS 1.3, or 1.2 when the payload's first
//      byte is odd), then the server sends application data in records of several sizes, a KeyUpdate (TLS 1.3) and
//      close_notify; the payload edits that ciphertext (flips bytes, cuts it, inserts or appends bytes) before the
//      client reads it
// Checked on every input:
// - a step that stops for input finds the input buffer empty (else tls::stream would spin: it only reads when
//   OpenSSL has taken everything), and one that stops for output has output to send;
// - the engine never asks for input again once it was told the peer's end (a truncation must be reported);
// - a step that ends with an error gives a clear one: OpenSSL's reason (tern.tls.openssl), tern's truncated
//   (tern.tls), a certificate verdict (tern.tls.verify) or eof after close_notify, with a message; an OpenSSL
//   error is final: every later handshake, read, write and shutdown step returns it at once, asking for nothing;
// - a read never yields more bytes than the buffer holds;
// - records: whatever the client decrypts is exactly the plaintext the server sent, in order, from the start (an
//   edited record is never accepted); eof only after close_notify with all of it; an unedited stream, cut in any
//   pieces, yields all of it and then eof.
// The handshake of mode 2 draws fresh keys on each run, so its ciphertext differs from run to run; what an edit
// hits (a header, a tag, a length) does not, so the paths an input takes are stable.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "fuzz_support.hpp"
#include "tern/error.hpp"
#include "tern/tls/context.hpp"
#include "tern/tls/detail/engine.hpp"
#include "tern/tls/error.hpp"

namespace {

namespace tls = tern::tls;
using tls::detail::engine;
using tls::detail::step;
using tls::detail::want;
using namespace tern::fuzz;

// ---- the contexts, made once: a P-256 key and a self-signed certificate for "fuzz.test", in memory ----

struct credentials {
  std::string certificate;
  std::string key;
};

std::string pem_of(int (*write)(BIO*, void*), void* what) {
  BIO* bio = BIO_new(BIO_s_mem());
  TERN_FUZZ_CHECK(bio != nullptr && write(bio, what) == 1);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(n));
  BIO_free(bio);
  return out;
}

credentials make_credentials() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  TERN_FUZZ_CHECK(key != nullptr && cert != nullptr);
  X509_set_version(cert, X509_VERSION_3);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 365L * 24 * 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("fuzz.test"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  TERN_FUZZ_CHECK(X509_sign(cert, key, EVP_sha256()) != 0);
  credentials c;
  c.certificate = pem_of([](BIO* b, void* x) { return PEM_write_bio_X509(b, static_cast<X509*>(x)); }, cert);
  c.key = pem_of(
      [](BIO* b, void* k) {
        return PEM_write_bio_PrivateKey(b, static_cast<EVP_PKEY*>(k), nullptr, nullptr, 0, nullptr, nullptr);
      },
      key);
  X509_free(cert);
  EVP_PKEY_free(key);
  return c;
}

struct contexts {
  tls::context server{tls::role::server};
  tls::context server_tls12{tls::role::server};
  tls::context client{tls::role::client};         // verifies nothing: the answers of mode 1 come from anywhere
  tls::context client_checked{tls::role::client};  // trusts the certificate, for mode 2's real handshake

  contexts() {
    const credentials c = make_credentials();
    for (tls::context* s : {&server, &server_tls12}) {
      TERN_FUZZ_CHECK(!s->use_certificate_chain(c.certificate));
      TERN_FUZZ_CHECK(!s->use_private_key(c.key));
    }
    TERN_FUZZ_CHECK(!server_tls12.set_max_version(tls::version::tls1_2));
    // A small session cache: the servers cache the session of every handshake that completes (mode 2), and the
    // default cache (20480 sessions) would only grow the process.
    for (tls::context* s : {&server, &server_tls12}) SSL_CTX_sess_set_cache_size(s->native_handle(), 64);
    client.set_verify_mode(tls::verify_mode::none);
    TERN_FUZZ_CHECK(!client_checked.add_certificate_authority(c.certificate));
  }
};

const contexts& ctxs() {
  static const contexts c;
  return c;
}

// ---- driving an engine ----

bool clear_error(const std::error_code& ec) {
  if (ec == tern::error::eof) return true;
  const std::error_category& cat = ec.category();
  const bool known = cat == tls::openssl_category() || cat == tls::category() || cat == tls::verify_category() ||
                     cat == std::system_category() || cat == std::generic_category();
  return known && ec.value() != 0 && !ec.message().empty();
}

// Every kind of step on an engine that failed with ec: each returns ec at once.
void check_final(engine& e, const std::error_code& ec) {
  char buf[64];
  const step steps[] = {e.handshake(), e.read(tern::mutable_buffer(buf, sizeof buf)),
                        e.write(tern::const_buffer("x", 1)), e.shutdown()};
  for (const step& s : steps) TERN_FUZZ_CHECK(s.next == want::nothing && s.ec == ec && s.bytes == 0);
}

// The peer's side of the wire: ciphertext handed over in pieces whose sizes the input chooses.
class feeder {
 public:
  feeder(std::string_view bytes, choices& pick) : bytes_(bytes), pick_(pick) {
    max_piece_ = pick_.one_in(3) ? pick_.between(1, 8) : pick_.between(1, 40000);
  }

  // One socket read into the engine's input buffer; at the end, the end of the stream.
  void give(engine& e) {
    TERN_FUZZ_CHECK(!ended_);  // the engine asked for input after it was told there is no more
    const tern::mutable_buffer space = e.input_space();
    TERN_FUZZ_CHECK(space.size() > 0);
    if (at_ == bytes_.size()) {
      e.input_done(0, true);
      ended_ = true;
      return;
    }
    const std::size_t n =
        std::min({space.size(), bytes_.size() - at_, static_cast<std::size_t>(pick_.between(1, max_piece_))});
    std::memcpy(space.data(), bytes_.data() + at_, n);
    at_ += n;
    e.input_done(n, false);
  }

  bool ended() const noexcept { return ended_; }

 private:
  std::string_view bytes_;
  choices& pick_;
  std::uint64_t max_piece_;
  std::size_t at_ = 0;
  bool ended_ = false;
};

// Takes what the engine wrote (in pieces, as partial socket writes), appending it to sink if given.
void drain(engine& e, choices& pick, std::string* sink) {
  while (e.has_output()) {
    const tern::const_buffer out = e.output();
    const std::size_t n = pick.one_in(4) ? static_cast<std::size_t>(pick.between(1, out.size())) : out.size();
    if (sink != nullptr) sink->append(static_cast<const char*>(out.data()), n);
    e.output_done(n, {});
  }
}

// The outcome of feeding an engine: the plaintext it read, and how it ended.
struct outcome {
  std::string plaintext;
  std::error_code ec;
};

// Handshakes (if not done), then reads until an error or the end, taking the peer's bytes from f.
outcome run(engine& e, feeder& f, choices& pick) {
  outcome out;
  char buf[20000];
  for (int guard = 0;; ++guard) {
    TERN_FUZZ_CHECK(guard < 1000000);  // a step that neither ends nor asks for anything the feeder lacks
    const bool handshaking = !e.handshake_done();
    const std::size_t room = 1 + static_cast<std::size_t>(pick.below(sizeof buf));
    const step s = handshaking ? e.handshake() : e.read(tern::mutable_buffer(buf, room));
    TERN_FUZZ_CHECK(s.bytes <= (handshaking ? 0 : room));
    switch (s.next) {
      case want::output:
        TERN_FUZZ_CHECK(e.has_output());
        drain(e, pick, nullptr);
        continue;
      case want::input:
        TERN_FUZZ_CHECK(s.bytes == 0);
        drain(e, pick, nullptr);  // what the stream sends before it waits
        f.give(e);
        continue;
      case want::nothing:
        break;
    }
    drain(e, pick, nullptr);
    if (!handshaking) out.plaintext.append(buf, s.bytes);
    if (s.ec) {
      TERN_FUZZ_CHECK(clear_error(s.ec));
      out.ec = s.ec;
      if (s.ec != tern::error::eof) check_final(e, s.ec);
      return out;
    }
    if (!handshaking) TERN_FUZZ_CHECK(s.bytes > 0);  // a read that ends without error brought something
  }
}

// ---- the modes ----

void as_server(std::string_view payload, choices& pick) {
  engine e(pick.one_in(2) ? ctxs().server : ctxs().server_tls12, 4096 + pick.below(40000), 0);
  feeder f(payload, pick);
  const outcome o = run(e, f, pick);
  // Nothing from a peer without the keys can be a finished handshake followed by data.
  TERN_FUZZ_CHECK(o.ec || o.plaintext.empty());
}

void as_client(std::string_view payload, choices& pick) {
  engine e(ctxs().client, 4096 + pick.below(40000), 0);
  if (pick.one_in(2)) TERN_FUZZ_CHECK(!e.set_host_name("fuzz.test"));
  feeder f(payload, pick);
  (void)run(e, f, pick);
}

// Moves what one engine wrote into the other's input buffer (which tls::stream would do through the sockets).
void pump(engine& from, engine& to) {
  while (from.has_output()) {
    const tern::const_buffer out = from.output();
    const tern::mutable_buffer space = to.input_space();
    const std::size_t n = std::min(out.size(), space.size());
    TERN_FUZZ_CHECK(n > 0);
    std::memcpy(space.data(), out.data(), n);
    to.input_done(n, false);
    from.output_done(n, {});
  }
}

// An edit of the ciphertext, read from the payload: 3 bytes each (what, where, value).
std::string edited(std::string wire, std::string_view payload) {
  for (std::size_t i = 0; i + 3 <= payload.size() && !wire.empty(); i += 3) {
    const auto op = static_cast<unsigned char>(payload[i]);
    const std::size_t at =
        ((static_cast<unsigned char>(payload[i + 1]) << 8 | static_cast<unsigned char>(payload[i + 2])) * 7) %
        wire.size();
    switch (op % 6) {
      case 0: wire[at] = static_cast<char>(wire[at] ^ (1 << (op >> 5))); break;  // flip a bit
      case 1: wire.resize(at); break;                                               // cut
      case 2: wire.insert(at, 1, static_cast<char>(op)); break;                    // insert a byte
      case 3: wire.erase(at, 1); break;                                            // drop a byte
      case 4: wire.append(payload.substr(i + 3)); return wire;                     // append the rest raw
      default: wire[at] = static_cast<char>(payload[i + 2]); break;                 // overwrite a byte
    }
  }
  return wire;
}

void records(std::string_view payload, choices& pick) {
  const bool tls12 = !payload.empty() && (static_cast<unsigned char>(payload[0]) & 1) != 0;
  engine client(ctxs().client_checked, 32 * 1024, 0);
  engine server(tls12 ? ctxs().server_tls12 : ctxs().server, 32 * 1024, 0);
  TERN_FUZZ_CHECK(!client.set_host_name("fuzz.test"));
  for (int round = 0; !(client.handshake_done() && server.handshake_done()); ++round) {
    TERN_FUZZ_CHECK(round < 20);
    const step c = client.handshake();
    TERN_FUZZ_CHECK(!c.ec);
    pump(client, server);
    const step s = server.handshake();
    TERN_FUZZ_CHECK(!s.ec);
    pump(server, client);
  }
  // What the server sends: records of several sizes, a KeyUpdate between two of them (TLS 1.3), close_notify.
  std::string plaintext;
  std::string wire;
  auto send = [&](std::size_t n) {
    const std::size_t from = plaintext.size();
    for (std::size_t i = 0; i < n; ++i) plaintext.push_back(static_cast<char>((from + i) * 31 + 7));
    std::size_t done = 0;
    while (done < n) {
      const step s = server.write(tern::const_buffer(plaintext.data() + from + done, n - done));
      TERN_FUZZ_CHECK(!s.ec && s.next != want::input);
      done += s.bytes;
      drain(server, pick, &wire);
    }
  };
  send(1);
  send(300);
  if (!tls12) TERN_FUZZ_CHECK(SSL_key_update(server.ssl(), SSL_KEY_UPDATE_NOT_REQUESTED) == 1);
  send(20000);
  send(5);
  TERN_FUZZ_CHECK(!server.shutdown().ec);
  drain(server, pick, &wire);

  const std::string sent = edited(wire, payload.empty() ? payload : payload.substr(1));
  feeder f(sent, pick);
  const outcome o = run(client, f, pick);
  // Decrypted bytes are always a prefix of what was sent: an edit is caught by the record's tag, never delivered.
  TERN_FUZZ_CHECK(o.plaintext.size() <= plaintext.size());
  TERN_FUZZ_CHECK(std::memcmp(o.plaintext.data(), plaintext.data(), o.plaintext.size()) == 0);
  if (o.ec == tern::error::eof) TERN_FUZZ_CHECK(o.plaintext == plaintext);
  if (sent == wire) TERN_FUZZ_CHECK(o.ec == tern::error::eof);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(bytes), size);
  choices pick(in);
  const exact_copy payload(in.substr(1));
  switch (static_cast<unsigned char>(in[0]) % 3) {
    case 0: as_server(payload.view(), pick); break;
    case 1: as_client(payload.view(), pick); break;
    default: records(payload.view(), pick); break;
  }
  return 0;
}
