// tern's /ping server of http/ping_json, for the scenarios that serve other routes or other protocols on the same
// threads (http2/*): one io_context per server thread, each with its own ping::service, listening on one port
// with SO_REUSEPORT.
#pragma once

#include "ping_load.hpp"
#include "ping_service.hpp"

#include <tern/http/server.hpp>

#include <memory>

namespace tern_bench::tern_impl {

// The routes one server thread serves, made on that thread with its own service.
using routes_for = tern::http::router (*)(ping::service& service);

// POST /ping answered by the service, and http/ping_json's server options.
tern::http::router ping_routes(ping::service& service);
tern::http::server_options ping_options();

// A server of `threads` threads on an ephemeral port of 127.0.0.1, listening when it returns.
std::unique_ptr<ping::server> start_tern_server(session& s, int threads, routes_for routes,
                                                const tern::http::server_options& opts);

}  // namespace tern_bench::tern_impl
