// libFuzzer target: tern::http2's server connection (src/http2/server_connection.cpp) with nghttp2 under it, given
// arbitrary bytes as a client's after its connection preface, arriving in pieces of arbitrary sizes. The
// connection runs as a server runs it (http2::server_protocol's serve, on a loop, with routes that read whole and
// streamed bodies, answer with bodies and trailers, and fail), over an in-memory transport instead of a socket:
// what it reads is the input, cut where the input's hash says; what it writes is checked and dropped. Checks:
// - serve() returns once the input has ended (every stream's handler has ended with it: nothing is left running
//   on the loop);
// - what the server writes is whole HTTP/2 frames, its SETTINGS first, none over the largest frame size a client
//   may allow, and a GOAWAY at most twice (the shutdown notice and the final one) before the connection ends.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "h2_fuzz_support.hpp"
#include "tern/http/router.hpp"
#include "tern/http/server.hpp"
#include "tern/http/stream.hpp"
#include "tern/http/transport.hpp"
#include "tern/http2/server.hpp"
#include "tern/tern.hpp"

namespace {

namespace http = tern::http;
using namespace tern::fuzz;

constexpr std::string_view preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// The server's output: whole frames, SETTINGS first, at most two GOAWAYs.
struct output_check {
  frame_follower frames;
  bool first = true;
  int goaways = 0;

  void feed(std::string_view bytes) {
    frames.feed(bytes, [this](unsigned type) {
      TERN_FUZZ_CHECK(!first || type == 4);  // the server's preface is a SETTINGS frame
      first = false;
      if (type == 7) ++goaways;
      TERN_FUZZ_CHECK(goaways <= 2);
    });
  }
  bool whole() const noexcept { return frames.whole(); }
};

// What the server writes goes to the check.
struct to_check {
  output_check* out;
  void operator()(std::string_view bytes) const { out->feed(bytes); }
};

http::router routes() {
  http::router r;
  r.get("/", [](http::request&) -> tern::task<http::response> { co_return http::response(200, "hello\n"); });
  r.post("/echo", [](http::request& q) -> tern::task<http::response> {
    co_return http::response(200, std::string(q.body()));
  });
  r.get("/fail", [](http::request&) -> tern::task<http::response> {
    throw std::runtime_error("failed");
    co_return http::response(200);
  });
  r.stream(http::method::post, "/stream",
           [](http::request&, http::body_reader& body, http::response_stream& out) -> tern::task<void> {
             if (co_await out.start(200)) co_return;
             char buf[1000];
             for (;;) {
               auto [ec, n] = co_await body.read_some(tern::mutable_buffer(buf, sizeof buf));
               if (ec) break;
               if (co_await out.write(tern::const_buffer(buf, n))) co_return;
             }
             http::fields t;
             for (http::field f : body.trailers()) t.add(f.name, f.value);
             (void)co_await out.finish(t);
           });
  // 40,000 bytes lent with write_last, past the stream's 16 KiB window: the input's WINDOW_UPDATEs, resets and
  // GOAWAYs decide how much is taken; the buffer is overwritten and freed once write_last returns (ASan sees a read
  // after that).
  r.stream(http::method::get, "/last",
           [](http::request&, http::body_reader&, http::response_stream& out) -> tern::task<void> {
             auto body = std::make_unique<std::string>(40000, 'l');
             if (co_await out.start(200, {}, body->size())) co_return;
             (void)co_await out.write_last(tern::const_buffer(body->data(), body->size()));
             body->assign(body->size(), 'X');
           });
  // Starts a response and leaves it unfinished: the stream is reset.
  r.stream(http::method::get, "/half",
           [](http::request&, http::body_reader&, http::response_stream& out) -> tern::task<void> {
             if (co_await out.start(200, {}, 10)) co_return;
             (void)co_await out.write(tern::const_buffer("12345", 5));
           });
  return r;
}

struct harness {
  tern::io_context ctx;
  std::unique_ptr<http::server> server;
  std::shared_ptr<const http::connection_protocol> h2;

  harness() {
    http::server_options o;
    o.limits.max_header_bytes = 4096;
    o.limits.max_body = 64 * 1024;
    tern::http2::server_options h;
    h.max_concurrent_streams = 16;
    h.stream_window = 16 * 1024;
    h.connection_window = 64 * 1024;
    h2 = tern::http2::server_protocol(h);
    o.http2 = h2;
    server = std::make_unique<http::server>(ctx, routes(), o);
  }

  tern::task<void> serve(std::string_view input, choices& cuts, output_check& out) {
    memory_transport<to_check> t(ctx, input, cuts, to_check{&out});
    tern::net::endpoint remote = tern::net::endpoint::loopback_v4(1);
    http::stop_listener* listener = nullptr;
    co_await h2->serve(http::handover{*server, t.socket(), &t, remote, preface, nullptr, {}, {}, &listener});
    TERN_FUZZ_CHECK(listener == nullptr);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static harness h;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  choices cuts(input);
  output_check out;
  h.ctx.block_on(h.serve(input, cuts, out));
  TERN_FUZZ_CHECK(out.whole());
  return 0;
}
