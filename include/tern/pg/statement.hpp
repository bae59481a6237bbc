// tern/pg/statement.hpp
//
// statement: a query text to be prepared once per connection and then run by name.
//
//   static const tern::pg::statement by_id("SELECT name FROM items WHERE id = $1");
//   auto [ec, r] = co_await conn.query(by_id, 42);   // Parse on this connection's first use, then Bind/Execute
//
// A connection prepares a statement the first time it runs it (the Parse goes in the same pipeline batch as the
// first execution, so it costs no round trip of its own) and remembers it for its life: later runs send only the
// parameters. The server-side name is derived from a number unique in the process, so statements made anywhere
// never collide. Parameter types are fixed by the first run's C++ types (an int goes as int4, a string as
// "unknown" for the server to infer); a later run with other C++ types is prepared again under a second name.
//
// A statement may be shared by any number of connections and threads; it must outlive the queries that use it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "tern/pg/params.hpp"

namespace tern::pg {

class statement {
 public:
  // results: the format of the rows (binary reads numbers and timestamps without parsing them); timeout: the
  // deadline of each run (0: the connection's query_timeout).
  explicit statement(std::string sql, format results = format::text,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;

  const std::string& sql() const noexcept { return sql_; }
  format results() const noexcept { return results_; }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  // The number unique in the process that names it on the server ("tern_<id>").
  std::uint64_t id() const noexcept { return id_; }

 private:
  std::string sql_;
  format results_;
  std::chrono::milliseconds timeout_;
  std::uint64_t id_;
};

}  // namespace tern::pg
