// tern/http/response.hpp
//
// http::response: what a handler answers, and what a client receives.
//
// A status, header fields and a whole body. The server writes the framing itself: Content-Length from the body
// (Content-Length and Transfer-Encoding fields set by the handler are not sent), Date and Server unless the
// handler set them, and Connection: close when the connection ends after this response. A handler that wants to
// close the connection sets Connection: close. Bodies that are produced piece by piece, or are too large to hold,
// go through the streaming form of a route (router::stream, response_stream). A 101 with `upgrade` set hands the
// connection to another protocol (upgrade.hpp).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "tern/http/fields.hpp"
#include "tern/http/message.hpp"
#include "tern/task.hpp"

namespace tern::http {

class upgraded_stream;

struct response {
  int status = status::ok;
  http::fields headers;
  std::string body;
  // Server side, with status 101: takes the connection over once the 101 is sent (upgrade.hpp).
  std::function<task<void>(upgraded_stream)> upgrade;

  response() = default;
  explicit response(int s) : status(s) {}
  // A response with a body, and its Content-Type.
  response(int s, std::string b, std::string_view content_type = "text/plain; charset=utf-8")
      : status(s), body(std::move(b)) {
    headers.add("Content-Type", content_type);  // the first field: nothing to replace
  }

  // The reason phrase sent with the status.
  std::string_view reason() const noexcept { return reason_phrase(status); }
};

}  // namespace tern::http
