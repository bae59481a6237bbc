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
    impl_entry{"dispatch/scaling", "asio/callbacks", a::dispatch_scaling_callbacks},
    impl_entry{"dispatch/scaling", "asio/coroutines", a::dispatch_scaling_coroutines},
    impl_entry{"dispatch/interleaved", "asio/callbacks", a::dispatch_interleaved_callbacks},
    impl_entry{"dispatch/interleaved", "asio/coroutines", a::dispatch_interleaved_coroutines},
    impl_entry{"dispatch/concurrent", "asio/callbacks", a::dispatch_concurrent_callbacks},
    impl_entry{"dispatch/concurrent", "asio/coroutines", a::dispatch_concurrent_coroutines},
    impl_entry{"dispatch/cross_thread", "asio/callbacks", a::dispatch_cross_thread_callbacks},
    impl_entry{"dispatch/cross_thread", "asio/coroutines", a::dispatch_cross_thread_coroutines},
    impl_entry{"coro/spawn", "asio/coroutines", a::coro_spawn_coroutines},
    impl_entry{"coro/switch", "asio/coroutines", a::coro_switch_coroutines},
    impl_entry{"coro/channel", "asio/callbacks", a::coro_channel_callbacks},
    impl_entry{"coro/channel", "asio/coroutines", a::coro_channel_coroutines},
    impl_entry{"coro/event", "asio/callbacks", a::coro_event_callbacks},
    impl_entry{"coro/event", "asio/coroutines", a::coro_event_coroutines},
    impl_entry{"timers/schedule_cancel", "asio/callbacks", a::timers_schedule_cancel_callbacks},
    impl_entry{"timers/schedule_cancel", "asio/coroutines", a::timers_schedule_cancel_coroutines},
    impl_entry{"timers/fire_rate", "asio/callbacks", a::timers_fire_rate_callbacks},
    impl_entry{"timers/fire_rate", "asio/coroutines", a::timers_fire_rate_coroutines},
    impl_entry{"timers/accuracy", "asio/callbacks", a::timers_accuracy_callbacks},
    impl_entry{"realtime/jitter", "asio/callbacks", a::realtime_jitter_callbacks},
    impl_entry{"timers/accuracy", "asio/coroutines", a::timers_accuracy_coroutines},
    impl_entry{"udp/pingpong", "asio/callbacks", a::udp_pingpong_callbacks},
    impl_entry{"udp/pingpong", "asio/coroutines", a::udp_pingpong_coroutines},
    impl_entry{"udp/throughput", "asio/callbacks", a::udp_throughput_callbacks},
    impl_entry{"udp/throughput", "asio/coroutines", a::udp_throughput_coroutines},
    impl_entry{"unix/pingpong", "asio/callbacks", a::unix_pingpong_callbacks},
    impl_entry{"unix/pingpong", "asio/coroutines", a::unix_pingpong_coroutines},
    impl_entry{"sockets/pingpong", "asio/callbacks", a::sockets_pingpong_callbacks},
    impl_entry{"sockets/pingpong", "asio/coroutines", a::sockets_pingpong_coroutines},
    impl_entry{"sockets/pingpong_cross_thread", "asio/callbacks", a::sockets_pingpong_cross_thread_callbacks},
    impl_entry{"sockets/pingpong_cross_thread", "asio/coroutines", a::sockets_pingpong_cross_thread_coroutines},
    impl_entry{"sockets/concurrent_pairs", "asio/callbacks", a::sockets_concurrent_pairs_callbacks},
    impl_entry{"sockets/concurrent_pairs", "asio/coroutines", a::sockets_concurrent_pairs_coroutines},
    impl_entry{"sockets/unidirectional", "asio/callbacks", a::sockets_unidirectional_callbacks},
    impl_entry{"sockets/unidirectional", "asio/coroutines", a::sockets_unidirectional_coroutines},
    impl_entry{"sockets/bidirectional", "asio/callbacks", a::sockets_bidirectional_callbacks},
    impl_entry{"sockets/bidirectional", "asio/coroutines", a::sockets_bidirectional_coroutines},
    impl_entry{"sockets/echo", "asio/callbacks", a::sockets_echo_callbacks},
    impl_entry{"sockets/echo", "asio/coroutines", a::sockets_echo_coroutines},
    impl_entry{"sockets/accept_churn", "asio/callbacks", a::sockets_accept_churn_callbacks},
    impl_entry{"sockets/accept_churn", "asio/coroutines", a::sockets_accept_churn_coroutines},
    impl_entry{"sockets/idle_connections", "asio/callbacks", a::sockets_idle_connections_callbacks},
    impl_entry{"sockets/idle_connections", "asio/coroutines", a::sockets_idle_connections_coroutines},
    impl_entry{"sockets/messages", "asio/callbacks", a::sockets_messages_callbacks},
    impl_entry{"sockets/messages", "asio/coroutines", a::sockets_messages_coroutines},
    impl_entry{"sockets/io_event", "asio/callbacks", a::sockets_io_event_callbacks},
    impl_entry{"sockets/io_event", "asio/coroutines", a::sockets_io_event_coroutines},
    impl_entry{"tls/handshake", "asio/callbacks", a::tls_handshake_callbacks},
    impl_entry{"tls/handshake", "asio/coroutines", a::tls_handshake_coroutines},
    impl_entry{"tls/throughput", "asio/callbacks", a::tls_throughput_callbacks},
    impl_entry{"tls/throughput", "asio/coroutines", a::tls_throughput_coroutines},
    impl_entry{"services/events", "asio/callbacks", a::services_events_callbacks},
#if defined(ASIO_HAS_IO_URING)  // random_access_file exists only in this configuration (CMake sets the macro)
    impl_entry{"files/random_read", "asio/callbacks", a::files_read_callbacks},
    impl_entry{"files/random_read", "asio/coroutines", a::files_read_coroutines},
    impl_entry{"files/sequential_read", "asio/callbacks", a::files_read_callbacks},
    impl_entry{"files/sequential_read", "asio/coroutines", a::files_read_coroutines},
#endif
};

}  // namespace

int main(int argc, char** argv) { return worker_main(argc, argv, entries, TERN_BENCH_WORKER_NAME); }
