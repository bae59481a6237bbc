// http2::server_protocol: the HTTP/2 side of http::server (see tern/http2/server.hpp), made once per server
// configuration: its nghttp2 options are shared by every connection it serves.
#include "tern/http2/server.hpp"

#include <new>

#include "nghttp2_api.hpp"
#include "server_connection.hpp"

namespace tern::http2 {

namespace {

class server_protocol_impl final : public http::connection_protocol {
 public:
  explicit server_protocol_impl(server_options opts) : opts_(opts) {
    nghttp2_option* o = nullptr;
    if (nghttp2_option_new(&o) != 0) throw std::bad_alloc();
    option_.reset(o);
    // Windows follow what the handlers consume (server_connection.cpp), not what arrives.
    nghttp2_option_set_no_auto_window_update(o, 1);
    // RFC 7540's priorities are deprecated (RFC 9113 §5.3.2); the server says so (SETTINGS_NO_RFC7540_PRIORITIES)
    // and keeps no closed streams for a priority tree. A client that does not say so too still has its PRIORITY
    // frames checked (a stream that depends on itself, stream 0) by nghttp2's minimal fallback.
    nghttp2_option_set_no_closed_streams(o, 1);
    nghttp2_option_set_server_fallback_rfc7540_priorities(o, 1);
    // Frames nghttp2 answers by itself (SETTINGS and PING acknowledgements, RST_STREAMs) may wait in its queue
    // only this many at once: beyond, the peer floods (CVE-2019-9512, 9514, 9515) and the session ends.
    nghttp2_option_set_max_outbound_ack(o, 100);
    nghttp2_option_set_max_settings(o, 32);
  }

  task<void> serve(http::handover h) const override {
    try {
      detail::server_connection c(h, opts_, option_.get());
      co_await c.run();
    } catch (...) {
      // Out of memory inside one connection: it ends, the server goes on.
    }
  }

 private:
  server_options opts_;
  detail::option_ptr option_;
};

}  // namespace

std::shared_ptr<const http::connection_protocol> server_protocol(server_options opts) {
  return std::make_shared<const server_protocol_impl>(opts);
}

}  // namespace tern::http2
