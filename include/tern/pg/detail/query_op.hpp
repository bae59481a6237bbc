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

#include <coroutine>
#include <cstdint>
#include <system_error>
#include <utility>

#include "tern/error.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/pg/params.hpp"
#include "tern/pg/result.hpp"

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
  std::coroutine_handle<> waiter_;
  void (*on_done_)(query_op*) = nullptr;
  query_op* next_ = nullptr;            // in the gate's queue or the resend list
  request req_;
  void* owner_data_ = nullptr;
  // row_stream: the row the driver has read and the consumer has not taken yet, and the coroutine waiting in next().
  pg_result* pending_row_ = nullptr;
  std::coroutine_handle<> row_waiter_;
};

}  // namespace tern::pg::detail
