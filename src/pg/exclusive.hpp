// Holding a connection for oneself (a transaction, a COPY, a script, an explicit batch being sent), and the
// non-pipelined exchanges of COPY and scripts: helpers shared by connection.cpp, copy.cpp and batch.cpp.
#pragma once

#include <coroutine>
#include <cstdint>
#include <system_error>

#include "state.hpp"
#include "tern/io_result.hpp"
#include "tern/task.hpp"

namespace tern::pg::detail {

// Awaitable: makes the caller the connection's exclusive holder, once the holders before it are done (and, with
// drain, once nothing is in flight either); io_result<std::uint32_t>, the holder's id for release_gate().
// Cancellable.
class [[nodiscard]] exclusive_awaiter {
 public:
  exclusive_awaiter(connection_state* s, bool drain) noexcept {
    w_.s = s;
    w_.drain = drain;
  }
  exclusive_awaiter(const exclusive_awaiter& o) noexcept : exclusive_awaiter(o.w_.s, o.w_.drain) {}
  exclusive_awaiter& operator=(const exclusive_awaiter&) = delete;
  ~exclusive_awaiter();

  bool await_ready() noexcept;
  void await_suspend(std::coroutine_handle<> h) noexcept { w_.waiter = h; }
  io_result<std::uint32_t> await_resume() noexcept { return {w_.ec, w_.granted}; }
  void cancel() noexcept;
  io_context& context() const noexcept { return *w_.s->ctx; }

 private:
  exclusive_wait w_;
};

// Leaves pipeline mode for a COPY or a script (the pipeline is empty: the holder drained it).
std::error_code leave_pipeline(connection_state* s) noexcept;
// Goes back to pipeline mode and releases the holder id: the queries that waited are sent.
void return_to_pipeline(connection_state* s, std::uint32_t id) noexcept;
// Hands an exchange outside pipeline mode that its caller gave up on (a script, the end of a COPY), whether it was
// still being sent or already running, to a task of its own: what libpq holds is sent (the protocol cannot drop a
// message half sent), the server asked to cancel it (with cancel), its results read to their end; then the
// connection goes back to pipeline mode and id is released. Without memory for the task the connection breaks.
void abandon_exchange(connection_state* s, std::uint32_t id, bool cancel) noexcept;
// Awaitable: waits until no cancel request of s is on its way (see connection_state::cancels_in_flight), or s is
// closed or broken; an exchange that sent one awaits this before it hands the connection back.
task<> cancels_settled(connection_state* s);
// Awaitable: reads and drops the rest of a COPY TO STDOUT's data, to its end; std::error_code.
task<std::error_code> drop_copy_data(connection_state* s);
// Awaitable: writes what libpq holds until it is all out; std::error_code.
task<std::error_code> flush_all(connection_state* s);
// Awaitable: waits until libpq has a whole result (PQisBusy false); std::error_code.
task<std::error_code> await_result(connection_state* s);
// The error of an operation that cannot start on s: closed, broken, or on another loop's thread.
std::error_code refusal(const connection_state* s) noexcept;

}  // namespace tern::pg::detail
