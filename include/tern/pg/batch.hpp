// tern/pg/batch.hpp
//
// batch: queries sent together with one sync point after them, with PostgreSQL's pipeline semantics as they are.
//
//   pg::batch b(conn);
//   for (const item& i : items) b.add("INSERT INTO items (id, name) VALUES ($1, $2)", i.id, i.name);
//   if (auto ec = co_await b.run()) { ... }        // the first failure
//   for (std::size_t i = 0; i < b.size(); ++i) b.outcome(i);   // io_result<result> of each query
//
// The queries of a batch are one implicit transaction, as the server sees a pipeline between two sync points: if
// one fails, those after it are skipped (pipeline_aborted) and those before it are rolled back with it, though
// their results (already received) say they succeeded; the queries after the batch's sync point are not affected.
// A batch made on a transaction (batch(tx)) runs inside it instead. A batch keeps its
// queries' parameters in memory of its own (copied at add()), which clear() keeps for the next round.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include "tern/io_result.hpp"
#include "tern/pg/detail/query_op.hpp"
#include "tern/pg/params.hpp"
#include "tern/pg/result.hpp"
#include "tern/pg/statement.hpp"
#include "tern/task.hpp"

namespace tern::pg {

class connection;
class transaction;

class batch {
 public:
  explicit batch(connection& c) noexcept;
  // A batch of queries inside a transaction.
  explicit batch(transaction& tx) noexcept;
  batch(const batch&) = delete;
  batch& operator=(const batch&) = delete;

  // Adds a query (its text and parameters copied).
  template <class... A>
  void add(std::string_view sql, const A&... args) {
    const params<sizeof...(A)> p(args...);
    add_encoded(sql, nullptr, format::text, p.list());
  }
  // Adds a run of a prepared statement (which must outlive run()).
  template <class... A>
  void add(const statement& st, const A&... args) {
    const params<sizeof...(A)> p(args...);
    add_encoded({}, &st, st.results(), p.list());
  }
  std::size_t size() const noexcept { return entries_.size(); }

  // Awaitable: sends every query back to back and a sync point after them, and waits for all their outcomes;
  // std::error_code of the first that failed. Waits first for a transaction or a COPY that holds the connection.
  task<std::error_code> run();
  // The outcome of query i after run().
  io_result<result>& outcome(std::size_t i) noexcept { return outcomes_[i]; }
  // Forgets the queries and outcomes, keeping the memory for the next round.
  void clear() noexcept;

 private:
  struct entry {
    std::size_t sql_offset;  // into text_ (when stmt is null)
    const statement* stmt;
    format results;
    std::size_t first_param;
    int param_count;
  };
  struct param_entry {
    std::size_t offset;  // into data_
    int length;
    bool null;
    int fmt;
    oid type;
  };
  void add_encoded(std::string_view sql, const statement* st, format results, const param_list& p);
  static void on_done(detail::query_op* op);

  detail::connection_state* s_;
  std::uint32_t owner_;
  std::vector<entry> entries_;
  std::vector<param_entry> param_entries_;
  std::string text_;   // the texts of the queries, NUL-terminated
  std::string data_;   // the parameters' bytes, text ones NUL-terminated
  // What run() hands libpq, rebuilt from the above once no more is added.
  std::vector<const char*> values_;
  std::vector<int> lengths_;
  std::vector<int> formats_;
  std::vector<oid> types_;
  std::vector<detail::query_op> ops_;
  std::vector<io_result<result>> outcomes_;
  std::size_t pending_ = 0;
  std::coroutine_handle<> waiter_;
};

}  // namespace tern::pg
