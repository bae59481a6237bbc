// tern/http/handler_call.hpp
//
// Not API: how a server awaits a route's handler, shared by tern::http's HTTP/1.1 connection and the HTTP/2
// protocol's streams, so that a handler runs the same way whichever version it answers.
//
// - route_start: awaits the route's task as an awaited task is awaited (it gets the awaiting task's stop token and
//   continues it), without owning the task. A reference, not the task: g++ 12 destroys an aggregate temporary of an
//   awaiting expression twice (design.md, "g++ 12 miscompiles two coroutine shapes"), so the awaiter owns nothing;
//   the task is the awaiting coroutine's local. Each server derives the await_resume it needs (the response moved
//   out, or used where the route's frame holds it) and answers 500 for a route that threw.
// - resume_on: a handler may end on another loop than its connection's (it moved with runtime::switch_to, to reach
//   something of that loop's, and returned there); the connection, whose socket and session belong to its own
//   loop, goes on there: at once when it runs there, else through that loop's queue.
#pragma once

#include <coroutine>

#include "tern/http/response.hpp"
#include "tern/io_context.hpp"
#include "tern/task.hpp"

namespace tern::http::detail {

struct route_start {
  task<response>& t;  // invalid when the route's call threw (no task then): await_ready, and the server answers 500
  bool await_ready() const noexcept { return !t.valid(); }
  template <class P>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
    t.handle().promise().set_stop_token(h.promise().stop_token());
    t.handle().promise().set_continuation(h);
    return t.handle();
  }
};

struct resume_on {
  io_context& loop;
  bool await_ready() const noexcept { return loop.running_here(); }
  void await_suspend(std::coroutine_handle<> h) const { loop.post([h] { h.resume(); }); }
  void await_resume() const noexcept {}
};

}  // namespace tern::http::detail
