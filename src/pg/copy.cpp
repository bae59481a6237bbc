// COPY as streams (see tern/pg/copy.hpp): COPY runs outside pipeline mode, with the connection held (drained) for
// it; the writer and the reader make their own waits on the socket, the driver stands aside meanwhile.
#include "tern/pg/copy.hpp"

#include <charconv>
#include <cstring>

#include "exclusive.hpp"
#include "state.hpp"
#include "tern/error.hpp"
#include "tern/spawn.hpp"

namespace tern::pg {

using detail::connection_state;

namespace {

task<std::error_code> finish_copy(connection_state* s, result& report);
task<> end_statement(connection_state* s, ExecStatusType first, const char* why);
task<> abandon_start(connection_state* s, std::uint32_t id);
task<> abandon_statement(connection_state* s, std::uint32_t id, ExecStatusType st);

// Starts a COPY statement and checks that the server entered the COPY state asked for; on failure the connection
// is back in pipeline mode and released, and report holds the server's refusal. Given up (its task cancelled)
// after the statement was sent, the server's answer is still awaited, and the COPY ended, by a task of its own
// (abandon_start) that then releases the connection: leaving pipeline mode's exchange half done would break it.
task<io_result<std::uint32_t>> start_copy(connection_state* s, const std::string& sql, ExecStatusType expected,
                                          result& report) {
  if (std::error_code ec = detail::refusal(s)) co_return io_result<std::uint32_t>{ec, 0};
  auto [gec, id] = co_await detail::exclusive_awaiter(s, true);
  if (gec) co_return io_result<std::uint32_t>{gec, 0};
  std::error_code ec = detail::leave_pipeline(s);
  bool sent = false;
  if (!ec) {
    sent = PQsendQuery(s->pg, sql.c_str()) != 0;
    if (!sent) ec = make_error_code(PQstatus(s->pg) == CONNECTION_BAD ? error::connection_lost : error::bad_response);
  }
  if (!ec) ec = co_await detail::flush_all(s);
  if (!ec) ec = co_await detail::await_result(s);
  if (ec && sent && !s->closed && !s->broken) {
    detail::retain(s);
    try {
      tern::spawn(*s->ctx, abandon_start(s, id)).detach();
      co_return io_result<std::uint32_t>{ec, 0};
    } catch (...) {
      detail::release(s);  // out of memory: the connection breaks instead
    }
  }
  if (!ec) {
    PGresult* r = PQgetResult(s->pg);
    const ExecStatusType st = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st == expected) {
      PQclear(r);
      co_return io_result<std::uint32_t>{std::error_code{}, id};
    }
    ec = st == PGRES_FATAL_ERROR ? detail::error_of(r, s->pg) : make_error_code(error::not_in_copy);
    report = result(r);
    // The statement is ended by a task of its own, which then hands the connection back (the queries behind it
    // wait at the gate): the caller has its answer now, and a stop of its task cannot cut the exchange short,
    // which would put the connection back in pipeline mode in the middle of it.
    detail::retain(s);
    try {
      tern::spawn(*s->ctx, abandon_statement(s, id, st)).detach();
      co_return io_result<std::uint32_t>{ec, 0};
    } catch (...) {
      detail::release(s);  // out of memory: ended here instead
    }
    co_await end_statement(s, st, "not the COPY direction asked for");
  }
  detail::return_to_pipeline(s, id);
  co_return io_result<std::uint32_t>{ec, 0};
}

// The rest of a COPY statement whose first result had the status first: a COPY is ended (one from the client
// aborted with why, one to the client cancelled and drained), then the results that follow are read to the end.
task<> end_statement(connection_state* s, ExecStatusType first, const char* why) {
  if (first == PGRES_COPY_IN) {
    if (PQputCopyEnd(s->pg, why) >= 0) co_await detail::flush_all(s);
  } else if (first == PGRES_COPY_OUT) {
    s->request_cancel();
  }
  if (first == PGRES_COPY_IN || first == PGRES_COPY_OUT) {
    result rest;
    co_await finish_copy(s, rest);
    co_await detail::cancels_settled(s);
  } else {
    while (!co_await detail::await_result(s)) {
      PGresult* more = PQgetResult(s->pg);
      if (more == nullptr) break;
      PQclear(more);
    }
  }
}

// A COPY statement of the other direction than asked for (its first result's status st), ended, then the
// connection goes back to pipeline mode and is released (start_copy's caller released its own hold).
task<> abandon_statement(connection_state* s, std::uint32_t id, ExecStatusType st) {
  co_await end_statement(s, st, "not the COPY direction asked for");
  detail::return_to_pipeline(s, id);
  detail::release(s);
}

// A COPY whose start was given up: the statement's output is sent, its answer awaited and its COPY ended, then the
// connection goes back to pipeline mode and is released (start_copy's caller released its own hold).
task<> abandon_start(connection_state* s, std::uint32_t id) {
  if (!co_await detail::flush_all(s) && !co_await detail::await_result(s)) {
    PGresult* r = PQgetResult(s->pg);
    const ExecStatusType st = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    PQclear(r);
    co_await end_statement(s, st, "COPY abandoned by the client");
  }
  detail::return_to_pipeline(s, id);
  detail::release(s);
}

// Reads the COPY's final results (its command status, then the end); the first error, with its report.
task<std::error_code> finish_copy(connection_state* s, result& report) {
  std::error_code first;
  for (;;) {
    if (std::error_code ec = co_await detail::await_result(s)) co_return first ? first : ec;
    PGresult* r = PQgetResult(s->pg);
    if (r == nullptr) co_return first;
    const ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COPY_OUT) {  // a reader abandoned part way: drop the rest of the data
      PQclear(r);
      if (std::error_code ec = co_await detail::drop_copy_data(s)) co_return ec;
      continue;
    }
    if (st == PGRES_FATAL_ERROR && !first) first = detail::error_of(r, s->pg);
    report = result(r);
  }
}

// Hands the connection back once a COPY is over. One whose end was given up part way (the task of finish(),
// abort() or read() cancelled while the end was being sent or the server's answer awaited) is finished by a task of
// its own first (abandon_exchange; the server is asked to cancel it with cancel): going back to pipeline mode in
// the middle of the exchange would break the connection for every other task.
void hand_back(connection_state* s, std::uint32_t id, bool cancel) noexcept {
  if (!s->closed && !s->broken && PQtransactionStatus(s->pg) == PQTRANS_ACTIVE) {
    detail::abandon_exchange(s, id, cancel);
  } else {
    detail::return_to_pipeline(s, id);
  }
}

// Aborts or drains a COPY whose writer or reader went away without finishing it, then releases the connection.
task<> abandon_copy(connection_state* s, std::uint32_t id, bool writer) {
  if (!s->closed && !s->broken) {
    result report;
    if (writer) {
      if (PQputCopyEnd(s->pg, "COPY abandoned by the client") >= 0) co_await detail::flush_all(s);
    } else {
      s->request_cancel();
    }
    co_await finish_copy(s, report);
    co_await detail::cancels_settled(s);
  }
  detail::return_to_pipeline(s, id);
  detail::release(s);
}

}  // namespace

// ---- connection's COPY operations ----

namespace {

// Starts a COPY in the direction that the server's answer must confirm (PGRES_COPY_IN or PGRES_COPY_OUT) and
// hands the connection to a Handle (copy_writer or copy_reader) under the COPY's exclusive owner id.
template <class Handle>
task<io_result<Handle>> open_copy(connection_state* s, std::string sql, ExecStatusType expected) {
  if (std::error_code ec = detail::refusal(s)) co_return io_result<Handle>{ec, Handle()};
  detail::retain(s);
  result report;
  auto [ec, id] = co_await start_copy(s, sql, expected, report);
  Handle h;
  if (!ec) h = Handle(s, id);
  detail::release(s);
  co_return io_result<Handle>{ec, std::move(h)};
}

}  // namespace

task<io_result<copy_writer>> connection::copy_in(std::string sql) {
  return open_copy<copy_writer>(s_, std::move(sql), PGRES_COPY_IN);
}

task<io_result<copy_reader>> connection::copy_out(std::string sql) {
  return open_copy<copy_reader>(s_, std::move(sql), PGRES_COPY_OUT);
}

// ---- copy_writer ----

copy_writer::copy_writer(connection_state* s, std::uint32_t owner) noexcept : s_(s), owner_(owner) {
  detail::retain(s_);
}

copy_writer::copy_writer(copy_writer&& o) noexcept
    : s_(std::exchange(o.s_, nullptr)), owner_(o.owner_), final_(std::move(o.final_)) {}

copy_writer& copy_writer::operator=(copy_writer&& o) noexcept {
  if (this != &o) {
    this->~copy_writer();
    new (this) copy_writer(std::move(o));
  }
  return *this;
}

copy_writer::~copy_writer() {
  if (s_ == nullptr) return;
  connection_state* s = std::exchange(s_, nullptr);
  try {
    tern::spawn(*s->ctx, abandon_copy(s, owner_, true)).detach();
  } catch (...) {
    s->break_connection(make_error_code(error::connection_lost));
    detail::return_to_pipeline(s, owner_);
    detail::release(s);
  }
}

task<std::error_code> copy_writer::write(const_buffer data) {
  if (s_ == nullptr) co_return make_error_code(error::not_in_copy);
  if (std::error_code ec = detail::refusal(s_)) co_return ec;
  const char* p = static_cast<const char*>(data.data());
  std::size_t left = data.size();
  while (left > 0) {
    // libpq takes at most an int per call.
    const int n = static_cast<int>(left < (1u << 30) ? left : (1u << 30));
    const int rc = PQputCopyData(s_->pg, p, n);
    if (rc < 0) {
      s_->break_connection(make_error_code(error::connection_lost));
      co_return make_error_code(error::connection_lost);
    }
    if (rc == 0) {  // libpq's buffer is full: wait for the socket
      auto [wec, ready] = co_await s_->watch.wait_writable();
      if (wec) co_return wec;
      if (PQflush(s_->pg) < 0) {
        s_->break_connection(make_error_code(error::connection_lost));
        co_return make_error_code(error::connection_lost);
      }
      continue;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  // libpq grows its buffer rather than refuse data, so the writer waits here until what it holds is out: memory
  // stays bounded by one write.
  co_return co_await detail::flush_all(s_);
}

task<io_result<std::uint64_t>> copy_writer::finish() {
  if (s_ == nullptr) co_return io_result<std::uint64_t>{make_error_code(error::not_in_copy), 0};
  // From another loop: refused, and the writer kept (giving it up would hand the connection back from this thread).
  if (!s_->ctx->running_here()) co_return io_result<std::uint64_t>{make_error_code(tern::error::wrong_loop), 0};
  connection_state* s = std::exchange(s_, nullptr);
  std::error_code ec = detail::refusal(s);
  while (!ec) {
    const int rc = PQputCopyEnd(s->pg, nullptr);
    if (rc == 1) break;
    if (rc < 0) {
      ec = make_error_code(error::connection_lost);
      break;
    }
    auto [wec, ready] = co_await s->watch.wait_writable();
    ec = wec;
  }
  if (!ec) ec = co_await detail::flush_all(s);
  if (!ec) ec = co_await finish_copy(s, final_);
  hand_back(s, owner_, true);
  detail::release(s);
  co_return io_result<std::uint64_t>{ec, ec ? 0 : final_.affected_rows()};
}

task<std::error_code> copy_writer::abort(std::string_view message) {
  if (s_ == nullptr) co_return make_error_code(error::not_in_copy);
  if (!s_->ctx->running_here()) co_return make_error_code(tern::error::wrong_loop);  // as finish(): the writer kept
  connection_state* s = std::exchange(s_, nullptr);
  std::error_code ec = detail::refusal(s);
  const std::string text(message);
  if (!ec && PQputCopyEnd(s->pg, text.c_str()) < 0) ec = make_error_code(error::connection_lost);
  if (!ec) ec = co_await detail::flush_all(s);
  if (!ec) {
    // The server answers an aborted COPY with an error: that is the expected outcome, not a failure of abort().
    ec = co_await finish_copy(s, final_);
    if (ec != tern::error::operation_canceled) ec = {};
  }
  hand_back(s, owner_, false);
  detail::release(s);
  co_return ec;
}

// ---- copy_reader ----

copy_reader::copy_reader(connection_state* s, std::uint32_t owner) noexcept : s_(s), owner_(owner) {
  detail::retain(s_);
}

copy_reader::copy_reader(copy_reader&& o) noexcept
    : s_(std::exchange(o.s_, nullptr)), owner_(o.owner_), piece_(std::exchange(o.piece_, nullptr)),
      final_(std::move(o.final_)) {}

copy_reader& copy_reader::operator=(copy_reader&& o) noexcept {
  if (this != &o) {
    this->~copy_reader();
    new (this) copy_reader(std::move(o));
  }
  return *this;
}

copy_reader::~copy_reader() {
  free_piece();
  if (s_ == nullptr) return;
  connection_state* s = std::exchange(s_, nullptr);
  try {
    tern::spawn(*s->ctx, abandon_copy(s, owner_, false)).detach();
  } catch (...) {
    s->break_connection(make_error_code(error::connection_lost));
    detail::return_to_pipeline(s, owner_);
    detail::release(s);
  }
}

void copy_reader::free_piece() noexcept {
  if (piece_ != nullptr) PQfreemem(std::exchange(piece_, nullptr));
}

task<io_result<std::string_view>> copy_reader::read() {
  using piece = io_result<std::string_view>;
  free_piece();
  if (s_ == nullptr) co_return piece{make_error_code(tern::error::eof), std::string_view()};
  for (;;) {
    if (std::error_code ec = detail::refusal(s_)) co_return piece{ec, std::string_view()};
    const int n = PQgetCopyData(s_->pg, &piece_, 1);
    if (n > 0) co_return piece{std::error_code{}, std::string_view(piece_, static_cast<std::size_t>(n))};
    if (n == 0) {
      auto [wec, ready] = co_await s_->watch.wait_readable();
      if (wec) co_return piece{wec, std::string_view()};
      if (PQconsumeInput(s_->pg) == 0) {
        s_->break_connection(make_error_code(error::connection_lost));
        co_return piece{make_error_code(error::connection_lost), std::string_view()};
      }
      continue;
    }
    // The end of the data (-1), or an error (-2): the COPY's own result says which.
    connection_state* s = std::exchange(s_, nullptr);
    std::error_code ec = co_await finish_copy(s, final_);
    if (!ec && n == -2) ec = make_error_code(error::connection_lost);
    hand_back(s, owner_, false);
    detail::release(s);
    co_return piece{ec ? ec : make_error_code(tern::error::eof), std::string_view()};
  }
}

}  // namespace tern::pg
