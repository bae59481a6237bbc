// tern/pg/transaction.hpp
//
// transaction: BEGIN ... COMMIT as a scoped object; ROLLBACK when it ends without commit(), by an early return or
// an exception.
//
//   auto [ec, tx] = co_await conn.begin({.level = pg::isolation::serializable});
//   co_await tx.query("UPDATE accounts SET balance = balance - $1 WHERE id = $2", 10, from);
//   co_await tx.query("UPDATE accounts SET balance = balance + $1 WHERE id = $2", 10, to);
//   if (auto cec = co_await tx.commit()) ...   // serialization_failure: run it again
//
// While it lives, the transaction holds its connection: other tasks' queries wait and go after its end. Its own
// queries are pipelined like any others (several may be in flight), with PostgreSQL's semantics: after a failure
// the rest of the transaction fails too (in_failed_transaction, or pipeline_aborted for those sent in the same
// batch), and commit() then reports transaction_rolled_back. The ROLLBACK of a transaction that was not committed
// is sent without waiting (a destructor cannot), before anything else goes out on the connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <system_error>
#include <utility>

#include "tern/cancel.hpp"
#include "tern/io_result.hpp"
#include "tern/pg/detail/query_op.hpp"
#include "tern/pg/params.hpp"
#include "tern/pg/result.hpp"
#include "tern/pg/statement.hpp"
#include "tern/task.hpp"

namespace tern::pg {

class transaction {
 public:
  transaction() noexcept = default;
  // Internal: the transaction begun on s under the exclusive owner id.
  transaction(detail::connection_state* s, std::uint32_t owner, std::chrono::milliseconds timeout) noexcept;
  transaction(transaction&& o) noexcept
      : s_(std::exchange(o.s_, nullptr)), owner_(o.owner_), timeout_(o.timeout_) {}
  transaction& operator=(transaction&& o) noexcept;
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  // Rolls back a transaction that was neither committed nor rolled back.
  ~transaction();

  // Awaitable: a query inside the transaction; io_result<result>. An operation, as connection::query()'s is.
  template <class... A>
  detail::query_call<A...> query(const char* sql, const A&... args) noexcept {
    return {s_, {sql, nullptr, {}, format::text, owner_, false}, timeout_, args...};
  }
  template <class... A>
  detail::query_call<A...> query(const std::string& sql, const A&... args) noexcept {
    return query(sql.c_str(), args...);
  }
  template <class... A>
  detail::query_call<A...> query(const statement& st, const A&... args) noexcept {
    const std::chrono::milliseconds t = st.timeout().count() != 0 ? st.timeout() : timeout_;
    return {s_, {st.sql().c_str(), &st, {}, st.results(), owner_, false}, t, args...};
  }

  // Awaitable: COMMIT; std::error_code (transaction_rolled_back if the server had aborted it). The transaction
  // has ended either way.
  task<std::error_code> commit();
  // Awaitable: ROLLBACK; std::error_code. The transaction has ended either way.
  task<std::error_code> rollback();
  // True until commit(), rollback() or the end of the connection.
  bool active() const noexcept { return s_ != nullptr; }

 private:
  friend class batch;
  task<std::error_code> finish(const char* sql);
  void abandon() noexcept;

  detail::connection_state* s_ = nullptr;
  std::uint32_t owner_ = 0;
  std::chrono::milliseconds timeout_{0};
};

}  // namespace tern::pg
