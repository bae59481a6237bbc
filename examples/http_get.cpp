// http_get: a small curl. Fetches http:// URLs with tern::http's client and prints the status line, the fields
// and the body of each; several URLs share the client's pool, so a second URL on the same host reuses the
// connection.
//
//   http_get [-I] [--timeout MS] URL...
//
// -I prints only the status line and fields (a HEAD request). Exit status: 0 when every response was 2xx or 3xx,
// 2 when a request failed or a response was 4xx/5xx (the reason on stderr), 1 for a usage error.
#include <tern/http/client.hpp>
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
  std::fprintf(stderr, "usage: http_get [-I] [--timeout MS] URL...\n");
  return 1;
}

tern::task<int> fetch_all(std::vector<std::string> urls, bool head_only, std::chrono::milliseconds timeout) {
  http::client_options opts;
  opts.response_timeout = opts.connect_timeout = timeout;
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
    std::printf("HTTP/1.1 %d %s\n", r.status, r.reason().data());
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
  std::chrono::milliseconds timeout(10'000);
  std::vector<std::string> urls;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-I") == 0) {
      head_only = true;
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
  return ctx.block_on(fetch_all(std::move(urls), head_only, timeout));
}
