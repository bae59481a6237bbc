// resolve: prints every address of a name, in the form of `getent ahosts`, through tern's asynchronous resolver.
//
//   resolve NAME [SERVICE] [-4|-6] [--server ADDRESS:PORT]... [--timeout MS]
//
// Each address is printed three times (STREAM, DGRAM, RAW), as getent prints them; the first line also carries
// the canonical name. With SERVICE, the port follows each address. --server asks the given DNS servers instead of
// those of /etc/resolv.conf; /etc/hosts is always consulted first. The exit status is 2 when the name has no
// address (with the resolver's message on stderr), 1 for a usage error.
#include <tern/tern.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace net = tern::net;

namespace {

int usage() {
  std::fprintf(stderr, "usage: resolve NAME [SERVICE] [-4|-6] [--server ADDRESS:PORT]... [--timeout MS]\n");
  return 1;
}

tern::task<int> print_addresses(std::string name, std::string service, net::address_family family,
                                net::resolver_options options) {
  net::resolver resolver(*tern::io_context::current(), std::move(options));
  auto [ec, found] = co_await resolver.resolve(name, service, family);
  if (ec) {
    std::fprintf(stderr, "resolve %s: %s\n", name.c_str(), ec.message().c_str());
    co_return 2;
  }
  bool first = true;
  for (const net::endpoint& ep : found.endpoints) {
    std::string address = ep.address().to_string();
    if (!service.empty()) address += " port " + std::to_string(ep.port());
    for (const char* type : {"STREAM", "DGRAM ", "RAW   "}) {
      std::printf("%-15s %s %s\n", address.c_str(), type, first ? found.canonical_name.c_str() : "");
      first = false;
    }
  }
  co_return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string name, service;
  net::address_family family = net::address_family::any;
  net::resolver_options options;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "-4") == 0) {
      family = net::address_family::v4;
    } else if (std::strcmp(arg, "-6") == 0) {
      family = net::address_family::v6;
    } else if (std::strcmp(arg, "--server") == 0 && i + 1 < argc) {
      auto ep = net::endpoint::parse(argv[++i]);
      if (!ep) return usage();
      options.servers.push_back(*ep);
    } else if (std::strcmp(arg, "--timeout") == 0 && i + 1 < argc) {
      options.timeout = std::chrono::milliseconds(std::atoi(argv[++i]));
    } else if (arg[0] == '-') {
      return usage();
    } else if (name.empty()) {
      name = arg;
    } else if (service.empty()) {
      service = arg;
    } else {
      return usage();
    }
  }
  if (name.empty()) return usage();
  return tern::run(print_addresses(name, service, family, std::move(options)));
}
