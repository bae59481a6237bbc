// What every tern scenario shares: the io_context on the backend that the impl id names, checked.
//
// tern-bench-tern is one executable for both backends: the backend is a run-time option of io_context. The worker
// asks for it explicitly (never `automatic`, so the environment cannot change it) and reports what the context
// resolved to; a context that ended up on the other backend fails the run instead of reporting under the wrong
// name.
#pragma once

#include "../harness/worker.hpp"

#include <tern/tern.hpp>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <system_error>

namespace tern_bench::tern_impl {

inline tern::backend_kind requested_backend(const session& s) {
    const std::string& id = s.request().impl;
    if (id == "tern/io_uring" || id == "tern/io_uring-latency" || id == "tern/io_uring-sqpoll" ||
        id == "tern/io_uring-http1")
        return tern::backend_kind::io_uring;
    if (id == "tern/epoll" || id == "tern/epoll-latency") return tern::backend_kind::epoll;
    throw bench_failure("not a tern implementation: " + id);
}

// The -latency implementations: tern in latency mode (runtime_options::low_latency: busy-polling loops).
inline bool latency_mode(const session& s) {
    const std::string& id = s.request().impl;
    return id == "tern/io_uring-latency" || id == "tern/epoll-latency";
}

// TERN_BENCH_ZERO_COPY=<bytes>: io_context_options::zero_copy_send_threshold for the contexts of the tern
// scenarios (io_uring honours it, epoll ignores it), so that zero-copy sends can be measured against the default
// without a build of their own. Unset or 0: the default (off).
inline std::size_t zero_copy_threshold() {
    const char* env = std::getenv("TERN_BENCH_ZERO_COPY");
    return env != nullptr ? static_cast<std::size_t>(std::strtoull(env, nullptr, 10)) : 0;
}

// TERN_BENCH_BUNDLES=0: io_context_options::receive_bundles off (one pool buffer per receive completion), to
// measure the bundled receives against single ones without a build of their own. Unset: the default (on).
inline bool receive_bundles() {
    const char* env = std::getenv("TERN_BENCH_BUNDLES");
    return env == nullptr || std::strcmp(env, "0") != 0;
}

// TERN_BENCH_SPIN_US=<us>: io_context_options::spin_before_park for the contexts of the tern scenarios (the
// runtime's default is 20 us; an io_context parks at once by default), to measure what a brief spin before parking
// buys a latency-bound point without a build of its own. Unset: the io_context's default (0).
inline std::chrono::nanoseconds spin_before_park() {
    const char* env = std::getenv("TERN_BENCH_SPIN_US");
    return std::chrono::microseconds(env != nullptr ? std::strtoll(env, nullptr, 10) : 0);
}

inline tern::io_context_options options_for(const session& s) {
    tern::io_context_options o;
    o.backend = requested_backend(s);
    o.sqpoll = s.request().impl == "tern/io_uring-sqpoll";  // a kernel thread polls the submission queue
    o.zero_copy_send_threshold = zero_copy_threshold();
    o.receive_bundles = receive_bundles();
    o.spin_before_park = spin_before_park();
    return o;
}

// Reports the resolved backend and refuses a context that is not on the one asked for.
inline void announce(session& s, const tern::io_context& ctx) {
    s.info("backend", tern::to_string(ctx.backend()));
    if (const std::size_t zc = zero_copy_threshold(); zc != 0) s.info("zero_copy_send_threshold", std::to_string(zc));
    if (!receive_bundles()) s.info("receive_bundles", "off");
    if (spin_before_park().count() != 0)
        s.info("spin_before_park_us", std::to_string(spin_before_park().count() / 1000));
    if (ctx.backend() != requested_backend(s))
        throw bench_failure(std::string("asked for ") + s.request().impl + ", the context runs " +
                            tern::to_string(ctx.backend()));
}

// Catches an exception escaping a detached task (a failed check in it): stops the loop, and run's caller
// rethrows it, so the failure ends the run instead of being printed and forgotten. The handler shares ownership
// of the slot, so it stays valid even if the context reports an exception while being destroyed after the trap.
class exception_trap {
public:
    explicit exception_trap(tern::io_context& ctx) : first_(std::make_shared<std::exception_ptr>()) {
        ctx.set_exception_handler([slot = first_, &ctx](std::exception_ptr e) {
            if (!*slot) *slot = e;
            ctx.stop();
        });
    }
    void rethrow_if_any() const {
        if (*first_) std::rethrow_exception(*first_);
    }

private:
    std::shared_ptr<std::exception_ptr> first_;
};

// Throws bench_failure unless `ec` is `expected` (compared as conditions: an ECANCELED system error equals
// std::errc::operation_canceled).
inline void expect(const std::error_code& ec, std::errc expected, const char* what) {
    if (ec != expected)
        throw bench_failure(std::string(what) + ": expected '" + std::make_error_code(expected).message() + "', got '" +
                            ec.message() + "'");
}

inline void expect_ok(const std::error_code& ec, const char* what) {
    if (ec) throw bench_failure(std::string(what) + ": " + ec.message());
}

}  // namespace tern_bench::tern_impl
