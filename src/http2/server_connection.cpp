// An HTTP/2 server connection: nghttp2's session driven through its memory interface by three kinds of task of
// the connection's loop.
//
// - The reader reads from the socket (or the TLS transport) into one buffer and hands the bytes to
//   nghttp2_session_mem_recv. The callbacks it triggers record what arrived into the streams (header fields
//   copied or held by reference, header_text; DATA appended to the stream's input) and start the handler of
//   each request whose header section is complete (its stream's loop, one task per stream object), which the
//   reader runs once mem_recv has returned, followed by the writer's turn (run_started): a read's requests are
//   answered before the loop moves on to another connection. While the writer is stuck on a full output buffer
//   (a peer that does not read), the reader reads no more, so what a peer sends cannot pile answers up in memory.
// - The writer gathers frames with nghttp2_session_mem_send into one output buffer, only while it has room (so
//   nghttp2 serialises no more than one write's worth ahead), and writes them in one write of up to write_size
//   bytes. It sleeps on a doorbell that the reader and the handlers ring when they have given nghttp2 something
//   to send.
// - Each stream's handler reads its request body from the stream's input (each byte taken is what the stream's
//   window reopens by: nghttp2_session_consume, with automatic window updates off) and writes its response into
//   the stream's output, from which nghttp2's data callback copies as the peer's windows allow (DATA deferred
//   while the handler has produced nothing, resumed when it has).
//
// No nghttp2 call is made from inside an nghttp2 callback except those its documentation allows there
// (submit_trailer from the data callback, terminate_session): what a callback decides that needs another call
// (resetting a stream, giving a closed stream's window back, the GOAWAY of a shutdown) is queued and made by the
// reader or writer once mem_recv or mem_send has returned (after_session_calls).
//
// The connection ends when nghttp2 wants neither to read nor to write (the GOAWAY exchange is over and no stream
// is open), when the peer closes or a write fails, or when the server's connection task is cancelled; every
// handler still running is then cancelled through its stream's stop token, and run() returns only once every
// task has ended.
#include "server_connection.hpp"

#include "memory.hpp"

#include <sys/mman.h>

#if defined(__has_include)
#if __has_include(<sanitizer/asan_interface.h>)
#include <sanitizer/asan_interface.h>
#endif
#endif

#include <algorithm>
#include <charconv>
#include <cstring>
#include <exception>

#include "tern/cancel.hpp"
#include "tern/error.hpp"
#include "tern/http/error.hpp"
#include "tern/http/handler_call.hpp"
#include "tern/http/upgrade.hpp"
#include "tern/net/socket_option.hpp"
#include "tern/spawn.hpp"

namespace tern::http2::detail {

using sized = io_result<std::size_t>;

namespace {

constexpr std::size_t input_buffer_size = 32 * 1024;
// The largest write made with one send (write_loop): write_all's piece, 64 KiB (stream_ops.cpp).
constexpr std::size_t single_send = 64 * 1024;
constexpr std::size_t kept_buffer = 64 * 1024;  // a reused stream's buffers keep at most this much memory
// The misbehaviour budget: spent by frames that cost work and serve no request, regained over time.
constexpr double budget_max = 1000;
constexpr double budget_per_second = 100;
constexpr std::uint8_t goaway_ping[8] = {'t', 'e', 'r', 'n', '-', 'b', 'y', 'e'};

using http::detail::resume_on;

// A whole-body route's task awaited so that the awaiting frame answers with the response where the task's frame
// holds it (the task is the awaiting frame's until it has answered): never moved out (a move of a response copies
// its inline fields: 104 instructions a request, half the move's cost). A route that throws, or whose call did
// (no task then), is answered 500 (http/handler_call.hpp).
struct route_answer : http::detail::route_start {
  // The answer when the route failed, made only then: a response built and destroyed in every frame wrote lines
  // of the frame no route's answer needs.
  std::optional<http::response>& failed;
  // The response where the route's frame holds it (the frame lives as long as t), not moved out: or failed, 500.
  http::response& await_resume() {
    if (t.valid()) {
      try {
        return t.handle().promise().value();
      } catch (...) {
      }
    }
    return failed.emplace(http::status::internal_server_error, "internal server error\n");
  }
};

std::string_view view(nghttp2_rcbuf* b) noexcept {
  const nghttp2_vec v = nghttp2_rcbuf_get_buf(b);
  return {reinterpret_cast<const char*>(v.base), v.len};
}

// RFC 9113 §8.2.2: fields that are specific to an HTTP/1.1 connection are not sent; the length is the server's.
// By length first: every field of every response passes here.
bool dropped_in_h2(std::string_view name) noexcept {
  switch (name.size()) {
    case 2: return http::iequals(name, "te");
    case 7: return http::iequals(name, "upgrade");
    case 10: return http::iequals(name, "connection") || http::iequals(name, "keep-alive");
    case 14: return http::iequals(name, "content-length");
    case 16: return http::iequals(name, "proxy-connection");
    case 17: return http::iequals(name, "transfer-encoding");
    default: return false;
  }
}

// Which of the names tern::http knows (http::detail::known_field) a request field's name is. HTTP/2 names arrive
// lowercase (nghttp2 refuses others), so one comparison of known length after the length and the first byte tell,
// where the general known_field_of folds the case of every word (50 instructions a field).
http::detail::known_field known_lowercase(std::string_view n) noexcept {
  using http::detail::known_field;
  const auto is = [n]<std::size_t N>(const char (&name)[N], known_field k) {
    return n.size() == N - 1 && std::memcmp(n.data(), name, N - 1) == 0 ? k : known_field::none;
  };
  if (n.empty()) return known_field::none;
  switch (n.size()) {
    case 4: return is("host", known_field::host);
    case 6:
      switch (n[0]) {
        case 'a': return is("accept", known_field::accept);
        case 'c': return is("cookie", known_field::cookie);
        case 'e': return is("expect", known_field::expect);
        case 'o': return is("origin", known_field::origin);
        default: return known_field::none;
      }
    case 7: return is("upgrade", known_field::upgrade);
    case 10: return n[0] == 'c' ? is("connection", known_field::connection) : is("user-agent", known_field::user_agent);
    case 12: return is("content-type", known_field::content_type);
    case 13: return is("authorization", known_field::authorization);
    case 14:
      return n[0] == 'c' ? is("content-length", known_field::content_length)
                         : is("http2-settings", known_field::http2_settings);
    case 17:
      return n[0] == 's' ? is("sec-websocket-key", known_field::sec_websocket_key)
                         : is("transfer-encoding", known_field::transfer_encoding);
    case 21: return is("sec-websocket-version", known_field::sec_websocket_version);
    case 22: return is("sec-websocket-protocol", known_field::sec_websocket_protocol);
    case 24: return is("sec-websocket-extensions", known_field::sec_websocket_extensions);
    default: return known_field::none;
  }
}

bool bodiless_status(int status) noexcept { return status < 200 || status == 204 || status == 304; }

// "100101102...999": the three digits of every status, for nghttp2 to refer to rather than copy.
constexpr std::array<char, 2700> status_digits = [] {
  std::array<char, 2700> a{};
  for (int code = 100; code <= 999; ++code) {
    char* at = a.data() + 3 * (code - 100);
    at[0] = static_cast<char>('0' + code / 100);
    at[1] = static_cast<char>('0' + code / 10 % 10);
    at[2] = static_cast<char>('0' + code % 10);
  }
  return a;
}();

// n in decimal, at the end of text.
std::string_view decimal(char (&text)[20], std::uint64_t n) noexcept {
  char* at = text + sizeof text;
  do {
    *--at = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n != 0);
  return std::string_view(at, static_cast<std::size_t>(text + sizeof text - at));
}

// HTTP2-Settings is base64url without padding (RFC 7540 §3.2.1).
bool base64url_decode(std::string_view in, std::string& out) {
  out.clear();
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '-' || c == '+') v = 62;
    else if (c == '_' || c == '/') v = 63;
    else if (c == '=') break;
    else return false;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return true;
}

}  // namespace

// ---- task_count ----

void task_count::done(io_context& ctx) noexcept {
  if (--running_ == 0 && waiter_) {
    ctx.post([h = std::exchange(waiter_, {})] { h.resume(); });
  }
}

// ---- the callbacks ----

struct callbacks {
  static server_connection& conn(void* user) noexcept { return *static_cast<server_connection*>(user); }
  static server_stream* stream(server_connection& c, std::int32_t id) noexcept { return c.find_stream(id); }

  // Before nghttp2 looks at a HEADERS frame: the streams the peer opens are remembered, and HEADERS for one that
  // nghttp2 has forgotten is judged by how it ended (nghttp2 keeps no closed streams here, and ignores such frames).
  // DATA is judged by feed(), which splits mem_recv where a DATA frame may find its stream gone (nghttp2 1.52 calls
  // this callback for DATA only when it holds the stream: a lookup here would find it every time).
  static int on_begin_frame(nghttp2_session* session, const nghttp2_frame_hd* hd, void* user) {
    server_connection& c = conn(user);
    const std::int32_t id = hd->stream_id;
    if (hd->type != NGHTTP2_HEADERS || id == 0 || (id & 1) == 0) return 0;
    if (id > c.max_seen_) c.remember(id);
    else if (nghttp2_session_find_stream(session, id) == nullptr) c.frame_on_gone_stream(id, NGHTTP2_HEADERS);
    return 0;
  }

  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    server_connection& c = conn(user);
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      c.header_stream_ = c.open_stream(frame->hd.stream_id);
    } else if (server_stream* s = stream(c, frame->hd.stream_id)) {
      s->in_trailers_ = true;
      s->header_bytes_ = 0;
      c.header_stream_ = s;
    }
    return 0;
  }

  static int on_header(nghttp2_session* session, const nghttp2_frame* frame, nghttp2_rcbuf* name,
                       nghttp2_rcbuf* value, std::uint8_t flags, void* user) {
    try {
      return on_field(session, frame, name, value, flags, user);
    } catch (...) {
      return NGHTTP2_ERR_CALLBACK_FAILURE;  // out of memory: this connection ends (nothing throws through nghttp2)
    }
  }

  // Inline in on_header: a call of its own cost a frame and its registers per field (six fields a request).
  [[gnu::always_inline]] static int on_field(nghttp2_session*, const nghttp2_frame* frame, nghttp2_rcbuf* name,
                                             nghttp2_rcbuf* value, std::uint8_t, void* user) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    server_connection& c = conn(user);
    // The stream whose header block this is, as on_begin_headers found it (a lookup in nghttp2's map per field
    // otherwise); looked up again if it has closed since.
    server_stream* s = c.header_stream_;
    if (s == nullptr || s->id_ != frame->hd.stream_id || s->closed_) s = stream(c, frame->hd.stream_id);
    if (s == nullptr) return 0;
    const http::parser_limits& limits = c.hopts_.limits;
    std::string_view n = view(name), v = view(value);
    if (s->in_trailers_) {
      // Sizes as an HTTP/1.1 head would count them ("name: value" and its CRLF), against the same limits.
      s->header_bytes_ += n.size() + v.size() + 4;
      if (s->header_bytes_ > limits.max_header_bytes || s->trailers_.size() >= limits.max_headers) return 0;
      n = s->text_.keep(name, n);
      v = s->text_.keep(value, v);
      s->trailers_.push_back({n, v});
      return 0;
    }
    if (!n.empty() && n.front() == ':') {
      // nghttp2 hands over only the pseudo-header fields a request may have (it resets a stream that sends any
      // other, :protocol only where extended CONNECT is on, before this callback): their lengths tell them apart,
      // and one byte :method from :scheme. Every request has four of these.
      std::string_view* to;
      switch (n.size()) {
        case 5: to = &s->head_.target; break;                                // :path
        case 7: to = n[1] == 'm' ? &s->head_.method_name : nullptr; break;  // :method, or :scheme
        case 9: to = &s->protocol_; break;                                   // :protocol
        case 10: to = &s->authority_; break;                                 // :authority
        default: to = nullptr; break;
      }
      if (to == nullptr) return 0;  // :scheme: the connection's, whatever it says
      s->pseudo_bytes_ += v.size();
      if (s->pseudo_bytes_ > limits.max_request_line && s->refused_ == 0) s->refused_ = http::status::uri_too_long;
      *to = s->text_.keep(value, v);
      return 0;
    }
    s->header_bytes_ += n.size() + v.size() + 4;
    if (s->header_bytes_ > limits.max_header_bytes || s->fields_.size() >= limits.max_headers) {
      s->refused_ = http::status::request_header_fields_too_large;
      // Far past the limit, the header block is a bomb (a few bytes of references to one large entry decode
      // into megabytes): its stream is reset now, so that nghttp2 stops checking and handing over every field.
      if (s->header_bytes_ > 4 * limits.max_header_bytes + 4096 ||
          s->fields_.size() + s->dropped_ > 4 * limits.max_headers) {
        (void)c.charge(1);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      }
      ++s->dropped_;
      return 0;
    }
    // The first position of each field tern::http knows by name (request::header finds those without a walk over
    // the fields), and what the request's framing needs, noted as the fields pass. A known name is referred to in
    // tern::http's table of them (lowercase, as HTTP/2's are), not kept.
    const http::detail::known_field k = known_lowercase(n);
    n = k != http::detail::known_field::none ? http::detail::known_field_names[static_cast<std::size_t>(k)]
                                             : s->text_.keep(name, n);
    v = s->text_.keep(value, v);
    s->fields_.push_back({n, v});
    if (k == http::detail::known_field::none) return 0;
    std::uint32_t& first = s->known_[static_cast<std::size_t>(k)];
    if (first != 0) return 0;
    first = static_cast<std::uint32_t>(s->fields_.size());
    if (k == http::detail::known_field::host) s->head_.host = v;
    else if (k == http::detail::known_field::content_length) s->content_length_text_ = v;
    else if (k == http::detail::known_field::expect) s->expect_continue_ = http::iequals(v, "100-continue");
    return 0;
  }

  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    server_connection& c = conn(user);
    c.got_frame_ = true;
    const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS: {
        server_stream* s = stream(c, frame->hd.stream_id);
        if (s == nullptr) break;
        if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
          s->in_end_ = end_stream;
          c.finish_head(*s);
        } else if (s->in_trailers_) {
          s->trailer_list_ = http::field_list(s->trailers_);
          s->in_end_ = true;
          s->input_.set();
        }
        break;
      }
      case NGHTTP2_DATA: {
        server_stream* s = stream(c, frame->hd.stream_id);
        if (frame->hd.length == 0 && !end_stream) (void)c.charge(1);  // an empty frame serves nothing
        if (s != nullptr && end_stream) {
          s->in_end_ = true;
          s->input_.set();
        }
        break;
      }
      case NGHTTP2_PING:
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) == 0) {
          (void)c.charge(1);
        } else if (std::memcmp(frame->ping.opaque_data, goaway_ping, sizeof goaway_ping) == 0) {
          c.notice_at_ = clock::time_point{};  // a round trip after the notice: the final GOAWAY is due
        }
        break;
      case NGHTTP2_SETTINGS:
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) == 0) (void)c.charge(1);
        break;
      case NGHTTP2_RST_STREAM:
        c.mark(frame->hd.stream_id, server_connection::ending::peer_reset);
        break;
      case NGHTTP2_PRIORITY:
        (void)c.charge(1);
        break;
      case NGHTTP2_WINDOW_UPDATE:
        // Increments this small serve a data dribble (CVE-2019-9511), not a reader.
        if (frame->window_update.window_size_increment < 1024) (void)c.charge(1);
        break;
      default:
        break;
    }
    return 0;
  }

  static int on_data_chunk(nghttp2_session*, std::uint8_t flags, std::int32_t id, const std::uint8_t* data,
                           std::size_t length, void* user) {
    server_connection& c = conn(user);
    server_stream* s = stream(c, id);
    if (s == nullptr || s->closed_ || s->shed_) {
      c.pending_consume_ += length;
      return 0;
    }
    try {
      s->in_.append(reinterpret_cast<const char*>(data), length);
    } catch (...) {
      return NGHTTP2_ERR_CALLBACK_FAILURE;  // out of memory: this connection ends (nothing throws through nghttp2)
    }
    s->unconsumed_ += length;
    s->in_total_ += length;
    // A chunk of the last frame rings the handler when the frame is whole (on_frame_recv; or the stream's close,
    // if nghttp2 refuses the frame's end), not now too: a second ring cost the event's lock once more per request.
    // The first part of a last frame split between reads waits for the rest of it, the stream's last bytes.
    if ((flags & NGHTTP2_FLAG_END_STREAM) == 0) s->input_.set();
    return 0;
  }

  static int on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user) {
    server_connection& c = conn(user);
    server_stream* s = stream(c, id);
    if (code == NGHTTP2_NO_ERROR) c.mark(id, server_connection::ending::normally, s);
    if (s != nullptr) c.stream_closed(*s, code);
    return 0;
  }

  // Every frame sent passes here: a request's answer's HEADERS and DATA take the short way, which calls nothing
  // (so that it saves no register), the rest the out-of-line one (frame_sent).
  static int on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    server_connection& c = conn(user);
    const std::uint8_t type = frame->hd.type;
    if (type != NGHTTP2_HEADERS && type != NGHTTP2_DATA) [[unlikely]] return frame_sent(c, frame);
    // Its time is the write's that carries it (write_loop): a clock read per DATA frame cost 10 ns each.
    if (type == NGHTTP2_DATA) c.data_gathered_ = true;
    if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) return 0;
    // The response is complete before the request: the peer is asked to stop sending (RFC 9113 §8.1).
    server_stream* s = stream(c, frame->hd.stream_id);
    if (s != nullptr && !s->in_end_) [[unlikely]] return frame_sent(c, frame);
    return 0;
  }

  [[gnu::noinline]] static int frame_sent(server_connection& c, const nghttp2_frame* frame) {
    const std::uint8_t type = frame->hd.type;
    if (type == NGHTTP2_HEADERS || type == NGHTTP2_DATA) {
      c.resets_.emplace_back(frame->hd.stream_id, NGHTTP2_NO_ERROR);  // an answer before the request's end
    } else if (type == NGHTTP2_GOAWAY && c.notice_sent_ && !c.notice_ping_due_ && !c.goaway_sent_) {
      c.notice_ping_due_ = true;  // the shutdown notice has gone: a PING follows it (after_session_calls)
    } else if (type == NGHTTP2_RST_STREAM) {
      c.mark(frame->hd.stream_id, server_connection::ending::reset_here);
      // A reset the peer provoked (a stream error it made) costs like one it sent (MadeYouReset, CVE-2025-8671).
      const std::uint32_t code = frame->rst_stream.error_code;
      if (code != NGHTTP2_NO_ERROR && code != NGHTTP2_CANCEL && code != NGHTTP2_INTERNAL_ERROR) (void)c.charge(1);
    }
    return 0;
  }

  static int send_data(nghttp2_session*, nghttp2_frame* frame, const std::uint8_t* framehd, std::size_t length,
                       nghttp2_data_source* source, void* user) {
    return conn(user).write_data(*frame, framehd, length, *static_cast<server_stream*>(source->ptr));
  }

  static int on_invalid_frame(nghttp2_session*, const nghttp2_frame*, int, void* user) {
    (void)conn(user).charge(1);
    return 0;
  }

  static nghttp2_session_callbacks* get() {
    static const callbacks_ptr made = [] {
      callbacks_ptr table = new_callbacks();
      nghttp2_session_callbacks* cb = table.get();
      nghttp2_session_callbacks_set_on_begin_frame_callback(cb, &on_begin_frame);
      nghttp2_session_callbacks_set_on_begin_headers_callback(cb, &on_begin_headers);
      nghttp2_session_callbacks_set_on_header_callback2(cb, &on_header);
      nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &on_frame_recv);
      nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &on_data_chunk);
      nghttp2_session_callbacks_set_on_stream_close_callback(cb, &on_stream_close);
      nghttp2_session_callbacks_set_on_frame_send_callback(cb, &on_frame_send);
      nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, &on_invalid_frame);
      nghttp2_session_callbacks_set_send_data_callback(cb, &send_data);
      return table;
    }();
    return made.get();
  }
};

// ---- the streams kept for reuse ----

// The streams kept for reuse by the HTTP/2 server connections of a thread (of its loop), one list for all of them,
// last kept first taken. Each connection kept its own before: with 100 connections of 10 streams in flight, 1000
// streams of 1.6 KB (and their text blocks, field arrays and frames) took turns, the lines of a stream had left
// even the L2 cache by its next request, and taking a stream for a request's header block (open_stream) was the
// most costly of tern's own functions in a perf profile. Shared, the streams a turn uses are those the turns before
// it gave back. A stream holds nothing of its connection while kept: its references into nghttp2's buffers went
// back at its end (release_memory), and its loop reads its connection anew for each request (stream_loop). As many
// are kept as the thread's connections may have open at once (the sum of their max_concurrent_streams, as when each
// kept its own); a connection's end trims the list to what is left of that, and the last one's frees it. Made on
// the heap and reached through a plain thread-local pointer: a connection destroyed on another thread (its loop
// destroyed there, its thread gone) still finds its list, and only the thread that made it forgets it.
struct stream_pool {
  server_stream* first = nullptr;
  std::size_t count = 0;
  std::size_t cap = 0;    // the sum of its connections' max_concurrent_streams
  std::size_t users = 0;  // the connections that use it
};

namespace {
thread_local constinit stream_pool* thread_pool = nullptr;
}  // namespace

// ---- the connection ----

server_connection::server_connection(const http::handover& h, const server_options& opts, const nghttp2_option* option)
    : ctx_(*io_context::current()),
      server_(h.server),
      hopts_(h.server.options()),
      opts_(opts),
      option_(option),
      socket_(h.socket),
      secure_(h.secure),
      remote_(h.remote),
      received_(h.received),
      upgraded_(h.upgraded),
      upgraded_body_(h.upgraded_body),
      upgrade_settings_(h.upgrade_settings),
      listener_(h.listener),
      input_(std::make_unique_for_overwrite<char[]>(input_buffer_size)),
      budget_(budget_max),
      budget_at_(clock::now()),
      started_(budget_at_),
      idle_since_(budget_at_),
      data_sent_at_(budget_at_) {
  output_.reserve(opts_.write_size + 32 * 1024);
  if (thread_pool == nullptr) thread_pool = new stream_pool;
  pool_ = thread_pool;
  ++pool_->users;
  pool_->cap += opts_.max_concurrent_streams;
}

server_connection::~server_connection() {
  // The streams first: their fields hold references into the session's memory (the kept ones hold none).
  while (live_ != nullptr) delete std::exchange(live_, live_->next_);
  stream_pool& pool = *pool_;
  pool.cap -= opts_.max_concurrent_streams;
  while (pool.count > pool.cap) {
    delete std::exchange(pool.first, pool.first->next_);
    --pool.count;
  }
  if (--pool.users == 0 && thread_pool == pool_) {
    thread_pool = nullptr;
    delete pool_;
  }
  session_.reset();
}

bool server_connection::start() {
  nghttp2_session* raw = nullptr;
  if (nghttp2_session_server_new3(&raw, callbacks::get(), this, option_, pooled_memory()) != 0) return false;
  session_.reset(raw);
  if (upgraded_ != nullptr && !upgrade_stream()) return false;
  std::vector<nghttp2_settings_entry> settings{
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, opts_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, opts_.stream_window},
      {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, std::clamp<std::uint32_t>(opts_.max_frame_size, 16384, 16777215)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
       static_cast<std::uint32_t>(hopts_.limits.max_header_bytes + hopts_.limits.max_request_line)},
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  };
  if (opts_.extended_connect) settings.push_back({NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1});
  if (nghttp2_submit_settings(session_.get(), NGHTTP2_FLAG_NONE, settings.data(), settings.size()) != 0) return false;
  widen_connection_window(session_.get(), opts_.connection_window);
  if (!received_.empty()) (void)feed(received_.data(), received_.size());
  return true;
}

// Upgrade: h2c: the HTTP/1.1 request becomes stream 1, half closed by the peer, its body already whole.
bool server_connection::upgrade_stream() {
  std::string settings;
  if (!base64url_decode(upgrade_settings_, settings)) return false;
  server_stream* s = open_stream(1);
  const bool head = upgraded_->method == http::method::head;
  if (nghttp2_session_upgrade2(session_.get(), reinterpret_cast<const std::uint8_t*>(settings.data()),
                               settings.size(), head ? 1 : 0, s) != 0) {
    return false;
  }
  s->head_ = *upgraded_;
  s->head_.version = http::http2;
  s->has_content_length_ = upgraded_->framing == http::body_framing::content_length;
  s->in_.append(upgraded_body_.data(), upgraded_body_.size());
  s->in_total_ = s->in_.size();
  s->in_end_ = true;
  start_handler(*s);
  return true;
}

task<void> server_connection::run() {
  *listener_ = this;
  if (!start()) {
    *listener_ = nullptr;
    co_return;
  }
  // The server's cancel (shutdown past its grace) ends the connection and every stream's handler.
  struct on_stop {
    server_connection* c;
    void operator()() const noexcept { c->end_connection(); }
  };
  const std::stop_token* parent = co_await current_stop_token();
  std::optional<std::stop_callback<on_stop>> link;
  if (parent != nullptr && parent->stop_possible()) link.emplace(*parent, on_stop{this});
  if (server_.stopping()) server_stopping();
  tasks_.add();
  spawn(ctx_, read_loop(), reader_stop_.get_token()).detach();
  tasks_.add();
  spawn(ctx_, write_loop(), writer_stop_.get_token()).detach();
  tasks_.add();
  spawn(ctx_, watch(), writer_stop_.get_token()).detach();
  co_await tasks_.wait();
  *listener_ = nullptr;
}

void server_connection::server_stopping() noexcept {
  if (stopping_) return;
  stopping_ = true;
  wake_writer();
}

void server_connection::end_connection() noexcept {
  dead_ = true;
  // The plain socket's read and write carry no stop binding (own_io): cancelled here. The stop comes on the loop
  // (the writer's end, the server's cancel past its grace, whose cut also closes the socket); from elsewhere the
  // socket's own cancel, which any thread may call, reaches them.
  if (ctx_.running_here()) {
    if (read_op_ != nullptr) read_op_->cancel();
    if (send_op_ != nullptr) send_op_->cancel();
    if (write_op_ != nullptr) write_op_->cancel();
  } else {
    (secure_ != nullptr ? secure_->socket() : socket_).cancel();
  }
  reader_stop_.request_stop();
  writer_stop_.request_stop();
  if (ctx_.running_here()) wake_writer();  // a writer at its doorbell does not watch its token (doorbell)
  for (server_stream* s = live_; s != nullptr; s = s->next_) {
    if (!s->running_) continue;
    s->stopped_ = true;
    s->stop_.request_stop();
    s->input_.set();
    s->signal_output();
  }
}

// What a callback decided and could not do inside nghttp2's call: made now that mem_recv or mem_send has returned.
void server_connection::make_deferred_calls() {
  nghttp2_session* session = session_.get();
  for (auto [id, code] : resets_) (void)nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, code);
  resets_.clear();
  if (pending_consume_ != 0) {
    (void)nghttp2_session_consume_connection(session, pending_consume_);
    pending_consume_ = 0;
  }
  // Shutdown: a GOAWAY that announces it (last-stream-id 2^31-1) and a PING; the final GOAWAY, with the last
  // stream handed to a handler, a round trip later (the PING's answer), when the peer has seen the notice and
  // sends nothing new it expects to be served. nghttp2 sends the PING ahead of the notice, so a second PING
  // follows the notice once it has gone, and the first answer to either will do: a peer that drops what it has
  // queued when a GOAWAY arrives (Python's h2) loses its answer to the first, and one with nothing left to do
  // after the notice (nghttp2's, when no stream is open) answers no PING that comes after it. Without the second,
  // the former's every stop waited the second of patience.
  if (stopping_ && !notice_sent_) {
    notice_sent_ = true;
    notice_at_ = clock::now();
    (void)nghttp2_submit_shutdown_notice(session);
    (void)nghttp2_submit_ping(session, NGHTTP2_FLAG_NONE, goaway_ping);
  }
  if (notice_ping_due_ && !notice_ping_sent_) {
    notice_ping_sent_ = true;
    (void)nghttp2_submit_ping(session, NGHTTP2_FLAG_NONE, goaway_ping);
  }
  if (notice_sent_ && !goaway_sent_ && notice_at_ == clock::time_point{}) send_goaway(NGHTTP2_NO_ERROR);
}

void server_connection::send_goaway(std::uint32_t code) {
  if (goaway_sent_) return;
  goaway_sent_ = true;
  (void)nghttp2_submit_goaway(session_.get(), NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(session_.get()), code, nullptr, 0);
}

// The peer's bytes, to nghttp2. A DATA frame for a stream nghttp2 no longer holds is dropped by nghttp2 without a
// callback, so the frames are followed here (their headers only): the bytes before such a frame go in first, and
// the stream is judged once they have been processed (frame_on_gone_stream), as on_begin_frame judges HEADERS.
// Most DATA frames cannot be for such a stream: one whose HEADERS came in the bytes not yet delivered (a request's
// HEADERS and DATA arrive in one read), or one nghttp2 holds now, when those bytes cannot close it (no RST_STREAM,
// no GOAWAY, no END_STREAM of its own: nothing else closes a stream inside mem_recv, the server's own ends being
// sent by mem_send). Those go in with the rest, in one mem_recv, not one per frame.
bool server_connection::feed(const char* data, std::size_t n) {
  frame_scanner& f = scanner_;
  f.restart();
  std::size_t start = 0, i = 0;
  // The payload still to pass over, kept here while the loop runs (in the scanner between reads).
  std::size_t skip = f.skip;
  while (true) {
    if (skip >= n - i) {  // the rest is payload (or there is no rest)
      f.skip = skip - (n - i);
      break;
    }
    i += skip;
    // A frame header: read where it lies when it is whole (the usual case), else gathered across reads.
    const std::uint8_t* h;
    if (f.have == 0 && n - i >= sizeof f.header) {
      h = reinterpret_cast<const std::uint8_t*>(data + i);
      i += sizeof f.header;
    } else {
      const std::size_t k = std::min(sizeof f.header - f.have, n - i);
      std::memcpy(f.header + f.have, data + i, k);
      f.have += k;
      i += k;
      if (f.have < sizeof f.header) {  // every byte taken: the header goes on in the next read
        f.skip = 0;
        break;
      }
      f.have = 0;
      h = f.header;
    }
    skip = (std::size_t{h[0]} << 16) | (std::size_t{h[1]} << 8) | h[2];
    const std::uint8_t type = h[3];
    note_header_block(type, h[4]);
    const std::int32_t id = static_cast<std::int32_t>(((std::uint32_t{h[5]} & 0x7f) << 24) |
                                                      (std::uint32_t{h[6]} << 16) | (std::uint32_t{h[7]} << 8) | h[8]);
    const bool ends = (type == NGHTTP2_DATA || type == NGHTTP2_HEADERS) && (h[4] & NGHTTP2_FLAG_END_STREAM) != 0;
    if (type == NGHTTP2_HEADERS && id > std::max(max_seen_, f.opened)) f.opened = id;
    // Whether nghttp2 holds the stream now is the connection's table's answer (find_stream): a stream leaves it
    // only through on_stream_close.
    const bool held = type == NGHTTP2_DATA && (id & 1) != 0 && !f.closing && !f.ended(id) &&
                      (id == f.opened || find_stream(id) != nullptr);
    if (type == NGHTTP2_RST_STREAM || type == NGHTTP2_GOAWAY) f.closing = true;
    if (ends) f.end(id);
    if (type != NGHTTP2_DATA || (id & 1) == 0 || held) continue;
    const std::size_t header_start = i >= start + sizeof f.header ? i - sizeof f.header : start;
    if (!deliver(data + start, header_start - start)) return false;
    start = header_start;
    f.restart();
    if (ends) f.end(id);
    if (id <= max_seen_ && nghttp2_session_find_stream(session_.get(), id) == nullptr) {
      frame_on_gone_stream(id, NGHTTP2_DATA);
    }
  }
  return deliver(data + start, n - start);
}

bool server_connection::deliver(const char* data, std::size_t n) {
  if (n == 0) return true;
  const ng_ssize rv = mem_recv(session_.get(), reinterpret_cast<const std::uint8_t*>(data), n);
  if (rv < 0) {
    // Fatal (a bad preface, a flood nghttp2 caught, a failed callback): only the GOAWAY nghttp2 may have queued
    // still goes out.
    dead_ = true;
    flush_on_death_ = rv == NGHTTP2_ERR_FLOODED;
  } else {
    after_session_calls();
  }
  wake_writer();
  return rv >= 0;
}

// The reader's deadline: header_timeout for the preface and the first frame, counted from the accept, and for a
// header block that has not ended, counted from its HEADERS frame. Later deadlines (idle, the shutdown notice's
// round trip) are the writer's, which wakes whenever a stream ends.
std::optional<clock::time_point> server_connection::read_deadline() const noexcept {
  if (!got_frame_) return started_ + hopts_.header_timeout;
  if (header_block_at_ != clock::time_point{}) return header_block_at_ + hopts_.header_timeout;
  return std::nullopt;
}

// A header block left open (HEADERS without END_HEADERS, and no CONTINUATION that ends it) starts no handler, so
// no body or write timeout applies, and holds a stream open, so idle_timeout does not either: header_timeout does,
// from its first frame. Every frame header passes here, so the block's end is seen whatever nghttp2 made of it.
void server_connection::note_header_block(std::uint8_t type, std::uint8_t flags) noexcept {
  if ((type == NGHTTP2_HEADERS || type == NGHTTP2_CONTINUATION) && (flags & NGHTTP2_FLAG_END_HEADERS) == 0) {
    if (type == NGHTTP2_HEADERS) header_block_at_ = stamp();
  } else {
    header_block_at_ = clock::time_point{};
  }
}

// The writer's: a second for the answer to the shutdown notice's PING, and while response bytes wait for the
// peer's windows, write_timeout after the last DATA frame: a peer that opens no window for whole responses (whose
// handlers have ended, so no write of theirs waits and times out) would hold their bodies and the connection for
// good. idle_timeout is watch's.
std::optional<clock::time_point> server_connection::write_deadline() const noexcept {
  if (goaway_sent_) return std::nullopt;  // the session winds down; it ends when nghttp2 is done
  std::optional<clock::time_point> d;
  if (notice_sent_) d = notice_at_ + std::chrono::seconds(1);
  if (whole_out_ != 0) {
    const clock::time_point stall = data_sent_at_ + hopts_.write_timeout;
    if (!d || stall < *d) d = stall;
  }
  return d;
}

void server_connection::on_write_deadline() {
  const clock::time_point now = clock::now();
  if (goaway_sent_) return;
  if (whole_out_ != 0 && now - data_sent_at_ >= hopts_.write_timeout) {
    // No DATA for that long with whole responses waiting: the connection goes (as write_body's rule for streams).
    goaway_sent_ = true;
    (void)nghttp2_session_terminate_session(session_.get(), NGHTTP2_NO_ERROR);
    return;
  }
  if (notice_sent_ && now >= notice_at_ + std::chrono::seconds(1)) send_goaway(NGHTTP2_NO_ERROR);
}

// The connection's two deadlines that a busy connection would otherwise arm and cancel all the time, checked
// lazily: idle_timeout from the moment no stream is open, and write_timeout on each write to the socket. The watch
// sleeps until the earliest moment either could be due (idle_timeout after the last stream's end, or from now while
// streams are open, since the next end comes later; write_timeout after the write in flight began, or from now),
// and when it wakes too early it sleeps again until the deadlines of the moment, so neither is late; but at least
// a millisecond later, so that a timeout of zero is polled, not spun on. A busy connection arms one timer per
// timeout instead of two per request at one request in flight (the writer's wait for its doorbell and its write).
// A write past its deadline is cancelled through the writer's stop token; the watch ends with the writer
// (end_connection).
task<void> server_connection::watch() {
  clock::time_point due = stamp() + std::min(hopts_.idle_timeout, hopts_.write_timeout);
  for (;;) {
    if (co_await sleep_until(due)) break;  // the connection's end
    const clock::time_point now = clock::now();
    if (writing_ && now - write_started_ >= hopts_.write_timeout) {
      write_timed_out_ = true;
      // A plain write (own_io); TLS's through the writer's token.
      if (send_op_ != nullptr) send_op_->cancel();
      if (write_op_ != nullptr) write_op_->cancel();
      writer_stop_.request_stop();
      break;
    }
    // No idle deadline once the session winds down (a GOAWAY sent, a shutdown's own deadline, a dead connection).
    const bool idle_applies = !dead_ && !goaway_sent_ && !notice_sent_;
    if (idle_applies && live_count_ == 0 && now - idle_since_ >= hopts_.idle_timeout) {
      send_goaway(NGHTTP2_NO_ERROR);
      wake_writer();
    }
    due = (writing_ ? write_started_ : now) + hopts_.write_timeout;
    if (idle_applies) due = std::min(due, (live_count_ == 0 ? idle_since_ : now) + hopts_.idle_timeout);
    due = std::max(due, now + std::chrono::milliseconds(1));  // a timeout of zero is polled, not spun on
  }
  tasks_.done(ctx_);
}

// Reads until the peer ends the connection, a read fails, or the writer stops it. Once nghttp2 wants nothing more
// (the GOAWAY exchange is over) what still arrives is read and dropped while the writer lingers.
task<void> server_connection::read_loop() {
  for (;;) {
    if (dead_) break;
    // A peer that does not read what it asked for gets nothing more read from it until it does.
    while (writing_ && !output_has_room() && !dead_) {
      reader_stuck_ = true;
      const std::error_code ec = co_await written_.wait();
      reader_stuck_ = false;
      if (ec) break;
    }
    if (dead_) break;
    const mutable_buffer space(input_.get(), input_buffer_size);
    const std::optional<clock::time_point> deadline = read_deadline();
    io_result<std::size_t> r;
    if (secure_ != nullptr) {
      if (deadline) r = co_await with_deadline(secure_->read_some(space), *deadline);
      else r = co_await secure_->read_some(space);
    } else {
      if (deadline) r = co_await with_deadline(socket_.read_some(space), *deadline);
      else r = co_await own_io<tern::detail::read_awaiter>(read_op_, [&] { return socket_.read_some(space); });
    }
    if (r.ec) {
      // The peer left (or the connection was cut): nothing it asked for can be delivered any more, unless the
      // writer has finished and only lingers for this end.
      if (!lingering_) dead_ = true;
      break;
    }
    if (lingering_) continue;
    // The handlers the bytes start, and the writer's turn after them, run here once nghttp2 has returned.
    reader_feeding_ = writer_deferred_ = true;
    feed_stamp_ = {};
    const bool fed = feed(input_.get(), r.value);
    reader_feeding_ = false;
    run_started();
    if (!fed) break;
  }
  reader_done_.set();
  wake_writer();
  tasks_.done(ctx_);
}

bool server_connection::fill_output() {
  nghttp2_session* session = session_.get();
  while (output_has_room()) {
    const std::uint8_t* data = nullptr;
    const ng_ssize n = mem_send(session, &data);
    if (n < 0) {
      dead_ = true;
      return false;
    }
    if (n == 0) {
      if (output_has_room()) return true;  // nghttp2 had nothing more
      // Only write_data leaves output_ full within a mem_send that returns nothing: it paused mem_send there,
      // and nghttp2 may have more.
      after_session_calls();
      return false;
    }
    output_.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    after_session_calls();
  }
  return false;
}

task<void> server_connection::write_loop() {
  bool gather = true;
  bool drained = false;  // the last gathering found nothing more in nghttp2
  for (;;) {
    // What rang the doorbell so far is gathered now: a ring left from before (a handler's answer that came while
    // the writer was already on its way) would only cost another turn that finds nothing.
    if (gather) {
      write_rung_ = false;
      if (!dead_ || flush_on_death_) {
        after_session_calls();
        drained = fill_output();
        flush_on_death_ = false;
      }
    }
    gather = true;
    if (output_.empty()) {
      if (dead_) break;
      if (!nghttp2_session_want_read(session_.get()) && !nghttp2_session_want_write(session_.get())) break;
      const std::optional<clock::time_point> deadline = write_deadline();
      if (!deadline) {
        co_await doorbell(*this);
        continue;
      }
      // Rare (a shutdown's round trip, whole responses stalled on the peer's windows): the event, whose wait takes a
      // deadline, rung by wake_writer while writer_timed_.
      write_wanted_.reset();
      if (write_rung_) continue;
      writer_timed_ = true;
      const std::error_code ec = co_await with_deadline(write_wanted_.wait(), *deadline);
      writer_timed_ = false;
      if (ec == tern::error::timed_out) on_write_deadline();
      else if (ec) break;
      continue;
    }
    writing_ = true;
    write_started_ = stamp();  // write_timeout from here (watch)
    if (data_gathered_) {  // DATA frames gathered since the last write go out now
      data_gathered_ = false;
      data_sent_at_ = write_started_;
    }
    const const_buffer out(output_.data(), output_.size());
    io_result<std::size_t> r;
    if (writer_stop_.stop_requested()) [[unlikely]] {
      // Ended (end_connection) or timed out while this turn was queued: a plain write watches no token (own_io),
      // so it is not started, as a bound one would have been cancelled at once.
      r.ec = make_error_code(tern::error::operation_canceled);
    } else if (secure_ != nullptr) {
      r = co_await secure_->write_all(out);
    } else if (out.size() > single_send ||
               (ctx_.zero_copy_threshold() != 0 && out.size() >= ctx_.zero_copy_threshold())) {
      r = co_await own_io<tern::detail::transfer_awaiter>(write_op_, [&] { return socket_.write_all(out); });
    } else {
      // The usual write, a few frames: one send, which nearly always takes it all, and write_all for what it left
      // (a full socket buffer). A transfer_awaiter for it cost 60 to 90 instructions more (its pieces' state and
      // loop); at or above these sizes write_all's pieces (64 KiB, or zero-copy sends) apply from the start.
      r = co_await own_io<tern::detail::write_awaiter>(send_op_, [&] { return socket_.write_some(out); });
      if (!r.ec && r.value < out.size() && writer_stop_.stop_requested()) {
        r.ec = make_error_code(tern::error::operation_canceled);  // the watch timed the send out as it completed
      } else if (!r.ec && r.value < out.size()) {
        const std::size_t sent = r.value;
        const const_buffer rest(output_.data() + sent, output_.size() - sent);
        r = co_await own_io<tern::detail::transfer_awaiter>(write_op_, [&] { return socket_.write_all(rest); });
        r.value += sent;
      }
    }
    writing_ = false;
    output_.clear();
    if (reader_stuck_) written_.set();  // not through the event's lock after every write, only for a waiting reader
    if (r.ec) {
      dead_ = true;  // a peer that takes nothing within the write timeout (or a broken connection)
      // Reset on close rather than left to the kernel to deliver what is queued: it would hold the buffers, and
      // the connection's end, for as long as the peer keeps its window shut.
      if (write_timed_out_) {
        (void)(secure_ != nullptr ? secure_->socket() : socket_).set_option(net::option::linger{true, std::chrono::seconds(0)});
      }
      break;
    }
    // Nothing to gather after the write when nghttp2 had nothing more before it and nothing has rung since (whatever
    // gives nghttp2 a frame to send rings): the writer goes straight to its wait, without a mem_send that finds
    // nothing (one per request with one stream at a time).
    gather = !drained || write_rung_ || dead_;
  }
  if (!dead_) co_await linger();
  end_connection();
  tasks_.done(ctx_);
}

// The session is over and its last frames (the final GOAWAY) are written. Closing now, with bytes of the peer's
// still unread (a WINDOW_UPDATE, a PING's answer, requests sent before it saw the GOAWAY), would make the kernel
// reset the connection, and the peer could lose the GOAWAY before reading it. So this side ends its sending first
// (FIN, or TLS's close_notify), and the reader drains until the peer closes too, for a second at most.
task<void> server_connection::linger() {
  lingering_ = true;
  if (secure_ != nullptr) (void)co_await with_timeout(secure_->shutdown_send(), std::chrono::seconds(1));
  else (void)socket_.shutdown(net::shutdown_how::send);
  (void)co_await with_timeout(reader_done_.wait(), std::chrono::seconds(1));
}

// ---- request bodies ----

namespace {
// A read that empties a mapped buffer at least this large gives it back (a streamed body whose reader fell behind);
// a smaller one is kept for the stream's next bytes.
constexpr std::size_t mapped_kept = 256 * 1024;
std::size_t round_to_pages(std::size_t n) noexcept { return (n + 4095) & ~std::size_t{4095}; }

// Under AddressSanitizer only the bytes a body buffer holds, [begin_, end_) of the buffer in use, are addressable:
// its pages are its own (mmap), which ASan does not watch, and a read past what arrived would otherwise go unseen.
// The small buffer is poisoned whole while the pages are in use, and a region is made addressable again before
// its pages are moved or given back, so that whatever the kernel maps there next starts clean.
#if defined(__SANITIZE_ADDRESS__)
#define TERN_H2_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TERN_H2_ASAN 1
#endif
#endif
#ifdef TERN_H2_ASAN
void poison(const char* p, std::size_t n) noexcept {
  if (n != 0) __asan_poison_memory_region(p, n);
}
void unpoison(const char* p, std::size_t n) noexcept {
  if (n != 0) __asan_unpoison_memory_region(p, n);
}
#else
void poison(const char*, std::size_t) noexcept {}
void unpoison(const char*, std::size_t) noexcept {}
#endif
}  // namespace

void body_buffer::append(const char* data, std::size_t n) {
  if (n == 0) return;
  if (end_ + n > capacity_) make_room(n);
  unpoison(data_ + end_, n);
  std::memcpy(data_ + end_, data, n);
  end_ += n;
}

// Room for n more bytes: the bytes already read are dropped from the front first (a streamed body), then the
// buffer grows, to pages of its own once the small one is too small, by doubling their size (only the pages
// written to take memory; mremap moves the pages, it does not copy them).
void body_buffer::make_room(std::size_t n) {
  if (begin_ != 0) {
    unpoison(data_, begin_);
    std::memmove(data_, data_ + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
    poison(data_ + end_, capacity_ - end_);
    if (end_ + n <= capacity_) return;
  }
  const std::size_t need = end_ + n;
  if (need <= small_size) {
    if (!small_) {
      small_.reset(new char[small_size]);
      poison(small_.get(), small_size);
    }
    data_ = small_.get();
    capacity_ = small_size;
    return;
  }
  const std::size_t size = round_to_pages(std::max(need, 2 * std::max(capacity_, small_size)));
  if (mapped_ != nullptr) unpoison(mapped_, mapped_size_);
  void* p = mapped_ != nullptr ? ::mremap(mapped_, mapped_size_, size, MREMAP_MAYMOVE)
                               : ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    if (mapped_ != nullptr) poison(mapped_ + end_, mapped_size_ - end_);
    throw std::bad_alloc();
  }
  unpoison(static_cast<char*>(p), size);
  if (mapped_ == nullptr && end_ != 0) std::memcpy(p, data_, end_);
  if (data_ != nullptr && data_ == small_.get()) poison(data_, end_);
  mapped_ = data_ = static_cast<char*>(p);
  mapped_size_ = capacity_ = size;
  poison(data_ + end_, capacity_ - end_);
}

std::size_t body_buffer::take(char* out, std::size_t n) noexcept {
  n = std::min(n, size());
  std::memcpy(out, data_ + begin_, n);
  poison(data_ + begin_, n);
  begin_ += n;
  if (begin_ == end_) {
    begin_ = end_ = 0;
    if (mapped_size_ >= mapped_kept) unmap();
  }
  return n;
}

void body_buffer::unmap() noexcept {
  if (mapped_ == nullptr) return;
  unpoison(mapped_, mapped_size_);
  ::munmap(mapped_, mapped_size_);
  mapped_ = nullptr;
  mapped_size_ = 0;
  data_ = small_.get();
  capacity_ = small_ ? small_size : 0;
}

// Pages of up to kept_buffer stay for the stream's next request: a body of 16 to 64 KiB on a warm stream then costs
// no mmap, mremap and munmap.
void body_buffer::clear() noexcept {
  if (data_ != nullptr) poison(data_ + begin_, end_ - begin_);
  begin_ = end_ = 0;
  if (mapped_size_ > kept_buffer) unmap();
}

void body_buffer::release() noexcept {
  clear();
  unmap();
  if (small_) unpoison(small_.get(), small_size);
  small_.reset();
  data_ = nullptr;
  capacity_ = 0;
}

// ---- header_text ----

void header_text::grow() {
  if (!first_) {
    first_ = std::make_unique_for_overwrite<char[]>(block_size);
    at_ = first_.get();
  } else {
    more_.push_back(std::make_unique_for_overwrite<char[]>(block_size));
    spilled_ = true;
    at_ = more_.back().get();
  }
  left_ = block_size;
}

std::string_view header_text::hold(nghttp2_rcbuf* b, std::string_view text) {
  held_.push_back(b);
  spilled_ = true;
  nghttp2_rcbuf_incref(b);
  return text;
}

void header_text::release_held() noexcept {
  if (!spilled_) return;
  spilled_ = false;
  if (!held_.empty()) {
    for (nghttp2_rcbuf* b : held_) nghttp2_rcbuf_decref(b);
    held_.clear();
  }
  if (!more_.empty()) more_.clear();
}

void header_text::clear() noexcept {
  release_held();
  rewind();
}

// ---- the streams' history ----

void server_connection::remember(std::int32_t id) noexcept {
  past_stream& slot = history_[history_count_ % history_size];
  if (history_count_ >= history_size) forgotten_ = slot.id;
  slot = past_stream{id, ending::open};
  ++history_count_;
  max_seen_ = id;
}

// The ring holds identifiers in increasing order from its oldest slot (remember takes only higher ones), so a
// binary search finds one: every stream's close looks itself up here, and a scan of the whole ring cost more than
// the rest of the close.
server_connection::past_stream* server_connection::recall(std::int32_t id) noexcept {
  // The newest first: with one request at a time, the stream that closes is the last one opened.
  if (history_count_ != 0) {
    past_stream& newest = history_[(history_count_ - 1) % history_size];
    if (newest.id == id) return &newest;
  }
  const std::size_t n = std::min(history_count_, history_size);
  const std::size_t oldest = history_count_ > history_size ? history_count_ % history_size : 0;
  std::size_t lo = 0, hi = n;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    past_stream& p = history_[(oldest + mid) % history_size];
    if (p.id == id) return &p;
    if (p.id < id) lo = mid + 1;
    else hi = mid;
  }
  return nullptr;
}

// A stream's first ending is the one that counts: a reset closes it with NO_ERROR in nghttp2's eyes too. A stream
// still held (s) knows where the ring put it, unless the ring has moved past it since: no search then.
void server_connection::mark(std::int32_t id, ending how, const server_stream* s) noexcept {
  past_stream* p = nullptr;
  if (s != nullptr && s->history_at_ < history_count_ && history_count_ - s->history_at_ <= history_size) {
    past_stream& at = history_[s->history_at_ % history_size];
    if (at.id == id) p = &at;
  }
  if (p == nullptr) p = recall(id);
  if (p != nullptr && p->how == ending::open) p->how = how;
}

void server_connection::frame_on_gone_stream(std::int32_t id, std::uint8_t type) {
  const past_stream* p = recall(id);
  std::uint32_t error = NGHTTP2_NO_ERROR;
  if (p == nullptr) {
    if (id <= forgotten_) return;  // too long ago to tell
    // Never opened, and closed by the opening of a later one: a HEADERS frame with an identifier lower than the
    // last is a connection error (§5.1.1), anything else on a closed stream too (§5.1).
    error = type == NGHTTP2_HEADERS ? NGHTTP2_PROTOCOL_ERROR : NGHTTP2_STREAM_CLOSED;
  } else if (p->how == ending::normally) {
    error = NGHTTP2_STREAM_CLOSED;  // frames after both ends' END_STREAM: a connection error (§5.1)
  } else if (p->how == ending::peer_reset) {
    resets_.emplace_back(id, NGHTTP2_STREAM_CLOSED);  // frames after the peer's own RST_STREAM: a stream error
    (void)charge(1);
    return;
  } else {
    return;  // reset here, or refused by nghttp2: the peer may have sent it before it knew
  }
  if (!goaway_sent_) {
    goaway_sent_ = true;
    (void)nghttp2_session_terminate_session(session_.get(), error);
  }
}

// ---- streams ----

server_stream* server_connection::open_stream(std::int32_t id) {
  stream_pool& pool = *pool_;
  server_stream* s = pool.first;
  if (s != nullptr) {
    pool.first = s->next_;
    --pool.count;
    s->conn_ = this;
    s->reset_fields();
  } else {
    std::unique_ptr<server_stream> made(new server_stream(*this));
    // Its loop, lazy: start_handler's first queueing of its handle starts it.
    made->loop_ = stream_loop(*made);
    made->loop_.handle().promise().set_stop_token(&made->token_);
    s = made.release();
  }
  s->id_ = id;
  // Its place in the history: the stream remembered last (on_begin_frame remembers each one it opens; mark checks
  // the identifier there, and none was remembered when the count is 0).
  s->history_at_ = history_count_ - 1;
  s->prev_ = nullptr;
  s->next_ = live_;
  if (live_ != nullptr) live_->prev_ = s;
  live_ = s;
  ++live_count_;
  // The stream keeps its stop source from one request to the next (a std::stop_source allocates its state, and the
  // loop's cache of them holds 16, fewer than the streams a connection keeps): a new one only after a stop, and the
  // token the stream's loop watches with it.
  if (s->stopped_) {
    s->stopped_ = false;
    s->stop_ = ctx_.take_stop_source();
    s->token_ = s->stop_.get_token();
  }
  max_stream_id_ = std::max(max_stream_id_, id);
  // Its slot in the table when that is free (nearly always), else nghttp2's user data: find_stream looks in the
  // one, then the other. Setting the user data of every stream cost 41 instructions per request.
  if (server_stream*& slot = by_id_[by_id_slot(id)]; slot == nullptr) slot = s;
  else (void)nghttp2_session_set_stream_user_data(session_.get(), id, s);
  return s;
}

void server_connection::recycle(server_stream& s, bool by_loop) noexcept {
  if (s.streaming_) unqueue(s.queued());
  else whole_out_ -= std::min(s.queued(), whole_out_);
  if (s.body_held_ != 0) {
    held_bodies_ -= s.body_held_;
    wake_accumulating();  // room for the bodies that wait for it
  }
  if (s.prev_ != nullptr) s.prev_->next_ = s.next_;
  else live_ = s.next_;
  if (s.next_ != nullptr) s.next_->prev_ = s.prev_;
  if (--live_count_ == 0) idle_since_ = stamp();
  if (header_stream_ == &s) header_stream_ = nullptr;
  if (server_stream*& slot = by_id_[by_id_slot(s.id_)]; slot == &s) slot = nullptr;
  s.release_memory();
  // Kept in the thread's pool, as many as the thread's connections may have open at once (stream_pool). Deleting a
  // stream destroys its loop, which its own loop cannot do while it runs: from there a kept one goes instead (its
  // loop waits for a request; none is kept only when no stream may be open, and s is kept then).
  stream_pool& pool = *pool_;
  if (pool.count >= pool.cap) {
    server_stream* gone = &s;
    if (by_loop) {
      gone = pool.first;
      if (gone != nullptr) {
        pool.first = gone->next_;
        --pool.count;
      }
    }
    if (gone != nullptr) {
      if (!gone->stopped_) ctx_.give_stop_source(std::move(gone->stop_));
      delete gone;
    }
    if (gone == &s) return;
  }
  s.conn_ = nullptr;  // until a connection takes it (open_stream)
  s.next_ = pool.first;
  pool.first = &s;
  ++pool.count;
}

void server_stream::release_memory() noexcept {
  text_.release_held();
  if (in_total_ != 0) in_.clear();  // a body arrived (every byte appended to in_ is counted there)
  if (out_.capacity() > kept_buffer) out_ = std::string();
  if (has_trailers_) {  // set (and cleared first) only by a response with trailers
    trailers_out_.clear();
    has_trailers_ = false;
  }
  // The response's state and the body's counts, in the lines the stream's end has just used.
  out_.clear();
  out_taken_ = 0;
  queued_end_ = 0;
  queued_base_ = out_.data();
  written_ = 0;
  length_.reset();
  out_done_ = discard_ = deferred_ = writer_waiting_ = lender_waiting_ = responded_ = streaming_ = false;
  running_ = closed_ = false;
  close_code_ = 0;
  unconsumed_ = parked_ = body_held_ = 0;
  in_total_ = 0;
  shed_ = false;
  input_.reset();
  if (output_signalled_) {
    output_.reset();
    output_signalled_ = false;
  }
}

void server_stream::reset_fields() noexcept {
  text_.rewind();  // what it held went back at the stream's end (release_memory)
  fields_.clear();
  known_.fill(0);
  if (in_trailers_) {  // only trailers set them
    trailers_.clear();
    trailer_list_ = {};
  }
  // Made again in place: an assignment from a temporary built it on the stack and copied it over with loads that
  // straddled the temporary's stores, each a failed store-to-load forward (perf annotate: a third of open_stream's
  // samples on one of them).
  std::destroy_at(&head_);
  std::construct_at(&head_);
  // request_ stays as it is: the next request's emplace replaces it (a request is trivially destructible).
  authority_ = {};
  protocol_ = {};
  content_length_text_ = {};
  header_bytes_ = pseudo_bytes_ = dropped_ = 0;
  refused_ = 0;
  in_trailers_ = has_content_length_ = websocket_ = false;
  in_end_ = expect_continue_ = false;
  accumulating_ = false;
  if (in_line_) {  // the line's links are null whenever the stream is not in it (leave_line)
    in_line_ = false;
    line_prev_ = line_next_ = nullptr;
  }
}

// The head is complete: the request as tern::http's handlers see it, and its handler started.
void server_connection::finish_head(server_stream& s) {
  http::request_head& h = s.head_;
  h.method = http::method_from(h.method_name);
  h.version = http::http2;
  h.keep_alive = true;
  // A handler written for HTTP/1.1 finds the authority where it looks for it (RFC 9113 §8.3.1).
  if (h.host.empty() && !s.authority_.empty()) {
    s.add_field({"host", s.authority_}, http::detail::known_field::host);
    h.host = s.authority_;
  }
  h.headers = http::field_list(s.fields_, s.known_);
  const std::string_view length = s.content_length_text_;
  if (!length.empty()) {
    // Up to 19 digits (no overflow) by a plain loop, as nghttp2 has checked them (RFC 9113 §8.1.1): from_chars's
    // general path cost more than the few digits of the usual length. Anything else goes to from_chars as before.
    std::uint64_t n = 0;
    bool digits = length.size() <= 19;
    for (std::size_t i = 0; digits && i < length.size(); ++i) {
      const unsigned d = static_cast<unsigned char>(length[i]) - unsigned{'0'};
      digits = d <= 9;
      n = n * 10 + d;
    }
    if (digits || std::from_chars(length.data(), length.data() + length.size(), n).ec == std::errc{}) {
      s.has_content_length_ = true;
      h.content_length = n;
    }
  }
  // RFC 8441: a WebSocket's extended CONNECT reaches its route as the GET with Upgrade: websocket that HTTP/1.1
  // would send, so that one handler (and ws::accepted) serves both versions; its 101 goes out as a 200.
  if (h.method == http::method::connect && s.protocol_ == "websocket") {
    s.websocket_ = true;
    h.method = http::method::get;
    h.method_name = "GET";
    s.add_field({"upgrade", "websocket"}, http::detail::known_field::upgrade);
    s.add_field({"connection", "upgrade"}, http::detail::known_field::connection);
    h.headers = http::field_list(s.fields_, s.known_);
    h.upgrade = true;
  }
  h.framing = s.in_end_ ? http::body_framing::none
              : s.has_content_length_ ? http::body_framing::content_length
                                      : http::body_framing::chunked;
  s.expect_continue_ = s.expect_continue_ && !s.in_end_;
  // Handlers still running count, whether or not their streams are: a peer that resets streams as fast as it
  // opens them (Rapid Reset) gets its new ones refused, never more handlers than max_concurrent_streams.
  if (handlers_ >= opts_.max_concurrent_streams) {
    (void)charge(1);
    resets_.emplace_back(s.id_, NGHTTP2_REFUSED_STREAM);
    return;
  }
  start_handler(s);
}

void server_connection::start_handler(server_stream& s) {
  s.body_start_ = start_stamp();
  s.running_ = true;
  ++handlers_;
  tasks_.add();
  // The stream's loop, waiting (or not yet started): queued, not spawned, so a request takes no spawn state, frame
  // or stop token of its own (stream_loop). Under the reader's feed, kept for the reader to run once nghttp2 has
  // returned (run_started).
  if (reader_feeding_) {
    s.started_next_ = nullptr;
    if (started_last_ != nullptr) started_last_->started_next_ = &s;
    else started_first_ = &s;
    started_last_ = &s;
    return;
  }
  ctx_.schedule_handle(s.loop_.handle());
}

// The handlers the reader's last feed started, run now, in the order their requests arrived, each up to its first
// wait (a whole answer: to its end), and then the writer, if it waits at its doorbell: what the bytes just read
// asked for is answered and on its way before the loop turns to another connection. Queued instead, behind the
// readers of every other connection ready in the same turn, the streams of all of them were open at once (at 100
// connections of 10 streams in flight, 150 on average), their lines beyond L1 by the time their handlers ran.
void server_connection::run_started() {
  while (server_stream* s = started_first_) {
    started_first_ = s->started_next_;
    if (started_first_ == nullptr) started_last_ = nullptr;
    s->loop_.handle().resume();
  }
  writer_deferred_ = false;
  if (write_rung_ && writer_parked_) std::exchange(writer_parked_, {}).resume();
}

void server_connection::stream_closed(server_stream& s, std::uint32_t code) {
  s.closed_ = true;
  s.close_code_ = code;
  // The window its unread bytes took is the connection's again (its parked bytes gave theirs back already).
  if (s.unconsumed_ != 0 || s.parked_ != 0) {
    pending_consume_ += s.unconsumed_ - s.parked_;
    parked_bytes_ -= s.parked_;
    s.unconsumed_ = s.parked_ = 0;
  }
  // nghttp2 forgets the stream as this callback returns (no_closed_streams, server.cpp), its user data with it:
  // no call to clear that (41 instructions per request).
  if (!s.running_) {
    recycle(s);
    return;
  }
  if (code != NGHTTP2_NO_ERROR || !s.out_done_) {
    // Closed under its handler (the peer's RST_STREAM, a stream error): the handler is cancelled.
    if (code != NGHTTP2_NO_ERROR && !s.shed_) (void)charge(1);  // a refusal of its own was charged when sent
    s.stopped_ = true;
    s.stop_.request_stop();
  }
  s.input_.set();
  s.signal_output();
}

// What the handler has taken from the stream's input reopens the windows by as much: the stream's, and the
// connection's for the bytes not parked (whose share of it went back when they were parked, read_whole).
void server_connection::consume(server_stream& s, std::size_t n) {
  n = std::min(n, s.unconsumed_);
  if (n == 0) return;
  const std::size_t parked = std::min(n, s.parked_);
  s.unconsumed_ -= n;
  s.parked_ -= parked;
  parked_bytes_ -= parked;
  if (s.closed_) return;  // given back with the stream's close
  if (s.in_end_) {
    // The peer has ended the stream: its window will carry nothing more, so only the connection's reopens (a
    // lookup of the stream in nghttp2's map fewer: a whole body usually arrives with its END_STREAM).
    if (n == parked) return;
    (void)nghttp2_session_consume_connection(session_.get(), n - parked);
  } else {
    if (parked != 0) (void)nghttp2_session_consume_stream(session_.get(), s.id_, parked);
    if (n != parked) (void)nghttp2_session_consume(session_.get(), s.id_, n - parked);
  }
  wake_writer();
}

bool server_connection::charge(std::size_t cost) noexcept {
  const clock::time_point now = clock::now();
  budget_ = std::min(budget_max, budget_ + std::chrono::duration<double>(now - budget_at_).count() * budget_per_second);
  budget_at_ = now;
  budget_ -= static_cast<double>(cost);
  if (budget_ >= 0) return true;
  if (!goaway_sent_) {
    goaway_sent_ = true;
    (void)nghttp2_session_terminate_session(session_.get(), NGHTTP2_ENHANCE_YOUR_CALM);
  }
  return false;
}

void server_connection::reset_stream(server_stream& s, std::uint32_t code) {
  if (s.closed_ || dead_) return;
  (void)nghttp2_submit_rst_stream(session_.get(), NGHTTP2_FLAG_NONE, s.id_, code);
  wake_writer();
}

// ---- handlers ----

// The stream's handler, request after request, from the route's match to its answer: one coroutine for the
// stream's life, made with it (open_stream) and destroyed with it (recycle, the connection's end), which between
// requests waits suspended at the end of its loop until start_handler queues its handle. A coroutine spawned per
// request (a spawn state and a frame taken and freed, the stop token copied into the state, the loop's list of
// spawned tasks, the final notification) cost 240 instructions and 8 L1 data misses more per request
// (http2/ping_json at 100 streams). The loop's stop token is the stream's (token_): each request's awaits watch its
// own request's stop source. The route's own task is the only coroutine it awaits for a whole-body request whose
// body has arrived (the usual one): the answers that need no route, the match and the body at hand are plain calls,
// and the response is moved once, out of the route's task into this frame (a chain of four coroutines and a
// response kept in the stream, moved into it twice, cost about 320 instructions more per request).
task<void> server_connection::stream_loop(server_stream& s) {
  for (;;) {
    // The connection of this request: a stream kept for reuse serves whichever connection of the thread takes it
    // next (stream_pool), so the loop refers to none of its own.
    server_connection& c = *s.conn_;
    try {
      const http::router::route* route = c.route_of(s);
      if (route != nullptr && route->streaming) {
        co_await c.serve_streaming(s, *s.request_, *route);
      } else if (route != nullptr) {
        http::request& req = *s.request_;
        std::string_view body;
        std::error_code ec;
        // A WebSocket's stream carries its frames, not a body to read before the handler.
        if (!s.websocket_ && !c.whole_at_hand(s, body, ec)) ec = co_await c.read_whole(s, body);
        if (ec) {
          if (ec.category() == http::category() && ec != http::error::partial_message) {
            c.respond_status(s, http::status_of(ec));
          }
        } else {
          req.set_body(body);
          task<http::response> handling;
          try {
            handling = route->whole(req);
          } catch (...) {
          }
          std::optional<http::response> failed;
          http::response& r = co_await route_answer{{handling}, failed};
          if (!c.ctx_.running_here()) co_await resume_on{c.ctx_};
          if (r.status == http::status::switching_protocols && r.upgrade && s.websocket_) {
            co_await c.tunnel(s, r);
          } else {
            if (r.status == http::status::switching_protocols) {
              r = http::response(http::status::internal_server_error, "a 101 is not an HTTP/2 answer\n");
            }
            c.respond(s, r);
          }
        }
      }
    } catch (...) {
      // Out of memory inside one stream: that stream is reset, the connection goes on.
    }
    s.running_ = false;
    --c.handlers_;
    if (!s.closed_ && !s.responded_ && !s.shed_) c.reset_stream(s, NGHTTP2_INTERNAL_ERROR);
    if (s.closed_) c.recycle(s, true);
    c.wake_writer();
    c.tasks_.done(c.ctx_);
    co_await std::suspend_always{};  // until start_handler queues the stream's next request
  }
}

// The route of the stream's request (set on s.request_), or nullptr when the stream has been answered without one:
// a head refused for its limits, a body over max_body, no route (404, 405).
const http::router::route* server_connection::route_of(server_stream& s) {
  if (s.refused_ != 0) {
    respond_status(s, s.refused_);
    return nullptr;
  }
  if (s.has_content_length_ && s.head_.content_length > hopts_.limits.max_body) {
    respond_status(s, http::status::content_too_large);
    return nullptr;
  }
  // The request lives in the stream, not in the handler's frame.
  http::request& req = s.request_.emplace(s.head_, remote_);
  int status = 0;
  std::string allow;
  const http::router::route* route = server_.routes().match(req, status, allow);
  if (route == nullptr) respond_status(s, status, allow);
  return route;
}

// An HTTP/2 stream as an upgraded connection's transport (RFC 8441): reads take the stream's DATA, writes queue it
// under flow control, the end of sending is END_STREAM, and closing resets the stream, never the connection.
class stream_tunnel final : public http::transport {
 public:
  stream_tunnel(server_connection& c, server_stream& s) noexcept : c_(c), s_(s) {}
  task<std::error_code> handshake() override { co_return std::error_code{}; }
  task<io_result<std::size_t>> read_some(mutable_buffer b) override { return c_.read_body(s_, b); }
  task<io_result<std::size_t>> write_all(const_buffer b) override {
    std::error_code ec = co_await c_.write_body(s_, b);
    co_return io_result<std::size_t>{ec, ec ? 0 : b.size()};
  }
  task<std::error_code> shutdown_send() override { return c_.end_body(s_, nullptr); }
  net::tcp_socket& socket() noexcept override { return c_.secure_ != nullptr ? c_.secure_->socket() : c_.socket_; }
  void close() noexcept override { c_.reset_stream(s_, NGHTTP2_CANCEL); }

 private:
  server_connection& c_;
  server_stream& s_;
};

// The 101 of a WebSocket handler, over HTTP/2: a 200 with its fields (the HTTP/1.1 ones are not sent), then the
// stream to the upgrade function, for as long as it runs. When it returns, the stream ends (END_STREAM after what
// it wrote: the close frame of its close handshake); when it throws, the stream is reset.
task<void> server_connection::tunnel(server_stream& s, http::response& r) {
  if (co_await start_response(s, http::status::ok, r.headers, std::nullopt)) co_return;
  auto upgrade = std::move(r.upgrade);
  bool failed = false;
  try {
    co_await upgrade(http::upgraded_stream(std::make_unique<stream_tunnel>(*this, s)));
  } catch (...) {
    failed = true;
  }
  co_await resume_on{ctx_};  // an upgrade function may end on another worker; the session is this loop's
  if (s.closed_ || s.out_done_) co_return;
  if (failed) reset_stream(s, NGHTTP2_INTERNAL_ERROR);
  else (void)co_await end_body(s, nullptr);
}

task<void> server_connection::serve_streaming(server_stream& s, http::request& req,
                                              const http::router::route& route) {
  http::body_reader reader(s);
  http::response_stream out(s);
  try {
    co_await route.streaming(req, reader, out);
  } catch (...) {
  }
  co_await resume_on{ctx_};
  if (s.closed_) co_return;
  if (!out.started()) {
    respond_status(s, http::status::internal_server_error);
  } else if (!out.finished()) {
    reset_stream(s, NGHTTP2_INTERNAL_ERROR);  // the peer sees an incomplete response, never a wrong one
  }
}

// read_whole's first pass, for a body that has all arrived before its handler starts (END_STREAM with the head, or
// in the same read): the same line, room and limits, without a coroutine. False when the body is still arriving.
bool server_connection::whole_at_hand(server_stream& s, std::string_view& body, std::error_code& ec) {
  if (!s.in_end_) return false;
  const std::size_t budget = std::max<std::size_t>(hopts_.limits.max_body, opts_.connection_window);
  if (line_first_ == nullptr && s.unconsumed_ <= (budget > held_bodies_ ? budget - held_bodies_ : 0)) {
    // No body waits and there is room for this one: what the line would do (it would be first and last, and take
    // it all within the room), without joining it.
    if (const std::size_t n = s.unconsumed_; n != 0) {  // none for a request without a body (nothing written)
      consume(s, n);
      s.body_held_ += n;
      held_bodies_ += n;
    }
  } else {
    join_line(s);
    take_room(s);
    leave_line(s);
  }
  if (s.shed_) ec = make_error_code(tern::error::operation_canceled);  // refused, whole or not
  else if (s.in_total_ > hopts_.limits.max_body) ec = make_error_code(http::error::body_too_large);
  else if (s.in_total_ != 0) body = s.in_.view();  // else none came, and the buffer's lines stay untouched
  return true;
}

// A whole-body route's body: consumed as it arrives (the route wants all of it, up to max_body), and handed over in
// place, as the stream's input holds it. The bodies a connection holds this way are bounded together, by the larger
// of max_body and the connection window, so a peer cannot make the server hold max_body for each of its streams
// (CVE-2019-9517's internal buffering). The room is handed out oldest first: the streams whose bodies are still
// arriving wait in a line, the first may take all the room there is, and a later one only what is left beyond
// what the first still needs, so the first can always complete and release its room, and no stream starves
// (room spread thinly over many bodies would let none complete). The bytes a stream has no room for yet are given
// back to the connection's window at once (not to its own, which stays closed until it gets room), so that they
// do not hold the window the first stream's bytes need; each holds at most its own window that way, and all of
// them together at most parked_cap(), beyond which the youngest are refused (park).
task<std::error_code> server_connection::read_whole(server_stream& s, std::string_view& body) {
  struct in_line {
    server_connection& c;
    server_stream& s;
    ~in_line() { c.leave_line(s); }
  } line{*this, s};
  join_line(s);
  for (;;) {
    take_room(s);
    if (s.shed_) co_return make_error_code(tern::error::operation_canceled);  // refused, whole or not
    if (s.in_total_ > hopts_.limits.max_body) co_return make_error_code(http::error::body_too_large);
    if (s.in_end_) break;
    if (s.closed_ || dead_) co_return make_error_code(tern::error::operation_canceled);
    send_continue(s);
    s.accumulating_ = true;
    ++accumulating_;
    std::error_code ec = co_await with_deadline(s.input_.wait(), body_deadline(s));
    s.accumulating_ = false;
    --accumulating_;
    if (ec) co_return ec == tern::error::timed_out ? make_error_code(http::error::body_timeout) : ec;
  }
  body = s.in_.view();
  co_return std::error_code{};
}

// What the room allows of the stream's bytes is held (its window reopens by as much); the rest is parked.
void server_connection::take_room(server_stream& s) {
  const std::size_t budget = std::max<std::size_t>(hopts_.limits.max_body, opts_.connection_window);
  std::size_t room = budget > held_bodies_ ? budget - held_bodies_ : 0;
  if (&s != line_first_) room -= std::min(room, reserved_for_first());
  // A body that has all arrived is in memory already: taking it completes the stream, which releases it once
  // its answer has gone. Until then what it takes beyond the room counts against the cap on parked bytes
  // (held_over): past the cap the youngest are refused, this one too, the first of the line included, or a peer
  // that leaves the answers no window would have every body held, one after the other (each the first).
  const std::size_t n = s.in_end_ ? s.unconsumed_ : std::min(s.unconsumed_, room);
  consume(s, n);
  s.body_held_ += n;
  held_bodies_ += n;
  if (n > room) {
    while (parked_bytes_ + held_over() > parked_cap()) {
      server_stream* youngest = line_last_;
      shed(*youngest);
      if (youngest == &s) return;
    }
  }
  const std::size_t unparked = s.unconsumed_ - s.parked_;
  if (unparked == 0 || s.closed_ || !park(s, unparked)) return;
  s.parked_ += unparked;
  parked_bytes_ += unparked;
  (void)nghttp2_session_consume_connection(session_.get(), unparked);
  wake_writer();
}

// Parked bytes are memory the connection's window no longer bounds, so they are capped (parked_cap), together
// with what whole bodies hold beyond the shared bound (held_over): bytes that would pass the cap make room by
// refusing the youngest streams of the line (REFUSED_STREAM: the peer knows they were not processed and may send
// them again), the stream itself if it is the youngest, never the first, which always goes on. False when s
// itself was refused. The first's bytes are parked whatever the cap (at most its window: they wait only for room
// that bodies already complete still hold).
bool server_connection::park(server_stream& s, std::size_t n) {
  while (parked_bytes_ + held_over() + n > parked_cap()) {
    server_stream* youngest = line_last_;
    if (youngest == nullptr || youngest == line_first_) return true;
    shed(*youngest);
    if (youngest == &s) return false;
  }
  return true;
}

// A stream refused for the cap: it leaves the line, its bytes go (their window back to the connection), and its
// handler ends without an answer; what still arrives for it is dropped until the peer sees the reset.
void server_connection::shed(server_stream& s) {
  s.shed_ = true;
  leave_line(s);
  const std::size_t unparked = s.unconsumed_ - s.parked_;
  if (unparked != 0) (void)nghttp2_session_consume_connection(session_.get(), unparked);
  parked_bytes_ -= s.parked_;
  s.unconsumed_ = s.parked_ = 0;
  if (s.body_held_ != 0) {
    held_bodies_ -= s.body_held_;
    s.body_held_ = 0;
    wake_accumulating();
  }
  s.in_.release();
  if (!s.closed_ && !dead_) {
    (void)nghttp2_submit_rst_stream(session_.get(), NGHTTP2_FLAG_NONE, s.id_, NGHTTP2_REFUSED_STREAM);
  }
  s.input_.set();
  wake_writer();
}

// The bytes whole bodies hold beyond the shared bound: taken because they had all arrived (take_room), and held
// until their answers have gone.
std::size_t server_connection::held_over() const noexcept {
  const std::size_t budget = std::max<std::size_t>(hopts_.limits.max_body, opts_.connection_window);
  return held_bodies_ > budget ? held_bodies_ - budget : 0;
}

// What the first body of the line may still need: its Content-Length, or else max_body, less what it holds.
std::size_t server_connection::reserved_for_first() const noexcept {
  const server_stream* f = line_first_;
  if (f == nullptr) return 0;
  const std::uint64_t max_body = hopts_.limits.max_body;
  const std::uint64_t need = f->has_content_length_ ? std::min(f->head_.content_length, max_body) : max_body;
  return need > f->body_held_ ? static_cast<std::size_t>(need - f->body_held_) : 0;
}

void server_connection::join_line(server_stream& s) noexcept {
  s.in_line_ = true;
  s.line_prev_ = line_last_;
  s.line_next_ = nullptr;
  if (line_last_ != nullptr) line_last_->line_next_ = &s;
  else line_first_ = &s;
  line_last_ = &s;
}

// Whatever ended the wait (the whole body, an error, the stream's reset or close): the stream leaves the line, and
// if it was the first, the next is first now and the room reserved for it changes for all.
void server_connection::leave_line(server_stream& s) noexcept {
  if (!s.in_line_) return;
  s.in_line_ = false;
  const bool was_first = &s == line_first_;
  if (s.line_prev_ != nullptr) s.line_prev_->line_next_ = s.line_next_;
  else line_first_ = s.line_next_;
  if (s.line_next_ != nullptr) s.line_next_->line_prev_ = s.line_prev_;
  else line_last_ = s.line_prev_;
  s.line_prev_ = s.line_next_ = nullptr;
  if (was_first) wake_accumulating();
}

// Called as each whole body leaves the line and as each one's stream is recycled: with no body waiting (the usual
// case) it does not walk every live stream, which cost a pass over 100 streams per request at 100 in flight.
void server_connection::wake_accumulating() noexcept {
  if (accumulating_ == 0) return;
  for (server_stream* x = live_; x != nullptr; x = x->next_) {
    if (x->accumulating_) x->input_.set();
  }
}

clock::time_point server_connection::body_deadline(const server_stream& s) const noexcept {
  const auto rate = std::max<std::size_t>(hopts_.min_body_rate, 1);
  return s.body_start_ + hopts_.body_timeout + std::chrono::microseconds(s.in_total_ * 1'000'000 / rate);
}

// Expect: 100-continue: the interim answer goes out when the handler first waits for the body.
void server_connection::send_continue(server_stream& s) {
  if (!s.expect_continue_ || s.responded_) return;
  s.expect_continue_ = false;
  const nghttp2_nv status = make_static_nv(":status", "100", 3);
  (void)nghttp2_submit_headers(session_.get(), NGHTTP2_FLAG_NONE, s.id_, nullptr, &status, 1, nullptr);
  wake_writer();
}

task<io_result<std::size_t>> server_connection::read_body(server_stream& s, mutable_buffer b) {
  // The reader and the stream are the connection's loop's (as over HTTP/1.1): refused elsewhere, nothing changed.
  if (!ctx_.running_here()) [[unlikely]] co_return sized{make_error_code(tern::error::wrong_loop), 0};
  if (b.size() == 0) co_return sized{std::error_code{}, 0};
  for (;;) {
    if (s.buffered() != 0) {
      const std::size_t n = s.in_.take(static_cast<char*>(b.data()), b.size());
      consume(s, n);
      co_return sized{std::error_code{}, n};
    }
    // A WebSocket's stream keeps the protocol's own time and size limits, not a body's.
    if (s.in_total_ > hopts_.limits.max_body && !s.websocket_) {
      co_return sized{make_error_code(http::error::body_too_large), 0};
    }
    if (s.in_end_) co_return sized{make_error_code(tern::error::eof), 0};
    if (s.closed_ || dead_) co_return sized{make_error_code(tern::error::operation_canceled), 0};
    send_continue(s);
    std::error_code ec;
    if (s.websocket_) ec = co_await s.input_.wait();
    else ec = co_await with_deadline(s.input_.wait(), body_deadline(s));
    if (ec) co_return sized{ec == tern::error::timed_out ? make_error_code(http::error::body_timeout) : ec, 0};
  }
}

// The response head, as nghttp2's fields, submitted. nghttp2 copies each name and value not marked NO_COPY into one
// block with the fields and lowercases the names it copies (as HTTP/2 requires), so the handler's names go as they
// are: a copy lowercased here first cost a copy and a pass more per field. The values that outlive the head's
// sending are referred to, not copied: the status's digits (a table), the server's name (its options) and the Date
// (the loop thread's cache of it, rewritten in place when the second changes: a head sent a second late carries
// the later date, the moment it is sent).
bool server_connection::submit_head(server_stream& s, int status, const http::fields& f,
                                    std::optional<std::uint64_t> length, bool with_body) {
  // One pass over the handler's fields: whether they set Server or Date.
  bool has_server = false, has_date = false;
  for (http::field x : f) {
    if (x.name.size() == 6) has_server = has_server || http::iequals(x.name, "server");
    else if (x.name.size() == 4) has_date = has_date || http::iequals(x.name, "date");
  }
  // The fields in this frame when they fit (nearly every response), without a vector's checks per field.
  nghttp2_nv fixed[12];
  nghttp2_nv* nv = fixed;
  if (f.size() + 4 > std::size(fixed)) {
    nva_.resize(f.size() + 4);
    nv = nva_.data();
  }
  std::size_t n = 0;
  constexpr std::uint8_t kept = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
  // The length as text, in this frame: nghttp2 copies it.
  char length_text[20];
  if (status >= 100 && status <= 999) {
    set_nv(nv[n++], ":status", 7, status_digits.data() + 3 * (status - 100), 3, kept);
  } else {
    // Not three digits (a handler's mistake): sent as given, copied.
    const std::string_view code = decimal(length_text, static_cast<std::uint64_t>(status));
    set_static_nv(nv[n++], ":status", code.data(), code.size());
  }
  if (!hopts_.server_name.empty() && !has_server) {
    set_nv(nv[n++], "server", 6, hopts_.server_name.data(), hopts_.server_name.size(), kept);
  }
  if (hopts_.date && !has_date) {
    const std::string_view now = http::date_now();
    set_nv(nv[n++], "date", 4, now.data(), now.size(), kept);
  }
  if (length && !bodiless_status(status)) {
    const std::string_view text = decimal(length_text, *length);
    set_static_nv(nv[n++], "content-length", text.data(), text.size());
  }
  for (http::field x : f) {
    if (dropped_in_h2(x.name)) continue;
    set_nv(nv[n++], x.name.data(), x.name.size(), x.value.data(), x.value.size());
  }
  const ng_data_provider body = data_provider(&s, &server_connection::read_out);
  const int rv = submit_response(session_.get(), s.id_, nv, n, with_body ? &body : nullptr);
  wake_writer();
  return rv == 0;
}

void server_connection::respond(server_stream& s, http::response& r) {
  if (s.closed_ || dead_ || s.responded_) return;
  s.responded_ = true;
  const bool bodiless = bodiless_status(r.status);
  const bool head_only = s.head_.method == http::method::head;
  s.out_ = std::move(r.body);
  s.out_taken_ = 0;
  s.queued_base_ = s.out_.data();
  s.queued_end_ = s.out_.size();
  s.out_done_ = true;
  const bool with_body = !bodiless && !head_only && !s.out_.empty();
  if (with_body) whole_out_ += s.out_.size();
  if (!submit_head(s, r.status, r.headers, s.out_.size(), with_body)) reset_stream(s, NGHTTP2_INTERNAL_ERROR);
}

void server_connection::respond_status(server_stream& s, int status, std::string_view allow) {
  http::response r(status, std::string(http::reason_phrase(status)) + "\n");
  if (!allow.empty()) r.headers.set("Allow", allow);
  respond(s, r);
}

inline void server_connection::took(server_stream& s, std::size_t n) noexcept {
  s.out_taken_ += n;
  if (!s.streaming_) whole_out_ -= std::min(n, whole_out_);
  if (s.queued() == 0) {
    s.out_.clear();
    s.out_taken_ = 0;
    s.queued_end_ = 0;
    if (s.lender_waiting_) [[unlikely]] {  // write_last's bytes all taken
      s.lender_waiting_ = false;
      s.signal_output();
    }
  }
  if (s.streaming_) unqueue(n);
  if (s.writer_waiting_ && s.queued() < opts_.output_per_stream && queued_out_ < queued_cap()) {
    s.writer_waiting_ = false;
    s.signal_output();
  }
}

// nghttp2's data callback (inside mem_send): copies what the handler has queued, as much as the frame and the
// windows allow; defers the stream while nothing is queued; ends it, or sends its trailers, after the last byte.
// A piece of no_copy_min bytes or more is not copied here but by write_data, straight from the stream's buffer
// into the connection's output (NGHTTP2_DATA_FLAG_NO_COPY), which nghttp2 calls next within the same mem_send:
// copied here it went from the handler's write to the stream, from the stream into nghttp2's frame buffer, and
// from there into the output, three copies of every body byte where two do (a 16 KiB response took 1.39 times
// the floor's instructions, memcpy's share 1.5 times the floor's). A short piece is copied as before: the
// callback costs more than the copy.
ng_ssize server_connection::read_out(nghttp2_session* session, std::int32_t id, std::uint8_t* buf, std::size_t length,
                                     std::uint32_t* flags, nghttp2_data_source* source, void*) {
  constexpr std::size_t no_copy_min = 1024;
  auto& s = *static_cast<server_stream*>(source->ptr);
  server_connection& c = *s.conn_;
  const std::size_t n = std::min(length, s.queued());
  const bool last = s.out_done_ && s.queued() == n;
  if (n >= no_copy_min) {
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;  // the bytes stay queued until write_data takes them
  } else {
    std::memcpy(buf, s.queued_data(), n);
    c.took(s, n);
  }
  if (last) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (s.has_trailers_) {
      c.nva_.clear();
      for (http::field x : s.trailers_out_) {
        c.nva_.push_back(make_nv(x.name.data(), x.name.size(), x.value.data(), x.value.size()));
      }
      if (nghttp2_submit_trailer(session, id, c.nva_.data(), c.nva_.size()) == 0) {
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      }
    }
    return static_cast<ng_ssize>(n);
  }
  if (n == 0) {
    s.deferred_ = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  return static_cast<ng_ssize>(n);
}

// nghttp2's send-data callback, inside mem_send right after read_out set NGHTTP2_DATA_FLAG_NO_COPY: the frame as
// nghttp2 would have written it (header, padding length, the bytes, padding; tern's server asks for no padding)
// appended to output_. It calls nothing of nghttp2's. mem_send would go on to the next frame without returning,
// and a run of such frames would grow output_ past a write: once output_ has no room for another (PAUSE) it stops
// there, and fill_output goes on, as after any frame, while output_ has room.
int server_connection::write_data(const nghttp2_frame& frame, const std::uint8_t* framehd, std::size_t length,
                                  server_stream& s) {
  const std::size_t pad = frame.data.padlen;
  output_.append(reinterpret_cast<const char*>(framehd), 9);
  if (pad > 0) output_.push_back(static_cast<char>(pad - 1));
  output_.append(s.queued_data(), length);
  if (pad > 1) output_.append(pad - 1, '\0');
  took(s, length);
  return output_has_room() ? 0 : NGHTTP2_ERR_PAUSE;
}

// The streamed bytes of every stream together wait for the peer within a bound (4 writes' worth): a peer that
// opens many streams and no windows makes their handlers wait, not the server's memory grow (CVE-2026-49975). When
// they fall back under it, the handlers waiting for it go on.
void server_connection::unqueue(std::size_t n) noexcept {
  const bool was_full = queued_out_ >= queued_cap();
  queued_out_ -= std::min(n, queued_out_);
  if (!was_full || queued_out_ >= queued_cap()) return;
  for (server_stream* x = live_; x != nullptr; x = x->next_) {
    if (x->writer_waiting_ && x->queued() < opts_.output_per_stream) {
      x->writer_waiting_ = false;
      x->signal_output();
    }
  }
}

void server_connection::resume(server_stream& s) {
  if (!s.deferred_) return;
  s.deferred_ = false;
  (void)nghttp2_session_resume_data(session_.get(), s.id_);
  wake_writer();
}

task<std::error_code> server_connection::start_response(server_stream& s, int status, const http::fields& f,
                                                        std::optional<std::uint64_t> length) {
  if (s.closed_ || dead_) co_return make_error_code(tern::error::operation_canceled);
  s.responded_ = true;
  s.streaming_ = true;
  s.discard_ = s.head_.method == http::method::head || bodiless_status(status);
  s.length_ = length;
  if (!submit_head(s, status, f, length, !s.discard_)) co_return make_error_code(tern::error::operation_canceled);
  co_return std::error_code{};
}

task<std::error_code> server_connection::write_body(server_stream& s, const_buffer b) {
  if (!ctx_.running_here()) [[unlikely]] co_return make_error_code(tern::error::wrong_loop);
  s.written_ += b.size();
  if (s.discard_ || b.size() == 0) co_return std::error_code{};
  const char* data = static_cast<const char*>(b.data());
  std::size_t left = b.size();
  // A write larger than the stream's room goes in pieces, each waiting for room: the stream holds at most
  // output_per_stream bytes whatever the size of the handler's writes (the caller's buffer lives until the write
  // returns, so nothing more needs copying ahead).
  while (left != 0) {
    if (std::error_code ec = co_await wait_output(s, output_wait::room)) co_return ec;
    // What nghttp2 has taken goes first, once it is at least what is left (each byte moves at most once).
    if (s.out_taken_ != 0 && s.out_taken_ >= s.queued()) {
      s.out_.erase(0, s.out_taken_);
      s.out_taken_ = 0;
    }
    const std::size_t piece = std::min(left, opts_.output_per_stream - s.queued());
    s.out_.append(data, piece);
    s.queued_base_ = s.out_.data();
    s.queued_end_ = s.out_.size();
    queued_out_ += piece;
    data += piece;
    left -= piece;
    resume(s);
    wake_writer();
  }
  co_return std::error_code{};
}

// A handler's wait on its stream's output: for room (output_wait::room; a handler faster than the peer's windows
// waits here before each piece it queues), or until the bytes write_last lent are all taken (output_wait::taken).
// Up to the write timeout at a time, after which the stream is given up (a peer that opens no window keeps nothing
// of the server's for longer). Empty when the stream may take more bytes, or when the lent ones are all taken
// (those are in the output: their stream may have closed since, with its last frame).
task<std::error_code> server_connection::wait_output(server_stream& s, output_wait what) {
  const bool room = what == output_wait::room;
  for (;;) {
    const bool waits = room ? s.queued() >= opts_.output_per_stream || queued_out_ >= queued_cap() : s.queued() != 0;
    const bool gone = s.closed_ || dead_;
    if (!waits && (!gone || !room)) co_return std::error_code{};
    if (gone) co_return make_error_code(tern::error::operation_canceled);
    (room ? s.writer_waiting_ : s.lender_waiting_) = true;
    if (std::error_code ec = co_await with_timeout(s.output_.wait(), hopts_.write_timeout)) {
      if (ec == tern::error::timed_out) output_timed_out(s);
      co_return ec;
    }
  }
}

// A stream's output waited write_timeout for room or for the peer: the stream is reset. With no DATA at all for
// that long (the peer opens no window for anything the server has for it) the connection goes too, as one whose
// socket stops taking bytes goes after the same time; a peer that holds one stream while others flow loses that
// stream only.
void server_connection::output_timed_out(server_stream& s) {
  reset_stream(s, NGHTTP2_CANCEL);
  if (!dead_ && clock::now() - data_sent_at_ >= hopts_.write_timeout && !goaway_sent_) {
    goaway_sent_ = true;
    (void)nghttp2_session_terminate_session(session_.get(), NGHTTP2_NO_ERROR);
    wake_writer();
  }
}

// The body's last bytes and its end, with END_STREAM on their last DATA frame. The bytes are lent, not copied: the
// DATA frames take them from the handler's buffer (write_data) and the handler waits until the last one has, as
// long as a write waits for room. Copied first, a body already in memory went from the handler's buffer into the
// stream's and from there into the output, and the stream's buffers of every response in flight (ten of 16 KiB:
// 160 KiB) passed through L1 on their way. Bytes already queued go first, so those are sent as write would send
// them, and so are more than output_per_stream bytes (a lent piece counts against the streams' common bound as a
// queued one does) and a discarded body. If the wait ends early (the stream reset, the connection ending, the
// write timeout), what is left is copied into the stream before the handler goes on: its buffer is not read after.
task<std::error_code> server_connection::write_last(server_stream& s, const_buffer b) {
  if (s.discard_ || s.queued() != 0 || b.size() == 0 || b.size() > opts_.output_per_stream) {
    if (std::error_code ec = co_await write_body(s, b)) co_return ec;
    co_return co_await end_body(s, nullptr);
  }
  // Nothing is queued (above): only the streams' common bound or the stream's end can hold it back, and the wait's
  // frame is made only then (the wait for the lent bytes below makes one for every response already).
  if (queued_out_ >= queued_cap() || s.closed_ || dead_) {
    if (std::error_code ec = co_await wait_output(s, output_wait::room)) co_return ec;
  }
  s.written_ += b.size();
  // Nothing is queued (above), so out_ is empty and out_taken_ 0 (took() clears them when the last byte goes).
  s.queued_base_ = static_cast<const char*>(b.data());
  s.queued_end_ = b.size();
  queued_out_ += b.size();
  s.out_done_ = true;
  resume(s);
  wake_writer();
  const std::error_code ec = co_await wait_output(s, output_wait::taken);
  if (s.queued() != 0) {  // still lent
    s.lender_waiting_ = false;
    s.out_.assign(s.queued_data(), s.queued());
    s.out_taken_ = 0;
    s.queued_base_ = s.out_.data();
    s.queued_end_ = s.out_.size();
  }
  co_return ec;
}

task<std::error_code> server_connection::end_body(server_stream& s, const http::fields* trailers) {
  if (!ctx_.running_here()) [[unlikely]] co_return make_error_code(tern::error::wrong_loop);
  if (s.discard_) {
    s.out_done_ = true;
    co_return std::error_code{};
  }
  if (s.closed_ || dead_) co_return make_error_code(tern::error::operation_canceled);
  if (trailers != nullptr && !trailers->empty()) {
    // Lowercase names, as HTTP/2 requires; nghttp2 copies them when the trailers are submitted.
    s.trailers_out_.clear();
    std::string lower;
    for (http::field x : *trailers) {
      if (dropped_in_h2(x.name)) continue;
      lower.assign(x.name);
      for (char& c : lower) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + ('a' - 'A'));
      }
      s.trailers_out_.add(lower, x.value);
    }
    s.has_trailers_ = !s.trailers_out_.empty();
  }
  s.out_done_ = true;
  resume(s);
  wake_writer();
  co_return std::error_code{};
}

// ---- server_stream: the exchange a streaming handler works through ----

task<io_result<std::size_t>> server_stream::read_body_some(mutable_buffer b) { return conn_->read_body(*this, b); }

std::optional<std::uint64_t> server_stream::body_length() const noexcept {
  if (has_content_length_) return head_.content_length;
  if (head_.framing == http::body_framing::none) return 0;
  return std::nullopt;
}

namespace {
task<std::error_code> refused(std::error_code ec = std::make_error_code(std::errc::invalid_argument)) { co_return ec; }
}  // namespace

task<std::error_code> server_stream::send_head(http::response_stream& s, int status, const http::fields& f,
                                               std::optional<std::uint64_t> length) {
  // Refused from another loop before anything is marked, so that the handler can switch back and start.
  if (!conn_->ctx_.running_here()) [[unlikely]] return refused(make_error_code(tern::error::wrong_loop));
  if (s.started()) return refused();
  mark_started(s);
  return conn_->start_response(*this, status, f, length);
}

task<std::error_code> server_stream::send_body(http::response_stream& s, const_buffer b) {
  if (!s.started() || s.finished() || (length_ && written_ + b.size() > *length_)) return refused();
  return conn_->write_body(*this, b);
}

task<std::error_code> server_stream::send_last(http::response_stream& s, const_buffer b) {
  if (!conn_->ctx_.running_here()) [[unlikely]] return refused(make_error_code(tern::error::wrong_loop));
  if (!s.started() || s.finished() || (length_ && written_ + b.size() != *length_)) return refused();
  mark_finished(s);
  return conn_->write_last(*this, b);
}

task<std::error_code> server_stream::send_end(http::response_stream& s, const http::fields* trailers) {
  if (!conn_->ctx_.running_here()) [[unlikely]] return refused(make_error_code(tern::error::wrong_loop));
  if (!s.started() || s.finished() || (length_ && written_ != *length_)) return refused();
  mark_finished(s);
  return conn_->end_body(*this, trailers);
}

}  // namespace tern::http2::detail
