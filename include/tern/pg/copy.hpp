// tern/pg/copy.hpp
//
// COPY as streams: copy_writer sends the data of COPY ... FROM STDIN, copy_reader reads the data of COPY ... TO
// STDOUT, piece by piece, so bulk loads and exports never hold their whole data.
//
//   auto [ec, w] = co_await conn.copy_in("COPY items (id, name) FROM STDIN");
//   co_await w.write("1\tlamp\n2\tdesk\n");        // any split: rows need not be whole
//   auto [fec, rows] = co_await w.finish();         // rows: what the server took
//
//   auto [ec, r] = co_await conn.copy_out("COPY items TO STDOUT");
//   for (;;) {
//     auto [rec, data] = co_await r.read();         // one row in the text and CSV formats
//     if (rec == tern::error::eof) break;
//     out.write(data);
//   }
//
// A COPY holds its connection from start to end (other tasks' queries wait) and runs outside pipeline mode, which
// PostgreSQL does not allow COPY in. Writes wait for the socket when libpq's buffer is full, so a fast producer is
// held back to the network's pace; reads take one piece at a time from libpq. A writer destroyed before finish()
// aborts the COPY (the server rolls it back); a reader destroyed before the end asks the server to cancel it and
// drops the rest. A COPY whose copy_in() or copy_out() is cancelled before the server has confirmed it is ended
// the same way. A write() cancelled while its data is still being sent has handed all of it to libpq, which sends
// it (the writer goes on, or aborts the COPY when destroyed). A finish() or abort() cancelled before the server's
// answer is finished by the connection on its own (what is left is sent, a finish() cancelled on the server, the
// answer read): whether the rows of a finish() given up were taken is not known. Either way the connection serves
// the next queries.
#pragma once

#include <cstdint>
#include <string_view>
#include <system_error>

#include "tern/buffer.hpp"
#include "tern/io_result.hpp"
#include "tern/pg/result.hpp"
#include "tern/task.hpp"

namespace tern::pg {

namespace detail {
struct connection_state;
}

class copy_writer {
 public:
  copy_writer() noexcept = default;
  // Internal: the COPY started on s, which holds the connection under the exclusive owner id.
  copy_writer(detail::connection_state* s, std::uint32_t owner) noexcept;
  copy_writer(copy_writer&& o) noexcept;
  copy_writer& operator=(copy_writer&& o) noexcept;
  // Aborts a COPY that was neither finished nor aborted.
  ~copy_writer();

  // Awaitable: sends data; std::error_code (the server's refusal of bad data shows at finish()).
  task<std::error_code> write(const_buffer data);
  // Awaitable: ends the data; io_result<std::uint64_t>, the rows the server took (or its error, whose report is in
  // final_result()).
  task<io_result<std::uint64_t>> finish();
  // Awaitable: aborts the COPY with a message (the server rolls it back); std::error_code.
  task<std::error_code> abort(std::string_view message = "aborted by the client");
  // The COPY's outcome after finish() or abort().
  const result& final_result() const noexcept { return final_; }
  bool active() const noexcept { return s_ != nullptr; }

 private:
  detail::connection_state* s_ = nullptr;
  std::uint32_t owner_ = 0;
  result final_;
};

class copy_reader {
 public:
  copy_reader() noexcept = default;
  // Internal: the COPY started on s under the exclusive owner id.
  copy_reader(detail::connection_state* s, std::uint32_t owner) noexcept;
  copy_reader(copy_reader&& o) noexcept;
  copy_reader& operator=(copy_reader&& o) noexcept;
  // Cancels and drains a COPY not read to its end.
  ~copy_reader();

  // Awaitable: the next piece of data, valid until the next call; io_result<std::string_view>: tern::error::eof
  // after the last (the rows sent in final_result().affected_rows()).
  task<io_result<std::string_view>> read();
  const result& final_result() const noexcept { return final_; }
  bool active() const noexcept { return s_ != nullptr; }

 private:
  void free_piece() noexcept;

  detail::connection_state* s_ = nullptr;
  std::uint32_t owner_ = 0;
  char* piece_ = nullptr;
  result final_;
};

}  // namespace tern::pg
