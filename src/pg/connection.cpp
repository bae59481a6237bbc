// tern::pg connections (see tern/pg/connection.hpp): connecting through PQconnectPoll on the loop, the exclusive
// holders (transactions, scripts), LISTEN and notifications, streams of rows, and moving between loops. The
// pipeline's engine is in state.cpp, COPY in copy.cpp, explicit batches in batch.cpp.
#include "tern/pg/connection.hpp"

#include <fcntl.h>

#include <atomic>

#include "exclusive.hpp"
#include "state.hpp"
#include "tern/cancel.hpp"
#include "tern/error.hpp"
#include "tern/spawn.hpp"
#include "tern/timer.hpp"
#include "tern/unique_fd.hpp"

namespace tern::pg {

namespace detail {

// ---- Holding the connection ----

exclusive_awaiter::~exclusive_awaiter() {
  connection_state* s = w_.s;
  if (s == nullptr || w_.done) return;
  if (w_.queued) {
    for (std::size_t i = s->gate_head; i < s->gate.size(); ++i) {
      if (s->gate[i].wait == &w_) s->gate[i].wait = nullptr;
    }
  } else if (w_.draining && s->drain_waiter == &w_) {
    s->drain_waiter = nullptr;
    s->release_gate(w_.granted);
  }
}

bool exclusive_awaiter::await_ready() noexcept {
  connection_state* s = w_.s;
  if (std::error_code ec = refusal(s)) {
    w_.ec = ec;
    w_.done = true;
    return true;
  }
  if (s->owner == 0 && s->gate_head == s->gate.size()) {
    if (s->grant(&w_)) {
      w_.done = true;
      return true;
    }
    return false;  // granted; waits for the pipeline to empty
  }
  s->enqueue_gate(&w_);
  return false;
}

void exclusive_awaiter::cancel() noexcept {
  connection_state* s = w_.s;
  if (w_.done) return;
  if (w_.queued) {
    for (std::size_t i = s->gate_head; i < s->gate.size(); ++i) {
      if (s->gate[i].wait == &w_) s->gate[i].wait = nullptr;
    }
    w_.queued = false;
  } else if (w_.draining) {
    s->drain_waiter = nullptr;
    w_.draining = false;
    s->release_gate(std::exchange(w_.granted, 0));
  } else {
    return;
  }
  w_.granted = 0;
  w_.ec = make_error_code(tern::error::operation_canceled);
  w_.done = true;
  resume_later(*s->ctx, w_.waiter);
}

std::error_code refusal(const connection_state* s) noexcept {
  if (s == nullptr || s->closed) return make_error_code(error::connection_closed);
  if (!s->ctx->running_here()) return make_error_code(tern::error::wrong_loop);
  if (s->broken) return make_error_code(error::connection_lost);
  return {};
}

std::error_code leave_pipeline(connection_state* s) noexcept {
  if (PQexitPipelineMode(s->pg) != 1) {
    s->error_text = PQerrorMessage(s->pg);
    return make_error_code(error::bad_response);
  }
  s->pipeline_off = true;
  return {};
}

void return_to_pipeline(connection_state* s, std::uint32_t id) noexcept {
  if (s->pipeline_off && !s->closed && !s->broken) {
    if (PQenterPipelineMode(s->pg) != 1) s->break_connection(make_error_code(error::bad_response));
  }
  s->pipeline_off = false;
  s->release_gate(id);
  s->kick();
}

task<std::error_code> flush_all(connection_state* s) {
  for (;;) {
    if (std::error_code ec = refusal(s)) co_return ec;
    const int f = PQflush(s->pg);
    if (f == 0) co_return std::error_code{};
    if (f < 0) {
      s->break_connection(make_error_code(error::connection_lost));
      co_return make_error_code(error::connection_lost);
    }
    auto [ec, ready] = co_await s->watch.wait(readiness::either);
    if (ec) co_return ec;
    // Reading while waiting to write: a server blocked on its own output would never read ours.
    if (any(ready & readiness::readable) && PQconsumeInput(s->pg) == 0) {
      s->break_connection(make_error_code(error::connection_lost));
      co_return make_error_code(error::connection_lost);
    }
  }
}

task<std::error_code> await_result(connection_state* s) {
  for (;;) {
    if (std::error_code ec = refusal(s)) co_return ec;
    if (PQisBusy(s->pg) == 0) co_return std::error_code{};
    auto [ec, ready] = co_await s->watch.wait_readable();
    if (ec) co_return ec;
    if (PQconsumeInput(s->pg) == 0) {
      s->break_connection(make_error_code(error::connection_lost));
      co_return make_error_code(error::connection_lost);
    }
  }
}

task<std::error_code> drop_copy_data(connection_state* s) {
  char* piece = nullptr;
  for (;;) {
    if (std::error_code ec = refusal(s)) co_return ec;
    const int n = PQgetCopyData(s->pg, &piece, 1);
    if (n > 0) {
      PQfreemem(piece);
      continue;
    }
    if (n < 0) co_return std::error_code{};
    auto [ec, ready] = co_await s->watch.wait_readable();
    if (ec) co_return ec;
    if (PQconsumeInput(s->pg) == 0) {
      s->break_connection(make_error_code(error::connection_lost));
      co_return make_error_code(error::connection_lost);
    }
  }
}

// An exchange whose caller gave up (abandon_exchange): pipeline mode cannot be entered while a query of the simple
// protocol is still being sent or running (the connection would break, and every other query with it), so the
// rest is sent, the server asked to cancel it (again while it goes on: a request that comes while the server still
// reads the script is dropped), its results read to their end, and only then is the connection handed on.
task<> finish_abandoned(connection_state* s, std::uint32_t id, bool cancel) {
  if (!co_await flush_all(s)) {
    if (cancel) s->cancel_until_stopped();
    while (!co_await await_result(s)) {
      PGresult* r = PQgetResult(s->pg);
      if (r == nullptr) break;
      const ExecStatusType st = PQresultStatus(r);
      PQclear(r);
      if (st == PGRES_COPY_IN) {  // a COPY FROM STDIN the script started: failed
        if (PQputCopyEnd(s->pg, "COPY abandoned by the client") < 0 || co_await flush_all(s)) break;
      } else if (st == PGRES_COPY_OUT) {  // the rest of a COPY TO STDOUT, cancelled
        if (co_await drop_copy_data(s)) break;
      }
    }
    s->stop_cancel_retry();
    co_await cancels_settled(s);
  }
  return_to_pipeline(s, id);
  release(s);
}

namespace {

bool cancels_pending(const connection_state* s) noexcept {
  return s->cancels_in_flight != 0 && !s->closed && !s->broken;
}

// Awaitable: resumed when the last cancel request on its way has ended (cancel_landed), or the connection ended.
// Not cancellable, on purpose: a caller whose task is stopped must still not hand the connection back early.
class [[nodiscard]] settle_awaiter {
 public:
  explicit settle_awaiter(connection_state* s) noexcept : s_(s) {}
  // A copy is the same wait, not yet started (a task's await_transform may pass the awaiter on by value).
  settle_awaiter(const settle_awaiter& o) noexcept : s_(o.s_) {}
  settle_awaiter& operator=(const settle_awaiter&) = delete;
  // Unlinks a wait whose frame is destroyed unfinished (its loop torn down).
  ~settle_awaiter() {
    if (!w_.linked) return;
    for (settle_wait** p = &s_->settle_waiters; *p != nullptr; p = &(*p)->next) {
      if (*p == &w_) {
        *p = w_.next;
        break;
      }
    }
  }
  bool await_ready() const noexcept { return !cancels_pending(s_); }
  void await_suspend(std::coroutine_handle<> h) noexcept {
    w_.waiter = h;
    w_.next = s_->settle_waiters;
    w_.linked = true;
    s_->settle_waiters = &w_;
  }
  void await_resume() const noexcept {}

 private:
  connection_state* s_;
  settle_wait w_;
};

}  // namespace

task<> cancels_settled(connection_state* s) {
  while (cancels_pending(s)) co_await settle_awaiter(s);
}

void abandon_exchange(connection_state* s, std::uint32_t id, bool cancel) noexcept {
  retain(s);
  try {
    tern::spawn(*s->ctx, finish_abandoned(s, id, cancel)).detach();
  } catch (...) {
    s->break_connection(make_error_code(error::connection_lost));
    return_to_pipeline(s, id);
    release(s);
  }
}

// ---- Streams ----

namespace {

// Awaitable: sends a streaming query and waits for its first row (or its end, or its error); std::error_code.
class [[nodiscard]] stream_start {
 public:
  explicit stream_start(query_op* op) noexcept : op_(op) {}
  stream_start(const stream_start& o) noexcept : op_(o.op_) {}
  stream_start& operator=(const stream_start&) = delete;

  bool await_ready() noexcept {
    if (op_->await_ready()) return true;
    return op_->pending_row_ != nullptr || op_->rows_ended_;
  }
  void await_suspend(std::coroutine_handle<> h) noexcept { op_->await_suspend(h); }
  std::error_code await_resume() noexcept {
    op_->suspended_ = false;
    return op_->rows_ended_ || op_->phase_ == query_op::phase::done ? op_->ec_ : std::error_code{};
  }
  void cancel() noexcept { op_->cancel(); }
  io_context& context() const noexcept { return op_->context(); }

 private:
  query_op* op_;
};

}  // namespace

row_wait::~row_wait() {
  if (waiting_ && rs_->op_ != nullptr) rs_->op_->row_waiter_ = {};
}

bool row_wait::await_ready() noexcept {
  rs_->current_ = result();
  query_op* op = rs_->op_.get();
  if (op == nullptr) {
    ec_ = make_error_code(tern::error::eof);
    return true;
  }
  if (op->pending_row_ != nullptr) return true;
  if (op->rows_ended_) return true;
  if (std::error_code ec = refusal(op->s_)) {
    ec_ = ec;
    return true;
  }
  op->s_->kick();
  return false;
}

void row_wait::await_suspend(std::coroutine_handle<> h) noexcept {
  rs_->op_->row_waiter_ = h;
  waiting_ = true;
}

io_result<row> row_wait::await_resume() noexcept {
  waiting_ = false;
  query_op* op = rs_->op_.get();
  if (ec_ || op == nullptr) return {ec_ ? ec_ : make_error_code(tern::error::eof), row({}, 0)};
  if (op->pending_row_ != nullptr) {
    rs_->current_ = result(std::exchange(op->pending_row_, nullptr));
    // The row is taken: the connection may read on, and take the next row if libpq has it already.
    connection_state* s = op->s_;
    if (!s->closed && !s->broken) {
      s->process_input();
      s->kick();
    }
    return {{}, rs_->current_[0]};
  }
  if (op->rows_ended_) {
    if (detail::result_source r = op->take_result(); !r.empty()) rs_->final_ = result(r);
    return {op->ec_ ? op->ec_ : make_error_code(tern::error::eof), row({}, 0)};
  }
  return {refusal(op->s_), row({}, 0)};
}

void row_wait::cancel() noexcept {
  if (!waiting_) return;
  query_op* op = rs_->op_.get();
  // The driver may have taken the handle already (its resumption is queued, waiting_ not yet cleared): the wake
  // wins, and the row it brought is returned.
  if (!op->row_waiter_) return;
  waiting_ = false;
  ec_ = make_error_code(tern::error::operation_canceled);
  resume_later(*op->s_->ctx, std::exchange(op->row_waiter_, {}));
}

io_context& row_wait::context() const noexcept { return *rs_->op_->s_->ctx; }

// ---- Notifications ----

void notify_deleter::operator()(pgNotify* n) const noexcept { PQfreemem(n); }

notification_wait::~notification_wait() {
  if (waiting_ && s_ != nullptr && s_->notify_waiter == this) s_->notify_waiter = nullptr;
}

bool notification_wait::await_ready() noexcept {
  if (s_ != nullptr && !s_->notifications.empty() && s_->ctx->running_here()) {
    n_ = s_->notifications.front();
    s_->notifications.pop_front();
    s_->kick();  // below the limit again: reading resumes
    return true;
  }
  if (std::error_code ec = refusal(s_)) {
    ec_ = ec;
    return true;
  }
  if (s_->notify_waiter != nullptr) {
    ec_ = make_error_code(tern::error::operation_in_progress);
    return true;
  }
  s_->notify_waiter = this;
  waiting_ = true;
  s_->kick();
  return false;
}

void notification_wait::await_suspend(std::coroutine_handle<> h) noexcept { waiter_ = h; }

void notification_wait::cancel() noexcept {
  if (!waiting_) return;
  if (s_->notify_waiter == this) s_->notify_waiter = nullptr;
  complete(nullptr, make_error_code(tern::error::operation_canceled));
}

io_context& notification_wait::context() const noexcept { return *s_->ctx; }

void notification_wait::complete(pgNotify* n, std::error_code ec) noexcept {
  waiting_ = false;
  n_ = n;
  ec_ = ec;
  resume_later(*s_->ctx, waiter_);
}

}  // namespace detail

// ---- statement, notification ----

statement::statement(std::string sql, format results, std::chrono::milliseconds timeout)
    : sql_(std::move(sql)), results_(results), timeout_(timeout) {
  static std::atomic<std::uint64_t> next{1};
  id_ = next.fetch_add(1, std::memory_order_relaxed);
}

std::string_view notification::channel() const noexcept { return n_ ? n_->relname : ""; }
std::string_view notification::payload() const noexcept { return n_ && n_->extra ? n_->extra : ""; }
int notification::sender_pid() const noexcept { return n_ ? n_->be_pid : 0; }

// ---- row_stream ----

row_stream::row_stream(std::unique_ptr<detail::query_op> op) noexcept : op_(std::move(op)) {
  if (op_ && op_->s_ != nullptr) detail::retain(op_->s_);
}

row_stream::row_stream(row_stream&& o) noexcept
    : op_(std::move(o.op_)), current_(std::move(o.current_)), final_(std::move(o.final_)) {}

row_stream& row_stream::operator=(row_stream&& o) noexcept {
  if (this != &o) {
    drop();
    op_ = std::move(o.op_);
    current_ = std::move(o.current_);
    final_ = std::move(o.final_);
  }
  return *this;
}

row_stream::~row_stream() { drop(); }

void row_stream::drop() noexcept {
  current_ = result();
  if (!op_) return;
  detail::connection_state* s = op_->s_;
  op_.reset();  // forgets the query: its remaining rows are read and dropped, the server asked to cancel it
  if (s != nullptr) detail::release(s);
}

// ---- connecting ----

namespace {

using detail::connection_state;

// The polling loop of an asynchronous connect: wait for what PQconnectPoll asks, call it again. libpq may close
// its socket and open another between calls (the next address, a retry without TLS), so each wait is on a fresh
// duplicate of whatever PQsocket is now.
task<std::error_code> poll_connect(io_context& ctx, PGconn* pg) {
  PostgresPollingStatusType st = PGRES_POLLING_WRITING;
  for (;;) {
    if (st == PGRES_POLLING_OK) co_return std::error_code{};
    if (st == PGRES_POLLING_FAILED) co_return make_error_code(error::connection_failed);
    const int fd = PQsocket(pg);
    if (fd < 0) co_return make_error_code(error::connection_failed);
    auto [aec, w] = watched_descriptor::adopt(ctx, unique_fd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)));
    if (aec) co_return aec;
    auto [wec, ready] = co_await w.wait(st == PGRES_POLLING_READING ? readiness::readable : readiness::writable);
    if (wec) co_return wec;
    st = PQconnectPoll(pg);
  }
}

// libpq's notice receiver: to the connection's on_notice, or nowhere.
void deliver_notice(void* arg, const PGresult* r) {
  auto* s = static_cast<connection_state*>(arg);
  if (!s->on_notice) return;
  const char* severity = PQresultErrorField(r, PG_DIAG_SEVERITY);
  const char* message = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
  s->on_notice(severity != nullptr ? severity : "", message != nullptr ? message : "");
}

std::string trimmed_message(const PGconn* pg) {
  std::string m = pg != nullptr ? PQerrorMessage(pg) : "out of memory";
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

}  // namespace

connection& connection::operator=(connection&& o) noexcept {
  if (this != &o) {
    close();
    s_ = std::exchange(o.s_, nullptr);
    timeout_ = o.timeout_;
    error_ = std::move(o.error_);
  }
  return *this;
}

task<io_result<connection>> connection::connect(io_context& ctx, std::string conninfo, connect_options opts) {
  return connect(ctx, {{"dbname", std::move(conninfo)}}, opts);
}

task<io_result<connection>> connection::connect(io_context& ctx,
                                                std::vector<std::pair<std::string, std::string>> params,
                                                connect_options opts) {
  connection c;
  c.timeout_ = opts.query_timeout;
  if (!ctx.running_here()) co_return io_result<connection>{make_error_code(tern::error::wrong_loop), std::move(c)};
  std::vector<const char*> keys, values;
  bool named = false;
  for (const auto& [k, v] : params) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
    named = named || k == "application_name" || k == "fallback_application_name";
  }
  if (!named) {
    keys.push_back("fallback_application_name");
    values.push_back("tern");
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  // expand_dbname: a dbname that is a connection string or a URI is taken apart, as PQconnectdb does.
  PGconn* pg = PQconnectStartParams(keys.data(), values.data(), 1);
  struct finish_guard {
    PGconn*& pg;
    ~finish_guard() {
      if (pg != nullptr) PQfinish(pg);
    }
  } guard{pg};
  if (pg != nullptr) PQsetNoticeReceiver(pg, [](void*, const PGresult*) {}, nullptr);  // none before the state
  if (pg == nullptr || PQstatus(pg) == CONNECTION_BAD) {
    c.error_ = trimmed_message(pg);
    co_return io_result<connection>{make_error_code(error::connection_failed), std::move(c)};
  }
  std::error_code ec = co_await tern::with_timeout(poll_connect(ctx, pg), opts.connect_timeout);
  if (ec) {
    c.error_ = ec == error::connection_failed ? trimmed_message(pg) : ec.message();
    co_return io_result<connection>{ec, std::move(c)};
  }
  if (PQsetnonblocking(pg, 1) != 0 || PQenterPipelineMode(pg) != 1) {
    c.error_ = trimmed_message(pg);
    co_return io_result<connection>{make_error_code(error::connection_failed), std::move(c)};
  }
  auto* s = new connection_state(ctx);
  s->pg = std::exchange(pg, nullptr);
  auto [aec, w] = watched_descriptor::adopt(ctx, unique_fd(::fcntl(PQsocket(s->pg), F_DUPFD_CLOEXEC, 0)));
  if (aec) {
    detail::release(s);
    co_return io_result<connection>{aec, std::move(c)};
  }
  s->watch = std::move(w);
  s->cancel = detail::read_cancel_target(s->pg);
  s->on_notice = std::move(opts.on_notice);
  PQsetNoticeReceiver(s->pg, &deliver_notice, s);
  c.s_ = s;
  co_return io_result<connection>{std::error_code{}, std::move(c)};
}

// ---- the connection's own operations ----

void connection::close() noexcept {
  if (s_ == nullptr) return;
  connection_state* s = std::exchange(s_, nullptr);
  s->closed = true;
  s->stop_cancel_retry();
  s->fail_all(make_error_code(error::connection_closed));
  if (s->driver_wait != nullptr) s->driver_wait->cancel();
  s->watch.close();
  if (s->pg != nullptr) PQfinish(std::exchange(s->pg, nullptr));
  detail::release(s);
}

bool connection::is_open() const noexcept { return s_ != nullptr && !s_->closed && !s_->broken; }

std::string connection::error_message() const {
  if (s_ != nullptr && !s_->error_text.empty()) return s_->error_text;
  return error_;
}

int connection::backend_pid() const noexcept { return s_ != nullptr && s_->pg ? PQbackendPID(s_->pg) : 0; }
int connection::server_version() const noexcept { return s_ != nullptr && s_->pg ? PQserverVersion(s_->pg) : 0; }
bool connection::uses_tls() const noexcept { return s_ != nullptr && s_->pg && PQsslInUse(s_->pg) == 1; }

bool connection::in_transaction() const noexcept {
  if (s_ == nullptr || s_->pg == nullptr) return false;
  if (s_->owner != 0) return true;  // a transaction object holds it
  const PGTransactionStatusType t = PQtransactionStatus(s_->pg);
  return t == PQTRANS_INTRANS || t == PQTRANS_INERROR;
}

bool connection::busy() const noexcept {
  return s_ != nullptr && (!s_->pipeline_empty() || s_->dirty || s_->owner != 0 || s_->gate_head != s_->gate.size() ||
                           s_->driving || s_->flush_posted || s_->cancels_in_flight != 0);
}

connection_stats connection::stats() const noexcept { return s_ != nullptr ? s_->stats : connection_stats{}; }

io_context& connection::context() const noexcept { return *s_->ctx; }

pg_conn* connection::native_handle() const noexcept { return s_ != nullptr ? s_->pg : nullptr; }

std::error_code connection::move_to(io_context& target) noexcept {
  if (s_ == nullptr || s_->closed) return make_error_code(error::connection_closed);
  if (busy() || s_->listening || s_->notify_waiter != nullptr) return make_error_code(tern::error::operation_in_progress);
  if (&target == s_->ctx) return {};
  if (std::error_code ec = s_->watch.move_to(target)) {
    s_->break_connection(ec);
    return ec;
  }
  s_->ctx = &target;
  return {};
}

task<std::error_code> connection::execute(std::string script, result* report) {
  connection_state* s = s_;
  if (std::error_code ec = detail::refusal(s)) co_return ec;
  detail::retain(s);
  struct keep {
    connection_state* s;
    ~keep() { detail::release(s); }
  } kept{s};
  auto [gec, id] = co_await detail::exclusive_awaiter(s, true);
  if (gec) co_return gec;
  if (std::error_code ec = detail::leave_pipeline(s)) {
    detail::return_to_pipeline(s, id);
    co_return ec;
  }
  std::error_code first;
  if (PQsendQuery(s->pg, script.c_str()) == 0) {
    first = make_error_code(PQstatus(s->pg) == CONNECTION_BAD ? error::connection_lost : error::bad_response);
    if (report != nullptr) *report = result(PQmakeEmptyPGresult(s->pg, PGRES_FATAL_ERROR));
  } else if (std::error_code ec = co_await detail::flush_all(s)) {
    first = ec;
    if (ec == tern::error::operation_canceled) {  // given up while it was still being sent
      detail::abandon_exchange(s, id, true);
      co_return first;
    }
  } else {
    for (;;) {
      if (std::error_code ec = co_await detail::await_result(s)) {
        if (!first) first = ec;
        if (ec != tern::error::operation_canceled) break;
        detail::abandon_exchange(s, id, true);
        co_return first;
      }
      PGresult* r = PQgetResult(s->pg);
      if (r == nullptr) break;
      const ExecStatusType st = PQresultStatus(r);
      if (st == PGRES_COPY_IN) {
        PQputCopyEnd(s->pg, "COPY needs copy_in()");  // the server then fails the COPY
        co_await detail::flush_all(s);
      } else if (st == PGRES_COPY_OUT) {  // no reader for its data: dropped
        if (std::error_code ec = co_await detail::drop_copy_data(s)) {
          PQclear(r);
          if (!first) first = ec;
          if (ec != tern::error::operation_canceled) break;
          detail::abandon_exchange(s, id, true);  // given up while the data flows
          co_return first;
        }
      }
      const bool failed = st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE;
      if (failed && !first) {
        first = detail::error_of(r, s->pg);
        if (report != nullptr) {
          *report = result(r);
          continue;
        }
      } else if (!failed && !first && report != nullptr) {
        *report = result(r);
        continue;
      }
      PQclear(r);
    }
  }
  detail::return_to_pipeline(s, id);
  co_return first;
}

task<io_result<transaction>> connection::begin(transaction_options opts) {
  connection_state* s = s_;
  if (std::error_code ec = detail::refusal(s)) co_return io_result<transaction>{ec, transaction()};
  detail::retain(s);
  struct keep {
    connection_state* s;
    ~keep() { detail::release(s); }
  } kept{s};
  auto [gec, id] = co_await detail::exclusive_awaiter(s, false);
  if (gec) co_return io_result<transaction>{gec, transaction()};
  if (s->dirty) s->sync();  // BEGIN must not join the implicit transaction of other tasks' batch
  std::string sql = "BEGIN";
  switch (opts.level) {
    case isolation::read_committed: sql += " ISOLATION LEVEL READ COMMITTED"; break;
    case isolation::repeatable_read: sql += " ISOLATION LEVEL REPEATABLE READ"; break;
    case isolation::serializable: sql += " ISOLATION LEVEL SERIALIZABLE"; break;
    case isolation::server_default: break;
  }
  if (opts.read_only) sql += " READ ONLY";
  if (opts.deferrable) sql += " DEFERRABLE";
  detail::query_op op(s, {sql.c_str(), nullptr, {}, format::text, id, false});
  auto [ec, r] = co_await op;
  if (ec == tern::error::operation_canceled) {
    // Given up after the BEGIN went out: it still runs, so the transaction it opens is abandoned (a ROLLBACK
    // behind it, ahead of anything else) rather than left open for the queries of others.
    { transaction opened(s, id, timeout_); }
    co_return io_result<transaction>{ec, transaction()};
  }
  if (ec) {
    s->release_gate(id);
    co_return io_result<transaction>{ec, transaction()};
  }
  co_return io_result<transaction>{std::error_code{}, transaction(s, id, timeout_)};
}

task<std::error_code> connection::listen(std::string_view channel) {
  if (std::error_code ec = detail::refusal(s_)) co_return ec;
  char* quoted = PQescapeIdentifier(s_->pg, channel.data(), channel.size());
  if (quoted == nullptr) co_return make_error_code(error::bad_value);
  std::string sql = std::string("LISTEN ") + quoted;
  PQfreemem(quoted);
  auto [ec, r] = co_await query(sql);
  if (!ec && s_ != nullptr) {
    s_->listening = true;
    s_->kick();
  }
  co_return ec;
}

task<std::error_code> connection::unlisten(std::string_view channel) {
  if (std::error_code ec = detail::refusal(s_)) co_return ec;
  char* quoted = PQescapeIdentifier(s_->pg, channel.data(), channel.size());
  if (quoted == nullptr) co_return make_error_code(error::bad_value);
  std::string sql = std::string("UNLISTEN ") + quoted;
  PQfreemem(quoted);
  auto [ec, r] = co_await query(sql);
  co_return ec;
}

task<std::error_code> connection::unlisten_all() {
  auto [ec, r] = co_await query("UNLISTEN *");
  if (!ec && s_ != nullptr) {
    s_->listening = false;
    // The driver's wait for notifications ends: with nothing else to wait for, so does the driver.
    if (s_->driver_wait != nullptr && !any(s_->wanted() & readiness::readable)) s_->driver_wait->cancel();
  }
  co_return ec;
}

detail::notification_wait connection::next_notification() noexcept { return detail::notification_wait(s_); }

task<io_result<row_stream>> connection::start_stream(detail::request r) {
  auto op = std::make_unique<detail::query_op>(s_, r);
  std::error_code ec = co_await detail::stream_start(op.get());
  row_stream rows(std::move(op));
  co_return io_result<row_stream>{ec, std::move(rows)};
}

// ---- transaction ----

transaction::transaction(detail::connection_state* s, std::uint32_t owner, std::chrono::milliseconds timeout) noexcept
    : s_(s), owner_(owner), timeout_(timeout) {
  detail::retain(s_);
}

transaction& transaction::operator=(transaction&& o) noexcept {
  if (this != &o) {
    abandon();
    s_ = std::exchange(o.s_, nullptr);
    owner_ = o.owner_;
    timeout_ = o.timeout_;
  }
  return *this;
}

transaction::~transaction() { abandon(); }

void transaction::abandon() noexcept {
  if (s_ == nullptr) return;
  connection_state* s = std::exchange(s_, nullptr);
  if (!s->closed && !s->broken && s->owner == owner_) {
    // Sent now, without waiting for its answer, ahead of anything else: the next holder or query comes after it.
    if (PQsendQueryParams(s->pg, "ROLLBACK", 0, nullptr, nullptr, nullptr, nullptr, 0) == 1) {
      detail::slot sl;
      sl.kind = detail::slot_kind::query;
      s->slots.push_back(sl);
      ++s->stats.queries;
      s->dirty = true;
      s->sync();
      s->schedule_flush();
    } else {
      s->break_connection(make_error_code(error::connection_lost));
    }
  }
  s->release_gate(owner_);
  detail::release(s);
}

task<std::error_code> transaction::commit() { return finish("COMMIT"); }

task<std::error_code> transaction::rollback() { return finish("ROLLBACK"); }

task<std::error_code> transaction::finish(const char* sql) {
  if (s_ == nullptr) co_return make_error_code(error::connection_closed);
  detail::query_op op(s_, {sql, nullptr, {}, format::text, owner_, false});
  auto [ec, r] = co_await op;
  connection_state* s = std::exchange(s_, nullptr);
  if (!s->closed && !s->broken && s->owner == owner_) {
    if (s->dirty) s->sync();
    s->schedule_flush();
  }
  s->release_gate(owner_);
  detail::release(s);
  if (!ec && sql[0] == 'C' && r.command_tag() == "ROLLBACK") ec = make_error_code(error::transaction_rolled_back);
  co_return ec;
}

}  // namespace tern::pg
