// The HTTP/1.1 server (see tern/http/server.hpp): the accept loop, and one task per connection.
//
// A connection reads into one buffer of its own. The head of the current request stays where it was parsed, so
// the views the handler sees stay valid; only the bytes after it are moved when room is needed (bytes of a
// chunked body being decoded, or of the next pipelined request). The buffer grows only while a head does not fit,
// up to the parser's limits. A body that arrived with its head is handed to the handler in place; one that did
// not is gathered in the connection's body string, reused from request to request. Responses are serialised into
// the connection's output string and written when the connection is about to wait for input (or is about to
// close), so pipelined requests get their answers in one write.
#include "tern/http/server.hpp"
#include "tern/http/handler_call.hpp"
#include "tern/http/upgrade.hpp"

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <exception>
#include <functional>
#include <vector>

#include <sys/socket.h>

#include "connection.hpp"
#include "date.hpp"
#include "out_buffer.hpp"
#include "tern/basic_descriptor.hpp"
#include "tern/error.hpp"
#include "tern/net/error.hpp"
#include "tern/sync/wait_group.hpp"
#include "tern/timer.hpp"
#include "tern/unique_fd.hpp"
#include "tern/yield.hpp"

namespace tern::http {

namespace detail {

using sized = io_result<std::size_t>;

namespace {

bool is_framing_field(std::string_view name) noexcept {
  return iequals(name, "content-length") || iequals(name, "transfer-encoding");
}

// A handler's task awaited so that its response initializes the connection's own: moved once out of the task
// (`response r; r = co_await ...` moved it into a temporary and then into r); a handler that throws, or whose call
// did (no task then), is answered 500 (handler_call.hpp).
struct handler_answer : route_start {
  response await_resume() {
    if (t.valid()) {
      try {
        return t.handle().promise().take();
      } catch (...) {
      }
    }
    return response(status::internal_server_error, "internal server error\n");
  }
};

}  // namespace

namespace {

// The status line: the usual one whole, others from the version, the code (std::to_chars) and the reason.
char* put_status_line(char* p, int status, version v) noexcept {
  if (status == status::ok && v != http10) return put(p, "HTTP/1.1 200 OK\r\n");
  p = put(p, v == http10 ? "HTTP/1.0 " : "HTTP/1.1 ");
  p = std::to_chars(p, p + 11, status).ptr;
  *p++ = ' ';
  p = put(p, reason_phrase(status));
  return put(p, "\r\n");
}

// The fields of a response that the server writes itself or leaves out, told apart by length first.
enum field_role : unsigned {
  user_field = 0, server_field = 1, date_field = 2, dropped_field = 4, connection_field = dropped_field | 8
};

unsigned role_of(std::string_view name) noexcept {
  switch (name.size()) {
    case 4: return iequals(name, "date") ? date_field : user_field;
    case 6: return iequals(name, "server") ? server_field : user_field;
    case 10: return iequals(name, "connection") ? connection_field : user_field;
    case 14: return iequals(name, "content-length") ? dropped_field : user_field;
    case 17: return iequals(name, "transfer-encoding") ? dropped_field : user_field;
    default: return user_field;
  }
}

}  // namespace

// The status line and fields of a response, into out_, in place: one pass over the handler's fields finds which of
// Server and Date it set and how many bytes its fields take, then the head is copied piece by piece into room
// reserved for all of it. body_size: the Content-Length to send (none for a status that has no body); chunked:
// Transfer-Encoding: chunked instead; close: Connection: close, and with close_field also when the first
// Connection field of f is "close" (a whole handler's way to close). Returns whether the head says close.
bool connection::write_head(int status, const fields& f, std::optional<std::uint64_t> body_size, bool chunked,
                            bool close, version v, bool close_field) {
  unsigned present = 0;
  std::size_t field_bytes = 0;
  for (field x : f) {
    const unsigned role = role_of(x.name);
    if (close_field && role == connection_field && !(present & connection_field)) {
      close = iequals(x.value, "close") || close;
    }
    present |= role;
    field_bytes += x.name.size() + x.value.size() + 4;
  }
  const std::string_view reason = reason_phrase(status);
  const std::string_view server_name = opts_->server_name;
  // The status line (version, code, reason), Server, Date, Content-Length, Connection, the empty line.
  const std::size_t most =
      9 + 11 + 1 + reason.size() + 2 + 8 + server_name.size() + 2 + 6 + 29 + 2 + 16 + 20 + 2 + 28 + 2;
  char* const start = out_.room(most + field_bytes);
  char* p = put_status_line(start, status, v);
  if (!server_name.empty() && !(present & server_field)) {
    p = put(p, "Server: ");
    p = put(p, server_name);
    p = put(p, "\r\n");
  }
  if (opts_->date && !(present & date_field)) {
    p = put(p, "Date: ");
    p = put(p, http_date_now());
    p = put(p, "\r\n");
  }
  const bool bodiless = status < 200 || status == 204 || status == 304;
  if (!bodiless) {
    if (chunked) {
      p = put(p, "Transfer-Encoding: chunked\r\n");
    } else if (body_size) {
      p = put(p, "Content-Length: ");
      p = std::to_chars(p, p + 20, *body_size).ptr;
      p = put(p, "\r\n");
    }
  }
  if (status == status::switching_protocols) {
    p = put(p, "Connection: Upgrade\r\n");
  } else if (close) {
    p = put(p, "Connection: close\r\n");
  } else if (v == http10) {
    p = put(p, "Connection: keep-alive\r\n");
  }
  for (field x : f) {
    if ((present & dropped_field) && (role_of(x.name) & dropped_field)) continue;
    p = put(p, x.name);
    p = put(p, ": ");
    p = put(p, x.value);
    p = put(p, "\r\n");
  }
  p = put(p, "\r\n");
  out_.commit(p);
  return close;
}

// ---- connection ----

connection::connection(server& s, net::tcp_socket socket, const net::endpoint& remote)
    : server_(&s),
      opts_(&s.opts_),
      socket_(std::move(socket)),
      remote_(remote),
      parser_(s.opts_.limits),
      capacity_(std::max<std::size_t>(s.opts_.buffer_size, 256)),
      buffer_(std::make_unique_for_overwrite<char[]>(capacity_)) {
  if (s.opts_.transport) secure_ = s.opts_.transport(std::move(socket_));
  chunked_decoder::limits l;
  l.max_body = s.opts_.limits.max_body;
  l.max_trailers = s.opts_.limits.max_header_bytes;
  chunked_ = chunked_decoder(l);
  server_->link(this);
}

connection::~connection() {
  if (watch_.linked()) server_->context().timers().remove(&watch_);
  server_->unlink(this);
}

clock::time_point connection::loop_now() const noexcept {
  return clock::time_point(
      std::chrono::duration_cast<clock::duration>(std::chrono::nanoseconds(server_->context().deadline_now_ns())));
}

// I/O deadlines. Each read of the plain socket has one (the header, idle and body timeouts), each write of a
// response too (the write timeout), and a connection reads and writes thousands of times between two expiries; so
// instead of a wheel node filed and removed per operation, one node per connection stays filed at some deadline.
// An operation that waits until a later deadline only records it (a read and a write may wait at once: a streaming
// handler's, each its slot), and when the node fires it cancels each waiting operation whose deadline has passed
// and files itself again for the earliest later one. An operation whose deadline is earlier than the node's (a
// head's first bytes shorten the idle wait to the header timeout) files the node again at once. I/O through a
// transport (TLS) is a task, and keeps with_deadline and with_timeout.
void connection::watch(watched& w, void* op, void (*cancel)(void*) noexcept, clock::time_point deadline) noexcept {
  watch_ns(w, op, cancel, tern::detail::to_ns(deadline));
}

void connection::watch_ns(watched& w, void* op, void (*cancel)(void*) noexcept, std::uint64_t deadline_ns) noexcept {
  w.op = op;
  w.cancel = cancel;
  w.expired = false;
  w.deadline_ns = deadline_ns;
  if (watch_.linked()) {
    if (watch_.deadline_ns <= w.deadline_ns) return;
    server_->context().timers().remove(&watch_);
  }
  if (!file_watch(w.deadline_ns)) {
    // Due already: the node fires on the next tick, when the operation has started, and cancels it.
    (void)file_watch(io_context::now_ns() + (std::uint64_t{1} << tern::detail::timer_wheel::tick_shift));
  }
}

bool connection::file_watch(std::uint64_t deadline_ns) noexcept {
  watch_.owner = this;
  watch_.fire = &on_watch;
  watch_.deadline_ns = deadline_ns;
  return server_->context().timers().insert(&watch_);
}

void connection::on_watch(tern::detail::timer_node* n) noexcept {
  connection& c = *static_cast<deadline_node*>(n)->owner;
  std::uint64_t next = ~std::uint64_t{0};
  for (watched* w : {&c.reading_, &c.writing_}) {
    if (w->op == nullptr || w->expired) continue;
    if (w->deadline_ns <= n->deadline_ns) {
      w->expired = true;
      w->cancel(w->op);
    } else if (w->deadline_ns < next) {
      next = w->deadline_ns;
    }
  }
  // Nothing else waits: the next operation files the node again. Otherwise the node goes on to the earliest
  // deadline still ahead (on the next tick if that one's tick has passed already).
  if (next != ~std::uint64_t{0} && !c.file_watch(next)) {
    (void)c.file_watch(io_context::now_ns() + (std::uint64_t{1} << tern::detail::timer_wheel::tick_shift));
  }
}

std::error_code connection::watched_done(watched& w, std::error_code ec) noexcept {
  w.op = nullptr;
  if (w.expired && ec == std::errc::operation_canceled) return make_error_code(tern::error::timed_out);
  return ec;
}

std::size_t connection::max_capacity() const noexcept {
  // The longest head the limits allow, its empty lines and CRLFs, and room for the start of a body.
  const parser_limits& l = opts_->limits;
  return l.max_request_line + l.max_header_bytes + 4096;
}

void connection::cut() noexcept { (secure_ ? secure_->socket() : socket_).close(); }

bool connection::input_waiting() const noexcept {
  auto [ec, n] = (secure_ ? secure_->socket() : socket_).available();
  return !ec && n != 0;
}

// Room after end_ for a read: the bytes from pinned_ on move to pinned_ first; then the buffer grows (only while
// nothing is pinned: a grown buffer moves the head).
bool connection::make_room() {
  if (end_ < capacity_) return true;
  if (begin_ > pinned_) {
    std::memmove(buffer_.get() + pinned_, buffer_.get() + begin_, end_ - begin_);
    end_ -= begin_ - pinned_;
    begin_ = pinned_;
    if (end_ < capacity_) return true;
  }
  if (pinned_ != 0 || capacity_ >= max_capacity()) return false;
  const std::size_t grown = std::min(capacity_ * 2, max_capacity());
  auto bigger = std::make_unique_for_overwrite<char[]>(grown);
  std::memcpy(bigger.get(), buffer_.get(), end_);
  buffer_ = std::move(bigger);
  capacity_ = grown;
  return true;
}

// A chunked body is decoded in the buffer after its head, so there must be room there: a head that (nearly) filled
// the buffer moves into a larger one, and is parsed again so that its views point into the new one.
void connection::keep_room_after_head() {
  constexpr std::size_t room = 1024;
  if (capacity_ - pinned_ >= room) return;
  const std::size_t head_start = pinned_ - parser_.head().size;
  const std::size_t grown = std::max(capacity_ * 2, pinned_ + room);
  auto bigger = std::make_unique_for_overwrite<char[]>(grown);
  std::memcpy(bigger.get(), buffer_.get(), end_);
  buffer_ = std::move(bigger);
  capacity_ = grown;
  parser_.reset();
  std::error_code ec;
  (void)parser_.parse(std::string_view(buffer_.get() + head_start, end_ - head_start), ec);  // parsed before
}

task<io_result<std::size_t>> connection::read_more(clock::time_point deadline) {
  if (!make_room()) co_return sized{make_error_code(error::headers_too_large), 0};
  const mutable_buffer space(buffer_.get() + end_, capacity_ - end_);
  io_result<std::size_t> via_ec;
  served_since_read_ = 0;
  if (secure_) {
    via_ec = co_await with_deadline(secure_->read_some(space), deadline);
  } else {
    tern::detail::read_awaiter op = socket_.read_some(space);
    watch(reading_, op, deadline);
    via_ec = co_await op;
    via_ec.ec = watched_done(reading_, via_ec.ec);
  }
  auto [ec, n] = via_ec;
  end_ += n;
  co_return sized{ec, n};
}

task<std::error_code> connection::flush() {
  if (out_.empty()) co_return std::error_code{};
  const const_buffer data(out_.data(), out_.size());
  io_result<std::size_t> via_ec;
  if (secure_) {
    via_ec = co_await with_timeout(secure_->write_all(data), opts_->write_timeout);
  } else {
    tern::detail::transfer_awaiter op = socket_.write_all(data);
    watch(writing_, op, loop_now() + opts_->write_timeout);
    via_ec = co_await op;
    via_ec.ec = watched_done(writing_, via_ec.ec);
  }
  auto [ec, n] = via_ec;
  out_.clear();
  co_return ec;
}

// Reads until the parser has a head. An error code that is an http::error is answered with its status before
// the connection closes; others (the peer left, the idle time passed, the server stops) close it silently.
task<std::error_code> connection::read_head() {
  parser_.reset();
  pinned_ = 0;
  const bool first = requests_ == 0;
  std::error_code ec;
  clock::time_point head_deadline{};
  for (;;) {
    if (begin_ == end_) {
      begin_ = end_ = 0;
    } else {
      if (parser_.parse(std::string_view(buffer_.get() + begin_, end_ - begin_), ec)) co_return std::error_code{};
      if (ec) co_return ec;
    }
    // Answers to earlier (pipelined) requests go out before the wait for more input. On a plain socket the write
    // and the read are awaited here, not through flush() and read_more(): no task frame per request for them, and
    // no stop binding (own_op).
    if (!out_.empty()) {
      if (secure_) {
        if (std::error_code fec = co_await flush()) co_return fec;
      } else {
        const std::uint64_t write_deadline = tern::detail::to_ns(loop_now() + opts_->write_timeout);
        auto [wec, written] = co_await own_op<tern::detail::transfer_awaiter>(
            *this, writing_, [this] { return socket_.write_all(const_buffer(out_.data(), out_.size())); },
            write_deadline);
        out_.clear();
        if (wec) co_return wec;
      }
    }
    const bool empty = begin_ == end_;
    if (empty && server_->stopping_) co_return make_error_code(tern::error::operation_canceled);
    if (!empty && head_deadline == clock::time_point{}) head_deadline = loop_now() + opts_->header_timeout;
    idle_ = empty;
    const clock::time_point deadline =
        empty ? loop_now() + (first ? opts_->header_timeout : opts_->idle_timeout) : head_deadline;
    io_result<std::size_t> got;
    if (secure_) {
      got = co_await read_more(deadline);
    } else if (!make_room()) {
      got = sized{make_error_code(error::headers_too_large), 0};
    } else {
      served_since_read_ = 0;
      got = co_await own_op<tern::detail::read_awaiter>(
          *this, reading_, [this] { return socket_.read_some(mutable_buffer(buffer_.get() + end_, capacity_ - end_)); },
          tern::detail::to_ns(deadline));
      end_ += got.value;
    }
    auto [rec, n] = got;
    idle_ = false;
    if (rec == tern::error::timed_out) {
      // A request that started and did not finish in time is answered; silence between requests is not.
      co_return !empty || first ? make_error_code(error::header_timeout) : rec;
    }
    if (rec) co_return rec;
  }
}

// The deadline of the next body read: the grace, then at least min_body_rate bytes per second on average.
clock::time_point connection::body_deadline(std::uint64_t received) const noexcept {
  const auto rate = std::max<std::size_t>(opts_->min_body_rate, 1);
  return body_start_ + opts_->body_timeout + std::chrono::microseconds(received * 1'000'000 / rate);
}

// The usual body, none or one that came whole with its head, into body without a task: true; false when
// read_body must gather it.
bool connection::body_at_hand(std::string_view& body) noexcept {
  const request_head& h = parser_.head();
  if (h.framing == body_framing::none) {
    body = {};
    return true;
  }
  if (h.framing != body_framing::content_length || end_ - begin_ < h.content_length) return false;
  body = std::string_view(buffer_.get() + begin_, static_cast<std::size_t>(h.content_length));
  begin_ += static_cast<std::size_t>(h.content_length);
  return true;
}

// The body of the current request, whole, into body (a view into the buffer when it came with the head).
task<std::error_code> connection::read_body(std::string_view& body) {
  const request_head& h = parser_.head();
  body = {};
  body_.clear();
  if (h.framing == body_framing::none) co_return std::error_code{};
  body_start_ = loop_now();
  if (h.framing == body_framing::content_length) {
    const std::size_t have = end_ - begin_;
    if (have >= h.content_length) {
      body = std::string_view(buffer_.get() + begin_, static_cast<std::size_t>(h.content_length));
      begin_ += static_cast<std::size_t>(h.content_length);
      co_return std::error_code{};
    }
    // The rest goes straight into the body string: nothing of the next request is read here.
    body_.resize(static_cast<std::size_t>(h.content_length));
    std::memcpy(body_.data(), buffer_.get() + begin_, have);
    begin_ = end_;
    std::size_t got = have;
    while (got < body_.size()) {
      if (std::error_code ec = co_await flush()) co_return ec;
      const mutable_buffer into(body_.data() + got, body_.size() - got);
      io_result<std::size_t> via_ec;
      if (secure_) {
        via_ec = co_await with_deadline(secure_->read_some(into), body_deadline(got));
      } else {
        tern::detail::read_awaiter op = socket_.read_some(into);
        watch(reading_, op, body_deadline(got));
        via_ec = co_await op;
        via_ec.ec = watched_done(reading_, via_ec.ec);
      }
      auto [ec, n] = via_ec;
      if (ec == tern::error::timed_out) co_return make_error_code(error::body_timeout);
      if (ec == tern::error::eof) co_return make_error_code(error::partial_message);
      if (ec) co_return ec;
      got += n;
    }
    body = body_;
    co_return std::error_code{};
  }
  if (h.framing != body_framing::chunked) co_return std::error_code{};
  chunked_.reset();
  std::error_code ec;
  bool single = true;  // the whole body is one run in the buffer: hand it over in place
  for (;;) {
    while (begin_ < end_ && !chunked_.done()) {
      const auto step = chunked_.decode(std::string_view(buffer_.get() + begin_, end_ - begin_), ec);
      if (ec) co_return ec;
      if (!step.data.empty()) {
        if (single && body.empty()) {
          body = step.data;
        } else {
          if (single) body_.assign(body);
          single = false;
          body_.append(step.data);
        }
      }
      begin_ += step.consumed;
      if (step.consumed == 0) break;
    }
    if (chunked_.done()) break;
    if (!single || !body.empty()) {
      // Reading more may move the buffer's unread bytes: keep what was decoded.
      if (single) body_.assign(body);
      single = false;
      body = {};
    }
    if (std::error_code fec = co_await flush()) co_return fec;  // a 100 Continue first
    auto [rec, n] = co_await read_more(body_deadline(chunked_.body_size()));
    if (rec == tern::error::timed_out) co_return make_error_code(error::body_timeout);
    if (rec == tern::error::eof) co_return make_error_code(error::partial_message);
    if (rec == error::headers_too_large) co_return make_error_code(error::body_too_large);
    if (rec) co_return rec;
  }
  if (!single) body = body_;
  co_return std::error_code{};
}

void connection::answer_error(int status, std::string_view why) {
  fields f;
  f.set("Content-Type", "text/plain; charset=utf-8");
  std::string body(why);
  body.push_back('\n');
  write_head(status, f, body.size(), false, true, http11);
  out_.append(body);
}

[[gnu::always_inline]] inline bool connection::answer(const response& r, bool head_only, bool close, version v) {
  close = write_head(r.status, r.headers, r.body.size(), false, close, v, true);
  const bool bodiless = r.status < 200 || r.status == 204 || r.status == 304;
  if (!head_only && !bodiless) out_.append(r.body);
  return close;
}

// The 101, then the connection as an upgraded_stream to the response's upgrade function, with what arrived after
// the request. The connection's task awaits it, so its stop token (shutdown's cancel) reaches it.
task<void> connection::hand_over(response& r) {
  write_head(r.status, r.headers, std::nullopt, false, false, http11);
  if (co_await flush()) {
    cut();
    co_return;
  }
  std::string buffered(buffer_.get() + begin_, end_ - begin_);
  begin_ = end_ = pinned_ = 0;
  auto upgrade = std::move(r.upgrade);
  try {
    co_await upgrade(upgraded_stream(std::move(socket_), std::move(secure_), std::move(buffered)));
  } catch (...) {
    // The protocol's failure ends its connection only (the stream closed with the upgrade function's frame).
  }
  if (!on_loop()) co_await resume_on{server_->context()};  // the connection leaves its server on its loop
}

// The HTTP/2 connection preface, where the HTTP/1.1 parser refused the first request for its version 2.0.
bool connection::http2_preface() const noexcept {
  return requests_ == 0 && server_->opts_.http2 && !secure_ &&
         std::string_view(buffer_.get() + begin_, end_ - begin_).starts_with("PRI * HTTP/2.0\r\n\r\n");
}

// RFC 7540 §3.2: cleartext only, with exactly one HTTP2-Settings.
// Out of line: its lookups inlined into run() made the compiler keep the request's and the response's handling
// out of it (about 100 instructions more per request).
[[gnu::noinline]] bool connection::h2c_requested(const request_head& h) const noexcept {
  return h.upgrade && server_->opts_.http2 && !secure_ && h.version == http11 &&
         list_contains(h.headers.get("upgrade"), "h2c") && h.headers.count("http2-settings") == 1;
}

// The request's body is read whole first (the client sends it before any HTTP/2 frame), then the 101; the request
// becomes stream 1 of the HTTP/2 connection, answered there.
task<void> connection::upgrade_h2c() {
  const request_head& h = parser_.head();
  std::string_view body;
  if (std::error_code ec = co_await read_body(body)) {
    if (ec.category() == http::category() && ec != error::partial_message) answer_error(status_of(ec), ec.message());
    co_return;
  }
  out_.append("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n");
  if (co_await flush()) co_return;
  co_await take_over(&h, body, h.headers.get("http2-settings"));
}

// Hands the connection to server_options::http2 with the bytes read and not used. The request head and body of an
// upgrade stay where they are (pinned in the buffer, or in body_) for as long as the protocol serves.
task<void> connection::take_over(const request_head* upgraded, std::string_view body, std::string_view settings) {
  const std::string_view received(buffer_.get() + begin_, end_ - begin_);
  begin_ = end_;
  handover h{*server_, secure_ ? secure_->socket() : socket_, secure_.get(), remote_, received, upgraded, body,
             settings, &taken_};
  co_await server_->opts_.http2->serve(h);
  taken_ = nullptr;
}

task<void> connection::run() {
  bool taken = false;  // served by server_options::http2 instead (ALPN "h2")
  if (secure_) {
    // The handshake is the start of the first request: the header timeout covers it (a client that connects and
    // says nothing is dropped as a slow one is), and stop() cuts a connection still in it, as it cuts idle ones.
    idle_ = true;
    const std::error_code ec = co_await with_timeout(secure_->handshake(), opts_->header_timeout);
    idle_ = false;
    if (ec) {
      secure_->socket().close();
      co_return;
    }
    taken = server_->opts_.http2 && secure_->application_protocol() == "h2";
    if (taken) co_await take_over(nullptr, {}, {});
  }
  while (!taken) {
    std::error_code ec = co_await read_head();
    if (ec) {
      if (ec == error::version_not_supported && http2_preface()) {
        co_await take_over(nullptr, {}, {});
        break;
      }
      // With HTTP/2 on a cleartext port, a first line that is no HTTP version at all may be a broken HTTP/2
      // preface: the connection is closed without an answer, as HTTP/2 asks (RFC 9113 §3.4), not answered 400.
      if (ec == error::bad_version && requests_ == 0 && server_->opts_.http2 && !secure_) break;
      if (ec.category() == http::category()) answer_error(status_of(ec), ec.message());
      break;
    }
    ++requests_;
    begin_ += parser_.head().size;
    pinned_ = begin_;  // the head stays put: the handler's views point into it
    if (parser_.head().framing == body_framing::chunked) keep_room_after_head();
    const request_head& h = parser_.head();
    if (h.upgrade && h2c_requested(h)) {
      co_await upgrade_h2c();
      break;
    }
    request req(h, remote_);
    int status = 0;
    const router::route* route = server_->routes_->match(req, status, allow_);
    bool close = !h.keep_alive || server_->stopping_;
    const bool head_only = h.method == method::head;
    if (route == nullptr) {
      // The body was not read: unless there is none, the connection cannot be reused.
      close = close || h.framing != body_framing::none;
      response r(status, std::string(reason_phrase(status)) + "\n");
      if (status == status::method_not_allowed) r.headers.set("Allow", allow_);
      answer(r, head_only, close, h.version);
      if (close) break;
      continue;
    }
    if (route->streaming) {
      const bool keep = co_await run_stream(*route, req, close);
      if (!keep) break;
      continue;
    }
    if (h.expect_continue && h.framing != body_framing::none && begin_ == end_) {
      out_.append("HTTP/1.1 100 Continue\r\n\r\n");
    }
    std::string_view body;
    if (!body_at_hand(body)) {
      if (std::error_code bec = co_await read_body(body)) {
        if (bec.category() == http::category() && bec != error::partial_message) {
          answer_error(status_of(bec), bec.message());
        }
        break;
      }
    }
    req.set_body(body);
    task<response> handling;
    try {
      handling = route->whole(req);
    } catch (...) {
    }
    response r = co_await handler_answer{{handling}};
    if (!on_loop()) [[unlikely]] co_await resume_on{server_->context()};
    if (r.upgrade && r.status == status::switching_protocols && h.version == http11 && !server_->stopping_) {
      co_await hand_over(r);
      co_return;
    }
    if (r.status == status::switching_protocols) {  // not an upgrade this connection can make
      if (!r.upgrade) r = response(status::internal_server_error, "a 101 without an upgrade function\n");
      else if (server_->stopping_) r = response(status::service_unavailable, "the server is shutting down\n");
      else r = response(status::bad_request, "an upgrade needs HTTP/1.1\n");
    }
    // A handler's Connection: close is found by write_head's walk of the fields.
    close = answer(r, head_only, close || server_->stopping_, h.version);
    if (close) break;
    if (out_.size() >= 64 * 1024) {
      if (co_await flush()) break;
    }
    // A client that pipelines hundreds of requests in one read would otherwise keep the loop until the last is
    // answered, and every other connection of the loop would wait that long (the reliability suite's hostile/http
    // measures it). After a few requests answered from one read, the connection lets the loop's queue run first.
    if (++served_since_read_ >= pipelined_burst) {
      served_since_read_ = 0;
      co_await tern::yield();
    }
  }
  (void)co_await flush();
  if (secure_) {
    // The protocol's end (TLS: close_notify), so that the client can tell a complete response from a cut one; a
    // peer that does not take it within a second is not waited for.
    (void)co_await with_timeout(secure_->shutdown_send(), std::chrono::seconds(1));
    secure_->socket().close();
  } else {
    socket_.close();
  }
}


// ---- the streaming form ----

namespace {
// Maps what a body read met to what the handler and the server see.
std::error_code body_read_error(std::error_code ec) noexcept {
  if (ec == tern::error::timed_out) return make_error_code(error::body_timeout);
  if (ec == tern::error::eof) return make_error_code(error::partial_message);
  return ec;
}
}  // namespace

std::optional<std::uint64_t> connection::body_length() const noexcept {
  if (framing_ == body_framing::content_length) return parser_.head().content_length;
  if (framing_ == body_framing::none) return 0;
  return std::nullopt;
}

task<io_result<std::size_t>> connection::read_body_some(mutable_buffer b) {
  if (!on_loop()) co_return sized{make_error_code(tern::error::wrong_loop), 0};
  if (b.size() == 0) co_return sized{std::error_code{}, 0};
  if (framing_ == body_framing::content_length) {
    if (body_left_ == 0) co_return sized{make_error_code(tern::error::eof), 0};
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(b.size(), body_left_));
    if (begin_ < end_) {
      const std::size_t n = std::min(want, end_ - begin_);
      std::memcpy(b.data(), buffer_.get() + begin_, n);
      begin_ += n;
      body_left_ -= n;
      co_return sized{std::error_code{}, n};
    }
    if (std::error_code ec = co_await flush()) co_return sized{ec, 0};
    const std::uint64_t received = parser_.head().content_length - body_left_;
    const mutable_buffer into(b.data(), want);
    io_result<std::size_t> via_ec;
    if (secure_) {
      via_ec = co_await with_deadline(secure_->read_some(into), body_deadline(received));
    } else {
      tern::detail::read_awaiter op = socket_.read_some(into);
      watch(reading_, op, body_deadline(received));
      via_ec = co_await op;
      via_ec.ec = watched_done(reading_, via_ec.ec);
    }
    auto [ec, n] = via_ec;
    if (ec) co_return sized{body_read_error(ec), 0};
    body_left_ -= n;
    co_return sized{std::error_code{}, n};
  }
  if (framing_ != body_framing::chunked) co_return sized{make_error_code(tern::error::eof), 0};
  for (;;) {
    if (chunked_.done()) co_return sized{make_error_code(tern::error::eof), 0};
    while (begin_ < end_) {
      // At most b.size() bytes of input, so that a data run never exceeds what the caller can take.
      std::error_code ec;
      const auto step =
          chunked_.decode(std::string_view(buffer_.get() + begin_, std::min(end_ - begin_, b.size())), ec);
      if (ec) co_return sized{ec, 0};
      begin_ += step.consumed;
      if (!step.data.empty()) {
        std::memcpy(b.data(), step.data.data(), step.data.size());
        co_return sized{std::error_code{}, step.data.size()};
      }
      if (chunked_.done()) co_return sized{make_error_code(tern::error::eof), 0};
      if (step.consumed == 0) break;
    }
    if (std::error_code ec = co_await flush()) co_return sized{ec, 0};
    auto [ec, n] = co_await read_more(body_deadline(chunked_.body_size()));
    if (ec == error::headers_too_large) co_return sized{make_error_code(error::body_too_large), 0};
    if (ec) co_return sized{body_read_error(ec), 0};
  }
}

task<std::error_code> connection::write_now(std::string_view data) {
  if (std::error_code ec = co_await flush()) co_return ec;
  const const_buffer b(data.data(), data.size());
  io_result<std::size_t> via_ec;
  if (secure_) {
    via_ec = co_await with_timeout(secure_->write_all(b), opts_->write_timeout);
  } else {
    tern::detail::transfer_awaiter op = socket_.write_all(b);
    watch(writing_, op, loop_now() + opts_->write_timeout);
    via_ec = co_await op;
    via_ec.ec = watched_done(writing_, via_ec.ec);
  }
  auto [ec, n] = via_ec;
  co_return ec;
}

task<std::error_code> connection::send_head(response_stream& s, int status, const fields& f,
                                            std::optional<std::uint64_t> length) {
  if (!on_loop()) co_return make_error_code(tern::error::wrong_loop);
  if (s.started_) co_return std::make_error_code(std::errc::invalid_argument);
  s.started_ = true;
  const bool bodiless = status < 200 || status == 204 || status == 304;
  s.discard_ = head_only_ || bodiless;
  s.length_ = length;
  s.chunked_ = !length && !s.discard_ && version_ == http11;
  if (!length && !s.discard_ && version_ == http10) close_ = true;  // the close delimits the body
  write_head(status, f, length, s.chunked_, close_, version_);
  std::error_code ec = co_await flush();
  if (ec) s.failed_ = true;
  co_return ec;
}

task<std::error_code> connection::send_body(response_stream& s, const_buffer b) {
  if (!on_loop()) co_return make_error_code(tern::error::wrong_loop);
  if (!s.started_ || s.finished_ || (s.length_ && s.written_ + b.size() > *s.length_)) {
    co_return std::make_error_code(std::errc::invalid_argument);
  }
  s.written_ += b.size();
  if (s.discard_ || b.size() == 0) co_return std::error_code{};
  std::error_code ec;
  const std::string_view data(static_cast<const char*>(b.data()), b.size());
  if (s.chunked_) {
    char size[20];
    int i = 0;
    for (std::size_t v = b.size(); v != 0; v >>= 4) size[i++] = "0123456789abcdef"[v & 15];
    while (i > 0) out_.push_back(size[--i]);
    out_.append("\r\n");
    if (data.size() <= 16 * 1024) {  // small: one write with its framing
      out_.append(data);
      out_.append("\r\n");
      ec = co_await flush();
    } else {
      ec = co_await write_now(data);
      out_.append("\r\n");  // goes out with the next chunk or the end
    }
  } else {
    ec = co_await write_now(data);
  }
  if (ec) s.failed_ = true;
  co_return ec;
}

task<std::error_code> connection::send_end(response_stream& s, const fields* trailers) {
  if (!on_loop()) co_return make_error_code(tern::error::wrong_loop);
  if (!s.started_ || s.finished_ || (s.length_ && s.written_ != *s.length_)) {
    co_return std::make_error_code(std::errc::invalid_argument);
  }
  s.finished_ = true;
  if (s.chunked_) {
    out_.append("0\r\n");
    if (trailers != nullptr) {
      for (field x : *trailers) {
        if (is_framing_field(x.name) || iequals(x.name, "connection")) continue;
        out_.append(x.name);
        out_.append(": ");
        out_.append(x.value);
        out_.append("\r\n");
      }
    }
    out_.append("\r\n");
  }
  std::error_code ec = co_await flush();
  if (ec) s.failed_ = true;
  co_return ec;
}

// Runs a streaming handler; false when the connection must close after it.
task<bool> connection::run_stream(const router::route& route, request& req, bool close) {
  const request_head& h = parser_.head();
  framing_ = h.framing;
  body_left_ = h.framing == body_framing::content_length ? h.content_length : 0;
  chunked_.reset();
  body_start_ = loop_now();
  version_ = h.version;
  head_only_ = h.method == method::head;
  close_ = close;
  if (h.expect_continue && h.framing != body_framing::none && begin_ == end_) {
    out_.append("HTTP/1.1 100 Continue\r\n\r\n");  // sent when the handler first reads
  }
  body_reader reader(*this);
  response_stream out(*this);
  try {
    co_await route.streaming(req, reader, out);
  } catch (...) {
  }
  if (!on_loop()) [[unlikely]] co_await resume_on{server_->context()};
  if (!out.started_) {
    answer(response(status::internal_server_error, "internal server error\n"), head_only_, close_, version_);
  } else if (!out.finished_ || out.failed_) {
    co_return false;
  }
  // What the handler left of the body is read and dropped, within reason.
  std::uint64_t dropped = 0;
  char scratch[4096];
  while (!body_done()) {
    auto [ec, n] = co_await read_body_some(mutable_buffer(scratch, sizeof scratch));
    if (ec == tern::error::eof) break;
    dropped += n;
    if (ec || dropped > 1024 * 1024) co_return false;
  }
  co_return !close_ && !server_->stopping_;
}

}  // namespace detail

// ---- server ----

server::server(io_context& ctx, std::shared_ptr<const router> routes, server_options opts)
    : ctx_(&ctx), routes_(std::move(routes)), opts_(std::move(opts)), acceptor_(ctx), tasks_(ctx) {}

server::~server() = default;

std::error_code server::listen(const net::endpoint& ep, net::acceptor_options opts) {
  return acceptor_.listen(ep, opts);
}

io_result<net::endpoint> server::local_endpoint() const noexcept { return acceptor_.local_endpoint(); }

void server::link(detail::connection* c) noexcept {
  c->next_ = head_;
  c->prev_ = nullptr;
  if (head_ != nullptr) head_->prev_ = c;
  head_ = c;
  ++open_;
}

void server::unlink(detail::connection* c) noexcept {
  if (c->prev_ != nullptr) c->prev_->next_ = c->next_; else head_ = c->next_;
  if (c->next_ != nullptr) c->next_->prev_ = c->prev_;
  --open_;
}

task<void> server::serve(net::tcp_socket socket) {
  auto [rec, remote] = socket.remote_endpoint();
  (void)rec;  // a peer gone already: the first read says so
  try {
    detail::connection c(*this, std::move(socket), remote);
    co_await c.run();
  } catch (...) {
    // Out of memory inside one connection: that connection ends, the others and the loop go on (an exception
    // leaving a child would cancel every connection of the group).
  }
  active_.done();
}

task<void> server::refuse(net::tcp_socket socket) {
  static constexpr std::string_view busy =
      "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 20\r\nRetry-After: 1\r\n\r\n"
      "too many connections";
  auto [ec, n] = co_await with_timeout(socket.write_all(const_buffer(busy.data(), busy.size())),
                                       std::chrono::seconds(1));
  (void)ec, (void)n;
  socket.close();
  --refusing_;
  active_.done();
}

namespace {

// Accept errors that belong to one connection on its way in (reset, refused by a firewall rule, a network error
// passed on by the kernel, as accept(2) lists them): the next accept goes on.
bool one_connection_failed(const std::error_code& ec) noexcept {
  if (ec.category() != std::system_category() && ec.category() != std::generic_category()) return false;
  switch (ec.value()) {
    case ECONNABORTED: case EPROTO: case EPERM: case EINTR: case EAGAIN: case ENETDOWN: case ENOPROTOOPT:
    case EHOSTDOWN: case ENONET: case EHOSTUNREACH: case EOPNOTSUPP: case ENETUNREACH: case ETIMEDOUT:
      return true;
    default:
      return false;
  }
}

// Out of descriptors (EMFILE, ENFILE) or buffers: the listener stays readable, and retrying at once would spin.
bool out_of_resources(const std::error_code& ec) noexcept {
  return ec == std::errc::too_many_files_open || ec == std::errc::too_many_files_open_in_system ||
         ec == std::errc::no_buffer_space || ec == std::errc::not_enough_memory;
}

}  // namespace

task<std::error_code> server::run() {
  constexpr auto back_off = std::chrono::milliseconds(20);
  std::error_code failure;
  unsigned failed_in_a_row = 0;
  while (!stopping_) {
    auto [ec, socket] = co_await acceptor_.accept();
    if (ec) {
      if (stopping_) break;
      if (ec == std::errc::operation_canceled) {
        // run()'s own stop (a deadline on it, a cancelled parent): what it runs is cancelled with it.
        failure = ec;
        stop();
        cut_all();
        break;
      }
      if (out_of_resources(ec)) {
        // Again when connections have closed.
        (void)co_await sleep_for(back_off);
        continue;
      }
      if (!one_connection_failed(ec)) {
        // The listener itself is broken (never listened, closed under the server, ...): nothing will come of
        // accepting again. The connections finish their requests, as after stop().
        failure = ec;
        stop();
        break;
      }
      // The loop's other tasks (a stop(), a timer) run before the next try, and a failure that persists after
      // all is retried at the back-off pace.
      if (++failed_in_a_row % 16 == 0) (void)co_await sleep_for(back_off);
      else co_await tern::yield();
      continue;
    }
    failed_in_a_row = 0;
    (void)socket.set_no_delay(true);
    active_.add();
    if (open_ >= opts_.max_connections) {
      // A flood: close without an answer rather than hold more sockets. Over a transport (TLS) the answer would
      // cost a handshake: the client sees its handshake fail at once instead.
      if (refusing_ >= 64 || opts_.transport) {
        socket.close();
        active_.done();
        continue;
      }
      ++refusing_;
      tasks_.spawn(refuse(std::move(socket)));
      continue;
    }
    tasks_.spawn(serve(std::move(socket)));
  }
  acceptor_.close();
  co_await tasks_.wait();
  // Under io_uring the listener's multishot accept (and a multishot receive an upgrade function armed) ends in the
  // kernel a moment after its close. The caller may stop running the loop once run() returns (block_on) and
  // destroy it on another thread, whose ring could no longer reap it: run() returns once the kernel is done.
  co_await closes_settled(*ctx_);
  co_return failure;
}

void server::stop() noexcept {
  if (stopping_) return;
  stopping_ = true;
  acceptor_.close();
  // An idle connection is cut, unless its next request is already in the kernel's receive queue (sent just
  // before the stop, its read not yet handled): that one is read and answered, with Connection: close. A request
  // still on the wire, or taken by a read whose completion the loop has not handled, is still cut; HTTP lets the
  // client retry it, as it would after any keep-alive close.
  for (detail::connection* c = head_; c != nullptr; c = c->next_) {
    if (c->taken_ != nullptr) c->taken_->server_stopping();
    else if (c->idle_ && !c->input_waiting()) c->cut();
  }
}

task<void> server::shutdown(std::chrono::milliseconds grace) {
  stop();
  if (open_ != 0) {
    auto ec = co_await with_timeout(active_.wait(), grace);
    if (ec) cut_all();  // past the grace
  }
  (void)co_await active_.wait();
}

void server::cut_all() noexcept {
  // Every operation of every connection (a handler's included) is cancelled, and each connection closes as soon as
  // its task notices.
  tasks_.cancel();
  for (detail::connection* c = head_; c != nullptr; c = c->next_) c->cut();
}

}  // namespace tern::http

// ---- serve: a server on every worker of a runtime ----

namespace tern::http {

namespace {

// Waits on the server's loop for the runtime's stop request, then shuts the server down.
task<void> stop_on_request(server& s, std::stop_token stop, std::chrono::milliseconds grace) {
  (void)co_await with_stop(sleep_for(std::chrono::hours(24 * 365)), stop);
  co_await s.shutdown(grace);
}

// Runs s until the runtime's stop request, which shuts it down with grace; run()'s error, if its listener broke.
task<std::error_code> run_until_stopped(server& s, std::stop_token stop, std::chrono::milliseconds grace) {
  auto watcher = spawn(s.context(), stop_on_request(s, stop, grace));
  const std::error_code ec = co_await s.run();
  co_await std::move(watcher);
  co_return ec;
}

// Port 0 means one free port for every worker: a socket bound (not listening) with SO_REUSEPORT reserves it while
// the workers bind theirs, and receives no connection itself.
io_result<net::endpoint> reserve_port(const net::endpoint& ep, unique_fd& holder) {
  if (ep.port() != 0) return {std::error_code{}, ep};
  holder = unique_fd(::socket(ep.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (!holder || ::setsockopt(holder.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
      ::bind(holder.get(), ep.data(), ep.size()) != 0 ||
      ::getsockname(holder.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return {std::error_code(errno, std::system_category()), ep};
  }
  return {std::error_code{}, net::endpoint(reinterpret_cast<const sockaddr*>(&bound), len)};
}

}  // namespace

task<std::error_code> detail::serve_on_workers(runtime& rt, std::shared_ptr<const router> routes, net::endpoint ep,
                                               server_options opts, std::chrono::milliseconds grace,
                                               std::function<void(const net::endpoint&)> on_listening) {
  unique_fd holder;
  auto [pec, where] = reserve_port(ep, holder);
  if (pec) co_return pec;
  std::vector<std::unique_ptr<server>> servers;
  std::error_code first;
  // Every server is made and listens on its own worker (its acceptor belongs to that loop).
  for (std::size_t i = 0; i < rt.size() && !first; ++i) {
    first = co_await rt.spawn_on(i, [](io_context& ctx, std::vector<std::unique_ptr<server>>& servers,
                                      std::shared_ptr<const router> routes, net::endpoint where,
                                      server_options opts) -> task<std::error_code> {
      auto s = std::make_unique<server>(ctx, std::move(routes), std::move(opts));
      net::acceptor_options listen_opts;
      listen_opts.reuse_port = true;
      if (std::error_code ec = s->listen(where, listen_opts)) co_return ec;
      servers.push_back(std::move(s));
      co_return std::error_code{};
    }(rt.worker(i), servers, routes, where, opts));
  }
  holder.reset();
  if (!first && on_listening) on_listening(where);
  std::vector<join_handle<std::error_code>> running;
  for (std::size_t i = 0; i < servers.size() && !first; ++i) {
    running.push_back(rt.spawn_on(i, run_until_stopped(*servers[i], rt.stop_token(), grace)));
  }
  for (auto& r : running) {
    const std::error_code ec = co_await std::move(r);
    if (!first) first = ec;
  }
  // Each server is destroyed on its own worker.
  for (std::size_t i = 0; i < servers.size(); ++i) {
    co_await rt.spawn_on(i, [](std::unique_ptr<server> s) -> task<void> {
      s.reset();
      co_return;
    }(std::move(servers[i])));
  }
  co_return first;
}

}  // namespace tern::http
