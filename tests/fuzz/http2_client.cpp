// libFuzzer target: tern::http2's client session (src/http2/client.cpp) with nghttp2 under it, given arbitrary
// bytes as the server's, arriving in pieces of arbitrary sizes while one to four requests are in flight: GETs, a
// HEAD, POSTs whose bodies go out in pieces (with a length or without one), and a request given up before its
// answer (its stream reset). The session runs as http::client runs it (client_protocol's start, on a loop), over
// an in-memory transport: what it reads is the input, which starts once the requests are on their way (a response
// to a stream the client has not opened yet ends the connection, and every input would end there); what it writes
// is checked and dropped. Checks:
// - every request ends once the input has ended: its response head, its body or an error (a request still waiting
//   then is a hang, which libFuzzer reports as a timeout: the client's own timeouts are longer than its limit);
// - a response head handed over is a final one (status 200-999, HTTP/2), and a body read to its end has the length
//   its head declared (HEAD: none) and at most the client's body limit;
// - what the client writes is whole HTTP/2 frames after its connection preface, SETTINGS first, none over the
//   largest frame size a peer may allow;
// - once the session is destroyed and the loop has run what was ready, its tasks have ended (its transport, which
//   it owns, is gone).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "tern/http/protocol.hpp"
#include "tern/http/transport.hpp"
#include "tern/http2/client.hpp"
#include "tern/sync/event.hpp"
#include "tern/task_group.hpp"
#include "tern/tern.hpp"

namespace {

namespace http = tern::http;
using namespace tern::fuzz;
using namespace std::chrono_literals;

constexpr std::string_view preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr std::size_t max_body = 8 * 1024;  // below what a stream's window lets through: the limit is reached

// The client's output: its preface, then frames, followed header by header.
struct output_check {
  std::size_t preface_seen = 0;
  std::string partial;  // the current frame's header, until it is whole
  std::size_t skip = 0;
  bool first = true;

  void feed(std::string_view bytes) {
    while (preface_seen < preface.size() && !bytes.empty()) {
      TERN_FUZZ_CHECK(bytes.front() == preface[preface_seen]);
      ++preface_seen;
      bytes.remove_prefix(1);
    }
    while (!bytes.empty()) {
      if (skip != 0) {
        const std::size_t k = std::min(skip, bytes.size());
        skip -= k;
        bytes.remove_prefix(k);
        continue;
      }
      partial.push_back(bytes.front());
      bytes.remove_prefix(1);
      if (partial.size() < 9) continue;
      const auto* h = reinterpret_cast<const unsigned char*>(partial.data());
      skip = (std::size_t{h[0]} << 16) | (std::size_t{h[1]} << 8) | h[2];
      TERN_FUZZ_CHECK(!first || h[3] == 4);  // SETTINGS follows the preface
      TERN_FUZZ_CHECK(skip <= 16777215);
      first = false;
      partial.clear();
    }
  }
  bool whole() const noexcept { return partial.empty() && skip == 0; }
};

// Transports not yet destroyed: the session owns its transport, so none is left once its tasks have ended.
int transports_alive = 0;

// The server's side of the connection: the input, in pieces, once the requests are on their way (ready).
class memory_transport final : public http::transport {
 public:
  memory_transport(tern::io_context& ctx, std::string_view input, choices& cuts, output_check& out,
                   tern::sync::manual_reset_event& ready)
      : socket_(ctx), input_(input), cuts_(cuts), out_(out), ready_(ready) {
    ++transports_alive;
  }
  ~memory_transport() override { --transports_alive; }

  tern::task<std::error_code> handshake() override { co_return std::error_code{}; }
  tern::task<tern::io_result<std::size_t>> read_some(tern::mutable_buffer b) override {
    if (std::error_code ec = co_await ready_.wait()) co_return tern::io_result<std::size_t>{ec, 0};
    if (input_.empty()) co_return tern::io_result<std::size_t>{make_error_code(tern::error::eof), 0};
    const std::size_t piece = cuts_.one_in(4) ? cuts_.between(1, 4096) : cuts_.between(1, 64);
    const std::size_t n = std::min({piece, input_.size(), b.size()});
    std::memcpy(b.data(), input_.data(), n);
    input_.remove_prefix(n);
    co_return tern::io_result<std::size_t>{std::error_code{}, n};
  }
  tern::task<tern::io_result<std::size_t>> write_all(tern::const_buffer b) override {
    out_.feed(std::string_view(static_cast<const char*>(b.data()), b.size()));
    co_return tern::io_result<std::size_t>{std::error_code{}, b.size()};
  }
  tern::task<std::error_code> shutdown_send() override { co_return std::error_code{}; }
  tern::net::tcp_socket& socket() noexcept override { return socket_; }

 private:
  tern::net::tcp_socket socket_;
  std::string_view input_;
  choices& cuts_;
  output_check& out_;
  tern::sync::manual_reset_event& ready_;
};

enum class kind { get, head, post_known, post_unknown, given_up };

// One request, from its opening to the end of its answer.
tern::task<void> exchange(http::client_session& session, kind k, std::size_t body_size) {
  const http::method m = k == kind::head                                      ? http::method::head
                         : k == kind::post_known || k == kind::post_unknown ? http::method::post
                                                                             : http::method::get;
  http::fields headers;
  headers.add("accept", "*/*");
  std::optional<std::uint64_t> length;
  if (m != http::method::post) length = 0;
  else if (k == kind::post_known) length = body_size;
  auto [ec, s] = co_await session.open(m, k == kind::head ? "/h" : "/r?q=1", headers, length);
  if (ec) co_return;
  if (m == http::method::post) {
    const std::string body(body_size, 'b');
    for (std::size_t at = 0; at < body.size();) {
      const std::size_t n = std::min<std::size_t>(body.size() - at, 700);
      if (co_await s->write(tern::const_buffer(body.data() + at, n))) co_return;
      at += n;
    }
  }
  if (k == kind::given_up) co_return;  // its client_stream goes before the answer: the stream is reset
  if (co_await s->finish()) co_return;
  const http::response_head& h = s->head();
  TERN_FUZZ_CHECK(h.status >= 200 && h.status <= 999);
  TERN_FUZZ_CHECK(h.version == http::http2);
  std::uint64_t total = 0;
  char buf[1500];
  for (;;) {
    auto [rec, n] = co_await s->read_some(tern::mutable_buffer(buf, sizeof buf));
    if (rec == tern::error::eof) {
      if (m == http::method::head) TERN_FUZZ_CHECK(total == 0);
      else if (h.framing == http::body_framing::content_length) TERN_FUZZ_CHECK(total == h.content_length);
      TERN_FUZZ_CHECK(total <= max_body);
      break;
    }
    if (rec) break;
    TERN_FUZZ_CHECK(n > 0 && n <= sizeof buf);
    total += n;
  }
}

tern::task<void> run(tern::io_context& ctx, std::string_view input, choices& cuts, output_check& out,
                     tern::sync::manual_reset_event& ready) {
  static const auto protocol = tern::http2::client_protocol([] {
    tern::http2::client_options o;
    o.stream_window = 16 * 1024;
    o.connection_window = 64 * 1024;
    o.output_per_stream = 2048;
    return o;
  }());
  http::client_handover h{tern::net::tcp_socket(ctx),
                          std::make_unique<memory_transport>(ctx, input, cuts, out, ready),
                          "fuzz.example",
                          "tern-fuzz",
                          {},
                          60s,
                          60s,
                          60s};
  h.limits.max_header_bytes = 4096;
  h.limits.max_headers = 32;
  h.limits.max_body = max_body;
  std::unique_ptr<http::client_session> session = protocol->start(std::move(h));
  const std::size_t requests = cuts.between(1, 4);
  co_await tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<void> {
    for (std::size_t i = 0; i < requests; ++i) {
      const auto k = static_cast<kind>(cuts.below(5));
      g.spawn(exchange(*session, k, cuts.between(0, 5000)));
    }
    // The requests' HEADERS written before the server's first byte is read.
    for (int i = 0; i < 4; ++i) co_await tern::yield();
    ready.set();
    co_return;
  });
  session.reset();  // its reader and writer see the connection closed and end (the caller runs them out)
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static tern::io_context ctx;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  choices cuts(input);
  output_check out;
  tern::sync::manual_reset_event ready;  // outlives the session's tasks, which the transport's reads wait on
  ctx.block_on(run(ctx, input, cuts, out, ready));
  while (ctx.poll() != 0) {
  }
  TERN_FUZZ_CHECK(transports_alive == 0);
  TERN_FUZZ_CHECK(out.preface_seen == preface.size());
  TERN_FUZZ_CHECK(out.whole());
  return 0;
}
