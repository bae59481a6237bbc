// The HTTP/2 client session (see tern/http2/client.hpp): nghttp2's client session driven through its memory
// interface by a reader and a writer task of the client's loop, as the server connection drives its session
// (server_connection.cpp), and one request state per stream.
//
// Lifetimes: the connection's state is shared by the session handle the http::client keeps, its two tasks and
// every request's client_stream. Destroying the handle ends the connection (its tasks are cancelled and the
// requests still open fail); the state goes when the last of them lets go. A request's state lives until nghttp2
// has closed its stream and its client_stream is gone, so that nghttp2 never calls back into freed memory; a
// client_stream dropped before its response ended resets the stream (RST_STREAM CANCEL).
#include "tern/http2/client.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <new>
#include <vector>

#include "memory.hpp"
#include "nghttp2_api.hpp"
#include "tern/cancel.hpp"
#include "tern/error.hpp"
#include "tern/http/error.hpp"
#include "tern/spawn.hpp"
#include "tern/sync/event.hpp"

namespace tern::http2 {

namespace {

using namespace detail;
using sized = io_result<std::size_t>;

constexpr std::size_t input_buffer_size = 32 * 1024;
constexpr std::size_t kept_buffer = 64 * 1024;

std::string_view view(nghttp2_rcbuf* b) noexcept {
  const nghttp2_vec v = nghttp2_rcbuf_get_buf(b);
  return {reinterpret_cast<const char*>(v.base), v.len};
}

bool dropped_in_h2(std::string_view name) noexcept {
  return http::iequals(name, "connection") || http::iequals(name, "keep-alive") ||
         http::iequals(name, "proxy-connection") || http::iequals(name, "transfer-encoding") ||
         http::iequals(name, "upgrade") || http::iequals(name, "host") || http::iequals(name, "content-length") ||
         http::iequals(name, "te");
}

bool sends_body(http::method m) noexcept {
  return m == http::method::post || m == http::method::put || m == http::method::patch;
}

class connection;

// One request and its response.
struct request_state {
  connection* conn = nullptr;
  std::int32_t id = 0;
  http::method method = http::method::get;
  // The response: its head as views into nghttp2's header buffers (held), its body as it arrives.
  std::vector<nghttp2_rcbuf*> held;
  std::vector<http::field> fields;
  http::response_head head;
  std::size_t header_bytes = 0;
  bool have_head = false;  // the final (non-1xx) head is complete
  std::string in;
  std::size_t in_taken = 0;
  std::size_t unconsumed = 0;
  std::uint64_t in_total = 0;
  bool in_end = false;
  sync::auto_reset_event input;
  // The request body: queued bytes from out_taken on.
  std::string out;
  std::size_t out_taken = 0;
  bool out_done = true;
  bool deferred = false;
  bool writer_waiting = false;
  std::optional<std::uint64_t> length;
  std::uint64_t written = 0;
  sync::auto_reset_event output;
  // Its end.
  bool closed = false;      // nghttp2 has closed the stream
  bool detached = false;    // its client_stream is gone
  std::error_code failure;  // why it ended without a whole response

  std::size_t queued() const noexcept { return out.size() - out_taken; }
  std::size_t buffered() const noexcept { return in.size() - in_taken; }
  ~request_state() {
    for (nghttp2_rcbuf* b : held) nghttp2_rcbuf_decref(b);
  }
};

class connection : public std::enable_shared_from_this<connection> {
 public:
  connection(http::client_handover h, const client_options& o)
      : ctx_(*io_context::current()),
        socket_(std::move(h.socket)),
        secure_(std::move(h.secure)),
        authority_(std::move(h.authority)),
        user_agent_(std::move(h.user_agent)),
        limits_(h.limits),
        response_timeout_(h.response_timeout),
        read_timeout_(h.read_timeout),
        write_timeout_(h.write_timeout),
        opts_(o),
        input_(std::make_unique_for_overwrite<char[]>(input_buffer_size)) {
    output_.reserve(opts_.write_size + 32 * 1024);
  }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection() {
    requests_.clear();  // their header buffers belong to the session's memory
    session_.reset();
  }

  void start();
  void close() noexcept;
  bool usable() const noexcept { return !dead_ && !goaway_; }
  task<io_result<std::unique_ptr<http::client_stream>>> open(http::method m, std::string_view target,
                                                             const http::fields& headers,
                                                             std::optional<std::uint64_t> body_length);

  // For the streams.
  task<std::error_code> write(request_state& r, const_buffer b);
  task<std::error_code> finish(request_state& r);
  task<io_result<std::size_t>> read_some(request_state& r, mutable_buffer b);
  void release(request_state& r) noexcept;

 private:
  friend struct client_callbacks;
  static task<void> read_loop(std::shared_ptr<connection> self);
  static task<void> write_loop(std::shared_ptr<connection> self);
  void fill_output();
  void after_session_calls();
  void fail_all(std::error_code ec) noexcept;
  void wake_writer() noexcept { write_wanted_.set(); }
  void forget(request_state& r) noexcept;
  void end_request(request_state& r, std::uint32_t code) noexcept;
  static ng_ssize read_out(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                           std::uint32_t* flags, nghttp2_data_source* source, void*);

  io_context& ctx_;
  net::tcp_socket socket_;
  std::unique_ptr<http::transport> secure_;
  std::string authority_;
  std::string user_agent_;
  http::parser_limits limits_;
  std::chrono::milliseconds response_timeout_, read_timeout_, write_timeout_;
  const client_options opts_;
  session_ptr session_;
  std::unique_ptr<char[]> input_;
  std::string output_;
  sync::auto_reset_event write_wanted_;
  std::stop_source reader_stop_, writer_stop_;
  std::vector<std::unique_ptr<request_state>> requests_;  // every request nghttp2 or its caller still uses
  std::vector<std::pair<std::int32_t, std::uint32_t>> resets_;
  std::size_t pending_consume_ = 0;
  std::vector<nghttp2_nv> nva_;
  std::string nva_text_;
  std::error_code failure_;  // why the connection ended
  bool dead_ = false;
  bool goaway_ = false;      // the server sent GOAWAY: no new requests here
};

// ---- callbacks ----

struct client_callbacks {
  static connection& conn(void* user) noexcept { return *static_cast<connection*>(user); }
  static request_state* request(nghttp2_session* s, std::int32_t id) noexcept {
    return static_cast<request_state*>(nghttp2_session_get_stream_user_data(s, id));
  }

  static int on_header(nghttp2_session* session, const nghttp2_frame* frame, nghttp2_rcbuf* name,
                       nghttp2_rcbuf* value, std::uint8_t, void* user) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    request_state* r = request(session, frame->hd.stream_id);
    if (r == nullptr || r->have_head) return 0;  // trailers: not kept
    const std::string_view n = view(name), v = view(value);
    if (n == ":status") {
      // nghttp2 has checked for three digits; a status below 100 ("051") is no HTTP status, and fails its request
      // as HTTP/1.1's response parser fails the same status line (the stream is reset, the others go on).
      int status = 0;
      (void)std::from_chars(v.data(), v.data() + v.size(), status);
      if (status < 100) {
        r->failure = make_error_code(http::error::bad_status_line);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      }
      r->head.status = status;
      return 0;
    }
    r->header_bytes += n.size() + v.size() + 4;
    const http::parser_limits& limits = conn(user).limits_;
    if (r->header_bytes > limits.max_header_bytes || r->fields.size() >= limits.max_headers) {
      r->failure = make_error_code(http::error::headers_too_large);
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // the stream is reset
    }
    nghttp2_rcbuf_incref(name);
    nghttp2_rcbuf_incref(value);
    r->held.push_back(name);
    r->held.push_back(value);
    r->fields.push_back({n, v});
    return 0;
  }

  static int on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    connection& c = conn(user);
    const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (frame->hd.type == NGHTTP2_GOAWAY) {
      c.goaway_ = true;
      return 0;
    }
    request_state* r = request(session, frame->hd.stream_id);
    if (r == nullptr) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && !r->have_head) {
      if (r->head.status >= 100 && r->head.status < 200) {
        // An interim answer: the final one follows. Its fields' buffers go now, or a server sending 1xx after
        // 1xx would grow them without the header limit ever seeing it.
        r->fields.clear();
        for (nghttp2_rcbuf* b : r->held) nghttp2_rcbuf_decref(b);
        r->held.clear();
        r->header_bytes = 0;
        r->head.status = 0;
      } else {
        http::response_head& h = r->head;
        h.version = http::http2;
        h.headers = http::field_list(r->fields);
        h.keep_alive = true;
        const std::string_view length = h.headers.get("content-length");
        std::uint64_t n = 0;
        if (!length.empty() && std::from_chars(length.data(), length.data() + length.size(), n).ec == std::errc{}) {
          h.framing = http::body_framing::content_length;
          h.content_length = n;
        } else {
          h.framing = end_stream || r->method == http::method::head ? http::body_framing::none
                                                                    : http::body_framing::chunked;
        }
        if (r->method == http::method::head) h.framing = http::body_framing::none;
        r->have_head = true;
        r->input.set();
      }
    }
    if (end_stream) {
      r->in_end = true;
      r->input.set();
    }
    return 0;
  }

  static int on_data_chunk(nghttp2_session* session, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                           std::size_t length, void* user) {
    connection& c = conn(user);
    request_state* r = request(session, id);
    if (r == nullptr || r->detached) {
      c.pending_consume_ += length;
      return 0;
    }
    r->in_total += length;
    r->unconsumed += length;
    if (r->in_total > c.limits_.max_body) {
      r->failure = make_error_code(http::error::body_too_large);
      c.resets_.emplace_back(id, NGHTTP2_CANCEL);
    } else {
      r->in.append(reinterpret_cast<const char*>(data), length);
    }
    r->input.set();
    return 0;
  }

  static int on_stream_close(nghttp2_session* session, std::int32_t id, std::uint32_t code, void* user) {
    if (request_state* r = request(session, id)) conn(user).end_request(*r, code);
    return 0;
  }

  // A request that could not be sent (the session refuses new streams after a GOAWAY): never processed.
  static int on_frame_not_send(nghttp2_session* session, const nghttp2_frame* frame, int, void* user) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    if (request_state* r = request(session, frame->hd.stream_id)) {
      if (!r->failure) r->failure = make_error_code(http::error::unprocessed);
      conn(user).end_request(*r, NGHTTP2_REFUSED_STREAM);
    }
    return 0;
  }

  static nghttp2_session_callbacks* get() {
    static const callbacks_ptr made = [] {
      callbacks_ptr table = new_callbacks();
      nghttp2_session_callbacks* cb = table.get();
      nghttp2_session_callbacks_set_on_header_callback2(cb, &on_header);
      nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &on_frame_recv);
      nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &on_data_chunk);
      nghttp2_session_callbacks_set_on_stream_close_callback(cb, &on_stream_close);
      nghttp2_session_callbacks_set_on_frame_not_send_callback(cb, &on_frame_not_send);
      return table;
    }();
    return made.get();
  }
};

// ---- the connection ----

void connection::start() {
  nghttp2_option* o = nullptr;
  if (nghttp2_option_new(&o) != 0) throw std::bad_alloc();
  option_ptr option(o);
  nghttp2_option_set_no_auto_window_update(o, 1);
  nghttp2_session* raw = nullptr;
  if (nghttp2_session_client_new3(&raw, client_callbacks::get(), this, o, pooled_memory()) != 0) throw std::bad_alloc();
  session_.reset(raw);
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, opts_.stream_window},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
       static_cast<std::uint32_t>(limits_.max_header_bytes + limits_.max_request_line)},
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  };
  (void)nghttp2_submit_settings(raw, NGHTTP2_FLAG_NONE, settings, sizeof settings / sizeof settings[0]);
  widen_connection_window(raw, opts_.connection_window);
  spawn(ctx_, read_loop(shared_from_this()), reader_stop_.get_token()).detach();
  spawn(ctx_, write_loop(shared_from_this()), writer_stop_.get_token()).detach();
}

void connection::close() noexcept {
  if (!failure_) failure_ = make_error_code(tern::error::operation_canceled);
  fail_all(failure_);
}

// The connection is over: its tasks stop, every request still open fails with ec.
void connection::fail_all(std::error_code ec) noexcept {
  if (!failure_) failure_ = ec;
  dead_ = true;
  reader_stop_.request_stop();
  writer_stop_.request_stop();
  for (auto& r : requests_) {
    // nghttp2 no longer reaches a request the connection has given up: its state may be freed from now on.
    if (r->id > 0 && session_) (void)nghttp2_session_set_stream_user_data(session_.get(), r->id, nullptr);
    if (r->closed) continue;
    if (!r->failure) r->failure = failure_;
    r->closed = true;
    r->input.set();
    r->output.set();
  }
}

void connection::after_session_calls() {
  for (auto [id, code] : resets_) (void)nghttp2_submit_rst_stream(session_.get(), NGHTTP2_FLAG_NONE, id, code);
  resets_.clear();
  if (pending_consume_ != 0) {
    (void)nghttp2_session_consume_connection(session_.get(), pending_consume_);
    pending_consume_ = 0;
  }
}

void connection::end_request(request_state& r, std::uint32_t code) noexcept {
  r.closed = true;
  pending_consume_ += r.unconsumed;
  r.unconsumed = 0;
  if (!r.failure && !(r.have_head && r.in_end)) {
    // REFUSED_STREAM, or a stream beyond a GOAWAY's last one (nghttp2 closes those with REFUSED_STREAM too): the
    // server never processed it.
    r.failure = make_error_code(code == NGHTTP2_REFUSED_STREAM ? http::error::unprocessed
                                : code == NGHTTP2_NO_ERROR      ? http::error::partial_message
                                                                : http::error::stream_reset);
  }
  (void)nghttp2_session_set_stream_user_data(session_.get(), r.id, nullptr);
  r.input.set();
  r.output.set();
  if (r.detached) forget(r);
}

void connection::forget(request_state& r) noexcept {
  std::erase_if(requests_, [&r](const std::unique_ptr<request_state>& x) { return x.get() == &r; });
}

// The client_stream goes: a stream still open is reset (the request was given up), and its state goes with its
// close.
void connection::release(request_state& r) noexcept {
  r.detached = true;
  if (r.closed || dead_) {
    forget(r);
    return;
  }
  (void)nghttp2_submit_rst_stream(session_.get(), NGHTTP2_FLAG_NONE, r.id, NGHTTP2_CANCEL);
  wake_writer();
}

task<void> connection::read_loop(std::shared_ptr<connection> self) {
  connection& c = *self;
  for (;;) {
    if (c.dead_) break;
    const mutable_buffer space(c.input_.get(), input_buffer_size);
    io_result<std::size_t> r;
    if (c.secure_) r = co_await c.secure_->read_some(space);
    else r = co_await c.socket_.read_some(space);
    if (r.ec) {
      c.fail_all(r.ec == tern::error::eof ? make_error_code(http::error::partial_message) : r.ec);
      break;
    }
    // The connection may have ended while the read waited to resume (fail_all, or a write that failed): its
    // requests' states may be gone, so nothing more goes to nghttp2.
    if (c.dead_) break;
    const ng_ssize rv = mem_recv(c.session_.get(), reinterpret_cast<const std::uint8_t*>(c.input_.get()), r.value);
    if (rv < 0) {
      c.fail_all(make_error_code(http::error::bad_response));
      break;
    }
    c.after_session_calls();
    c.wake_writer();
  }
}

void connection::fill_output() {
  while (output_.size() < opts_.write_size) {
    const std::uint8_t* data = nullptr;
    const ng_ssize n = mem_send(session_.get(), &data);
    if (n < 0) {
      fail_all(make_error_code(http::error::bad_response));
      break;
    }
    if (n == 0) break;
    output_.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    after_session_calls();
  }
}

task<void> connection::write_loop(std::shared_ptr<connection> self) {
  connection& c = *self;
  for (;;) {
    if (c.dead_) break;
    c.after_session_calls();
    c.fill_output();
    if (c.output_.empty()) {
      if (c.dead_) break;
      if (!nghttp2_session_want_read(c.session_.get()) && !nghttp2_session_want_write(c.session_.get())) {
        c.fail_all(make_error_code(http::error::unprocessed));  // after a GOAWAY, nothing is left to do here
        break;
      }
      if (co_await c.write_wanted_.wait()) break;
      continue;
    }
    const const_buffer out(c.output_.data(), c.output_.size());
    io_result<std::size_t> r;
    if (c.secure_) r = co_await with_timeout(c.secure_->write_all(out), c.write_timeout_);
    else r = co_await with_timeout(c.socket_.write_all(out), c.write_timeout_);
    c.output_.clear();
    if (r.ec) {
      c.fail_all(r.ec);
      break;
    }
  }
}

// nghttp2's data callback for a request body: as the server's (server_connection::read_out).
ng_ssize connection::read_out(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                              std::uint32_t* flags, nghttp2_data_source* source, void*) {
  auto& r = *static_cast<request_state*>(source->ptr);
  const std::size_t n = std::min(length, r.queued());
  std::memcpy(buf, r.out.data() + r.out_taken, n);
  r.out_taken += n;
  if (r.queued() == 0) {
    r.out.clear();
    r.out_taken = 0;
  }
  if (r.writer_waiting && r.queued() < r.conn->opts_.output_per_stream) {
    r.writer_waiting = false;
    r.output.set();
  }
  if (r.out_done && r.queued() == 0) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ng_ssize>(n);
  }
  if (n == 0) {
    r.deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  return static_cast<ng_ssize>(n);
}

class stream final : public http::client_stream {
 public:
  stream(std::shared_ptr<connection> c, request_state& r) noexcept : conn_(std::move(c)), r_(&r) {}
  ~stream() override { conn_->release(*r_); }
  task<std::error_code> write(const_buffer b) override { return conn_->write(*r_, b); }
  task<std::error_code> finish() override { return conn_->finish(*r_); }
  const http::response_head& head() const noexcept override { return r_->head; }
  task<io_result<std::size_t>> read_some(mutable_buffer b) override { return conn_->read_some(*r_, b); }

 private:
  std::shared_ptr<connection> conn_;
  request_state* r_;
};

task<io_result<std::unique_ptr<http::client_stream>>> connection::open(http::method m, std::string_view target,
                                                                       const http::fields& headers,
                                                                       std::optional<std::uint64_t> body_length) {
  using result = io_result<std::unique_ptr<http::client_stream>>;
  if (!usable()) co_return result{make_error_code(http::error::unprocessed), nullptr};
  auto owned = std::make_unique<request_state>();
  request_state& r = *owned;
  r.conn = this;
  r.method = m;
  r.length = body_length;
  const bool with_body = !body_length || *body_length != 0;
  r.out_done = !with_body;
  // The head: pseudo-header fields, then the request's own (names lowercased), the connection's fields dropped.
  std::size_t need = 20;
  for (http::field f : headers) need += f.name.size();
  nva_text_.clear();
  nva_text_.reserve(need);
  nva_.clear();
  const std::string_view name = http::to_string(m);
  const std::string_view scheme = secure_ ? "https" : "http";
  nva_.push_back(make_static_nv(":method", name.data(), name.size()));
  nva_.push_back(make_static_nv(":scheme", scheme.data(), scheme.size()));
  nva_.push_back(make_static_nv(":authority", authority_.data(), authority_.size()));
  nva_.push_back(make_static_nv(":path", target.data(), target.size()));
  if (!user_agent_.empty() && !headers.contains("user-agent")) {
    nva_.push_back(make_static_nv("user-agent", user_agent_.data(), user_agent_.size()));
  }
  if (body_length && (*body_length != 0 || sends_body(m))) {
    char digits[20];
    const auto end = std::to_chars(digits, digits + sizeof digits, *body_length).ptr;
    const char* at = nva_text_.data() + nva_text_.size();
    nva_text_.append(digits, static_cast<std::size_t>(end - digits));
    nva_.push_back(make_static_nv("content-length", at, static_cast<std::size_t>(end - digits)));
  }
  for (http::field f : headers) {
    if (dropped_in_h2(f.name)) continue;
    const std::size_t at = nva_text_.size();
    nva_text_.append(f.name);
    for (std::size_t i = at; i < nva_text_.size(); ++i) {
      if (nva_text_[i] >= 'A' && nva_text_[i] <= 'Z') nva_text_[i] = static_cast<char>(nva_text_[i] + ('a' - 'A'));
    }
    nva_.push_back(make_nv(nva_text_.data() + at, f.name.size(), f.value.data(), f.value.size()));
  }
  const ng_data_provider body = data_provider(&r, &connection::read_out);
  // The state joins the connection before nghttp2 holds a pointer to it: a push_back that throws then frees
  // nothing nghttp2 knows of.
  requests_.push_back(std::move(owned));
  const std::int32_t id =
      submit_request(session_.get(), nva_.data(), nva_.size(), with_body ? &body : nullptr, &r);
  if (id < 0) {
    requests_.pop_back();
    co_return result{make_error_code(http::error::unprocessed), nullptr};
  }
  r.id = id;
  wake_writer();
  co_return result{std::error_code{}, std::make_unique<stream>(shared_from_this(), r)};
}

task<std::error_code> connection::write(request_state& r, const_buffer b) {
  if (b.size() == 0) co_return std::error_code{};  // (a request without a body writes nothing, as send() does)
  if (r.out_done || (r.length && r.written + b.size() > *r.length)) {
    co_return std::make_error_code(std::errc::invalid_argument);
  }
  r.written += b.size();
  const char* data = static_cast<const char*>(b.data());
  std::size_t left = b.size();
  // In pieces of at most the stream's room, each waiting for room: a request holds at most output_per_stream
  // bytes whatever the size of the caller's writes (as the server's streams do).
  while (left != 0) {
    while (r.queued() >= opts_.output_per_stream) {
      if (r.closed) co_return r.failure;
      r.writer_waiting = true;
      if (std::error_code ec = co_await with_timeout(r.output.wait(), write_timeout_)) co_return ec;
    }
    if (r.closed) co_return r.failure;
    if (r.out_taken != 0 && r.out_taken >= r.queued()) {
      r.out.erase(0, r.out_taken);
      r.out_taken = 0;
    }
    const std::size_t piece = std::min(left, opts_.output_per_stream - r.queued());
    r.out.append(data, piece);
    data += piece;
    left -= piece;
    if (r.deferred) {
      r.deferred = false;
      (void)nghttp2_session_resume_data(session_.get(), r.id);
    }
    wake_writer();
  }
  co_return std::error_code{};
}

task<std::error_code> connection::finish(request_state& r) {
  if (r.length && r.written != *r.length) co_return std::make_error_code(std::errc::invalid_argument);
  if (!r.out_done) {
    r.out_done = true;
    if (r.deferred && !r.closed) {
      r.deferred = false;
      (void)nghttp2_session_resume_data(session_.get(), r.id);
    }
    wake_writer();
  }
  // The response head, past any interim 1xx.
  const clock::time_point deadline = clock::now() + response_timeout_;
  while (!r.have_head) {
    if (r.closed) co_return r.failure ? r.failure : make_error_code(http::error::partial_message);
    if (std::error_code ec = co_await with_deadline(r.input.wait(), deadline)) co_return ec;
  }
  co_return std::error_code{};
}

task<io_result<std::size_t>> connection::read_some(request_state& r, mutable_buffer b) {
  if (!r.have_head) co_return sized{std::make_error_code(std::errc::invalid_argument), 0};
  if (b.size() == 0) co_return sized{std::error_code{}, 0};
  for (;;) {
    if (r.buffered() != 0) {
      const std::size_t n = std::min(b.size(), r.buffered());
      std::memcpy(b.data(), r.in.data() + r.in_taken, n);
      r.in_taken += n;
      if (r.in_taken == r.in.size()) {
        r.in.clear();
        r.in_taken = 0;
      } else if (r.in_taken >= kept_buffer) {
        r.in.erase(0, r.in_taken);
        r.in_taken = 0;
      }
      // What the caller has taken reopens the windows by as much.
      const std::size_t consumed = std::min(n, r.unconsumed);
      r.unconsumed -= consumed;
      if (consumed != 0 && !r.closed) {
        (void)nghttp2_session_consume(session_.get(), r.id, consumed);
        wake_writer();
      }
      co_return sized{std::error_code{}, n};
    }
    if (r.in_end) co_return sized{make_error_code(tern::error::eof), 0};
    if (r.closed) co_return sized{r.failure ? r.failure : make_error_code(http::error::partial_message), 0};
    if (std::error_code ec = co_await with_timeout(r.input.wait(), read_timeout_)) co_return sized{ec, 0};
  }
}

class session final : public http::client_session {
 public:
  session(http::client_handover h, const client_options& o)
      : conn_(std::make_shared<connection>(std::move(h), o)) {
    conn_->start();
  }
  ~session() override { conn_->close(); }
  task<io_result<std::unique_ptr<http::client_stream>>> open(http::method m, std::string_view target,
                                                             const http::fields& headers,
                                                             std::optional<std::uint64_t> body_length) override {
    return conn_->open(m, target, headers, body_length);
  }
  bool usable() const noexcept override { return conn_->usable(); }

 private:
  std::shared_ptr<connection> conn_;
};

class client_protocol_impl final : public http::client_protocol {
 public:
  explicit client_protocol_impl(client_options o) : opts_(o) {}
  std::unique_ptr<http::client_session> start(http::client_handover h) const override {
    return std::make_unique<session>(std::move(h), opts_);
  }

 private:
  client_options opts_;
};

}  // namespace

std::shared_ptr<const http::client_protocol> client_protocol(client_options opts) {
  return std::make_shared<const client_protocol_impl>(opts);
}

}  // namespace tern::http2
