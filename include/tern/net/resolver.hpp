// tern/net/resolver.hpp
//
// net::resolver: asynchronous name resolution on the loop, with c-ares.
//
//   tern::net::resolver r(ctx);
//   auto [ec, found] = co_await r.resolve("example.org", "https");
//   for (const tern::net::endpoint& ep : found.endpoints) ...
//
// What a query does: a numeric host ("192.0.2.7", "::1") is converted without a query; a name is looked up in
// /etc/hosts first (unless options say otherwise), then in DNS (A and AAAA for address_family::any) at the servers
// of /etc/resolv.conf or those given. The service is a port number or a name from /etc/services.
//
// Why it runs on the loop and not on a thread: c-ares opens its own UDP (and, for long answers, TCP) sockets and
// asks the caller to watch them. The resolver watches them with the loop's backend (poll operations, as for any
// other descriptor) and takes its retransmission timeouts from the loop's timer wheel, so no thread is started and
// a resolve is an operation like a read: cancellable (resolver::cancel, a stop token, with_timeout) and reported
// through std::error_code. libtern links c-ares privately: this header does not include ares.h.
//
// Which thread: a resolver belongs to the loop it was made on; resolve() is awaited by tasks of that loop (another
// thread gets tern::error::wrong_loop). Several resolves may be pending at once. Destroying the resolver completes
// the pending ones with operation_canceled.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "tern/detail/work_queue.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/net/endpoint.hpp"
#include "tern/task.hpp"

namespace tern::net {

namespace dns {
// The errors of a failed resolution, as c-ares reports them, in the category "tern.resolver"; message() is c-ares's
// own text. A refused connection to the server also compares equal to std::errc::connection_refused. As for every
// other operation, a resolve that no server answered within its tries is tern::error::timed_out (not timed_out
// below, c-ares's value, which is never reported), and a cancelled one tern::error::operation_canceled.
enum class error {
  no_data = 1,              // the name exists but has no address of the family asked for
  format_error = 2,         // the server could not understand the query
  server_failure = 3,       // SERVFAIL
  not_found = 4,            // the name does not exist (NXDOMAIN), or is in no source
  not_implemented = 5,
  refused = 6,              // the server refused the query
  bad_query = 7,
  bad_name = 8,             // not a valid host name
  bad_family = 9,
  bad_response = 10,        // the answer was malformed
  connection_refused = 11,  // the server's port is closed
  timed_out = 12,           // (reported as tern::error::timed_out)
  end_of_file = 13,
  file_error = 14,          // /etc/resolv.conf or /etc/hosts could not be read
  no_memory = 15,
  destroyed = 16,
  bad_string = 17,
  bad_flags = 18,
  no_name = 19,             // neither a host nor a service was given
  bad_hints = 20,
  not_initialized = 21,
  canceled = 24,
  service_not_found = 25,   // the service is neither a number nor a name in /etc/services
};

// The category of dns::error ("tern.resolver").
const std::error_category& category() noexcept;

inline std::error_code make_error_code(error e) noexcept { return {static_cast<int>(e), category()}; }
}  // namespace dns

// The names before dns::error.
using resolver_error [[deprecated("renamed tern::net::dns::error")]] = dns::error;
[[deprecated("renamed tern::net::dns::category")]] inline const std::error_category& resolver_category() noexcept {
  return dns::category();
}

// Which addresses a resolve returns.
enum class address_family { any, v4, v6 };

struct resolver_options {
  // The DNS servers (address and port) to ask, in order; empty: those of /etc/resolv.conf.
  std::vector<endpoint> servers;
  // How long one try waits for an answer; zero: /etc/resolv.conf's or c-ares's default (a few seconds).
  std::chrono::milliseconds timeout{0};
  // How many times each server is tried; zero: the default.
  int tries = 0;
  // Consult /etc/hosts before DNS.
  bool hosts_file = true;
  // Append /etc/resolv.conf's search domains to names with fewer dots than its ndots (as getaddrinfo does).
  bool search_domains = true;
};

// What a resolve found: the endpoints in the order to try them (c-ares sorts them by RFC 6724), without duplicates,
// each with the service's port, and the canonical name (the target of the last CNAME; else the name asked).
struct resolve_results {
  std::string canonical_name;
  std::vector<endpoint> endpoints;
};

class resolver;

namespace detail {
struct resolver_impl;
struct resolve_query;

// The awaiting side of one resolve (inside resolve()'s frame): where the outcome is written and how the awaiting
// coroutine is resumed.
struct resolve_request : tern::detail::resume_item {
  resolve_query* query = nullptr;  // the c-ares side while the query runs
  bool starting = false;           // inside ares_getaddrinfo: a synchronous answer must not schedule a resumption
  bool done = false;
  bool queued = false;             // the resumption is in the run queue
  std::error_code ec;
  resolve_results results;
};

// One resolve, awaited inside resolver::resolve: cancellable, so stop tokens and with_timeout reach it.
class [[nodiscard]] resolve_awaiter {
 public:
  resolve_awaiter(resolver_impl* impl, io_context& ctx, std::string_view host, std::string_view service,
                  address_family family) noexcept
      : impl_(impl), ctx_(&ctx), host_(host), service_(service), family_(family) {}
  resolve_awaiter(const resolve_awaiter& o) noexcept
      : impl_(o.impl_), ctx_(o.ctx_), host_(o.host_), service_(o.service_), family_(o.family_) {}
  resolve_awaiter& operator=(const resolve_awaiter&) = delete;
  ~resolve_awaiter();

  bool await_ready() noexcept;
  bool await_suspend(std::coroutine_handle<> h) noexcept;
  io_result<resolve_results> await_resume() noexcept {
    req_.queued = false;
    return {req_.ec, std::move(req_.results)};
  }
  // Completes a pending resolve now with operation_canceled; the c-ares query runs on and its answer is dropped.
  void cancel() noexcept;
  io_context& context() const noexcept { return *ctx_; }

 private:
  resolver_impl* impl_;
  io_context* ctx_;
  std::string_view host_;
  std::string_view service_;
  address_family family_;
  std::uint16_t port_ = 0;
  resolve_request req_;
};
}  // namespace detail

class resolver {
 public:
  // A resolver on ctx. Reading /etc/resolv.conf or starting c-ares can fail; every resolve then reports that
  // error (see error()).
  explicit resolver(io_context& ctx, resolver_options options = {});
  resolver(resolver&&) noexcept;
  resolver& operator=(resolver&&) noexcept;
  resolver(const resolver&) = delete;
  resolver& operator=(const resolver&) = delete;
  // Completes the pending resolves with operation_canceled.
  ~resolver();

  // The addresses of host with service's port (empty service: port 0). host may be numeric (no query is made).
  // Yields io_result<resolve_results>: dns::error::not_found for a name that does not exist, no_data when it has
  // no address of the family, tern::error::timed_out when no server answered, operation_canceled, wrong_loop; a
  // non-empty list otherwise. host and service are copied into the task: temporaries are fine.
  task<io_result<resolve_results>> resolve(std::string host, std::string service = {},
                                           address_family family = address_family::any);

  // Completes every pending resolve with operation_canceled. Loop thread.
  void cancel() noexcept;
  // Why the resolver could not start (empty when it did).
  std::error_code error() const noexcept;
  io_context& context() const noexcept { return *ctx_; }

 private:
  io_context* ctx_;
  std::unique_ptr<detail::resolver_impl> impl_;
};

}  // namespace tern::net

template <>
struct std::is_error_code_enum<tern::net::dns::error> : std::true_type {};
