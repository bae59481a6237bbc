// tern/pg/row_stream.hpp
//
// row_stream: the rows of a query read one at a time (connection::stream), for results too large to hold.
//
//   auto [ec, rows] = co_await conn.stream("SELECT id, body FROM documents");
//   for (;;) {
//     auto [rec, row] = co_await rows.next();
//     if (rec == tern::error::eof) break;   // every row read
//     if (rec) return rec;                  // the query failed part way (its report: rows.final_result())
//     use(row["body"].as<std::string_view>());  // valid until the next call of next()
//   }
//
// The query runs in libpq's single-row mode: each row is its own small result, and the connection reads from the
// socket only as far as the row it hands out, so a slow reader holds the server back (through TCP) instead of
// filling memory. Destroying the stream before its end asks the server to cancel the query and drops what is
// left of it.
#pragma once

#include <coroutine>
#include <memory>
#include <system_error>

#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/pg/detail/query_op.hpp"
#include "tern/pg/result.hpp"

namespace tern::pg {

class row_stream;

namespace detail {
// The awaiter of row_stream::next(): yields io_result<row>.
class [[nodiscard]] row_wait {
 public:
  explicit row_wait(row_stream* rs) noexcept : rs_(rs) {}
  row_wait(const row_wait& o) noexcept : rs_(o.rs_) {}
  row_wait& operator=(const row_wait&) = delete;
  ~row_wait();

  bool await_ready() noexcept;
  void await_suspend(std::coroutine_handle<> h) noexcept;
  io_result<row> await_resume() noexcept;
  void cancel() noexcept;
  io_context& context() const noexcept;

 private:
  row_stream* rs_;
  std::error_code ec_;
  bool waiting_ = false;
};
}  // namespace detail

class row_stream {
 public:
  row_stream() noexcept = default;
  // Internal: takes over a started streaming query (on the heap, since it outlives the call that started it).
  explicit row_stream(std::unique_ptr<detail::query_op> op) noexcept;
  row_stream(row_stream&&) noexcept;
  row_stream& operator=(row_stream&&) noexcept;
  // Drops the rest of the rows, asking the server to cancel the query if it has not finished.
  ~row_stream();

  // Awaitable: the next row, valid until the next call; io_result<row>: tern::error::eof after the last row, or the
  // query's error (the server's report in final_result()). Cancellable; the stream stays usable.
  detail::row_wait next() noexcept { return detail::row_wait(this); }
  // After eof or an error: the query's final result (command tag, affected rows, or the server's report).
  const result& final_result() const noexcept { return final_; }

 private:
  friend class detail::row_wait;
  void drop() noexcept;

  std::unique_ptr<detail::query_op> op_;
  result current_;  // the row handed out last
  result final_;
};

}  // namespace tern::pg
