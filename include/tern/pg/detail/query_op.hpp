// tern/pg/detail/query_op.hpp
//
// The awaiter of one query on a connection, and what it sends. Not API: connection, transaction, batch and
// row_stream make them.
//
// A query_op lives where the query is awaited (the awaiting task's frame), so a query allocates nothing of tern's
// own; the connection links it into its lists by pointers (the gate's queue, the results held until a batch's
// sync point, the queries to send again) and finds it from the slot of each message it expects back. Its phases:
//   idle -> at_gate (waiting for a transaction or a COPY to end) -> in_flight (sent) -> held (its result is in,
//   the batch's sync is not) -> done; or resend (another query of its batch failed, so its implicit transaction
//   was rolled back or skipped) -> in_flight again.
// Every phase ends in done through complete(), which resumes the awaiting coroutine through the loop (never
// inline), or calls on_done for the owners that wait for many (batch).
#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <new>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tern/cancel.hpp"
#include "tern/error.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/pg/params.hpp"
#include "tern/detail/stop_binding.hpp"
#include "tern/pg/result.hpp"
#include "tern/timer.hpp"

struct pg_result;

namespace tern::pg {
class statement;
}

namespace tern::pg::detail {

struct connection_state;

// What a query sends, and how its outcome is handled.
struct request {
  const char* sql = nullptr;           // the text, NUL-terminated (a statement's when stmt is set)
  const statement* stmt = nullptr;     // prepared under a name of the connection's; null: sent unnamed
  param_list params;
  format results = format::text;
  std::uint32_t owner = 0;             // the exclusive holder it runs under (a transaction); 0: none
  // Its own implicit transaction, among other tasks' queries of the same batch: held until the batch's sync point
  // and sent again if another query of the batch failed. False in a transaction and an explicit batch, which
  // take PostgreSQL's pipeline semantics as they are.
  bool isolated = true;
  bool single_row = false;             // rows one by one (row_stream)
};

class query_op {
 public:
  enum class phase : std::uint8_t { idle, at_gate, in_flight, held, resend, done };

  query_op(connection_state* s, const request& r) noexcept : s_(s), req_(r) {}
  // A copy is the same query, not yet started (awaiters are copied before they start, by with_timeout).
  query_op(const query_op& o) noexcept : s_(o.s_), on_done_(o.on_done_), req_(o.req_), owner_data_(o.owner_data_) {}
  query_op& operator=(const query_op&) = delete;
  // Forgets a query still linked into its connection (its frame destroyed at a loop's teardown). Inline when there
  // is nothing to undo, the common case (a query awaited to its end, its result taken): a call less per query.
  ~query_op() {
    // A row is pending only in single-row mode: its flag, next to the phase, spares reading pending_row_.
    if ((s_ != nullptr && phase_ != phase::idle && phase_ != phase::done) || !res_.empty() ||
        (single_row_set_ && pending_row_ != nullptr)) {
      release();
    }
  }

  bool await_ready();
  void await_suspend(std::coroutine_handle<> h) noexcept {
    waiter_ = h;
    suspended_ = true;
  }
  io_result<result> await_resume() noexcept { return {ec_, result(take_result())}; }
  // Cancels the query: it completes with operation_canceled at once; if the server is running it, a cancel request
  // goes to the server (through a connection of its own), and its result is dropped when it comes.
  void cancel() noexcept;
  io_context& context() const noexcept;

  // ---- The connection's side (connection.cpp) ----
  // Starts the query without an awaiting coroutine: on_done(this) runs when it completes (never inline).
  void start_with(void (*on_done)(query_op*), void* owner_data) noexcept;
  result_source take_result() noexcept { return std::exchange(res_, {}); }
  // The destructor's work when there is some: unlinks the query, frees its result and a stream's pending row.
  void release() noexcept;

  // First, in 64 bytes, what is touched as the query completes (the batch's sync point) and as its task resumes
  // (await_resume, the destructor): hundreds of queries' frames are alive at once, so a query's op is out of the
  // cache by then, and each cache line it spreads over is a miss (docs/design.md, tern::pg). What is read as it is
  // sent (just after it was made, while its frame is in the cache) and what serves row_stream come after.
  connection_state* s_;
  result_source res_;                   // its result, once in (copied out of the PGresult when small)
  std::error_code ec_ = tern::detail::success;  // a copy: a default-constructed one is a call
  phase phase_ = phase::idle;
  bool suspended_ = false;
  std::uint8_t resends_ = 0;            // times sent again (each time alone)
  bool single_row_set_ = false;
  bool rows_ended_ = false;             // row_stream: the end of the rows
  // query_call's extras to undo as it resumes or is destroyed: its deadline armed, its task's stop token registered.
  std::uint8_t extras_ = 0;
  std::coroutine_handle<> waiter_;
  void (*on_done_)(query_op*) = nullptr;
  query_op* next_ = nullptr;            // in the gate's queue or the resend list
  request req_;
  void* owner_data_ = nullptr;
  // row_stream: the row the driver has read and the consumer has not taken yet, and the coroutine waiting in next().
  pg_result* pending_row_ = nullptr;
  std::coroutine_handle<> row_waiter_;
};

// What connection::query() and transaction::query() return: the awaitable of one query, with its op, its
// parameters and its deadline, made as the temporary of the co_await expression and so living in the awaiting
// frame: a query needs no coroutine frame of its own (one was 448 bytes from the frame pool, two resumes and a
// destroy: some 185 instructions and 4 cache misses a query with hundreds in flight, docs/design.md, tern::pg).
//
// The parameters are encoded as the query starts (await_ready), not as the object is made: params<N> points into
// itself (a number's bytes), and the object may be copied before it starts (with_timeout copies it, spawn moves
// it into a task of its own), so it keeps only references to the arguments until then. A copy is the same query,
// not started; one that has started is never copied (awaiters are not). The deadline (the connection's
// query_timeout, a statement's timeout) is a wheel node armed only when there is one; an unarmed one is never
// touched, so a query without a deadline reads no line of it. A class with constructors, not an aggregate: g++ 12
// destroys twice an aggregate temporary that owns memory in an expression that awaits (docs/design.md); its
// destructor is safe for an object that never started.
template <class... A>
class [[nodiscard]] query_call {
 public:
  query_call(connection_state* s, const request& r, std::chrono::milliseconds timeout, const A&... args) noexcept
      : op_(s, r), args_(args...), timeout_(timeout) {}
  query_call(const query_call& o) noexcept : op_(o.op_), args_(o.args_), timeout_(o.timeout_) {}
  query_call& operator=(const query_call&) = delete;
  ~query_call() {
    if (op_.extras_ != 0) [[unlikely]] undo_extras();
    // Before op_ goes: forgetting a query still linked into its connection does not read its parameters.
    if constexpr (!std::is_trivially_destructible_v<block>) {
      if (encoded_) params_.~block();
    }
  }

  // It binds the stop token of the task awaiting it itself, when it suspends (tern/detail/stop_binding.hpp): a task's
  // stop_binding would be 24 more bytes of the awaiting frame written as every query starts and read as it resumes.
  using binds_task_stop = void;

  bool await_ready() {
    std::apply([this](const A&... a) { ::new (static_cast<void*>(&params_)) block(a...); }, args_);
    if constexpr (!std::is_trivially_destructible_v<block>) encoded_ = true;
    op_.req_.params = params_.list();
    return op_.await_ready();
  }
  template <class P>
  void await_suspend(std::coroutine_handle<P> h) {
    const std::stop_token* t = tern::detail::task_stop_token(h);
    op_.await_suspend(h);
    if (t != nullptr || timeout_.count() != 0) [[unlikely]] suspend_extras(t);
  }
  io_result<result> await_resume() noexcept {
    if (op_.extras_ != 0) [[unlikely]] return resume_extras();
    return op_.await_resume();
  }
  void cancel() noexcept { op_.cancel(); }
  io_context& context() const noexcept { return op_.context(); }

 private:
  using block = params_for<A...>;
  using registration = tern::detail::stop_registration<query_call>;
  static constexpr std::uint8_t deadline_armed = 1, stop_registered = 2;
  struct deadline_node : tern::detail::timer_node {
    query_op* op = nullptr;
    bool fired = false;
  };

  static void on_fire(tern::detail::timer_node* n) noexcept {
    auto* d = static_cast<deadline_node*>(n);
    d->fired = true;
    d->op->cancel();
  }
  // The query is in flight: its task's stoppable token is registered (a stop requested already cancels it at once,
  // through the loop), then its deadline armed. A throw of the registration's block (operator new, once per pool
  // class) resumes the task with it, and the query is forgotten as it is destroyed.
  [[gnu::noinline]] void suspend_extras(const std::stop_token* t) {
    if (t != nullptr) {
      void* b = tern::detail::frame_pool::allocate(registration::block_size());
      reg_ = registration::make(b, *t, this);
      op_.extras_ |= stop_registered;
    }
    if (timeout_.count() != 0) {
      io_context& ctx = op_.context();
      deadline_.op = &op_;
      deadline_.fire = &on_fire;
      deadline_.deadline_ns = tern::detail::deadline_after(ctx, timeout_);
      op_.extras_ |= deadline_armed;
      if (!ctx.timers().insert(&deadline_)) {  // already past
        deadline_.fired = true;
        op_.cancel();  // completes through the loop, never inline
      }
    }
  }
  void undo_extras() noexcept {
    if ((op_.extras_ & deadline_armed) != 0 && deadline_.linked()) op_.context().timers().remove(&deadline_);
    if ((op_.extras_ & stop_registered) != 0) (void)registration::release(reg_);
    op_.extras_ = 0;
  }
  io_result<result> resume_extras() noexcept {
    const bool timed_out = (op_.extras_ & deadline_armed) != 0 && deadline_.fired;
    undo_extras();
    io_result<result> r = op_.await_resume();
    if (timed_out) tern::detail::cancel_to_timeout(r);
    return r;
  }

  // First the op, whose first 64 bytes are what a query touches as it completes and resumes; the rest is read as
  // the query is sent, while the frame is still in the cache.
  query_op op_;
  union {
    block params_;  // encoded by await_ready
  };
  [[no_unique_address]] std::conditional_t<std::is_trivially_destructible_v<block>, std::tuple<>, bool> encoded_{};
  std::tuple<const A&...> args_;
  std::chrono::milliseconds timeout_;
  registration* reg_;  // set with stop_registered (not before: a line an unstopped query does not touch)
  deadline_node deadline_;
};

}  // namespace tern::pg::detail
