// Every implementation function of every worker, by family. A worker's main() lists the ones it links in a
// table of (scenario, impl id, function); see workers/.
#pragma once

#include "../harness/worker.hpp"

namespace tern_bench::asio_impl {
void dispatch_post_callbacks(session&);
void dispatch_post_coroutines(session&);
void coro_spawn_coroutines(session&);
void coro_switch_coroutines(session&);
void timers_schedule_cancel_callbacks(session&);
void timers_schedule_cancel_coroutines(session&);
void timers_fire_rate_callbacks(session&);
void timers_fire_rate_coroutines(session&);
void sockets_pingpong_callbacks(session&);
void sockets_pingpong_coroutines(session&);
}  // namespace tern_bench::asio_impl

// tern implementations take the backend from the impl id ("tern/io_uring" or "tern/epoll").
namespace tern_bench::tern_impl {
void dispatch_post(session&);
void coro_spawn(session&);
void coro_switch(session&);
void timers_schedule_cancel(session&);
void timers_fire_rate(session&);
void sockets_pingpong(session&);
}  // namespace tern_bench::tern_impl

namespace tern_bench::raw_impl {
void sockets_pingpong_liburing(session&);
}  // namespace tern_bench::raw_impl
