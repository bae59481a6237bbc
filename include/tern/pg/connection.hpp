// tern/pg/connection.hpp
//
// connection: one PostgreSQL session, driven from a tern loop through libpq's non-blocking API, shared by any
// number of tasks of that loop.
//
//   auto [ec, conn] = co_await pg::connection::connect(ctx, "host=/run/postgresql dbname=app");
//   auto [qec, r] = co_await conn.query("SELECT name FROM items WHERE id = $1", 42);
//
// Connecting: libpq's PQconnectStartParams and PQconnectPoll, each step waiting for the socket on the loop, so TLS
// (sslmode, sslrootcert, ...), every authentication method libpq has (SCRAM, md5, certificates, GSSAPI) and every
// option of a connection string or URI work as libpq documents them. connect_options::connect_timeout bounds the
// whole of it. A host name is resolved by libpq itself, which blocks the loop while it does (give hostaddr, an
// address, or a Unix socket directory to avoid that).
//
// Queries: with parameters (params.hpp), as text or as a statement prepared once per connection (statement.hpp);
// their results are pg::result (result.hpp). The connection is in pipeline mode: the queries of every task are
// sent back to back as they come and their results matched in order, and the queries started while the loop runs
// its current batch of ready tasks go out together, with one sync point after them and one system call. Each
// query still behaves as if it ran alone, in its own implicit transaction: its result is held until the batch's
// sync point, and if another query of the batch failed (which makes the server roll back or skip the rest of the
// batch) it is sent again, alone, so that the failure is reported to its own task only. A query that shares a
// batch with a failing one may therefore run twice; its effects are undone the first time, but not its
// non-transactional ones (a sequence's nextval). Explicit batches (batch.hpp) and transactions (transaction.hpp)
// take PostgreSQL's pipeline semantics instead.
//
// Deadlines and cancellation: every query honours the awaiting task's stop token, with_timeout on it or on the
// task, and connect_options::query_timeout (or the statement's own timeout). A cancelled query completes at once
// with operation_canceled (timed_out for a deadline); if the server had started it, a cancel request goes to the
// server on a connection of its own (from the backend's key, on the loop, without blocking it), and the
// connection goes on serving the next queries. As with any client, a statement cancelled late may have taken
// effect.
//
// Exclusive uses: a transaction, a COPY and execute() hold the connection for themselves while they run; other
// tasks' queries wait for them (in order) and are then sent. LISTEN makes the connection read notifications
// whenever they come (next_notification()).
//
// Which thread: a connection belongs to the loop it was made on; its operations are awaited by tasks of that loop
// (from another thread they complete with tern::error::wrong_loop). move_to() hands an idle one to another loop.
// A connection must outlive the operations awaited on it; destroying it (or close()) ends every pending one with
// pg::error::connection_closed.
//
// Allocation: tern::pg allocates nothing per query (its state lives in the awaiting frame; a small result is copied
// into a block from a per-thread pool); libpq allocates the PGresult of each result, which a small one frees at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "tern/cancel.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/pg/copy.hpp"
#include "tern/pg/detail/query_op.hpp"
#include "tern/pg/error.hpp"
#include "tern/pg/notification.hpp"
#include "tern/pg/params.hpp"
#include "tern/pg/result.hpp"
#include "tern/pg/row_stream.hpp"
#include "tern/pg/statement.hpp"
#include "tern/pg/transaction.hpp"
#include "tern/task.hpp"

struct pg_conn;  // libpq's PGconn

namespace tern::pg {

struct connect_options {
  // The whole of connecting: the TCP or Unix connect, TLS, authentication, the session's start.
  std::chrono::milliseconds connect_timeout{10'000};
  // The deadline of every query (0: none); a statement's own timeout takes its place. On expiry the query ends
  // with timed_out and the server is asked to cancel it.
  std::chrono::milliseconds query_timeout{0};
  // The server's notices and warnings (severity as the server names it, "NOTICE", "WARNING"; its message), on
  // the loop's thread; empty: dropped (libpq would print them on stderr).
  std::function<void(std::string_view severity, std::string_view message)> on_notice{};
};

enum class isolation : std::uint8_t { server_default, read_committed, repeatable_read, serializable };

struct transaction_options {
  isolation level = isolation::server_default;
  bool read_only = false;
  bool deferrable = false;  // with serializable and read_only: wait for a snapshot that cannot fail
};

// What a connection has done, for monitoring and tests.
struct connection_stats {
  std::uint64_t queries = 0;            // sent (each resend counted again)
  std::uint64_t syncs = 0;              // sync points, that is, batches
  std::uint64_t resent = 0;             // queries sent again because another query of their batch failed
  std::uint64_t cancels_sent = 0;       // cancel requests delivered to the server
  std::uint64_t cancels_by_thread = 0;  // of those, made by libpq's blocking PQcancel on a thread of its own (a
                                        // libpq whose PGcancel tern::pg cannot read); the others go from the loop
  std::uint64_t cancels_confirmed = 0;  // cancelled queries the server then reported as cancelled or skipped
  std::uint64_t prepared = 0;           // statements prepared on this connection
};

class transaction;
class batch;

namespace detail {
// Reference counting of a connection's state (its loop's thread only).
void retain(connection_state* s) noexcept;
void release(connection_state* s) noexcept;

}  // namespace detail

class connection {
 public:
  // Not connected.
  connection() noexcept = default;
  connection(connection&& o) noexcept
      : s_(std::exchange(o.s_, nullptr)), timeout_(o.timeout_), error_(std::move(o.error_)) {}
  connection& operator=(connection&& o) noexcept;
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection() { close(); }

  // Awaitable: connects with a libpq connection string ("host=... dbname=...") or URI ("postgresql://...");
  // io_result<connection>. On failure the error is connection_failed (or timed_out), and the connection returned
  // holds libpq's message (error_message()).
  static task<io_result<connection>> connect(io_context& ctx, std::string conninfo, connect_options opts);
  // The same with libpq's keywords and values ({"host", "/tmp"}, {"dbname", "app"}, {"sslmode", "require"}).
  static task<io_result<connection>> connect(io_context& ctx, std::vector<std::pair<std::string, std::string>> params,
                                             connect_options opts);
  // Without options: overloads, not a default argument, since connect_options owns memory (on_notice) and g++ 12
  // destroys twice such an aggregate made in an expression that co_awaits (docs/guide.md, "Compilers").
  TERN_CORO_WRAPPER static task<io_result<connection>> connect(io_context& ctx, std::string conninfo) {
    return connect(ctx, std::move(conninfo), connect_options());
  }
  TERN_CORO_WRAPPER static task<io_result<connection>> connect(
      io_context& ctx, std::vector<std::pair<std::string, std::string>> params) {
    return connect(ctx, std::move(params), connect_options());
  }

  // Awaitable: runs sql with args as $1, $2, ...; io_result<result>. sql and args must outlive the co_await (as
  // anything in the awaited expression does); they are read as the query starts. Not a task: an operation that
  // lives in the awaiting frame (detail::query_call), so with_timeout, with_stop and spawn take it as they take a
  // socket's operations, and a query needs no coroutine frame of its own.
  template <class... A>
  detail::query_call<A...> query(const char* sql, const A&... args) noexcept {
    return {s_, {sql, nullptr, {}}, timeout_, args...};
  }
  template <class... A>
  detail::query_call<A...> query(const std::string& sql, const A&... args) noexcept {
    return query(sql.c_str(), args...);
  }
  // Awaitable: runs a prepared statement (prepared on this connection first if it is not yet).
  template <class... A>
  detail::query_call<A...> query(const statement& st, const A&... args) noexcept {
    return {s_, {st.sql().c_str(), &st, {}, st.results()}, deadline_of(st), args...};
  }

  // Awaitable: the rows of a query one at a time, for results of any size: io_result<row_stream> once the first
  // row (or the end, or the error) has come. While the stream is read, the connection reads no further than the
  // row it hands out, so memory stays bounded whatever the result's size; other tasks' queries wait behind it.
  template <class... A>
  task<io_result<row_stream>> stream(const char* sql, const A&... args) {
    const detail::params_for<A...> p(args...);
    co_return co_await start_stream({sql, nullptr, p.list(), format::text, 0, false, true});
  }
  template <class... A>
  task<io_result<row_stream>> stream(const statement& st, const A&... args) {
    const detail::params_for<A...> p(args...);
    co_return co_await start_stream({st.sql().c_str(), &st, p.list(), st.results(), 0, false, true});
  }

  // Awaitable: runs a script of any number of statements separated by semicolons, without parameters (libpq's
  // simple query protocol: the pipeline is drained and left for the while); std::error_code of the first that
  // failed, whose report is in the result when asked for. Cancelled while it is still being sent or runs, it ends
  // at once, and the connection finishes it on its own before it serves the next queries: the rest is sent, the
  // server asked to cancel it, its results read and dropped (its first statements may have taken effect).
  task<std::error_code> execute(std::string script, result* report = nullptr);

  // Awaitable: BEGIN (with the isolation level and access mode asked for); io_result<transaction>. The
  // transaction holds the connection: other tasks' queries wait until it ends.
  task<io_result<transaction>> begin(transaction_options opts = {});

  // Awaitable: LISTEN on a channel (its name quoted as an identifier); from then on the connection reads
  // notifications as they come, also while idle.
  task<std::error_code> listen(std::string_view channel);
  // Awaitable: UNLISTEN one channel.
  task<std::error_code> unlisten(std::string_view channel);
  // Awaitable: UNLISTEN *; the connection stops reading while idle.
  task<std::error_code> unlisten_all();
  // Awaitable: the next notification (those that came while nobody waited are queued, in order, up to 65536;
  // beyond that the connection stops reading until some are taken); io_result<notification>. One waiter at a
  // time (another gets operation_in_progress). Cancellable.
  detail::notification_wait next_notification() noexcept;

  // Awaitable: starts COPY ... FROM STDIN; io_result<copy_writer> to send the data through. The connection is the
  // COPY's until the writer finishes or is destroyed (which aborts the COPY).
  task<io_result<copy_writer>> copy_in(std::string sql);
  // Awaitable: starts COPY ... TO STDOUT; io_result<copy_reader> to read the data from.
  task<io_result<copy_reader>> copy_out(std::string sql);

  // Closes the connection: pending operations end with connection_closed. Idempotent.
  void close() noexcept;
  // True while connected (not closed, not broken).
  bool is_open() const noexcept;
  // libpq's message about the last connection failure (connect, or a connection lost).
  std::string error_message() const;
  // The server process serving this connection, its version (150004 for 15.4), and whether the session is encrypted.
  int backend_pid() const noexcept;
  int server_version() const noexcept;
  bool uses_tls() const noexcept;
  // The server-side session's transaction state: in a transaction block (or an aborted one).
  bool in_transaction() const noexcept;
  // Whether queries are in flight, held, or waiting to be sent (the connection is not idle).
  bool busy() const noexcept;
  connection_stats stats() const noexcept;
  // The loop the connection belongs to.
  io_context& context() const noexcept;
  // Moves an idle connection (no query in flight, not listening, no transaction or COPY) to another loop;
  // operation_in_progress otherwise. From the thread of either loop while the other does not use it.
  [[nodiscard]] std::error_code move_to(io_context& target) noexcept;
  // The libpq connection, for what tern::pg does not wrap (its parameters, PQserverVersion, ...): not for I/O.
  pg_conn* native_handle() const noexcept;

  // The deadline of every query (connect_options::query_timeout).
  std::chrono::milliseconds query_timeout() const noexcept { return timeout_; }
  void set_query_timeout(std::chrono::milliseconds t) noexcept { timeout_ = t; }

  // Internal: the state (null when not connected).
  detail::connection_state* state() const noexcept { return s_; }

 private:
  friend class batch;
  task<io_result<row_stream>> start_stream(detail::request r);
  std::chrono::milliseconds deadline_of(const statement& st) const noexcept {
    return st.timeout().count() != 0 ? st.timeout() : timeout_;
  }

  detail::connection_state* s_ = nullptr;
  std::chrono::milliseconds timeout_{0};
  std::string error_;  // a failed connect's message
};

}  // namespace tern::pg
