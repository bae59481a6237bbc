// tern/tls/stream.hpp
//
// tls::stream<S>: TLS over any tern stream S (net::tcp_socket, net::unix_stream_socket, anything with read_some and
// write_some awaited as io_result<size_t>), with OpenSSL 3. The stream owns S; next_layer() is S.
//
//   tls::context client_ctx(tls::role::client);
//   auto [ec, socket] = co_await net::connect(ctx, "example.com", "443");
//   tls::stream<net::tcp_socket> s(std::move(socket), client_ctx);
//   s.set_host_name("example.com");                      // SNI, and the name the certificate must carry
//   if (auto ec = co_await s.handshake()) ...            // "hostname mismatch", "tlsv1 alert ...", timed_out
//   co_await s.write_all(tern::const_buffer("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"));
//   auto [rec, n] = co_await s.read_some(buf);           // tern::error::eof after the peer's close_notify
//   co_await s.shutdown();                               // close_notify both ways
//
// Operations are tasks: the awaiting task's stop token reaches every wait inside them (a task_group's cancel, a
// runtime's shutdown), with_timeout(s.read_some(b), d) puts a deadline on one, and they allocate nothing once the
// stream is made (their frames come from the frame pool; the stream's buffers are allocated with it).
//
// Full duplex: one read (read_some, read_exact) and one write (write_some, write_all, shutdown_send) may be pending
// at once, from two tasks of S's loop, each moving its own direction's records; neither waits for the other. What a
// read makes OpenSSL answer (a TLS 1.3 KeyUpdate, an alert) goes out with the send in flight, or else with the next
// write or shutdown. handshake() and shutdown() use both directions: nothing else may be pending on the stream while
// they run. See tls/detail/engine.hpp for the buffers, docs/design.md for why.
//
// Results:
// - read_some yields at least one byte, or an error: tern::error::eof once the peer's close_notify arrived (a clean
//   end), tls::error::truncated when the connection ended without one (a truncation attack, or a careless peer),
//   the next layer's errors (connection_reset, operation_canceled), or OpenSSL's ("decryption failed or bad record
//   mac", "wrong version number", ...). An OpenSSL error is fatal: every later operation reports it again.
// - write_some yields how many bytes of b the stream took: they are encrypted into whole records and sent before
//   it returns, or, if the send was cancelled or failed, left in the stream's output buffer in order (the next
//   write or shutdown sends them first). A failed send (not a cancellation) ends the sending side: a record may
//   have left in part, so every later write reports that error.
// - handshake() reports why a handshake failed: the certificate check's verdict ("hostname mismatch",
//   "unable to get local issuer certificate", in tls::verify_category()) on the side that checked, the alert it
//   sent ("tlsv1 alert unknown ca") on the other.
//
// Lifetime: S's rules apply (the loop outlives the stream; operations are awaited by tasks of S's loop). An
// operation awaited on another thread than the one running S's loop (when S names it: loop_bound) completes at
// once with tern::error::wrong_loop, before OpenSSL or the stream's buffers are touched. A stream may be moved
// while nothing is pending; a moved-from stream may only be destroyed or assigned to.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <system_error>
#include <utility>

#include "tern/buffer.hpp"
#include "tern/error.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/stream.hpp"
#include "tern/task.hpp"
#include "tern/tls/context.hpp"
#include "tern/tls/detail/engine.hpp"
#include "tern/tls/error.hpp"
#include "tern/tls/session.hpp"

struct ssl_st;

namespace tern::tls {

struct stream_options {
  std::size_t input_buffer_size = 32 * 1024;   // ciphertext read from the next layer at once (at least 4 KiB)
  std::size_t output_buffer_size = 64 * 1024;  // ciphertext sent at once (at least one record, about 19 KiB)
};

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
class stream {
 public:
  // The stream underneath.
  using next_layer_type = Stream;

  // A TLS stream of ctx's role over next, which is connected (or, for a server, accepted). Nothing is sent until
  // handshake() (or the first read or write, which shakes hands first). Throws std::runtime_error if OpenSSL cannot
  // make a connection (out of memory).
  stream(Stream next, const context& ctx, stream_options opts = {})
      : next_(std::move(next)),
        engine_(std::make_unique<detail::engine>(ctx, opts.input_buffer_size, opts.output_buffer_size)) {}

  // The stream underneath (the socket), for its options and endpoints. Reading or writing it directly breaks TLS.
  Stream& next_layer() noexcept { return next_; }
  const Stream& next_layer() const noexcept { return next_; }
  // The loop the stream belongs to: its next layer's (so that a layer above, such as ws::stream, checks it too).
  io_context& context() const noexcept
    requires loop_bound<Stream>
  {
    return next_.context();
  }

  // Clients, before the handshake: the server's name, sent in SNI and checked against its certificate (when the
  // context verifies and checks names). An IP address is checked but not sent. invalid_argument on a server.
  [[nodiscard]] std::error_code set_host_name(std::string_view host) { return engine_->set_host_name(host); }
  // Clients, before the handshake: offers s for resumption; no_session if it cannot be resumed.
  [[nodiscard]] std::error_code set_session(const tls::session& s) { return engine_->set_session(s); }

  // Awaitable: the handshake; yields std::error_code.
  task<std::error_code> handshake();
  // Awaitable: decrypted bytes into b, at least one; yields io_result<size_t> (see Results above).
  task<io_result<std::size_t>> read_some(mutable_buffer b) { return read(b, false); }
  // Awaitable: encrypts and sends some of b (up to about the output buffer's size); yields io_result<size_t>.
  task<io_result<std::size_t>> write_some(const_buffer b) { return write(b, false); }
  // Awaitable: fills b; yields io_result<size_t>, the byte count read before any error.
  task<io_result<std::size_t>> read_exact(mutable_buffer b) { return read(b, true); }
  // Awaitable: writes all of b; yields io_result<size_t>, the byte count taken before any error.
  task<io_result<std::size_t>> write_all(const_buffer b) { return write(b, true); }
  // Awaitable: sends close_notify, then waits for the peer's, dropping any data that comes before it; yields
  // std::error_code (truncated if the peer closed without answering). Nothing else may be pending.
  task<std::error_code> shutdown();
  // Awaitable: sends close_notify only (this side writes no more; a pending or later read still gets the peer's
  // data, then eof). A write, so a read may be pending meanwhile.
  task<std::error_code> shutdown_send();

  // After the handshake: whether a session offered by set_session was resumed (client), or a client resumed one
  // (server).
  bool session_reused() const noexcept { return engine_->session_reused(); }
  // The session to offer on a later connection (empty or not resumable before the server's ticket arrived: in
  // TLS 1.3 it comes after the handshake, with the first read).
  tls::session session() const noexcept { return engine_->current_session(); }
  // The ALPN protocol agreed on ("" if none).
  std::string_view alpn_protocol() const noexcept { return engine_->alpn_protocol(); }
  // The SNI name: the one a client sent, or the one a server received ("" if none).
  std::string_view server_name() const noexcept { return engine_->server_name(); }
  // "TLSv1.3", "TLSv1.2", ...
  std::string_view protocol_version() const noexcept { return engine_->protocol_version(); }
  // The cipher suite agreed on ("TLS_AES_256_GCM_SHA384", ...).
  std::string_view cipher() const noexcept { return engine_->cipher(); }
  // Whether the kernel encrypts what is sent (kTLS; see context::enable_ktls). False where it is not available.
  bool ktls_send() const noexcept { return engine_->ktls_send(); }
  // Whether the kernel decrypts what is received (kTLS).
  bool ktls_receive() const noexcept { return engine_->ktls_receive(); }
  // The OpenSSL connection, for what this class does not cover (the peer's certificate, ...).
  ssl_st* native_handle() const noexcept { return engine_->ssl(); }

 private:
  // read_some (fill: false) and read_exact (true), and write_some and write_all, as one task each, so that a record
  // costs no task of its own beyond the I/O it needs.
  task<io_result<std::size_t>> read(mutable_buffer b, bool fill);
  task<io_result<std::size_t>> write(const_buffer b, bool all);
  // Does what a step asked for: sends the output buffer, or makes one read of the next layer into the input buffer
  // (sending first while the handshake is not done, since the peer may be waiting for our flight), unless another
  // task brought input since the step stopped.
  task<std::error_code> provide(detail::want w);
  // Sends everything in the output buffer (one sender at a time: waits for a send in progress).
  task<std::error_code> send_output();
  // True on a thread that does not run the next layer's loop (when it names one): every operation then refuses with
  // tern::error::wrong_loop before it touches the stream. A bool rather than an error_code: an empty error_code
  // costs a call of std::system_category() on every operation.
  bool off_loop() const noexcept {
    if constexpr (loop_bound<Stream>) {
      return !next_.context().running_here();
    } else {
      return false;
    }
  }

  Stream next_;
  std::unique_ptr<detail::engine> engine_;
};

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::handshake() {
  if (off_loop()) [[unlikely]] co_return make_error_code(tern::error::wrong_loop);
  for (;;) {
    const detail::step s = engine_->handshake();
    if (s.next == detail::want::nothing) {
      // The last flight (a client's Finished, a server's tickets), or the alert that says why it failed.
      const std::error_code sent = co_await send_output();
      co_return s.ec ? s.ec : sent;
    }
    if (std::error_code ec = co_await provide(s.next)) co_return ec;
  }
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<io_result<std::size_t>> stream<Stream>::read(mutable_buffer b, bool fill) {
  if (off_loop()) [[unlikely]] co_return io_result<std::size_t>{make_error_code(tern::error::wrong_loop), 0};
  std::size_t done = 0;
  if (b.size() == 0) co_return io_result<std::size_t>{{}, 0};
  for (;;) {
    const detail::step s = engine_->read(b + done);
    if (s.next == detail::want::nothing) {
      done += s.bytes;
      if (s.ec || !fill || done == b.size()) co_return io_result<std::size_t>{s.ec, done};
    } else if (std::error_code ec = co_await provide(s.next)) {
      co_return io_result<std::size_t>{ec, done};
    }
  }
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<io_result<std::size_t>> stream<Stream>::write(const_buffer b, bool all) {
  if (off_loop()) [[unlikely]] co_return io_result<std::size_t>{make_error_code(tern::error::wrong_loop), 0};
  std::size_t done = 0;
  while (done < b.size()) {
    const detail::step s = engine_->write(b + done);
    if (s.next != detail::want::nothing) {
      if (std::error_code ec = co_await provide(s.next)) co_return io_result<std::size_t>{ec, done};
      continue;
    }
    if (s.ec) co_return io_result<std::size_t>{s.ec, done};
    done += s.bytes;
    // The records are sent before the call returns (see Results above).
    const std::error_code ec = co_await send_output();
    if (ec || !all) co_return io_result<std::size_t>{ec, done};
  }
  co_return io_result<std::size_t>{{}, done};
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::shutdown_send() {
  if (off_loop()) [[unlikely]] co_return make_error_code(tern::error::wrong_loop);
  for (;;) {
    const detail::step s = engine_->shutdown();
    if (s.next == detail::want::nothing) {
      if (s.ec) co_return s.ec;
      co_return co_await send_output();
    }
    if (std::error_code ec = co_await provide(s.next)) co_return ec;
  }
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::shutdown() {
  if (std::error_code ec = co_await shutdown_send()) co_return ec;
  char dropped[256];
  for (;;) {
    auto [ec, n] = co_await read_some(mutable_buffer(dropped, sizeof dropped));
    if (ec == tern::error::eof) co_return std::error_code{};
    if (ec) co_return ec;
  }
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::provide(detail::want w) {
  if (w == detail::want::output) co_return co_await send_output();
  detail::engine& e = *engine_;
  const std::uint64_t seen = e.input_generation();
  if (!e.handshake_done() && e.has_output()) {
    if (std::error_code ec = co_await send_output()) co_return ec;
  }
  auto held = co_await e.input_lock.scoped_lock();
  if (!held) co_return held.ec;
  if (e.input_generation() != seen) co_return std::error_code{};  // another task brought input meanwhile
  const mutable_buffer space = e.input_space();
  if (space.size() == 0) co_return std::error_code{};
  auto [ec, n] = co_await next_.read_some(space);
  const bool ended = ec == tern::error::eof;
  e.input_done(ec ? 0 : n, ended);
  co_return ended ? std::error_code{} : ec;
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::send_output() {
  detail::engine& e = *engine_;
  if (!e.has_output()) co_return e.output_error();
  auto held = co_await e.output_lock.scoped_lock();
  if (!held) co_return held.ec;
  while (e.has_output() && !e.output_error()) {
    auto [ec, n] = co_await next_.write_some(e.output());
    e.output_done(n, ec);
    if (ec) co_return ec;
  }
  co_return e.output_error();
}

}  // namespace tern::tls
