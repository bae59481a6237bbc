// The HTTP/1.1 client (see tern/http/client.hpp).
//
// A connection carries one exchange at a time: the request head is composed into the connection's output and
// leaves with the first piece of the body (so a small request is one write), the response is read into the
// connection's buffer, parsed in place, and its body handed out from there (or read straight into the caller's
// memory when the buffer is empty). A connection goes back to the pool only when its response ended exactly where
// the framing said and the server allows reuse: anything else (a timeout, an error, bytes after the response)
// closes it.
//
// The pool, the options and the resolver are a client_state that the client, its running requests and its
// exchanges share (a shared_ptr each: no allocation per request), so that none of them depends on the client
// object outliving it. The request coroutines are static functions of that state, never members of the client: a
// coroutine's `this` would dangle once the client went.
#include "tern/http/client.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "tern/cancel.hpp"
#include "tern/error.hpp"
#include "tern/net/connect.hpp"
#include "tern/net/error.hpp"
#include "tern/net/resolver.hpp"

namespace tern::http {

namespace detail {

struct client_connection {
  client_connection(std::string k, net::tcp_socket s, std::string host, const parser_limits& limits)
      : key(std::move(k)),
        socket(std::move(s)),
        host_field(std::move(host)),
        buffer(std::make_unique_for_overwrite<char[]>(capacity)),
        parser(limits) {
    chunked_decoder::limits l;
    l.max_body = limits.max_body;
    l.max_trailers = limits.max_header_bytes;
    chunked = chunked_decoder(l);
  }

  std::string key;         // "host:port" (plain) or "https://host:port", the pool's
  net::tcp_socket socket;
  // The bytes go through secure when set (https), else straight through socket; each I/O site branches with
  // if/else (g++ 12 miscompiles `c ? co_await a : co_await b`).
  std::unique_ptr<transport> secure;
  std::string host_field;  // the Host field's value
  std::size_t capacity = 16 * 1024;
  std::unique_ptr<char[]> buffer;
  std::size_t begin = 0, end = 0;  // unread response bytes
  std::size_t pinned = 0;          // the response head ends here: what comes before stays put (head() views it)
  response_parser parser;
  chunked_decoder chunked;
  std::string out;  // request bytes not yet written
  clock::time_point last_used{};
  bool reused = false;  // came from the pool

  // The exchange in progress.
  method request_method = method::get;
  bool request_chunked = false;
  std::optional<std::uint64_t> request_length;
  std::uint64_t written = 0;
  bool finished = false;       // the request is complete
  bool have_head = false;
  std::uint64_t received = 0;  // response bytes so far (none: the retry is safe)
  std::uint64_t body_left = 0; // Content-Length bytes still to read
  std::uint64_t body_read = 0;
  bool body_done = false;
  bool broken = false;         // an error: never reused
};

struct client_state {
  client_state(io_context& c, client_options o) : ctx(&c), opts(std::move(o)) {}

  // True on a thread that does not run the client's loop: every operation then refuses with wrong_loop before it
  // touches anything (a bool: an empty error_code would cost a call of std::system_category() each time).
  bool off_loop() const noexcept { return !ctx->running_here(); }
  task<io_result<std::unique_ptr<client_connection>>> connect(std::string_view host, std::uint16_t port,
                                                              bool secure);
  std::unique_ptr<client_connection> take_idle(std::string_view key);
  void give_back(std::unique_ptr<client_connection> c);
  client_session* session_for(std::string_view key) noexcept;
  static task<io_result<client_exchange>> open_stream(std::shared_ptr<client_state> self, client_session& s, method m,
                                                      std::string_view target, const fields& headers,
                                                      std::optional<std::uint64_t> body_length);

  // The requests, as coroutines that hold the state rather than a client.
  static task<io_result<client_exchange>> start_exchange(std::shared_ptr<client_state> self, http::scheme s,
                                                         std::string_view host, std::uint16_t port, method m,
                                                         std::string_view target, const fields& headers,
                                                         std::optional<std::uint64_t> body_length);
  // exchange() with its arguments owned by the task, so that the caller's strings may go before it is awaited.
  static task<io_result<client_exchange>> exchange_owned(std::shared_ptr<client_state> self, http::scheme s,
                                                         std::string host, std::uint16_t port, method m,
                                                         std::string target, fields headers,
                                                         std::optional<std::uint64_t> body_length) {
    co_return co_await start_exchange(std::move(self), s, host, port, m, target, headers, body_length);
  }
  static task<io_result<response>> send_request(std::shared_ptr<client_state> self, http::scheme s,
                                                std::string host, std::uint16_t port, client_request req);

  io_context* ctx;
  client_options opts;
  std::unique_ptr<net::resolver> resolver;  // made on first use
  // Looked up by string_view (transparent), so a request finds its pool without making a key string.
  struct key_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view k) const noexcept { return std::hash<std::string_view>{}(k); }
  };
  std::unordered_map<std::string, std::vector<std::unique_ptr<client_connection>>, key_hash, std::equal_to<>> idle;
  // HTTP/2 sessions by the same key (more than one only while a second was being connected).
  std::unordered_map<std::string, std::vector<std::unique_ptr<client_session>>, key_hash, std::equal_to<>> sessions;
  // Hosts a connection is being made to that may become a session: set once it is made (or has failed).
  std::unordered_map<std::string, std::shared_ptr<sync::manual_reset_event>, key_hash, std::equal_to<>> connecting;
  bool closed = false;  // the client object is gone: nothing is pooled any more
};

}  // namespace detail

namespace {

bool idempotent(method m) noexcept {
  return m == method::get || m == method::head || m == method::put || m == method::delete_ ||
         m == method::options || m == method::trace;
}

bool sends_body(method m) noexcept { return m == method::post || m == method::put || m == method::patch; }

void append_hex(std::string& out, std::size_t v) {
  char digits[20];
  int i = 0;
  do {
    digits[i++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v != 0);
  while (i > 0) out.push_back(digits[--i]);
}

using sized = io_result<std::size_t>;

task<io_result<response>> failed_request(std::error_code ec) { co_return io_result<response>{ec, {}}; }

// The pool's key of a host and port, "host:port", made in place (a request looks its pool up without
// allocating); a host longer than any DNS name is cut, which only costs it pooling.
class pool_key {
 public:
  pool_key(std::string_view host, std::uint16_t port, bool secure) noexcept {
    constexpr std::string_view https = "https://";  // an https connection is never taken for an http request
    if (secure) {
      std::memcpy(text_, https.data(), https.size());
      size_ = https.size();
    }
    host = host.substr(0, 255);
    std::memcpy(text_ + size_, host.data(), host.size());
    size_ += host.size();
    text_[size_++] = ':';
    char digits[5];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + port % 10);
      port = static_cast<std::uint16_t>(port / 10);
    } while (port != 0);
    while (n > 0) text_[size_++] = digits[--n];
  }
  std::string_view view() const noexcept { return {text_, size_}; }

 private:
  char text_[270];
  std::size_t size_ = 0;
};

}  // namespace

std::optional<url> url::parse(std::string_view text) {
  constexpr std::string_view plain = "http://";
  constexpr std::string_view secure = "https://";
  url u;
  if (text.size() >= plain.size() && iequals(text.substr(0, plain.size()), plain)) {
    text.remove_prefix(plain.size());
  } else if (text.size() >= secure.size() && iequals(text.substr(0, secure.size()), secure)) {
    text.remove_prefix(secure.size());
    u.scheme = http::scheme::https;
    u.port = 443;
  } else {
    return std::nullopt;
  }
  const std::size_t slash = text.find_first_of("/?#");
  std::string_view authority = text.substr(0, slash);
  std::string_view rest = slash == std::string_view::npos ? std::string_view() : text.substr(slash);
  rest = rest.substr(0, rest.find('#'));
  if (authority.find('@') != std::string_view::npos) return std::nullopt;  // no credentials in URLs
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    u.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return std::nullopt;
      port_text = after.substr(1);
    }
  } else {
    const std::size_t colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (u.host.empty()) return std::nullopt;
  if (!port_text.empty()) {
    unsigned port = 0;
    for (char c : port_text) {
      if (c < '0' || c > '9' || (port = port * 10 + static_cast<unsigned>(c - '0')) > 65535) return std::nullopt;
    }
    if (port == 0) return std::nullopt;
    u.port = static_cast<std::uint16_t>(port);
  }
  if (rest.empty()) rest = "/";
  if (rest.front() == '?') u.target = "/" + std::string(rest); else u.target = std::string(rest);
  return u;
}

// ---- client_exchange ----

client_exchange::client_exchange(client_exchange&& o) noexcept
    : client_(std::move(o.client_)), conn_(std::move(o.conn_)), stream_(std::move(o.stream_)) {}

client_exchange& client_exchange::operator=(client_exchange&& o) noexcept {
  if (this != &o) {
    if (conn_) client_->give_back(std::move(conn_));
    client_ = std::move(o.client_);
    conn_ = std::move(o.conn_);
    stream_ = std::move(o.stream_);
  }
  return *this;
}

client_exchange::~client_exchange() {
  if (conn_) client_->give_back(std::move(conn_));
}

const response_head& client_exchange::head() const noexcept {
  return stream_ ? stream_->head() : conn_->parser.head();
}

task<std::error_code> client_exchange::write(const_buffer b) {
  if (client_->off_loop()) [[unlikely]] co_return make_error_code(tern::error::wrong_loop);
  if (stream_) co_return co_await stream_->write(b);
  detail::client_connection& c = *conn_;
  const client_options& o = client_->opts;
  if (c.finished || (c.request_length && c.written + b.size() > *c.request_length)) {
    co_return std::make_error_code(std::errc::invalid_argument);
  }
  c.written += b.size();
  if (b.size() == 0) co_return std::error_code{};
  const std::string_view data(static_cast<const char*>(b.data()), b.size());
  if (c.request_chunked) {
    append_hex(c.out, b.size());
    c.out.append("\r\n");
  }
  std::error_code ec;
  if (data.size() <= 16 * 1024) {  // small: with its framing (and the head) in one write
    c.out.append(data);
    if (c.request_chunked) c.out.append("\r\n");
    const const_buffer out(c.out.data(), c.out.size());
    if (c.secure) ec = (co_await with_timeout(c.secure->write_all(out), o.write_timeout)).ec;
    else ec = (co_await with_timeout(c.socket.write_all(out), o.write_timeout)).ec;
    c.out.clear();
  } else {
    const const_buffer out(c.out.data(), c.out.size());
    if (c.secure) ec = (co_await with_timeout(c.secure->write_all(out), o.write_timeout)).ec;
    else ec = (co_await with_timeout(c.socket.write_all(out), o.write_timeout)).ec;
    c.out.clear();
    if (!ec) {
      if (c.secure) ec = (co_await with_timeout(c.secure->write_all(b), o.write_timeout)).ec;
      else ec = (co_await with_timeout(c.socket.write_all(b), o.write_timeout)).ec;
    }
    if (c.request_chunked) c.out.append("\r\n");
  }
  if (ec) c.broken = true;
  co_return ec;
}

task<std::error_code> client_exchange::finish() {
  if (client_->off_loop()) [[unlikely]] co_return make_error_code(tern::error::wrong_loop);
  if (stream_) co_return co_await stream_->finish();
  detail::client_connection& c = *conn_;
  const client_options& o = client_->opts;
  if (c.finished || (c.request_length && c.written != *c.request_length)) {
    co_return std::make_error_code(std::errc::invalid_argument);
  }
  c.finished = true;
  if (c.request_chunked) c.out.append("0\r\n\r\n");
  if (!c.out.empty()) {
    const const_buffer out(c.out.data(), c.out.size());
    io_result<std::size_t> via_ec;
    if (c.secure) via_ec = co_await with_timeout(c.secure->write_all(out), o.write_timeout);
    else via_ec = co_await with_timeout(c.socket.write_all(out), o.write_timeout);
    auto [ec, n] = via_ec;
    c.out.clear();
    if (ec) {
      c.broken = true;
      co_return ec;
    }
  }
  // The response head, past any interim 1xx.
  const clock::time_point deadline = clock::now() + o.response_timeout;
  std::error_code ec;
  for (;;) {
    if (c.begin < c.end && c.parser.parse(std::string_view(c.buffer.get() + c.begin, c.end - c.begin),
                                          c.request_method, ec)) {
      const response_head& h = c.parser.head();
      if (h.status >= 100 && h.status < 200 && h.status != 101) {
        c.begin += h.size;
        c.parser.reset();
        continue;
      }
      break;
    }
    if (ec) {
      c.broken = true;
      co_return ec;
    }
    if (c.begin == c.end) c.begin = c.end = 0;
    if (c.end == c.capacity) {
      if (c.begin == 0) {  // a head longer than the buffer: grow it, up to the limits
        const parser_limits& l = o.limits;
        const std::size_t most = l.max_request_line + l.max_header_bytes + 4096;
        if (c.capacity >= most) {
          c.broken = true;
          co_return make_error_code(error::headers_too_large);
        }
        const std::size_t grown = std::min(c.capacity * 2, most);
        auto bigger = std::make_unique_for_overwrite<char[]>(grown);
        std::memcpy(bigger.get(), c.buffer.get(), c.end);
        c.buffer = std::move(bigger);
        c.capacity = grown;
      } else {
        std::memmove(c.buffer.get(), c.buffer.get() + c.begin, c.end - c.begin);
        c.end -= c.begin;
        c.begin = 0;
      }
    }
    const mutable_buffer space(c.buffer.get() + c.end, c.capacity - c.end);
    io_result<std::size_t> via_rec;
    if (c.secure) via_rec = co_await with_deadline(c.secure->read_some(space), deadline);
    else via_rec = co_await with_deadline(c.socket.read_some(space), deadline);
    auto [rec, n] = via_rec;
    if (rec) {
      c.broken = true;
      co_return rec == tern::error::eof ? make_error_code(error::partial_message) : rec;
    }
    c.end += n;
    c.received += n;
  }
  c.begin += c.parser.head().size;
  c.pinned = c.begin;
  if (c.capacity - c.pinned < 1024) {
    // Room after the head for the body: a head that (nearly) filled the buffer moves to a larger one, parsed again
    // there so that head()'s views point into it.
    const std::size_t head_start = c.pinned - c.parser.head().size;
    const std::size_t grown = std::max(c.capacity * 2, c.pinned + 1024);
    auto bigger = std::make_unique_for_overwrite<char[]>(grown);
    std::memcpy(bigger.get(), c.buffer.get(), c.end);
    c.buffer = std::move(bigger);
    c.capacity = grown;
    c.parser.reset();
    (void)c.parser.parse(std::string_view(c.buffer.get() + head_start, c.end - head_start), c.request_method, ec);
  }
  const response_head& h = c.parser.head();
  c.have_head = true;
  c.body_read = 0;
  c.body_left = h.framing == body_framing::content_length ? h.content_length : 0;
  c.body_done = h.framing == body_framing::none || (h.framing == body_framing::content_length && c.body_left == 0);
  c.chunked.reset();
  co_return std::error_code{};
}

task<io_result<std::size_t>> client_exchange::read_some(mutable_buffer b) {
  if (client_->off_loop()) [[unlikely]] co_return sized{make_error_code(tern::error::wrong_loop), 0};
  if (stream_) co_return co_await stream_->read_some(b);
  detail::client_connection& c = *conn_;
  const client_options& o = client_->opts;
  if (!c.have_head) co_return sized{std::make_error_code(std::errc::invalid_argument), 0};
  if (c.body_done) co_return sized{make_error_code(tern::error::eof), 0};
  if (b.size() == 0) co_return sized{std::error_code{}, 0};
  const response_head& h = c.parser.head();
  const auto fail = [&c](std::error_code ec) {
    c.broken = true;
    return sized{ec, 0};
  };
  if (h.framing == body_framing::content_length) {
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(b.size(), c.body_left));
    std::size_t n = 0;
    if (c.begin < c.end) {
      n = std::min(want, c.end - c.begin);
      std::memcpy(b.data(), c.buffer.get() + c.begin, n);
      c.begin += n;
    } else {
      const mutable_buffer into(b.data(), want);
      io_result<std::size_t> via_ec;
      if (c.secure) via_ec = co_await with_timeout(c.secure->read_some(into), o.read_timeout);
      else via_ec = co_await with_timeout(c.socket.read_some(into), o.read_timeout);
      auto [ec, got] = via_ec;
      if (ec) co_return fail(ec == tern::error::eof ? make_error_code(error::partial_message) : ec);
      n = got;
    }
    c.body_left -= n;
    if (c.body_left == 0) c.body_done = true;
    co_return sized{std::error_code{}, n};
  }
  for (;;) {
    if (h.framing == body_framing::chunked) {
      while (c.begin < c.end && !c.chunked.done()) {
        std::error_code ec;
        const auto step =
            c.chunked.decode(std::string_view(c.buffer.get() + c.begin, std::min(c.end - c.begin, b.size())), ec);
        if (ec) co_return fail(ec);
        c.begin += step.consumed;
        if (!step.data.empty()) {
          std::memcpy(b.data(), step.data.data(), step.data.size());
          if (c.chunked.done()) c.body_done = true;
          co_return sized{std::error_code{}, step.data.size()};
        }
        if (step.consumed == 0) break;
      }
      if (c.chunked.done()) {
        c.body_done = true;
        co_return sized{make_error_code(tern::error::eof), 0};
      }
    } else {  // until_close: what is buffered, then the socket until the end
      if (c.begin < c.end) {
        const std::size_t n = std::min(b.size(), c.end - c.begin);
        std::memcpy(b.data(), c.buffer.get() + c.begin, n);
        c.begin += n;
        c.body_read += n;
        if (c.body_read > o.limits.max_body) co_return fail(make_error_code(error::body_too_large));
        co_return sized{std::error_code{}, n};
      }
    }
    if (c.begin == c.end) c.begin = c.end = c.pinned;
    if (c.end == c.capacity) {
      std::memmove(c.buffer.get() + c.pinned, c.buffer.get() + c.begin, c.end - c.begin);
      c.end -= c.begin - c.pinned;
      c.begin = c.pinned;
    }
    const mutable_buffer space(c.buffer.get() + c.end, c.capacity - c.end);
    io_result<std::size_t> via_ec;
    if (c.secure) via_ec = co_await with_timeout(c.secure->read_some(space), o.read_timeout);
    else via_ec = co_await with_timeout(c.socket.read_some(space), o.read_timeout);
    auto [ec, n] = via_ec;
    if (ec == tern::error::eof && h.framing == body_framing::until_close) {
      c.body_done = true;
      c.broken = true;  // the end of the body is the end of the connection
      co_return sized{make_error_code(tern::error::eof), 0};
    }
    if (ec) co_return fail(ec == tern::error::eof ? make_error_code(error::partial_message) : ec);
    c.end += n;
  }
}

// ---- the shared state ----

namespace detail {

// A session to the key's host that takes new requests; the ones that no longer do are dropped (their streams
// still running keep what they need).
client_session* client_state::session_for(std::string_view key) noexcept {
  auto it = sessions.find(key);
  if (it == sessions.end()) return nullptr;
  auto& list = it->second;
  std::erase_if(list, [](const std::unique_ptr<client_session>& s) { return !s->usable(); });
  return list.empty() ? nullptr : list.front().get();
}

task<io_result<client_exchange>> client_state::open_stream(std::shared_ptr<client_state> self, client_session& s,
                                                           method m, std::string_view target, const fields& headers,
                                                           std::optional<std::uint64_t> body_length) {
  auto [ec, stream] = co_await s.open(m, target, headers, body_length);
  if (ec) co_return io_result<client_exchange>{ec, {}};
  client_exchange ex;
  ex.client_ = std::move(self);
  ex.stream_ = std::move(stream);
  co_return io_result<client_exchange>{std::error_code{}, std::move(ex)};
}

std::unique_ptr<client_connection> client_state::take_idle(std::string_view key) {
  auto it = idle.find(key);
  if (it == idle.end()) return nullptr;
  auto& list = it->second;
  const clock::time_point now = clock::now();
  while (!list.empty()) {
    std::unique_ptr<client_connection> c = std::move(list.back());
    list.pop_back();
    if (now - c->last_used > opts.idle_timeout) continue;
    // A server that closed the connection while it was pooled has sent its FIN (or a reset): a peek that finds
    // anything but "nothing yet" means the connection is gone. Servers close idle connections after seconds, so
    // one used within the last 100 ms is taken without the system call (a request that still meets a closed
    // connection is retried, when idempotent: see send_request()).
    // Over TLS, bytes may wait that are not an end (a TLS 1.3 session ticket sent after the last response): only
    // the connection's end or an error tells there.
    if (now - c->last_used > std::chrono::milliseconds(100)) {
      char probe;
      const int fd = (c->secure ? c->secure->socket() : c->socket).native_handle();
      const ssize_t r = ::recv(fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
      const bool nothing = r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      if (!nothing && !(c->secure && r > 0)) continue;
    }
    c->reused = true;
    return c;
  }
  return nullptr;
}

void client_state::give_back(std::unique_ptr<client_connection> c) {
  // Not from another thread than the loop's (an exchange destroyed there), and not once the client is gone: the
  // connection closes with c instead.
  if (!ctx->running_here() || closed) return;
  const response_head& h = c->parser.head();
  const bool reusable = !c->broken && c->finished && c->have_head && c->body_done && h.keep_alive &&
                        c->begin == c->end && c->out.empty();
  if (!reusable) return;
  auto& list = idle[c->key];
  if (list.size() >= opts.max_idle_per_host) return;
  c->last_used = clock::now();
  list.push_back(std::move(c));
}

task<io_result<std::unique_ptr<client_connection>>> client_state::connect(std::string_view host, std::uint16_t port,
                                                                          bool secure) {
  using result = io_result<std::unique_ptr<client_connection>>;
  if (secure && !opts.tls) co_return result{std::make_error_code(std::errc::protocol_not_supported), nullptr};
  const clock::time_point deadline = clock::now() + opts.connect_timeout;
  if (!resolver) resolver = std::make_unique<net::resolver>(*ctx);
  auto [ec, socket] =
      co_await with_deadline(net::connect(*resolver, std::string(host), std::to_string(port)), deadline);
  if (ec) co_return result{ec, nullptr};
  (void)socket.set_no_delay(true);
  std::unique_ptr<transport> wrapped;
  if (secure) {
    // The handshake is part of connecting: the same deadline covers both.
    wrapped = opts.tls(std::move(socket), host);
    if (std::error_code hec = co_await with_deadline(wrapped->handshake(), deadline)) co_return result{hec, nullptr};
  }
  const bool v6 = host.find(':') != std::string_view::npos;
  std::string field = v6 ? "[" + std::string(host) + "]" : std::string(host);
  if (port != (secure ? 443 : 80)) field += ":" + std::to_string(port);
  auto c = std::make_unique<client_connection>(std::string(pool_key(host, port, secure).view()), std::move(socket),
                                               std::move(field), opts.limits);
  c->secure = std::move(wrapped);
  co_return result{std::error_code{}, std::move(c)};
}

namespace {

// The whole response body into body: sized once when the length is known (no read past it), grown geometrically
// otherwise.
task<std::error_code> read_body(client_exchange& ex, std::string& body) {
  const response_head& h = ex.head();
  std::size_t at = 0;
  if (h.framing == body_framing::content_length) {
    body.resize(static_cast<std::size_t>(h.content_length));
    while (at < body.size()) {
      auto [ec, n] = co_await ex.read_some(mutable_buffer(body.data() + at, body.size() - at));
      if (ec) co_return ec;
      at += n;
    }
    co_return std::error_code{};
  }
  for (;;) {
    if (at == body.size()) body.resize(std::max<std::size_t>(16 * 1024, 2 * body.size()));
    auto [ec, n] = co_await ex.read_some(mutable_buffer(body.data() + at, body.size() - at));
    at += n;
    if (ec == tern::error::eof) break;
    if (ec) co_return ec;
  }
  body.resize(at);
  co_return std::error_code{};
}

}  // namespace

task<io_result<client_exchange>> client_state::start_exchange(std::shared_ptr<client_state> state, http::scheme s,
                                                              std::string_view host, std::uint16_t port, method m,
                                                              std::string_view target, const fields& headers,
                                                              std::optional<std::uint64_t> body_length) {
  using result = io_result<client_exchange>;
  if (state->off_loop()) [[unlikely]] co_return result{make_error_code(tern::error::wrong_loop), {}};
  const bool secure = s == http::scheme::https;
  const std::string_view name = to_string(m);
  if (name.empty() || target.empty() || target.find_first_of(" \r\n") != std::string_view::npos) {
    co_return result{std::make_error_code(std::errc::invalid_argument), {}};
  }
  const pool_key key(host, port, secure);
  // A connection to this host that may become its HTTP/2 session is being made: wait for it rather than make
  // another (the requests of a burst share it once its handshake has told).
  for (auto it = state->connecting.find(key.view()); it != state->connecting.end();
       it = state->connecting.find(key.view())) {
    const std::shared_ptr<sync::manual_reset_event> made = it->second;
    if (std::error_code wec = co_await made->wait()) co_return result{wec, {}};
  }
  if (client_session* session = state->session_for(key.view())) {
    co_return co_await open_stream(std::move(state), *session, m, target, headers, body_length);
  }
  std::unique_ptr<detail::client_connection> conn = state->take_idle(key.view());
  if (!conn) {
    // Marked while it connects (when it may turn out HTTP/2), and unmarked however the connecting ends.
    struct connecting_mark {
      client_state* c = nullptr;
      std::string key;
      ~connecting_mark() {
        if (c == nullptr) return;
        auto it = c->connecting.find(key);
        it->second->set();
        c->connecting.erase(it);
      }
    } mark;
    const client_options& o = state->opts;
    if (o.http2 && (secure || o.http2_prior_knowledge)) {
      mark.c = state.get();
      mark.key = std::string(key.view());
      state->connecting.emplace(mark.key, std::make_shared<sync::manual_reset_event>());
    }
    auto [ec, fresh] = co_await state->connect(host, port, secure);
    if (ec) co_return result{ec, {}};
    conn = std::move(fresh);
    // A new connection speaks HTTP/2 when its handshake agreed on it, or by prior knowledge: it becomes the host's
    // session, and this request its first stream.
    const bool h2 =
        o.http2 && (conn->secure ? conn->secure->application_protocol() == "h2" : o.http2_prior_knowledge);
    if (h2) {
      client_handover h{std::move(conn->socket), std::move(conn->secure), conn->host_field, o.user_agent,
                        o.limits, o.response_timeout, o.read_timeout, o.write_timeout};
      auto& list = state->sessions[std::string(key.view())];
      list.push_back(o.http2->start(std::move(h)));
      client_session& session = *list.back();
      co_return co_await open_stream(std::move(state), session, m, target, headers, body_length);
    }
  }
  detail::client_connection& c = *conn;
  c.parser.reset();
  c.begin = c.end = c.pinned = 0;  // a pooled connection has nothing unread (give_back checks)
  c.request_method = m;
  c.request_length = body_length;
  c.request_chunked = !body_length;
  c.written = 0;
  c.finished = c.have_head = c.body_done = false;
  c.received = 0;
  std::string& out = c.out;
  out.clear();
  out.append(name);
  out.push_back(' ');
  out.append(target);
  out.append(" HTTP/1.1\r\nHost: ");
  out.append(c.host_field);
  out.append("\r\n");
  const client_options& opts = state->opts;
  if (!opts.user_agent.empty() && !headers.contains("user-agent")) {
    out.append("User-Agent: ");
    out.append(opts.user_agent);
    out.append("\r\n");
  }
  if (c.request_chunked) {
    out.append("Transfer-Encoding: chunked\r\n");
  } else if (*body_length != 0 || sends_body(m)) {
    out.append("Content-Length: ");
    out.append(std::to_string(*body_length));
    out.append("\r\n");
  }
  for (field f : headers) {
    if (iequals(f.name, "host") || iequals(f.name, "content-length") || iequals(f.name, "transfer-encoding")) continue;
    out.append(f.name);
    out.append(": ");
    out.append(f.value);
    out.append("\r\n");
  }
  out.append("\r\n");
  client_exchange ex;
  ex.client_ = std::move(state);
  ex.conn_ = std::move(conn);
  co_return result{std::error_code{}, std::move(ex)};
}

task<io_result<response>> client_state::send_request(std::shared_ptr<client_state> state, http::scheme s,
                                                     std::string host, std::uint16_t port, client_request req) {
  using result = io_result<response>;
  for (int attempt = 0;; ++attempt) {
    auto [ec, ex] = co_await start_exchange(state, s, host, port, req.method, req.target, req.headers,
                                            req.body.size());
    // A request an HTTP/2 server did not process (its connection's GOAWAY): again, on a new connection.
    if (ec == error::unprocessed && attempt < 3) continue;
    if (ec) co_return result{ec, {}};
    const bool reused = ex.conn_ && ex.conn_->reused;
    ec = co_await ex.write(const_buffer(req.body.data(), req.body.size()));
    if (!ec) ec = co_await ex.finish();
    if (ec == error::unprocessed && attempt < 3) continue;
    if (ec) {
      // A pooled connection the server closed in the meantime: once more on a new one, when that is safe.
      const bool stale = reused && ex.conn_->received == 0 && ec != tern::error::timed_out &&
                         ec != tern::error::operation_canceled;
      if (stale && attempt == 0 && idempotent(req.method)) continue;
      co_return result{ec, {}};
    }
    response r;
    const response_head& h = ex.head();
    r.status = h.status;
    for (field f : h.headers) r.headers.add(f.name, f.value);
    if (std::error_code rec = co_await read_body(ex, r.body)) co_return result{rec, {}};
    co_return result{std::error_code{}, std::move(r)};
  }
}

}  // namespace detail

// ---- client ----

client::client(io_context& ctx) : client(ctx, client_options()) {}

client::client(io_context& ctx, client_options opts)
    : state_(std::make_shared<detail::client_state>(ctx, std::move(opts))) {}

client::~client() {
  state_->closed = true;
  state_->idle.clear();
  state_->sessions.clear();
}

const client_options& client::options() const noexcept { return state_->opts; }

std::size_t client::idle_connections() const noexcept {
  std::size_t n = 0;
  for (const auto& [key, list] : state_->idle) n += list.size();
  return n;
}

void client::close_idle() noexcept {
  state_->idle.clear();
  state_->sessions.clear();
}

task<io_result<client_exchange>> client::exchange(http::scheme s, std::string_view host, std::uint16_t port, method m,
                                                  std::string_view target, const fields& headers,
                                                  std::optional<std::uint64_t> body_length) {
  return detail::client_state::exchange_owned(state_, s, std::string(host), port, m, std::string(target), headers,
                                              body_length);
}

task<io_result<response>> client::send(http::scheme s, std::string host, std::uint16_t port, client_request req) {
  return detail::client_state::send_request(state_, s, std::move(host), port, std::move(req));
}

task<io_result<response>> client::get(std::string_view target_url) {
  std::optional<url> u = url::parse(target_url);
  if (!u) return failed_request(std::make_error_code(std::errc::invalid_argument));
  client_request req;
  req.target = std::move(u->target);
  return detail::client_state::send_request(state_, u->scheme, std::move(u->host), u->port, std::move(req));
}

task<io_result<response>> client::post(std::string_view target_url, std::string body, std::string_view content_type) {
  std::optional<url> u = url::parse(target_url);
  if (!u) return failed_request(std::make_error_code(std::errc::invalid_argument));
  client_request req;
  req.method = method::post;
  req.target = std::move(u->target);
  req.body = std::move(body);
  req.headers.set("Content-Type", content_type);
  return detail::client_state::send_request(state_, u->scheme, std::move(u->host), u->port, std::move(req));
}

}  // namespace tern::http
