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
#include "h2_fuzz_support.hpp"
#include "tern/http/protocol.hpp"
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

// The client's output: its preface, then whole frames, SETTINGS first.
struct output_check {
  std::size_t preface_seen = 0;
  frame_follower frames;
  bool first = true;

  void feed(std::string_view bytes) {
    while (preface_seen < preface.size() && !bytes.empty()) {
      TERN_FUZZ_CHECK(bytes.front() == preface[preface_seen]);
      ++preface_seen;
      bytes.remove_prefix(1);
    }
    frames.feed(bytes, [this](unsigned type) {
      TERN_FUZZ_CHECK(!first || type == 4);  // SETTINGS follows the preface
      first = false;
    });
  }
  bool whole() const noexcept { return frames.whole(); }
};

// Transports not yet destroyed: the session owns its transport, so none is left once its tasks have ended.
int transports_alive = 0;

// What the client writes goes to the check; made and destroyed with the transport, it counts the transports.
struct to_check {
  output_check* out;
  explicit to_check(output_check* o) noexcept : out(o) { ++transports_alive; }
  to_check(const to_check& other) noexcept : out(other.out) { ++transports_alive; }
  to_check& operator=(const to_check&) = delete;
  ~to_check() { --transports_alive; }
  void operator()(std::string_view bytes) const { out->feed(bytes); }
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
                          std::make_unique<memory_transport<to_check>>(ctx, input, cuts, to_check(&out), &ready),
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
