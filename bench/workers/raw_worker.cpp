// Worker for the raw baselines: hand-written loops without a runtime, the floor of what is possible.
#include "../harness/worker.hpp"
#include "../scenarios/registry.hpp"

#include <array>

namespace {

using namespace tern_bench;

constexpr std::array entries = {
    impl_entry{"sockets/pingpong", "raw/liburing", raw_impl::sockets_pingpong_liburing},
    impl_entry{"sockets/pingpong_cross_thread", "raw/blocking", raw_impl::sockets_pingpong_cross_thread_blocking},
    impl_entry{"sockets/unidirectional", "raw/liburing", raw_impl::sockets_unidirectional_liburing},
    impl_entry{"sockets/bidirectional", "raw/liburing", raw_impl::sockets_bidirectional_liburing},
    impl_entry{"sockets/echo", "raw/liburing", raw_impl::sockets_echo_liburing},
    impl_entry{"sockets/messages", "raw/liburing", raw_impl::sockets_messages_liburing},
    impl_entry{"sockets/accept_churn", "raw/liburing", raw_impl::sockets_accept_churn_liburing},
    impl_entry{"sockets/io_event", "raw/epoll", raw_impl::sockets_io_event_epoll},
    impl_entry{"files/random_read", "raw/liburing", raw_impl::files_read_liburing},
    impl_entry{"files/sequential_read", "raw/liburing", raw_impl::files_read_liburing},
    impl_entry{"files/random_read", "raw/pread", raw_impl::files_read_pread},
    impl_entry{"files/sequential_read", "raw/pread", raw_impl::files_read_pread},
    impl_entry{"files/random_read", "raw/libaio", raw_impl::files_read_libaio},
    impl_entry{"files/sequential_read", "raw/libaio", raw_impl::files_read_libaio},
    impl_entry{"tls/handshake", "raw/crypto", raw_impl::tls_handshake_crypto},
    impl_entry{"tls/handshake", "raw/openssl", raw_impl::tls_handshake_openssl},
    impl_entry{"tls/throughput", "raw/openssl", raw_impl::tls_throughput_openssl},
    impl_entry{"ws/echo", "raw/epoll", raw_impl::ws_echo_epoll},
    impl_entry{"http2/ping_json", "raw/nghttp2", raw_impl::http2_ping_json_nghttp2},
    impl_entry{"http2/streams", "raw/nghttp2", raw_impl::http2_streams_nghttp2},
    impl_entry{"http2/ping_json", "raw/nghttp2_uring", raw_impl::http2_ping_json_nghttp2_uring},
    impl_entry{"http2/streams", "raw/nghttp2_uring", raw_impl::http2_streams_nghttp2_uring},
};

}  // namespace

int main(int argc, char** argv) { return worker_main(argc, argv, entries, "tern-bench-raw"); }
