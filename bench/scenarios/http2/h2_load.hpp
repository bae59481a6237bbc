// The harness of http2/*, shared by every stack: the worker process is the server (its threads on CPU 0), and for
// each phase it runs h2load (nghttp2-client) on CPU 1 against it over h2c with prior knowledge. A stack provides a
// function that starts a server (ping::server, ../http/ping_load.hpp) serving two routes:
//   POST /ping            the /ping service of http/ping_json (../http/ping_service.hpp), the same code everywhere;
//   GET  /bytes/<n>       200 with n bytes of body_byte(i), n at most max_body_size.
//
// http2/ping_json (params conns, streams): h2load -c conns -m streams POSTs {"sequence": N} with Content-Type
// application/json. h2load cannot check a body, so each phase is followed by a checked pass: nghttp (the same
// package) POSTs a fresh N on min(streams, 16) concurrent streams of one connection and every body must be exactly
// {"sequence":N} (an answer other than 200 has no body). The phase fails on any request h2load saw fail, on a
// non-2xx status, on a wrong checked answer, on a request the service refused or on a server thread's failure.
// Metrics: req_per_s (h2load's count over its duration), p50_us and p99_us (from h2load's per-request log) and
// server_cpu_us_per_req (the worker's CPU time, getrusage over the phase, per request answered).
// http2/streams (params streams, size): h2load -c 1 -m streams GETs /bytes/size; mb_per_s counts the bodies
// (10^6 bytes), server_cpu_us_per_req as above; the checked pass downloads one body with nghttp and compares every
// byte.
#pragma once

#include "../http/ping_load.hpp"

#include <cstddef>
#include <string_view>

namespace tern_bench::h2 {

inline constexpr std::string_view bytes_prefix = "/bytes/";
inline constexpr std::size_t max_body_size = 1024 * 1024;

// Byte i of every /bytes body: a pattern that a shifted or truncated body does not match.
inline char body_byte(std::size_t i) { return static_cast<char>('a' + (i % 251) % 26); }

// max_body_size bytes of the pattern, made once: a body of n bytes is its first n.
const char* body_bytes();

// The size a /bytes/<n> target asks for, or -1 when it is not one (or n is too large).
long long bytes_size(std::string_view target);

void run_ping(session& s, ping::server_start start);
void run_streams(session& s, ping::server_start start);

}  // namespace tern_bench::h2
