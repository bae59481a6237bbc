// tern/http/router.hpp
//
// http::router: which handler answers which request, by method and path.
//
// A pattern is a path whose segments are literals or {name} captures: "/users/{id}/posts/{post}" matches
// "/users/7/posts/12" and gives the handler request.param("id") == "7". A literal segment wins over a capture at
// the same place ("/users/me" before "/users/{id}", whatever the order they were added in); otherwise routes are
// tried in the order they were added. A path that matches a route of another method only is answered 405 with an
// Allow field; one that matches nothing, 404. HEAD falls back to the GET route of the path (the server sends the
// head of its response without the body).
//
// Two forms of handler:
// - handler: task<response>(request&): the request with its whole body, and a whole response. The usual form.
// - stream_handler: task<void>(request&, body_reader&, response_stream&): the body is read piece by piece and the
//   response written piece by piece (chunked when its length is not given): uploads and downloads of any size.
// A handler that throws is answered 500 and the connection goes on; the exception never reaches the loop.
//
// A router is built before the server starts and then only read, so one router can serve every worker of a
// runtime at once; handlers run on the worker of their connection and must be safe to run on several at once.
// A handler may move to another worker (runtime::switch_to, to use what that worker owns) and return from there:
// the connection goes on on its own loop all the same.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tern/http/message.hpp"
#include "tern/http/request.hpp"
#include "tern/http/response.hpp"
#include "tern/task.hpp"

namespace tern::http {

class body_reader;
class response_stream;

using handler = std::function<task<response>(request&)>;
using stream_handler = std::function<task<void>(request&, body_reader&, response_stream&)>;

class router {
 public:
  router() = default;

  // Adds a route for method m and pattern (a path starting with '/'; "{name}" segments capture). Throws
  // std::invalid_argument for a malformed pattern (no leading '/', an unclosed '{', more than
  // request::max_params captures, two captures of one name).
  router& add(method m, std::string_view pattern, handler h);
  router& get(std::string_view pattern, handler h) { return add(method::get, pattern, std::move(h)); }
  router& post(std::string_view pattern, handler h) { return add(method::post, pattern, std::move(h)); }
  router& put(std::string_view pattern, handler h) { return add(method::put, pattern, std::move(h)); }
  router& patch(std::string_view pattern, handler h) { return add(method::patch, pattern, std::move(h)); }
  router& del(std::string_view pattern, handler h) { return add(method::delete_, pattern, std::move(h)); }
  // A route whose handler reads the body and writes the response piece by piece.
  router& stream(method m, std::string_view pattern, stream_handler h);

  struct route;
  // The route for a request and its captures (set on req); nullptr when none matches, with status 404 or 405
  // (allow then lists the methods the path has, as "GET, HEAD, POST").
  const route* match(request& req, int& status, std::string& allow) const;

  struct segment {
    std::string text;  // the literal, or the capture's name
    bool capture = false;
  };
  struct route {
    http::method method;
    std::vector<segment> segments;
    // A pattern without captures, whole: a path matches it when it is the same string (the same segments).
    bool literal = false;
    std::string pattern;
    handler whole;
    stream_handler streaming;  // set instead of whole for router::stream routes
  };

 private:
  route& add_route(method m, std::string_view pattern);
  std::vector<route> routes_;
};

}  // namespace tern::http
