// tern/ws/stream.hpp
//
// ws::stream<S>: an RFC 6455 WebSocket over any tern stream S (net::tcp_socket, tls::stream<net::tcp_socket>,
// net::unix_stream_socket: anything with read_some and write_some awaited as io_result<size_t>). The stream owns
// S; next_layer() is S.
//
//   ws::stream<net::tcp_socket> ws(std::move(socket), ws::role::client);
//   if (auto ec = co_await ws.handshake("example.com", "/chat")) ...   // error::rejected, bad_accept, ...
//   co_await ws.write(ws::message_type::text, "hello");
//   std::string message;
//   auto [ec, type] = co_await ws.read(message);                        // a whole message, text or binary
//   co_await ws.close(ws::close_code::normal, "bye");                   // the close handshake
//
//   ws::stream<net::tcp_socket> ws(std::move(accepted), ws::role::server);
//   if (auto ec = co_await ws.accept()) ...     // reads the upgrade request itself; 400 or 426 sent on a bad one
//
// What the stream does by itself: answers pings with pongs while reading, answers the peer's close frame and
// reports its code (ws::close_code::normal, ... as an error_code of "tern.ws"; close_code() and close_reason()
// give it again), masks a client's frames with a fresh key each, refuses with the RFC's close code a peer that
// breaks the protocol (1002: reserved bits or opcodes, bad lengths, fragments out of order, a client frame without
// a mask or a server frame with one), sends text that is not UTF-8, even across fragments (1007), or a message over
// max_message_size (1009), and agrees on permessage-deflate (RFC 7692) when both ends ask.
//
// Operations are tasks: the awaiting task's stop token and with_timeout reach every wait inside them, and their
// frames come from the frame pool. Without permessage-deflate a warm stream allocates nothing per message (read()
// into a string that already has the room reuses it).
//
// Full duplex: one read (read, read_some, or close() waiting for the peer's close) and one write (write,
// write_some, ping, pong, close) may be pending at once, in two tasks of S's loop; several writers take turns
// (frames are never interleaved). A pong or close answer that a read must send goes out at once when no write is
// in progress, or else right after the current write's frame (between two fragments of a message if need be): a
// reader never waits for a writer stuck on a full socket. handshake() and accept() use both directions: nothing
// else may be pending while they run.
//
// Errors: the next layer's (connection_reset, operation_canceled, ...) pass through; a connection that ends
// without a close frame is close_code::abnormal. A write whose send fails or is cancelled may have sent part of
// a frame, so every later write reports that error. After the close handshake, destroy the stream (a server
// closes the TCP connection first, as RFC 6455 §7.1.1 asks).
//
// Lifetime: S's rules apply (the loop outlives the stream; operations are awaited by tasks of S's loop). An
// operation awaited on another thread than the one running S's loop (when S names it: loop_bound) completes at
// once with tern::error::wrong_loop and leaves the stream as it was. A stream may be moved while nothing is
// pending.
// An operation copies the strings it is given (host, target, a close reason); what it refers to (buffers, and
// the spans and fields in handshake_options and accept_options) must outlive it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "tern/buffer.hpp"
#include "tern/cancel.hpp"
#include "tern/error.hpp"
#include "tern/http/parser.hpp"
#include "tern/io_result.hpp"
#include "tern/stream.hpp"
#include "tern/task.hpp"
#include "tern/timer.hpp"
#include "tern/ws/detail/core.hpp"
#include "tern/ws/error.hpp"
#include "tern/ws/outbox.hpp"

namespace tern::ws {

namespace detail {
// A close reason, copied when close() is called: at most max_control_payload - 2 bytes (a longer one is only
// remembered as too long).
class close_reason {
 public:
  explicit close_reason(std::string_view r) noexcept : size_(r.size()) {
    if (!too_long() && size_ != 0) std::memcpy(bytes_, r.data(), size_);
  }
  bool too_long() const noexcept { return size_ > max_control_payload - 2; }
  std::string_view view() const noexcept { return too_long() ? std::string_view() : std::string_view(bytes_, size_); }

 private:
  char bytes_[max_control_payload - 2];
  std::size_t size_;
};
}  // namespace detail

// Which end of the connection a stream is: a client masks what it sends, a server requires masks.
enum class role : std::uint8_t { client, server };

// An upgrade request that an HTTP server's handler has checked and will answer itself (its response with status
// 101, http::response::upgrade): the handler puts fields() in its 101, and the function that takes the connection
// over makes the stream from it (ws::stream<S>(std::move(connection), std::move(upgrade))), open at once.
class accepted {
 public:
  // Checks request and agrees on the subprotocol and permessage-deflate (with opts.deflate); on success puts the
  // fields of the 101 into answer (Upgrade, Connection, Sec-WebSocket-Accept, and -Protocol and -Extensions when
  // agreed). On an error, answer gets nothing and status() is what to answer instead (400, or 426 with
  // Sec-WebSocket-Version: 13). Throws std::bad_alloc.
  accepted(const http::request_head& request, http::fields& answer, stream_options opts = {},
           const accept_options& o = {})
      : core_(std::make_unique<detail::core>(true, opts)) {
    error_ = core_->answer_request(request, o);
    if (!error_) core_->answer_fields(answer);
  }
  // Why the request was refused (error::not_upgrade, bad_version, bad_key), or empty.
  std::error_code error() const noexcept { return error_; }
  // 101, or the refusal's status.
  int status() const noexcept { return core_ ? core_->handshake_status() : 0; }
  // The subprotocol agreed on ("" if none).
  std::string_view subprotocol() const noexcept { return core_ ? core_->subprotocol() : std::string_view(); }

 private:
  template <class Stream>
    requires read_stream<Stream> && write_stream<Stream>
  friend class stream;
  std::unique_ptr<detail::core> core_;
  std::error_code error_;
};

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
class stream {
 public:
  using next_layer_type = Stream;

  // A WebSocket of role r over next (connected or accepted). Nothing is sent until handshake() or accept().
  // Allocates the stream's buffers (stream_options); throws std::bad_alloc.
  stream(Stream next, ws::role r, stream_options opts = {})
      : next_(std::move(next)), core_(std::make_unique<detail::core>(r == role::server, opts)) {}

  // A server's stream over a connection whose upgrade an HTTP server answered (see accepted): open at once, or,
  // if the request was refused, closed (reads and writes report error::not_open).
  stream(Stream next, accepted&& upgrade) : next_(std::move(next)), core_(std::move(upgrade.core_)) {
    if (upgrade.error_) core_->st = detail::state::idle;
  }

  // The stream underneath. Reading or writing it directly breaks the framing.
  Stream& next_layer() noexcept { return next_; }
  const Stream& next_layer() const noexcept { return next_; }

  // ---- opening handshake ----------------------------------------------------------------------------------------

  // Client: sends the upgrade request for target ("/chat?room=1") on host ("example.com:8080") and checks the
  // answer: 101, Upgrade, Connection, Sec-WebSocket-Accept, the extension and subprotocol agreed. Awaitable;
  // yields std::error_code (error::rejected with handshake_status() for another status).
  TERN_CORO_WRAPPER task<std::error_code> handshake(std::string_view host, std::string_view target,
                                                    handshake_options o = {}) {
    return handshake_as(std::string(host), std::string(target), o);
  }
  // Server: reads the upgrade request from the next layer and answers it: 101, or 400 / 426 and an error
  // (error::not_upgrade, bad_version, bad_key, bad_request). Awaitable; yields std::error_code.
  task<std::error_code> accept(accept_options o = {});
  // Server: answers a request head that someone else read (an HTTP server's handler, before giving the
  // connection over); already_read is what arrived after the head, which belongs to the WebSocket.
  task<std::error_code> accept(const http::request_head& request, const_buffer already_read = {},
                               accept_options o = {});

  // ---- messages -------------------------------------------------------------------------------------------------

  // A whole message into out (replacing its content; its capacity is reused). Awaitable; yields
  // io_result<message_type>. Errors: the peer's close code, error::protocol_violation, invalid_utf8,
  // message_too_big, bad_compression (the close frame the RFC asks for has gone out first), close_code::abnormal
  // if the connection ended without a close frame, or the next layer's.
  task<io_result<message_type>> read(std::string& out);
  // Part of a message into b (at least one byte, or the empty end of a message): its type, size, and whether it
  // ends the message. Awaitable; yields io_result<read_result>. Text is validated as it arrives: a part can be
  // delivered before the rest of its message turns out not to be UTF-8.
  task<io_result<read_result>> read_some(mutable_buffer b);
  // Sends b as one message of type t. Awaitable; yields std::error_code (error::closed once a close frame went
  // out).
  task<std::error_code> write(message_type t, const_buffer b) { return write_some(true, t, b); }
  // Sends b as one fragment of a message: t is the type of the message the first fragment starts (ignored on
  // the others); fin ends the message. Control frames (pings, pongs, close answers) may go between fragments.
  task<std::error_code> write_some(bool fin, message_type t, const_buffer b);
  // Sends a ping with payload (at most 125 bytes). The peer's pong is read by a read (last_pong()).
  task<std::error_code> ping(const_buffer payload = {}) { return send_control(detail::opcode::ping, payload); }
  // Sends an unsolicited pong (a heartbeat that asks no answer).
  task<std::error_code> pong(const_buffer payload = {}) { return send_control(detail::opcode::pong, payload); }
  // Sends a close frame with code (close_code{4000} for an application's own) and reason (at most 123 bytes of
  // UTF-8), then, unless a read is pending (it will see the peer's close), reads until the peer's close frame,
  // dropping messages. Awaitable; yields std::error_code (empty once the handshake is complete; bad_close_code
  // for a code that may not be sent, such as 1005 or 1006).
  TERN_CORO_WRAPPER task<std::error_code> close(ws::close_code code = close_code::normal,
                                                std::string_view reason = {}) {
    return close_with(code, detail::close_reason(reason));
  }
  // Writes the messages queued in box (by senders on any worker; see outbox.hpp), in order, until box is closed
  // and empty (then yields an empty error_code) or a write fails (then yields that error). However it ends (a
  // failed write, a cancellation, its frame destroyed with its loop) it closes box, so that no sender waits for a
  // writer that is gone. Run it as a task of the stream's loop, beside the reader. box is taken by value (the
  // queue is shared: the caller's outbox object may go first); the stream must outlive the task.
  task<std::error_code> write_from(outbox box) { return write_queued(std::move(box), clock::duration::zero()); }
  // The same, with a deadline on each message: one not written within message_timeout (a peer that stopped
  // reading) ends it with timed_out, and the stream writes no more (part of a frame may have gone out). A server
  // whose broadcasts drop slow readers with try_send uses it to free their connections too.
  task<std::error_code> write_from(outbox box, clock::duration message_timeout) {
    return write_queued(std::move(box), message_timeout);
  }

  // ---- state ----------------------------------------------------------------------------------------------------

  // True after the opening handshake, until a close frame is sent or received or the connection fails.
  bool is_open() const noexcept {
    return core_->st == detail::state::open && !core_->close_sent && !core_->read_error;
  }
  // The subprotocol agreed on ("" if none).
  std::string_view subprotocol() const noexcept { return core_->subprotocol(); }
  // Whether permessage-deflate was agreed on.
  bool deflate_agreed() const noexcept { return core_->deflate_agreed(); }
  // The handshake's status: 101, the server's other answer (client), or the refusal sent (server).
  int handshake_status() const noexcept { return core_->handshake_status(); }
  // The peer's close code (1005 for a close frame without one; 0 before one arrived) and reason.
  std::uint16_t close_code() const noexcept { return core_->close_code_received; }
  std::string_view close_reason() const noexcept { return core_->close_reason(); }
  // The payload of the last pong received, and how many have arrived.
  std::span<const unsigned char> last_pong() const noexcept { return core_->last_pong(); }
  std::uint64_t pongs_received() const noexcept { return core_->pongs; }

 private:
  // True on a thread that does not run the next layer's loop (when it names one): every operation then refuses with
  // tern::error::wrong_loop before it touches the stream, the check descriptors make. A bool rather than an
  // error_code: an empty error_code costs a call of std::system_category() on every operation.
  bool off_loop() const noexcept {
    if constexpr (loop_bound<Stream>) {
      return !next_.context().running_here();
    } else {
      return false;
    }
  }
  task<std::error_code> handshake_as(std::string host, std::string target, handshake_options o);
  task<std::error_code> close_with(ws::close_code code, detail::close_reason reason);
  task<std::error_code> receive();
  task<std::error_code> write_queued(outbox box, clock::duration message_timeout);
  task<std::error_code> send_raw(const unsigned char* data, std::size_t size);
  task<std::error_code> send_frame(detail::opcode op, bool fin, bool rsv1, const unsigned char* data,
                                   std::size_t size);
  // An unmasked frame (a server's) of at least gather_threshold bytes, over a stream that gathers: the header and
  // the caller's payload leave in one write each time, without the payload's copy into the output buffer. Below
  // the threshold the copy is cheaper than sendmsg's extra work (ws/echo: 16 KiB x 100 +15% on epoll, +6% on
  // io_uring; 4 KiB x 1 1% slower gathered).
  task<std::error_code> send_gathered(const unsigned char* header, std::size_t header_size, const unsigned char* data,
                                      std::size_t size);
  static constexpr std::size_t gather_threshold = 8192;
  // ping() and pong(): waits for the output lock, then sends the frame after any parked answer.
  task<std::error_code> send_control(detail::opcode op, const_buffer payload);
  task<std::error_code> send_control_locked(detail::opcode op, const unsigned char* payload, std::size_t size);
  task<std::error_code> flush_pending();
  task<std::error_code> reader_sends(detail::opcode op, const unsigned char* payload, std::size_t size);
  task<std::error_code> answer(const http::request_head& request, const accept_options& o, std::size_t head_size);
  task<std::error_code> fail(std::error_code why);
  std::error_code check(message_type t, const unsigned char* p, std::size_t n, bool done) noexcept;

  Stream next_;
  std::unique_ptr<detail::core> core_;
};

// ---- implementation ---------------------------------------------------------------------------------------------

namespace detail {
// Clears a flag when the coroutine that set it ends.
struct flag_reset {
  bool& flag;
  ~flag_reset() { flag = false; }
};
inline std::uint16_t close_code_for(const std::error_code& why) noexcept {
  if (why == error::invalid_utf8 || why == error::bad_compression) return 1007;
  if (why == error::message_too_big) return 1009;
  return 1002;
}
inline http::parser_limits head_limits(std::size_t buffer) noexcept {
  http::parser_limits l;
  l.max_request_line = std::min<std::size_t>(l.max_request_line, buffer);
  l.max_header_bytes = std::min<std::size_t>(l.max_header_bytes, buffer);
  return l;
}
}  // namespace detail

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::receive() {
  detail::core& c = *core_;
  const mutable_buffer space = c.in_space();
  if (space.size() == 0) co_return std::make_error_code(std::errc::no_buffer_space);
  auto [ec, n] = co_await next_.read_some(space);
  if (ec) co_return ec;
  c.in_done(n);
  co_return std::error_code{};
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::send_raw(const unsigned char* data, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    auto [ec, n] = co_await next_.write_some(const_buffer(data + done, size - done));
    if (ec) co_return ec;
    done += n;
  }
  co_return std::error_code{};
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::send_frame(detail::opcode op, bool fin, bool rsv1, const unsigned char* data,
                                                 std::size_t size) {
  detail::core& c = *core_;
  const bool masked = !c.server();
  if constexpr (gather_write_stream<Stream>) {
    if (!masked && size >= gather_threshold) {
      unsigned char header[detail::max_header_size];
      const std::size_t h = detail::write_header(header, op, fin, rsv1, size, false, 0);
      co_return co_await send_gathered(header, h, data, size);
    }
  }
  const std::uint32_t key = masked ? c.next_mask_key() : 0;
  unsigned char* out = c.out();
  const std::size_t capacity = c.out_capacity();
  std::size_t fill = detail::write_header(out, op, fin, rsv1, size, masked, key);
  std::size_t pos = 0;
  do {
    const std::size_t n = std::min(size - pos, capacity - fill);
    if (masked) {
      detail::copy_masked(out + fill, data + pos, n, key, pos & 3);
    } else if (n != 0) {
      std::memcpy(out + fill, data + pos, n);
    }
    fill += n;
    pos += n;
    if (std::error_code ec = co_await send_raw(out, fill)) {
      c.write_error = ec;  // part of a frame may have left: nothing can follow it
      co_return ec;
    }
    fill = 0;
  } while (pos < size);
  co_return std::error_code{};
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::send_gathered(const unsigned char* header, std::size_t header_size,
                                                    const unsigned char* data, std::size_t size) {
  std::size_t done = 0;
  while (done < header_size + size) {
    io_result<std::size_t> r;
    if (done < header_size) {
      const const_buffer parts[2] = {const_buffer(header + done, header_size - done), const_buffer(data, size)};
      r = co_await next_.write_some(std::span<const const_buffer>(parts));
    } else {
      r = co_await next_.write_some(const_buffer(data + (done - header_size), header_size + size - done));
    }
    if (r.ec) {
      core_->write_error = r.ec;  // part of a frame may have left: nothing can follow it
      co_return r.ec;
    }
    done += r.value;
  }
  co_return std::error_code{};
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::send_control_locked(detail::opcode op, const unsigned char* payload,
                                                          std::size_t size) {
  detail::core& c = *core_;
  if (c.write_error) co_return c.write_error;
  if (c.close_sent) co_return make_error_code(error::closed);
  c.build_control(op, payload, size);
  if (op == detail::opcode::close) c.close_sent = true;
  const auto frame = c.control_frame();
  std::error_code ec = co_await send_raw(frame.data(), frame.size());
  if (ec) c.write_error = ec;
  co_return ec;
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::flush_pending() {
  detail::core& c = *core_;
  while (c.pending.set) {
    c.pending.set = false;
    if (c.write_error || c.close_sent) break;
    if (std::error_code ec = co_await send_control_locked(c.pending.op, c.pending.payload.data(), c.pending.size)) {
      co_return ec;
    }
  }
  co_return std::error_code{};
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::reader_sends(detail::opcode op, const unsigned char* payload,
                                                   std::size_t size) {
  detail::core& c = *core_;
  if (c.write_error || c.close_sent) co_return std::error_code{};
  if (c.output_lock.try_lock()) {
    std::error_code ec = co_await send_control_locked(op, payload, size);
    if (!ec) ec = co_await flush_pending();
    c.output_lock.unlock();
    co_return ec;
  }
  // A write is in progress: it sends this after its current frame. A parked close is never replaced by a pong.
  if (c.pending.set && c.pending.op == detail::opcode::close) co_return std::error_code{};
  c.pending.op = op;
  c.pending.size = static_cast<std::uint8_t>(size);
  if (size != 0) std::memcpy(c.pending.payload.data(), payload, size);
  c.pending.set = true;
  co_return std::error_code{};
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::handshake_as(std::string host, std::string target, handshake_options o) {
  if (off_loop()) [[unlikely]] co_return make_error_code(tern::error::wrong_loop);
  detail::core& c = *core_;
  if (c.server() || c.st != detail::state::idle) co_return std::make_error_code(std::errc::invalid_argument);
  if (std::error_code ec = c.build_request(host, target, o)) co_return ec;
  c.st = detail::state::closed;  // until the answer is checked
  if (std::error_code ec = co_await send_raw(c.out(), c.out_size())) co_return ec;
  http::response_parser parser(detail::head_limits(c.options().input_buffer_size));
  for (;;) {
    std::error_code ec;
    const std::string_view data(reinterpret_cast<const char*>(c.in_data()), c.in_size());
    if (parser.parse(data, http::method::get, ec)) {
      const http::response_head& head = parser.head();
      if (head.status >= 100 && head.status < 200 && head.status != 101) {  // an interim answer: skip it
        c.in_consume(head.size);
        parser.reset();
        continue;
      }
      ec = c.check_response(head);
      c.in_consume(head.size);
      co_return ec;
    }
    if (ec) co_return make_error_code(error::bad_response);
    if (std::error_code rec = co_await receive()) {
      co_return rec == std::errc::no_buffer_space ? make_error_code(error::bad_response) : rec;
    }
  }
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::answer(const http::request_head& request, const accept_options& o,
                                             std::size_t head_size) {
  detail::core& c = *core_;
  const std::error_code refused = c.answer_request(request, o);
  c.in_consume(head_size);
  const std::error_code sent = co_await send_raw(c.out(), c.out_size());
  if (sent) c.st = detail::state::closed;
  co_return refused ? refused : sent;
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::accept(accept_options o) {
  if (off_loop()) [[unlikely]] co_return make_error_code(tern::error::wrong_loop);
  detail::core& c = *core_;
  if (!c.server() || c.st != detail::state::idle) co_return std::make_error_code(std::errc::invalid_argument);
  http::request_parser parser(detail::head_limits(c.options().input_buffer_size));
  for (;;) {
    std::error_code ec;
    const std::string_view data(reinterpret_cast<const char*>(c.in_data()), c.in_size());
    if (parser.parse(data, ec)) co_return co_await answer(parser.head(), o, parser.head().size);
    std::error_code rec;
    if (!ec) {
      rec = co_await receive();
      if (!rec) continue;
      if (rec != std::errc::no_buffer_space) {
        c.st = detail::state::closed;
        co_return rec;
      }
    }
    const std::error_code why = c.refuse(400, error::bad_request);
    (void)co_await send_raw(c.out(), c.out_size());
    co_return why;
  }
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::accept(const http::request_head& request, const_buffer already_read,
                                             accept_options o) {
  if (off_loop()) [[unlikely]] co_return make_error_code(tern::error::wrong_loop);
  detail::core& c = *core_;
  if (!c.server() || c.st != detail::state::idle) co_return std::make_error_code(std::errc::invalid_argument);
  if (!c.in_prepend(already_read)) {
    const std::error_code why = c.refuse(400, error::bad_request);
    (void)co_await send_raw(c.out(), c.out_size());
    co_return why;
  }
  co_return co_await answer(request, o, 0);
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
std::error_code stream<Stream>::check(message_type t, const unsigned char* p, std::size_t n, bool done) noexcept {
  detail::core& c = *core_;
  c.message_bytes += n;
  const std::uint64_t max = c.options().max_message_size;
  if (max != 0 && c.message_bytes > max) return error::message_too_big;
  if (t == message_type::text) {
    if (!c.utf8.feed(p, n)) return error::invalid_utf8;
    if (done && !c.utf8.complete()) return error::invalid_utf8;
  }
  if (done) {
    c.message_bytes = 0;
    c.utf8.reset();
  }
  return {};
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::fail(std::error_code why) {
  detail::core& c = *core_;
  c.read_error = why;
  const std::uint16_t code = detail::close_code_for(why);
  const unsigned char payload[2] = {static_cast<unsigned char>(code >> 8), static_cast<unsigned char>(code)};
  (void)co_await reader_sends(detail::opcode::close, payload, 2);
  co_return why;
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<io_result<read_result>> stream<Stream>::read_some(mutable_buffer b) {
  using result = io_result<read_result>;
  if (off_loop()) [[unlikely]] co_return result{make_error_code(tern::error::wrong_loop), {}};
  detail::core& c = *core_;
  if (c.st == detail::state::idle) co_return result{make_error_code(error::not_open), {}};
  if (c.read_error) co_return result{c.read_error, {}};
  if (c.st != detail::state::open) co_return result{make_error_code(error::not_open), {}};
  if (b.size() == 0) co_return result{std::make_error_code(std::errc::invalid_argument), {}};
  c.reading = true;
  detail::flag_reset reading{c.reading};
  auto* const dst = static_cast<unsigned char*>(b.data());
  const std::size_t room = b.size();
  auto current_type = [&c] {
    return c.decoder.message_opcode() == detail::opcode::text ? message_type::text : message_type::binary;
  };
  for (;;) {
    if (c.finishing) {  // a compressed message's end: the flush tail still to inflate
      const message_type type = current_type();
      unsigned char* o = dst;
      std::size_t left = room;
      bool done = false;
      if (c.inflater_->finish(o, left, done)) co_return result{co_await fail(error::bad_compression), {}};
      const std::size_t produced = room - left;
      if (done) c.finishing = false;
      if (std::error_code e = check(type, dst, produced, done)) co_return result{co_await fail(e), {}};
      co_return result{{}, {type, produced, done}};
    }
    const detail::frame_decoder::result r = c.decoder.next(c.in_data(), c.in_size());
    switch (r.what) {
      case detail::frame_decoder::event::need_more:
        if (std::error_code ec = co_await receive()) {
          // A cancelled read leaves the stream as it was (nothing was taken from a frame); other errors end it.
          if (ec == tern::error::eof) ec = close_code::abnormal;
          if (ec != std::errc::operation_canceled && ec != std::errc::timed_out) c.read_error = ec;
          co_return result{ec, {}};
        }
        continue;
      case detail::frame_decoder::event::failed:
        co_return result{co_await fail(r.ec), {}};
      case detail::frame_decoder::event::control: {
        c.in_consume(r.consumed);
        if (r.op == detail::opcode::ping) {
          (void)co_await reader_sends(detail::opcode::pong, r.payload, r.size);
          continue;
        }
        if (r.op == detail::opcode::pong) {
          c.on_pong(r.payload, r.size);
          continue;
        }
        const std::error_code closed = c.on_close_frame(r.payload, r.size);
        if (!is_close_code(closed)) co_return result{co_await fail(closed), {}};
        // Echo the code (RFC 6455 §5.5.1), or send an empty close for a close without one.
        const unsigned char echo[2] = {r.payload[0], r.size >= 2 ? r.payload[1] : static_cast<unsigned char>(0)};
        (void)co_await reader_sends(detail::opcode::close, echo, r.size >= 2 ? 2 : 0);
        c.read_error = closed;
        co_return result{closed, {}};
      }
      case detail::frame_decoder::event::data: {
        c.in_consume(r.consumed);
        const message_type type = current_type();
        if (!c.decoder.message_compressed()) {
          const std::size_t n = std::min(r.size, room);
          if (n != 0) std::memcpy(dst, r.payload, n);
          c.decoder.consume_payload(n);
          c.in_consume(n);
          const bool done = r.message_end && n == r.size;
          if (std::error_code e = check(type, dst, n, done)) co_return result{co_await fail(e), {}};
          if (n == 0 && !done) continue;
          co_return result{{}, {type, n, done}};
        }
        const unsigned char* in = r.payload;
        std::size_t in_left = r.size;
        unsigned char* o = dst;
        std::size_t left = room;
        if (in_left != 0 && c.inflater_->run(in, in_left, o, left)) {
          co_return result{co_await fail(error::bad_compression), {}};
        }
        const std::size_t used = r.size - in_left;
        c.decoder.consume_payload(used);
        c.in_consume(used);
        bool done = false;
        if (r.message_end && used == r.size) {
          c.finishing = true;
          if (left != 0) {
            if (c.inflater_->finish(o, left, done)) co_return result{co_await fail(error::bad_compression), {}};
            if (done) c.finishing = false;
          }
        }
        const std::size_t produced = room - left;
        if (std::error_code e = check(type, dst, produced, done)) co_return result{co_await fail(e), {}};
        if (produced == 0 && !done) continue;
        co_return result{{}, {type, produced, done}};
      }
    }
  }
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<io_result<message_type>> stream<Stream>::read(std::string& out) {
  // The string's bytes (the last message's) are the first window, overwritten: resize zero-fills what it adds, so
  // growing the string only when they run out means a message no larger than the last one costs no fill. The
  // window grows to the capacity first, then geometrically (resize past the capacity reallocates to twice it).
  std::size_t used = 0;
  for (;;) {
    if (out.size() - used < 1024) {
      out.resize(std::min(std::max(out.capacity(), used + 4096), used + std::size_t{256 * 1024}));
    }
    const std::size_t window = std::min<std::size_t>(out.size() - used, 256 * 1024);
    auto [ec, part] = co_await read_some(mutable_buffer(out.data() + used, window));
    used += part.size;
    if (ec || part.message_done) {
      out.resize(used);
      co_return io_result<message_type>{ec, part.type};
    }
  }
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::write_some(bool fin, message_type t, const_buffer b) {
  if (off_loop()) [[unlikely]] co_return make_error_code(tern::error::wrong_loop);
  detail::core& c = *core_;
  if (c.st == detail::state::idle) co_return make_error_code(error::not_open);
  auto held = co_await c.output_lock.scoped_lock();
  if (!held) co_return held.ec;
  if (c.write_error) co_return c.write_error;
  if (c.close_sent || c.st != detail::state::open) co_return make_error_code(error::closed);
  const auto* data = static_cast<const unsigned char*>(b.data());
  std::size_t size = b.size();
  detail::opcode op = detail::opcode::continuation;
  bool rsv1 = false;
  if (!c.writing_message) {
    op = t == message_type::text ? detail::opcode::text : detail::opcode::binary;
    c.writing_compressed = c.deflater_ && (!fin || size >= c.options().deflate.threshold);
    rsv1 = c.writing_compressed;
  }
  if (c.writing_compressed) {
    c.compressed.clear();
    c.deflater_->compress(data, size, fin, c.compressed);
    data = reinterpret_cast<const unsigned char*>(c.compressed.data());
    size = c.compressed.size();
  }
  c.writing_message = !fin;
  std::error_code ec = co_await send_frame(op, fin, rsv1, data, size);
  if (!ec) ec = co_await flush_pending();
  co_return ec;
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::send_control(detail::opcode op, const_buffer payload) {
  if (off_loop()) [[unlikely]] co_return make_error_code(tern::error::wrong_loop);
  detail::core& c = *core_;
  if (payload.size() > detail::max_control_payload) co_return make_error_code(error::control_too_long);
  if (c.st == detail::state::idle) co_return make_error_code(error::not_open);
  auto held = co_await c.output_lock.scoped_lock();
  if (!held) co_return held.ec;
  std::error_code ec = co_await flush_pending();
  if (!ec) {
    ec = co_await send_control_locked(op, static_cast<const unsigned char*>(payload.data()), payload.size());
  }
  co_return ec;
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::close_with(ws::close_code code, detail::close_reason kept) {
  if (off_loop()) [[unlikely]] co_return make_error_code(tern::error::wrong_loop);
  detail::core& c = *core_;
  const auto value = static_cast<unsigned>(code);
  if (!sendable_close_code(value)) co_return make_error_code(error::bad_close_code);
  if (kept.too_long()) co_return make_error_code(error::control_too_long);
  const std::string_view reason = kept.view();
  if (!detail::valid_utf8(reinterpret_cast<const unsigned char*>(reason.data()), reason.size())) {
    co_return std::make_error_code(std::errc::invalid_argument);
  }
  if (c.st == detail::state::idle) co_return make_error_code(error::not_open);
  {
    auto held = co_await c.output_lock.scoped_lock();
    if (!held) co_return held.ec;
    if (!c.close_sent) {
      c.pending.set = false;  // a pong parked for after the current frame is pointless now
      unsigned char payload[detail::max_control_payload];
      const std::size_t n = detail::core::close_payload(payload, static_cast<std::uint16_t>(value), reason);
      if (std::error_code ec = co_await send_control_locked(detail::opcode::close, payload, n)) co_return ec;
    }
  }
  if (c.reading) co_return std::error_code{};  // the pending read sees the peer's close
  // Wait for the peer's close frame, dropping what comes before it.
  unsigned char scratch[512];
  for (;;) {
    auto [ec, part] = co_await read_some(mutable_buffer(scratch, sizeof scratch));
    if (!ec) continue;
    if (is_close_code(ec) && ec != close_code::abnormal) co_return std::error_code{};
    co_return ec;
  }
}

template <class Stream>
  requires read_stream<Stream> && write_stream<Stream>
task<std::error_code> stream<Stream>::write_queued(outbox box, clock::duration message_timeout) {
  struct closer {  // however the writer ends, its senders see closed
    sync::channel<queued_message>& queue;
    ~closer() { (void)queue.close(); }
  } guard{box.channel()};
  if (off_loop()) [[unlikely]] co_return make_error_code(tern::error::wrong_loop);
  for (;;) {
    auto [ec, message] = co_await guard.queue.receive();
    if (ec == sync::error::closed) co_return std::error_code{};
    if (ec) co_return ec;
    std::error_code wec;
    if (message_timeout > clock::duration::zero()) {
      wec = co_await with_timeout(write(message->type, message->payload), message_timeout);
    } else {
      wec = co_await write(message->type, message->payload);
    }
    if (wec) co_return wec;
  }
}

}  // namespace tern::ws
