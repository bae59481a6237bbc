// Every implementation function of every worker, by family. A worker's main() lists the ones it links in a
// table of (scenario, impl id, function); see workers/.
#pragma once

#include "../harness/worker.hpp"

namespace tern_bench::asio_impl {
void dispatch_post_callbacks(session&);
void dispatch_post_coroutines(session&);
void dispatch_scaling_callbacks(session&);
void dispatch_scaling_coroutines(session&);
void dispatch_interleaved_callbacks(session&);
void dispatch_interleaved_coroutines(session&);
void dispatch_concurrent_callbacks(session&);
void dispatch_concurrent_coroutines(session&);
void dispatch_cross_thread_callbacks(session&);
void dispatch_cross_thread_coroutines(session&);
void coro_spawn_coroutines(session&);
void coro_switch_coroutines(session&);
void coro_channel_callbacks(session&);
void coro_channel_coroutines(session&);
void coro_event_callbacks(session&);
void coro_event_coroutines(session&);
void timers_schedule_cancel_callbacks(session&);
void timers_schedule_cancel_coroutines(session&);
void timers_fire_rate_callbacks(session&);
void timers_fire_rate_coroutines(session&);
void timers_accuracy_callbacks(session&);
void realtime_jitter_callbacks(session&);
void timers_accuracy_coroutines(session&);
void udp_pingpong_callbacks(session&);
void udp_pingpong_coroutines(session&);
void udp_throughput_callbacks(session&);
void udp_throughput_coroutines(session&);
void unix_pingpong_callbacks(session&);
void unix_pingpong_coroutines(session&);
void sockets_pingpong_callbacks(session&);
void sockets_pingpong_coroutines(session&);
void sockets_pingpong_cross_thread_callbacks(session&);
void sockets_pingpong_cross_thread_coroutines(session&);
void sockets_concurrent_pairs_callbacks(session&);
void sockets_concurrent_pairs_coroutines(session&);
void sockets_unidirectional_callbacks(session&);
void sockets_unidirectional_coroutines(session&);
void sockets_bidirectional_callbacks(session&);
void sockets_bidirectional_coroutines(session&);
void sockets_echo_callbacks(session&);
void sockets_echo_coroutines(session&);
void sockets_accept_churn_callbacks(session&);
void sockets_accept_churn_coroutines(session&);
void sockets_idle_connections_callbacks(session&);
void sockets_idle_connections_coroutines(session&);
void sockets_messages_callbacks(session&);
void sockets_messages_coroutines(session&);
void sockets_io_event_callbacks(session&);
void sockets_io_event_coroutines(session&);
void files_read_callbacks(session&);  // files/*: the io_uring configuration only (Asio's files need it)
void files_read_coroutines(session&);
void tls_handshake_callbacks(session&);  // asio::ssl::stream on OpenSSL 3
void tls_handshake_coroutines(session&);
void tls_throughput_callbacks(session&);
void tls_throughput_coroutines(session&);
void services_events_callbacks(session&);  // tern::services' events as posted handlers
}  // namespace tern_bench::asio_impl

// tern implementations take the backend from the impl id ("tern/io_uring" or "tern/epoll").
namespace tern_bench::tern_impl {
void dispatch_post(session&);
void dispatch_scaling(session&);
void dispatch_interleaved(session&);
void dispatch_concurrent(session&);
void dispatch_cross_thread(session&);
void coro_spawn(session&);
void coro_switch(session&);
void coro_channel(session&);
void coro_event(session&);
void timers_schedule_cancel(session&);
void timers_fire_rate(session&);
void timers_accuracy(session&);
void realtime_jitter(session&);
void udp_pingpong(session&);
void udp_throughput(session&);
void unix_pingpong(session&);
void sockets_pingpong(session&);
void sockets_pingpong_cross_thread(session&);
void sockets_concurrent_pairs(session&);
void sockets_unidirectional(session&);
void sockets_bidirectional(session&);
void sockets_echo(session&);
void sockets_accept_churn(session&);
void sockets_idle_connections(session&);
void sockets_messages(session&);
void sockets_io_event(session&);
void http_minimal(session&);  // tern::http's server and client
void ws_echo(session&);  // tern::ws on both ends
void http_parse(session&);  // tern/parser: tern::http's request parser, no io_context
void http_ping_json(session&);  // tern::http's server
void files_read(session&);  // files/random_read and files/sequential_read
void tls_handshake(session&);  // tern::tls::stream
void tls_throughput(session&);
void services_start_stop(session&);  // tern::services: registry
void services_start(session&);
void services_events(session&);  // tern::services: event_bus
void redis_pipeline(session&);  // tern::redis
void redis_pubsub(session&);
void http2_ping_json(session&);  // tern::http2 (tern/io_uring-http1: tern::http's HTTP/1.1 server under wrk)
void http2_streams(session&);
void pg_select(session&);  // tern::pg
void pg_insert_batch(session&);
}  // namespace tern_bench::tern_impl

// The HTTP comparators of tern-bench-http: Boost.Beast (on Boost.Asio) and http-parser.
namespace tern_bench::http_impl {
void http_parse_beast(session&);
void http_parse_http_parser(session&);
void http_minimal_beast(session&);
void ws_echo_beast(session&);  // Beast's websocket::stream on both ends
void http_ping_json_beast(session&);
}  // namespace tern_bench::http_impl

namespace tern_bench::raw_impl {
void sockets_pingpong_liburing(session&);
void sockets_pingpong_cross_thread_blocking(session&);
void sockets_unidirectional_liburing(session&);
void sockets_bidirectional_liburing(session&);
void sockets_echo_liburing(session&);  // raw/liburing (TERN_BENCH_RAW_FIXED=1: registered files)
void sockets_messages_liburing(session&);
void sockets_accept_churn_liburing(session&);
void sockets_io_event_epoll(session&);
void ws_echo_epoll(session&);  // raw/epoll: WebSocket frames over epoll, no runtime, no library
void files_read_liburing(session&);  // files/random_read and files/sequential_read
void files_read_pread(session&);
void files_read_libaio(session&);
void tls_handshake_crypto(session&);  // raw/crypto: the public-key work of a handshake alone
void tls_handshake_openssl(session&);  // raw/openssl: both ends over a BIO pair, no socket
void tls_throughput_openssl(session&);  // raw/openssl: OpenSSL on non-blocking sockets, poll(), no runtime
void redis_pipeline_benchmark(session&);  // raw/redis-benchmark (in tern-bench-redis): redis-benchmark -P
void redis_pipeline_benchmark_keys(session&);  // raw/redis-benchmark-keys: the same with -r tasks (as many keys as tasks)
void http2_ping_json_nghttp2(session&);  // raw/nghttp2: nghttp2's server session on an epoll loop, no runtime
void http2_streams_nghttp2(session&);
void http2_ping_json_nghttp2_uring(session&);  // raw/nghttp2_uring: the same server on an io_uring loop
void http2_streams_nghttp2_uring(session&);
void pg_select_libpq_blocking(session&);  // in tern-bench-pg: PQexecParams one at a time
void pg_select_libpq_pipeline(session&);  // in tern-bench-pg: libpq's pipeline mode and poll(), the floor
void pg_insert_batch_libpq_blocking(session&);  // PQexecParams one at a time; COPY by PQputCopyData
void pg_insert_batch_libpq_pipeline(session&);  // pipeline mode and poll() (mode=insert only)
}  // namespace tern_bench::raw_impl

// The Redis comparators of tern-bench-redis: hiredis with its libevent adapter.
namespace tern_bench::hiredis_impl {
void redis_pipeline(session&);
void redis_pubsub(session&);
}  // namespace tern_bench::hiredis_impl

// The PostgreSQL comparator of tern-bench-pg: libpqxx.
namespace tern_bench::libpqxx_impl {
void pg_select(session&);
void pg_insert_batch(session&);
}  // namespace tern_bench::libpqxx_impl
