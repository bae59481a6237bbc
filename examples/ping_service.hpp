// ping_service.hpp: the /ping service of Ichor's HTTP benchmark, shared by examples/http_ping_server.cpp (plain
// HTTP) and examples/https_server.cpp (the same over TLS). A POST to /ping with a JSON body {"sequence": N} is
// answered with {"sequence":N}, the number parsed from the JSON (simdjson) and written back; anything else gets a
// status that says why (404, 405, 415, 400).
#pragma once

#include <tern/http/router.hpp>
#include <tern/tern.hpp>

#include <simdjson.h>

#include <charconv>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace ping_service {

namespace http = tern::http;

// The JSON parser of the calling worker: simdjson's parsers are not thread-safe, and a warm one allocates nothing.
inline simdjson::ondemand::parser& json_parser() {
  thread_local simdjson::ondemand::parser parser;
  return parser;
}

// {"sequence": N} with N an unsigned integer, and nothing else; false for any other body.
inline bool parse_sequence(std::string_view body, std::uint64_t& sequence) {
  // simdjson reads up to SIMDJSON_PADDING bytes past the end of its input: a copy into padded memory makes that
  // safe whatever follows the body in the connection's buffer.
  thread_local std::string padded;
  padded.assign(body);
  padded.resize(body.size() + simdjson::SIMDJSON_PADDING);
  simdjson::ondemand::document doc;
  if (json_parser().iterate(padded.data(), body.size(), padded.size()).get(doc)) return false;
  simdjson::ondemand::object object;
  if (doc.get_object().get(object)) return false;
  std::size_t keys = 0;
  bool found = false;
  for (auto field : object) {
    std::string_view key;
    if (field.unescaped_key().get(key) || ++keys > 1 || key != "sequence") return false;
    if (field.value().get_uint64().get(sequence)) return false;
    found = true;
  }
  // The object was walked to its end; anything after it is an error.
  return found && doc.current_location().error() == simdjson::OUT_OF_BOUNDS;
}

inline tern::task<http::response> ping(http::request& req) {
  const std::string_view type = req.header("content-type");
  if (type.substr(0, type.find(';')) != "application/json") co_return http::response(415);
  std::uint64_t sequence = 0;
  if (!parse_sequence(req.body(), sequence)) co_return http::response(400, "expected {\"sequence\": N}\n");
  char body[40] = "{\"sequence\":";
  char* end = std::to_chars(body + 12, body + sizeof body - 1, sequence).ptr;
  *end++ = '}';
  co_return http::response(200, std::string(body, end), "application/json");
}

inline std::shared_ptr<const http::router> routes() {
  auto r = std::make_shared<http::router>();
  r->post("/ping", ping);
  return r;
}

}  // namespace ping_service
