// tern/http/stream.hpp
//
// The streaming form of a route (router::stream): body_reader gives the request body piece by piece as it
// arrives, and response_stream writes the response piece by piece, so neither has to fit in memory.
//
//   routes.stream(http::method::put, "/files/{name}",
//                 [](http::request& req, http::body_reader& body, http::response_stream& out) -> tern::task<> {
//                   char buf[16384];
//                   for (;;) {
//                     auto [ec, n] = co_await body.read_some(tern::mutable_buffer(buf, sizeof buf));
//                     if (ec == tern::error::eof) break;
//                     if (ec) co_return;                 // the server closes the connection
//                     ... store buf[0..n) ...
//                   }
//                   (void)co_await out.start(201);       // no length: chunked (an empty body here)
//                   (void)co_await out.finish();
//                 });
//
// The body reader honours the server's limits and timeouts (max_body, body_timeout, min_body_rate) and the
// chunked coding's rules, reporting an http::error; what the handler leaves unread is read and dropped after it
// returns (up to 1 MiB; beyond, the connection is closed instead). The response has a Content-Length when
// start() is given the length (writing more is refused; less closes the connection after the handler), and is
// chunked otherwise (to an HTTP/1.0 client: delimited by closing the connection). A handler that returns without
// start() gets a 500 sent for it; one that started but did not finish() has its connection closed, so the peer
// sees an incomplete response rather than a wrong one. The reader and the stream are the connection's, and its
// loop's: awaited on another loop (a handler that moved with runtime::switch_to), they refuse with
// tern::error::wrong_loop and change nothing; switch back first.
//
// Over HTTP/2 (tern::http2) the same handler reads the request's DATA and writes the response's: the body reader's
// pace opens the stream's flow-control window (a handler that stops reading stops the peer), the response has a
// content-length when start() is given one, and a handler that started but did not finish() has its stream reset
// (RST_STREAM) instead of its connection closed. Trailer fields go both ways there: body_reader::trailers() once
// the body has been read, response_stream::finish(trailers). Over HTTP/1.1, a chunked response carries its trailers
// in its last chunk (dropped otherwise), and a chunked request's trailers are read and dropped.
//
// Lifetimes: the buffers given to read_some, write and write_last, and the fields given to start(), are read in
// place when the operation runs: await each operation at once (a temporary inside the awaited expression lives long
// enough).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>

#include "tern/buffer.hpp"
#include "tern/http/fields.hpp"
#include "tern/io_result.hpp"
#include "tern/task.hpp"

namespace tern::http {

class body_reader;
class response_stream;

namespace detail {
class connection;

// What body_reader and response_stream work through: an HTTP/1.1 connection, or an HTTP/2 stream.
class exchange {
 public:
  virtual task<io_result<std::size_t>> read_body_some(mutable_buffer b) = 0;
  virtual bool body_done() const noexcept = 0;
  virtual std::optional<std::uint64_t> body_length() const noexcept = 0;
  virtual const field_list& body_trailers() const noexcept = 0;
  virtual task<std::error_code> send_head(response_stream& s, int status, const fields& f,
                                          std::optional<std::uint64_t> length) = 0;
  virtual task<std::error_code> send_body(response_stream& s, const_buffer b) = 0;
  // trailers: null for none.
  virtual task<std::error_code> send_end(response_stream& s, const fields* trailers) = 0;
  // The body's last bytes and its end (response_stream::write_last). By default send_body, then send_end; an
  // exchange that can send the bytes with the end in one go (HTTP/2: END_STREAM on the last DATA frame) does.
  virtual task<std::error_code> send_last(response_stream& s, const_buffer b);

 protected:
  ~exchange() = default;
  // For the implementations: the response_stream's state as the handler sees it.
  static void mark_started(response_stream& s) noexcept;
  static void mark_finished(response_stream& s) noexcept;
};
}  // namespace detail

class body_reader {
 public:
  // Awaitable: up to b.size() more bytes of the request body into b; yields io_result<size_t>, tern::error::eof
  // once the whole body has been read (and for a request without a body).
  task<io_result<std::size_t>> read_some(mutable_buffer b);
  // Awaitable: the rest of the body appended to out; body_too_large if that would pass max bytes.
  task<std::error_code> read_all(std::string& out, std::size_t max);
  // The whole body has been read.
  bool done() const noexcept;
  // The body's length when the request gave it (Content-Length); none for a chunked body.
  std::optional<std::uint64_t> length() const noexcept;
  // The request's trailer fields, once read_some has reported eof (HTTP/2; empty over HTTP/1.1).
  const field_list& trailers() const noexcept;

  explicit body_reader(detail::exchange& c) noexcept : conn_(&c) {}

 private:
  detail::exchange* conn_;
};

class response_stream {
 public:
  // Awaitable: sends the status line and fields. With length, the body is that many bytes (Content-Length);
  // without, it is chunked. Yields std::error_code.
  task<std::error_code> start(int status, const fields& f = {}, std::optional<std::uint64_t> length = {});
  // Awaitable: sends body bytes (one chunk of a chunked body). Refused with std::errc::invalid_argument before
  // start() or past the declared length.
  task<std::error_code> write(const_buffer b);
  // Awaitable: ends the body (the last chunk of a chunked one). Refused when a declared length was not reached.
  task<std::error_code> finish();
  // Awaitable: write(b), then finish(), in one operation; refused, with nothing sent, when a declared length is not
  // exactly reached by b. Over HTTP/2 the end rides on b's last DATA frame, and b (up to the server's
  // output_per_stream) is sent from where it lies, not copied into the stream first: the way to send a body that
  // is already in memory.
  task<std::error_code> write_last(const_buffer b);
  // Awaitable: ends the body with trailer fields (HTTP/2: a HEADERS frame after the DATA; HTTP/1.1: in the last
  // chunk of a chunked body, and dropped otherwise).
  task<std::error_code> finish(const fields& trailers);
  bool started() const noexcept { return started_; }
  bool finished() const noexcept { return finished_; }

  explicit response_stream(detail::exchange& c) noexcept : conn_(&c) {}

 private:
  friend class detail::connection;
  friend class detail::exchange;
  detail::exchange* conn_;
  bool started_ = false;
  bool finished_ = false;
  bool chunked_ = false;
  bool discard_ = false;  // a response to HEAD, or a status without a body: the body is not sent
  bool failed_ = false;   // a write failed: the connection will close
  std::optional<std::uint64_t> length_;
  std::uint64_t written_ = 0;
};

namespace detail {
inline void exchange::mark_started(response_stream& s) noexcept { s.started_ = true; }
inline void exchange::mark_finished(response_stream& s) noexcept { s.finished_ = true; }
}  // namespace detail

}  // namespace tern::http
