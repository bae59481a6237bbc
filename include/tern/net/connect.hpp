// tern/net/connect.hpp
//
// net::connect: a TCP connection to a host by name, or to the first of several endpoints that answers, with Happy
// Eyeballs (RFC 8305).
//
//   auto [ec, socket] = co_await tern::net::connect(ctx, "example.org", "https");
//
// How the race runs: the endpoints are put in RFC 8305's order (the resolver's first address, then the families
// alternating), the first attempt starts, and the next one starts when the attempt delay (250 ms) has passed or
// as soon as an attempt fails, whichever comes first. The first connection made wins; every other attempt is
// cancelled and its socket closed before connect returns. When every attempt has failed, the error is the last
// attempt's (connection_refused, network_unreachable, ...).
//
// Simplification against RFC 8305, written down in docs/design.md: the A and AAAA answers are awaited together
// (one resolve), not raced; with a resolver on the local network the difference is one round trip at most.
//
// Like every operation, a connect is cancelled by its task's stop token and by with_timeout (timed_out), which
// cancel every attempt in flight, and it copies what it is given (host, service, endpoints, options).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/net/endpoint.hpp"
#include "tern/net/resolver.hpp"
#include "tern/net/tcp.hpp"
#include "tern/task.hpp"
#include "tern/timer.hpp"

namespace tern::net {

struct connect_options {
  // How long an attempt runs alone before the next one starts (RFC 8305 recommends 250 ms; at least 10 ms).
  clock::duration attempt_delay = std::chrono::milliseconds(250);
  // Which addresses of the name to try.
  address_family family = address_family::any;
};

// The endpoints in the order Happy Eyeballs tries them: the first one's family first, then alternating families,
// each family keeping its own order.
std::vector<endpoint> happy_eyeballs_order(std::vector<endpoint> endpoints);

// Connects to the first of endpoints that accepts, racing them as described above (in the given order: call
// happy_eyeballs_order first to interleave the families). No endpoints: invalid_argument.
task<io_result<tcp_socket>> connect(io_context& ctx, std::vector<endpoint> endpoints, connect_options options = {});

// Resolves host and service with r, then connects as above. A failed resolve's error is returned as it is.
task<io_result<tcp_socket>> connect(resolver& r, std::string host, std::string service,
                                    connect_options options = {});

// The same with a resolver made for this call (/etc/resolv.conf's servers, /etc/hosts first).
task<io_result<tcp_socket>> connect(io_context& ctx, std::string host, std::string service,
                                    connect_options options = {});

}  // namespace tern::net
