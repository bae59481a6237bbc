// http_ping_server: the /ping service of Ichor's HTTP benchmark on tern::http. A POST to /ping with a JSON body
// {"sequence": N} is answered with {"sequence":N}, the number parsed from the JSON (simdjson) and written back;
// anything else gets a status that says why (404, 405, 415, 400).
//
//   http_ping_server ADDRESS:PORT [THREADS]
//
// With THREADS (default 1) above one, every worker of a tern::runtime serves the port (SO_REUSEPORT). Prints
// "listening on ADDRESS:PORT" once it serves; SIGINT or SIGTERM shut it down gracefully (requests in flight are
// answered, for up to two seconds).
#include <tern/http/server.hpp>
#include <tern/tern.hpp>

#include <simdjson.h>

#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace http = tern::http;
namespace net = tern::net;

namespace {

// The JSON parser of the calling worker: simdjson's parsers are not thread-safe, and a warm one allocates nothing.
simdjson::ondemand::parser& json_parser() {
  thread_local simdjson::ondemand::parser parser;
  return parser;
}

// {"sequence": N} with N an unsigned integer, and nothing else; false for any other body.
bool parse_sequence(std::string_view body, std::uint64_t& sequence) {
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

tern::task<http::response> ping(http::request& req) {
  const std::string_view type = req.header("content-type");
  if (type.substr(0, type.find(';')) != "application/json") co_return http::response(415);
  std::uint64_t sequence = 0;
  if (!parse_sequence(req.body(), sequence)) co_return http::response(400, "expected {\"sequence\": N}\n");
  char body[40] = "{\"sequence\":";
  char* end = std::to_chars(body + 12, body + sizeof body - 1, sequence).ptr;
  *end++ = '}';
  co_return http::response(200, std::string(body, end), "application/json");
}

std::shared_ptr<const http::router> routes() {
  auto r = std::make_shared<http::router>();
  r->post("/ping", ping);
  return r;
}

tern::task<int> serve_one(tern::io_context& ctx, net::endpoint where) {
  http::server server(ctx, routes());
  if (auto ec = server.listen(where)) {
    std::fprintf(stderr, "http_ping_server: listen on %s: %s\n", where.to_string().c_str(), ec.message().c_str());
    co_return 1;
  }
  std::printf("listening on %s\n", server.local_endpoint().value.to_string().c_str());
  std::fflush(stdout);
  tern::signal_set signals(ctx, {SIGINT, SIGTERM});
  auto running = tern::spawn(ctx, server.run());
  (void)co_await signals.wait();
  co_await server.shutdown(std::chrono::seconds(2));
  co_await std::move(running);
  co_return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: http_ping_server ADDRESS:PORT [THREADS]\n");
    return 1;
  }
  const auto where = net::endpoint::parse(argv[1]);
  const int threads = argc == 3 ? std::atoi(argv[2]) : 1;
  if (!where || threads < 1) {
    std::fprintf(stderr, "http_ping_server: bad address or thread count\n");
    return 1;
  }
  if (threads == 1) {
    tern::io_context ctx;
    return ctx.block_on(serve_one(ctx, *where));
  }
  tern::io_context main_loop;
  tern::signal_set signals(main_loop, {SIGINT, SIGTERM});  // before the workers start: they inherit the mask
  tern::runtime_options o;
  o.threads = static_cast<unsigned>(threads);
  tern::runtime rt(o);
  auto done = rt.spawn_on(0, http::serve(rt, routes(), *where, {}, std::chrono::seconds(2),
                                         [](const net::endpoint& ep) {
                                           std::printf("listening on %s\n", ep.to_string().c_str());
                                           std::fflush(stdout);
                                         }));
  (void)main_loop.block_on(signals.wait());
  rt.shutdown(std::chrono::seconds(3));
  return 0;
}
