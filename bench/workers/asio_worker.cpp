// Worker for asio/callbacks and asio/coroutines. Built twice, once per Asio configuration
// (tern-bench-asio-epoll, tern-bench-asio-uring); see scenarios/asio_setup.hpp.
#include "../harness/worker.hpp"
#include "../scenarios/registry.hpp"

#include <array>

namespace {

using namespace tern_bench;
namespace a = tern_bench::asio_impl;

constexpr std::array entries = {
    impl_entry{"dispatch/post", "asio/callbacks", a::dispatch_post_callbacks},
    impl_entry{"dispatch/post", "asio/coroutines", a::dispatch_post_coroutines},
    impl_entry{"coro/spawn", "asio/coroutines", a::coro_spawn_coroutines},
    impl_entry{"coro/switch", "asio/coroutines", a::coro_switch_coroutines},
    impl_entry{"timers/schedule_cancel", "asio/callbacks", a::timers_schedule_cancel_callbacks},
    impl_entry{"timers/schedule_cancel", "asio/coroutines", a::timers_schedule_cancel_coroutines},
    impl_entry{"timers/fire_rate", "asio/callbacks", a::timers_fire_rate_callbacks},
    impl_entry{"timers/fire_rate", "asio/coroutines", a::timers_fire_rate_coroutines},
    impl_entry{"sockets/pingpong", "asio/callbacks", a::sockets_pingpong_callbacks},
    impl_entry{"sockets/pingpong", "asio/coroutines", a::sockets_pingpong_coroutines},
};

}  // namespace

int main(int argc, char** argv) { return worker_main(argc, argv, entries, TERN_BENCH_WORKER_NAME); }
