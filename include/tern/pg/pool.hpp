// tern/pg/pool.hpp
//
// pool: a bounded set of connections to one database, shared by the tasks of any number of loops.
//
//   pg::pool db({.conninfo = "host=/run/postgresql dbname=app", .max_size = 8});
//   auto [ec, r] = co_await db.query("SELECT name FROM items WHERE id = $1", 42);   // from a task of any worker
//   auto [aec, conn] = co_await db.acquire();                                       // exclusive, for a while
//   auto [tec, tx] = co_await conn->begin();
//
// acquire() lends a connection for the caller's exclusive use until the lease (pooled_connection) is destroyed.
// It takes an idle connection (one of the caller's own loop first), or opens one while the pool has fewer than
// max_size, or waits in a FIFO for one to come back, up to acquire_timeout (then tern::error::timed_out).
// query() is acquire(), one query, and the lease's end; to put many tasks' queries on one connection, share a
// lease's connection between tasks of its loop (connection.hpp: they are pipelined).
//
// Connections belong to loops (connection.hpp); one that was idle on another loop moves to the caller's loop with
// it (an idle connection holds no operation, so the move is a re-registration of its socket).
//
// Health: an idle connection is checked before it is lent: if the server has closed it (a restart, an idle
// timeout) the socket shows it at once and the connection is replaced; one idle for longer than
// health_check_after is also asked a round trip. A connection comes back clean: one returned broken is dropped (and
// the capacity goes to the next waiter, which connects afresh), one returned in a transaction (a transaction left
// by a failure, or begun with a query) is rolled back, one listening is unlistened, and one with queries still in
// flight (cancelled ones) is taken back once they are done; meanwhile it counts against max_size.
//
// Thread safety: acquire(), query() and stats() may be called from tasks of any loop at once; a lease is used and
// destroyed on the loop that acquired it. The pool must outlive the tasks that wait in acquire(); leases may
// outlive it (their connections are then closed when they end). Destroying the pool closes its idle connections;
// loops whose connections are idle in it must outlive it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>

#include "tern/io_result.hpp"
#include "tern/pg/connection.hpp"
#include "tern/pg/result.hpp"
#include "tern/pg/statement.hpp"
#include "tern/task.hpp"

namespace tern::pg {

struct pool_options {
  std::string conninfo;                                   // a libpq connection string or URI
  std::size_t max_size = 10;                              // connections at most, lent, idle or being made
  std::chrono::milliseconds acquire_timeout{30'000};      // the longest wait for a connection (0: no limit)
  std::chrono::milliseconds health_check_after{30'000};   // idle longer than this: a round trip before lending
  connect_options connect{};                              // for every connection the pool opens
};

struct pool_stats {
  std::size_t size = 0;          // connections now (lent, idle, being made or cleaned)
  std::size_t idle = 0;
  std::size_t waiting = 0;       // acquire()s in the queue
  std::uint64_t connects = 0;    // connections opened
  std::uint64_t dropped = 0;     // connections found or returned broken, and closed
  std::uint64_t timeouts = 0;    // acquire()s that gave up waiting
};

namespace detail {
struct pool_state;
}

// A connection lent by a pool; returned when destroyed.
class pooled_connection {
 public:
  pooled_connection() noexcept = default;
  // Internal: lends c from the pool's state p.
  pooled_connection(std::shared_ptr<detail::pool_state> p, connection c) noexcept;
  pooled_connection(pooled_connection&&) noexcept = default;
  pooled_connection& operator=(pooled_connection&& o) noexcept;
  // Gives the connection back to its pool (cleaned as the pool's notes say).
  ~pooled_connection();

  connection& operator*() noexcept { return c_; }
  connection* operator->() noexcept { return &c_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  // Closes the connection instead of giving it back (the pool opens another when needed).
  void discard() noexcept;

 private:
  std::shared_ptr<detail::pool_state> p_;
  connection c_;
};

class pool {
 public:
  explicit pool(pool_options opts);
  pool(const pool&) = delete;
  pool& operator=(const pool&) = delete;
  // Closes the idle connections; waiting acquire()s end with connection_closed.
  ~pool();

  // Awaitable: a connection for the calling task's loop, exclusive until the lease ends; io_result<pooled_connection>:
  // timed_out after acquire_timeout, connection_failed (or another connect error) when a new connection could
  // not be made, connection_closed once the pool is closed. Cancellable.
  task<io_result<pooled_connection>> acquire();

  // Awaitable: one query on a connection of the pool; io_result<result>.
  template <class... A>
  task<io_result<result>> query(const char* sql, const A&... args) {
    auto [ec, c] = co_await acquire();
    if (ec) co_return io_result<result>{ec, result()};
    co_return co_await c->query(sql, args...);
  }
  template <class... A>
  task<io_result<result>> query(const std::string& sql, const A&... args) {
    return query(sql.c_str(), args...);
  }
  template <class... A>
  task<io_result<result>> query(const statement& st, const A&... args) {
    auto [ec, c] = co_await acquire();
    if (ec) co_return io_result<result>{ec, result()};
    co_return co_await c->query(st, args...);
  }

  pool_stats stats() const;
  // libpq's message about the last connection the pool failed to open.
  std::string last_connect_error() const;
  // Closes the idle connections and refuses new acquire()s; lent connections are closed when they come back.
  void close() noexcept;

 private:
  std::shared_ptr<detail::pool_state> p_;
};

}  // namespace tern::pg
