// Worker for tern/io_uring and tern/epoll: one executable, the backend chosen per run from the impl id.
#include "../harness/worker.hpp"
#include "../scenarios/registry.hpp"

#include <tern/metrics.hpp>

#include <array>

namespace {

using namespace tern_bench;
namespace t = tern_bench::tern_impl;

constexpr std::array entries = {
    impl_entry{"dispatch/post", "tern/io_uring", t::dispatch_post},
    impl_entry{"dispatch/post", "tern/epoll", t::dispatch_post},
    impl_entry{"coro/spawn", "tern/io_uring", t::coro_spawn},
    impl_entry{"coro/spawn", "tern/epoll", t::coro_spawn},
    impl_entry{"coro/switch", "tern/io_uring", t::coro_switch},
    impl_entry{"coro/switch", "tern/epoll", t::coro_switch},
    impl_entry{"timers/schedule_cancel", "tern/io_uring", t::timers_schedule_cancel},
    impl_entry{"timers/schedule_cancel", "tern/epoll", t::timers_schedule_cancel},
    impl_entry{"timers/fire_rate", "tern/io_uring", t::timers_fire_rate},
    impl_entry{"timers/fire_rate", "tern/epoll", t::timers_fire_rate},
    impl_entry{"timers/accuracy", "tern/io_uring", t::timers_accuracy},
    impl_entry{"timers/accuracy", "tern/epoll", t::timers_accuracy},
    impl_entry{"udp/pingpong", "tern/io_uring", t::udp_pingpong},
    impl_entry{"udp/pingpong", "tern/epoll", t::udp_pingpong},
    impl_entry{"udp/throughput", "tern/io_uring", t::udp_throughput},
    impl_entry{"udp/throughput", "tern/epoll", t::udp_throughput},
    impl_entry{"unix/pingpong", "tern/io_uring", t::unix_pingpong},
    impl_entry{"unix/pingpong", "tern/epoll", t::unix_pingpong},
    impl_entry{"sockets/pingpong", "tern/io_uring", t::sockets_pingpong},
    impl_entry{"sockets/pingpong", "tern/epoll", t::sockets_pingpong},
    impl_entry{"sockets/pingpong", "tern/io_uring-sqpoll", t::sockets_pingpong},
    impl_entry{"sockets/pingpong_cross_thread", "tern/io_uring", t::sockets_pingpong_cross_thread},
    impl_entry{"sockets/pingpong_cross_thread", "tern/epoll", t::sockets_pingpong_cross_thread},
    impl_entry{"sockets/pingpong_cross_thread", "tern/io_uring-latency", t::sockets_pingpong_cross_thread},
    impl_entry{"sockets/pingpong_cross_thread", "tern/epoll-latency", t::sockets_pingpong_cross_thread},
    impl_entry{"realtime/jitter", "tern/io_uring", t::realtime_jitter},
    impl_entry{"realtime/jitter", "tern/epoll", t::realtime_jitter},
    impl_entry{"realtime/jitter", "tern/io_uring-latency", t::realtime_jitter},
    impl_entry{"realtime/jitter", "tern/epoll-latency", t::realtime_jitter},
    impl_entry{"sockets/concurrent_pairs", "tern/io_uring", t::sockets_concurrent_pairs},
    impl_entry{"sockets/concurrent_pairs", "tern/epoll", t::sockets_concurrent_pairs},
    impl_entry{"sockets/unidirectional", "tern/io_uring", t::sockets_unidirectional},
    impl_entry{"sockets/unidirectional", "tern/epoll", t::sockets_unidirectional},
    impl_entry{"sockets/bidirectional", "tern/io_uring", t::sockets_bidirectional},
    impl_entry{"sockets/bidirectional", "tern/epoll", t::sockets_bidirectional},
    impl_entry{"sockets/echo", "tern/io_uring", t::sockets_echo},
    impl_entry{"sockets/echo", "tern/epoll", t::sockets_echo},
    impl_entry{"sockets/accept_churn", "tern/io_uring", t::sockets_accept_churn},
    impl_entry{"sockets/accept_churn", "tern/epoll", t::sockets_accept_churn},
    impl_entry{"sockets/idle_connections", "tern/io_uring", t::sockets_idle_connections},
    impl_entry{"sockets/idle_connections", "tern/epoll", t::sockets_idle_connections},
    impl_entry{"sockets/messages", "tern/io_uring", t::sockets_messages},
    impl_entry{"sockets/messages", "tern/epoll", t::sockets_messages},
    impl_entry{"sockets/io_event", "tern/io_uring", t::sockets_io_event},
    impl_entry{"sockets/io_event", "tern/epoll", t::sockets_io_event},
    impl_entry{"http/minimal", "tern/io_uring", t::http_minimal},
    impl_entry{"http/minimal", "tern/epoll", t::http_minimal},
    impl_entry{"ws/echo", "tern/io_uring", t::ws_echo},
    impl_entry{"ws/echo", "tern/epoll", t::ws_echo},
    impl_entry{"redis/pipeline", "tern/io_uring", t::redis_pipeline},
    impl_entry{"redis/pipeline", "tern/epoll", t::redis_pipeline},
    impl_entry{"redis/pipeline", "tern/io_uring-latency", t::redis_pipeline},
    impl_entry{"redis/pipeline", "tern/epoll-latency", t::redis_pipeline},
    impl_entry{"redis/pubsub", "tern/io_uring", t::redis_pubsub},
    impl_entry{"redis/pubsub", "tern/epoll", t::redis_pubsub},
    impl_entry{"pg/select", "tern/io_uring", t::pg_select},
    impl_entry{"pg/select", "tern/epoll", t::pg_select},
    impl_entry{"pg/insert_batch", "tern/io_uring", t::pg_insert_batch},
    impl_entry{"pg/insert_batch", "tern/epoll", t::pg_insert_batch},
    impl_entry{"http/parse", "tern/parser", t::http_parse},
    impl_entry{"http/ping_json", "tern/io_uring", t::http_ping_json},
    impl_entry{"http/ping_json", "tern/epoll", t::http_ping_json},
    impl_entry{"http2/ping_json", "tern/io_uring", t::http2_ping_json},
    impl_entry{"http2/ping_json", "tern/epoll", t::http2_ping_json},
    impl_entry{"http2/ping_json", "tern/io_uring-http1", t::http2_ping_json},
    impl_entry{"http2/streams", "tern/io_uring", t::http2_streams},
    impl_entry{"http2/streams", "tern/epoll", t::http2_streams},
    impl_entry{"dispatch/scaling", "tern/io_uring", t::dispatch_scaling},
    impl_entry{"dispatch/scaling", "tern/epoll", t::dispatch_scaling},
    impl_entry{"dispatch/interleaved", "tern/io_uring", t::dispatch_interleaved},
    impl_entry{"dispatch/interleaved", "tern/epoll", t::dispatch_interleaved},
    impl_entry{"dispatch/concurrent", "tern/io_uring", t::dispatch_concurrent},
    impl_entry{"dispatch/concurrent", "tern/epoll", t::dispatch_concurrent},
    impl_entry{"dispatch/cross_thread", "tern/io_uring", t::dispatch_cross_thread},
    impl_entry{"dispatch/cross_thread", "tern/epoll", t::dispatch_cross_thread},
    impl_entry{"coro/channel", "tern/io_uring", t::coro_channel},
    impl_entry{"coro/channel", "tern/epoll", t::coro_channel},
    impl_entry{"coro/event", "tern/io_uring", t::coro_event},
    impl_entry{"coro/event", "tern/epoll", t::coro_event},
    impl_entry{"files/random_read", "tern/io_uring", t::files_read},
    impl_entry{"files/random_read", "tern/epoll", t::files_read},
    impl_entry{"files/sequential_read", "tern/io_uring", t::files_read},
    impl_entry{"files/sequential_read", "tern/epoll", t::files_read},
    impl_entry{"tls/handshake", "tern/io_uring", t::tls_handshake},
    impl_entry{"tls/handshake", "tern/epoll", t::tls_handshake},
    impl_entry{"tls/throughput", "tern/io_uring", t::tls_throughput},
    impl_entry{"tls/throughput", "tern/epoll", t::tls_throughput},
    impl_entry{"services/start_stop", "tern/io_uring", t::services_start_stop},
    impl_entry{"services/start_stop", "tern/epoll", t::services_start_stop},
    impl_entry{"services/start", "tern/io_uring", t::services_start},
    impl_entry{"services/start", "tern/epoll", t::services_start},
    impl_entry{"services/events", "tern/io_uring", t::services_events},
    impl_entry{"services/events", "tern/epoll", t::services_events},
};

}  // namespace

int main(int argc, char** argv) {
    // syscalls_per_op, wakeups_per_op, parks_per_op and spins_per_op: every loop of this process, from the
    // counters tern keeps anyway.
    if constexpr (tern::metrics::enabled) {
        register_loop_counter([]() noexcept {
            const tern::metrics::loop_snapshot s = tern::metrics::process_snapshot();
            return loop_counts{s.syscalls, s.wakeups_received, s.parks, s.spins};
        });
    }
    return worker_main(argc, argv, entries, "tern-bench-tern");
}
