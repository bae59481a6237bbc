// http_get: a small curl. Fetches http:// URLs with tern::http's client and prints the status line, the fields
// and the body of each; several URLs share the client's pool, so a second URL on the same host reuses the
// connection.
//
//   http_get [-I] [--http2] [--timeout MS] URL...
//
// -I prints only the status line and fields (a HEAD request). --http2 speaks HTTP/2 from the first byte (h2c with
// prior knowledge, tern::http2): the URLs of one host then share one connection, as streams. Exit status: 0 when every response was 2xx or 3xx,
// 2 when a request failed or a response was 4xx/5xx (the reason on stderr), 1 for a usage error.
#include <tern/http/client.hpp>
#include <tern/http2/client.hpp>
#include <tern/tern.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace http = tern::http;

namespace {

int usage() {
  std::fprintf(stderr, "usage: http_get [-I] [--http2] [--timeout MS] URL...\n");
  return 1;
}

tern::task<int> fetch_all(std::vector<std::string> urls, bool head_only, bool h2, std::chrono::milliseconds timeout) {
  http::client_options opts;
  opts.response_timeout = opts.connect_timeout = timeout;
  if (h2) {
    opts.http2 = tern::http2::client_protocol();
    opts.http2_prior_knowledge = true;
  }
  http::client client(*tern::io_context::current(), opts);
  int status = 0;
  for (const std::string& text : urls) {
    const auto u = http::url::parse(text);
    if (!u) {
      std::fprintf(stderr, "http_get: not an http:// URL: %s\n", text.c_str());
      status = 2;
      continue;
    }
    http::client_request req;
    req.method = head_only ? http::method::head : http::method::get;
    req.target = u->target;
    auto [ec, r] = co_await client.send(u->host, u->port, std::move(req));
    if (ec) {
      std::fprintf(stderr, "http_get: %s: %s\n", text.c_str(), ec.message().c_str());
      status = 2;
      continue;
    }
    std::printf("%s %d %s\n", h2 ? "HTTP/2" : "HTTP/1.1", r.status, r.reason().data());
    for (http::field f : r.headers) {
      std::printf("%.*s: %.*s\n", static_cast<int>(f.name.size()), f.name.data(), static_cast<int>(f.value.size()),
                  f.value.data());
    }
    std::printf("\n");
    std::fwrite(r.body.data(), 1, r.body.size(), stdout);
    if (r.status >= 400) status = 2;
  }
  co_return status;
}

}  // namespace

int main(int argc, char** argv) {
  bool head_only = false;
  bool h2 = false;
  std::chrono::milliseconds timeout(10'000);
  std::vector<std::string> urls;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-I") == 0) {
      head_only = true;
    } else if (std::strcmp(argv[i], "--http2") == 0) {
      h2 = true;
    } else if (std::strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
      timeout = std::chrono::milliseconds(std::atol(argv[++i]));
    } else if (argv[i][0] == '-') {
      return usage();
    } else {
      urls.emplace_back(argv[i]);
    }
  }
  if (urls.empty()) return usage();
  tern::io_context ctx;
  return ctx.block_on(fetch_all(std::move(urls), head_only, h2, timeout));
}
