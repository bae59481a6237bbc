// What every Asio scenario shares: the configuration this worker was compiled with, and the io_context.
//
// Each Asio worker executable is compiled with one configuration (CMake sets the macros for the whole target):
//   tern-bench-asio-epoll: the default epoll reactor;
//   tern-bench-asio-uring: ASIO_HAS_IO_URING + ASIO_DISABLE_EPOLL, the io_uring backend for sockets and timers.
// Both use concurrency_hint 1 (one thread runs the context), Asio's best setting for single-thread scenarios.
// With clang and libstdc++, Asio 1.22 does not detect coroutine support by itself; CMake defines
// ASIO_HAS_CO_AWAIT=1 and ASIO_HAS_STD_COROUTINE=1.
#pragma once

#include "../harness/worker.hpp"

#include <asio.hpp>

#ifndef TERN_BENCH_ASIO_CONFIG
#error "TERN_BENCH_ASIO_CONFIG must name the Asio configuration (set by bench/CMakeLists.txt)"
#endif

#if !defined(ASIO_HAS_CO_AWAIT)
#error "Asio coroutine support is off: define ASIO_HAS_CO_AWAIT=1 and ASIO_HAS_STD_COROUTINE=1"
#endif

namespace tern_bench::asio_impl {

inline constexpr const char* config = TERN_BENCH_ASIO_CONFIG;

// A configuration mismatch would put one backend's numbers under the other's name: refuse to compile it.
#if defined(ASIO_HAS_IO_URING) && !defined(ASIO_HAS_EPOLL)
static_assert(std::string_view(TERN_BENCH_ASIO_CONFIG) == "io_uring");
#elif defined(ASIO_HAS_EPOLL) && !defined(ASIO_HAS_IO_URING)
static_assert(std::string_view(TERN_BENCH_ASIO_CONFIG) == "epoll");
#else
#error "Asio must be configured with exactly one of its epoll reactor or its io_uring backend"
#endif

// Reports the configuration, so that the orchestrator can check it ran the binary it meant to.
inline void announce(session& s) { s.info("config", config); }

// The hint promises that one thread runs the context.
inline constexpr int concurrency_hint = 1;

// Completion handler for co_spawn of a scenario's own coroutines: an exception escaping one (a failed check) is
// rethrown out of io_context::run() and fails the run, where `detached` would swallow it.
struct rethrow {
    void operator()(std::exception_ptr e) const {
        if (e) std::rethrow_exception(e);
    }
};

// Throws bench_failure unless `ec` is `expected`.
inline void expect(const asio::error_code& ec, const asio::error_code& expected, const char* what) {
    if (ec != expected)
        throw bench_failure(std::string(what) + ": expected '" + expected.message() + "', got '" + ec.message() + "'");
}

// Throws bench_failure if `ec` holds an error. Success is tested as !ec, never by comparison with
// error_code(): Asio reports success with its own system category, which compares unequal to std's.
inline void expect_ok(const asio::error_code& ec, const char* what) {
    if (ec) throw bench_failure(std::string(what) + ": " + ec.message());
}

}  // namespace tern_bench::asio_impl
