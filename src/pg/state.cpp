// The connection's engine (see state.hpp for its shape): sending, the batches' sync points and flushes, the driver
// task, the dispatch of results to their queries, holding and resending, the gate, cancellation, and failure.
#include "state.hpp"

#include <algorithm>
#include <cstring>

#include "cancel.hpp"
#include "tern/error.hpp"
#include "tern/spawn.hpp"
#include "tern/timer.hpp"
#include "tern/yield.hpp"

namespace tern::pg::detail {

namespace {

// How many notifications are queued before the connection stops reading for them.
constexpr std::size_t notification_limit = 65536;
// How long after a cancel request a query that fails with query_canceled is taken for its victim (the request hit
// the query after the one it was meant for) rather than for one cancelled on purpose.
constexpr auto stray_cancel_window = std::chrono::seconds(2);
constexpr std::uint8_t max_victim_resends = 3;

readiness without(readiness a, readiness b) noexcept {
  return static_cast<readiness>(static_cast<std::uint8_t>(a) & ~static_cast<std::uint8_t>(b));
}

// A result carrying libpq's message about the connection, for an operation that failed with the connection.
PGresult* connection_report(PGconn* pg) noexcept {
  return pg != nullptr ? PQmakeEmptyPGresult(pg, PGRES_FATAL_ERROR) : nullptr;
}

// Sends the first batch's cancel request again while the batch goes on: the server drops a request that comes
// while it waits for the query rather than runs it (the batch was still on its way, or the server had not read it).
task<> resend_cancel(connection_state* s, std::stop_token stop) {
  auto interval = std::chrono::milliseconds(500);
  for (;;) {
    (void)co_await tern::sleep_for(interval);
    if (stop.stop_requested()) co_return;
    s->request_cancel();
    interval = std::min(interval * 2, std::chrono::milliseconds(8000));
  }
}

task<> drive(connection_state* s) {
  // Also when the frame is destroyed unfinished (its loop torn down while it waits): the state's reference goes.
  struct driven {
    connection_state* s;
    ~driven() {
      s->driving = false;
      release(s);
    }
  } guard{s};
  bool lingered = false;
  for (;;) {
    if (s->closed || s->broken) break;
    const readiness want = s->wanted();
    if (want == readiness::none) {
      // One more turn of the loop: a task resumed by the last results usually sends its next query right away,
      // and the driver then goes on instead of being started again.
      if (lingered) break;
      lingered = true;
      co_await tern::yield();
      continue;
    }
    lingered = false;
    tern::detail::readiness_awaiter wait = s->watch.wait(want);
    s->driver_wants = want;
    s->driver_wait = &wait;
    auto [ec, ready] = co_await wait;
    s->driver_wait = nullptr;
    s->driver_wants = readiness::none;
    if (s->closed || s->broken) break;
    if (ec) {
      if (ec == tern::error::operation_canceled) continue;  // kick() wants more than this wait asked for
      s->break_connection(ec);
      break;
    }
    if (any(ready & readiness::writable) && s->want_write) s->flush_now();
    if (any(ready & readiness::readable) && !s->broken) {
      if (PQconsumeInput(s->pg) == 0) {
        s->break_connection(make_error_code(error::connection_lost));
        break;
      }
      s->process_input();
    }
  }
}

}  // namespace

void retain(connection_state* s) noexcept { ++s->refs; }

void release(connection_state* s) noexcept {
  if (--s->refs == 0) delete s;
}

std::error_code error_of(const PGresult* r, const PGconn* pg) noexcept {
  if (pg == nullptr || PQstatus(pg) == CONNECTION_BAD) return make_error_code(error::connection_lost);
  if (r != nullptr) {
    if (const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE)) {
      if (std::error_code ec = sqlstate_code(state)) return ec;
    }
  }
  return make_error_code(error::bad_response);
}

connection_state::~connection_state() {
  stop_cancel_retry();
  for (std::size_t i = 0; i < slots.size(); ++i) dispose(slots[i].res);
  while (!notifications.empty()) {
    PQfreemem(notifications.front());
    notifications.pop_front();
  }
  watch.close();
  if (pg != nullptr) PQfinish(pg);
}

// ---- Sending ----

bool connection_state::submit(query_op* op) {
  if (!gate_open_for(op)) {
    enqueue_gate(op);
    return true;
  }
  return send_now(op);
}

bool connection_state::send_now(query_op* op) {
  const bool alone = op->req_.single_row;
  if (alone && dirty) sync();  // a stream has a batch of its own: its rows are handed out as they come
  if (!send(op)) return false;
  if (alone) sync();
  schedule_flush();
  return true;
}

prepared_entry* connection_state::prepared_for(const query_op* op) {
  const request& r = op->req_;
  auto& entries = prepared[r.stmt->id()];
  for (auto& e : entries) {
    if (e->types.size() == static_cast<std::size_t>(r.params.count) &&
        std::equal(e->types.begin(), e->types.end(), r.params.types)) {
      return e.get();
    }
  }
  auto e = std::make_unique<prepared_entry>();
  e->statement_id = r.stmt->id();
  e->types.assign(r.params.types, r.params.types + r.params.count);
  e->name = "tern_" + std::to_string(r.stmt->id());
  if (!entries.empty()) e->name += "_" + std::to_string(next_name_suffix++);
  e->st = prepared_entry::state::pending;
  entries.push_back(std::move(e));
  // A new entry is marked by having no slot yet: the caller sends its Parse.
  entries.back()->types.shrink_to_fit();
  return entries.back().get();
}

int connection_state::send_prepared(query_op* op) {
  const request& r = op->req_;
  const param_list& p = r.params;
  const std::size_t before = prepared[r.stmt->id()].size();
  prepared_entry* e = prepared_for(op);
  const bool fresh = prepared[r.stmt->id()].size() != before;
  if (fresh) {
    if (PQsendPrepare(pg, e->name.c_str(), r.sql, p.count, p.types) == 0) {
      std::erase_if(prepared[r.stmt->id()], [e](const auto& x) { return x.get() == e; });
      op->ec_ = PQstatus(pg) == CONNECTION_BAD ? make_error_code(error::connection_lost)
                                               : make_error_code(error::bad_response);
      op->res_.pg = connection_report(pg);
      return -1;
    }
    slot prepare;
    prepare.op = op;
    prepare.kind = slot_kind::prepare;
    parsing.push_back(e);
    slots.push_back(prepare);
  }
  return PQsendQueryPrepared(pg, e->name.c_str(), p.count, p.values, p.lengths, p.formats, static_cast<int>(r.results));
}

void connection_state::send_failed(query_op* op) noexcept {
  // A Parse queued by send_prepared stays queued: its slot goes on, without this query.
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].op == op) slots[i].op = nullptr;
  }
  op->ec_ = PQstatus(pg) == CONNECTION_BAD ? make_error_code(error::connection_lost)
                                           : make_error_code(error::bad_response);
  op->res_.pg = connection_report(pg);
}

bool connection_state::send(query_op* op) {
  const request& r = op->req_;
  const param_list& p = r.params;
  int sent;
  if (r.stmt != nullptr) {
    sent = send_prepared(op);
    if (sent < 0) return false;
  } else {
    sent = PQsendQueryParams(pg, r.sql, p.count, p.types, p.values, p.lengths, p.formats, static_cast<int>(r.results));
  }
  if (sent == 0) {
    send_failed(op);
    return false;
  }
  slot q;
  q.op = op;
  q.kind = slot_kind::query;
  q.isolated = r.isolated;
  q.single_row = r.single_row;
  slots.push_back(q);
  if (r.single_row && slots.size() == 1) {
    op->single_row_set_ = PQsetSingleRowMode(pg) == 1;
  }
  op->phase_ = query_op::phase::in_flight;
  ++stats.queries;
  dirty = true;
  return true;
}

void connection_state::sync() {
  if (PQpipelineSync(pg) == 0) {
    break_connection(make_error_code(error::connection_lost));
    return;
  }
  slot s;
  s.kind = slot_kind::sync;
  slots.push_back(s);
  dirty = false;
  ++stats.syncs;
}

void connection_state::schedule_flush() {
  if (flush_posted) {
    // The send that posted the flush woke the driver for this batch's results, and the unsent queries keep a slot
    // waiting until the flush: a later query of the batch changes nothing the driver waits for.
    if (!driving) kick();
    return;
  }
  flush_posted = true;
  retain(this);
  // Queued behind the tasks that are ready now, which may send more queries into the same batch.
  ctx->post([this] {
    flush_posted = false;
    if (!closed && !broken) flush_now();
    release(this);
  });
  kick();
}

void connection_state::flush_now() {
  if (pipeline_off) return;
  if (dirty) sync();  // PQpipelineSync writes
  if (broken) return;
  const int f = PQflush(pg);
  if (f < 0) {
    break_connection(make_error_code(error::connection_lost));
    return;
  }
  want_write = f == 1;
  if (want_write) kick();
}

// ---- The driver ----

readiness connection_state::wanted() const noexcept {
  if (closed || broken) return readiness::none;
  readiness r = want_write ? readiness::writable : readiness::none;
  bool input = false;
  if (!pipeline_off) {
    if (!slots.empty()) {
      // A stream whose consumer has not taken its last row holds the reading back: that is its memory bound.
      const slot& h = slots.front();
      input = !(h.kind == slot_kind::query && h.single_row && h.op != nullptr && h.op->pending_row_);
    }
    if ((listening || notify_waiter != nullptr) && notifications.size() < notification_limit) input = true;
  }
  if (input) r = r | readiness::readable;
  return r;
}

void connection_state::kick() {
  if (closed || broken) return;
  const readiness w = wanted();
  if (w == readiness::none) return;
  if (!driving) {
    driving = true;
    retain(this);
    tern::spawn(*ctx, drive(this)).detach();
    return;
  }
  if (driver_wait != nullptr && any(without(w, driver_wants))) driver_wait->cancel();
}

void connection_state::take_notifications() noexcept {
  if (pipeline_off || pg == nullptr) return;
  while (PGnotify* n = PQnotifies(pg)) {
    if (notify_waiter != nullptr) {
      notification_wait* w = std::exchange(notify_waiter, nullptr);
      w->complete(n, {});
    } else {
      notifications.push_back(n);
    }
  }
}

void connection_state::process_input() {
  if (processing) return;
  processing = true;
  // Notifications are taken once per pass, before and after the results: PQnotifies parses the input each time
  // it is called, which per result would cost as much again as PQisBusy.
  take_notifications();
  for (;;) {
    if (closed || broken || pipeline_off || slots.empty()) break;
    slot& h = slots.front();
    if (h.kind == slot_kind::query && h.single_row && h.op != nullptr && h.op->pending_row_) break;
    if (PQisBusy(pg)) break;
    PGresult* r = PQgetResult(pg);
    if (h.kind == slot_kind::sync) {
      const ExecStatusType st = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
      if (r != nullptr) PQclear(r);
      if (st != PGRES_PIPELINE_SYNC) {
        break_connection(PQstatus(pg) == CONNECTION_BAD ? make_error_code(error::connection_lost)
                                                        : make_error_code(error::bad_response));
        break;
      }
      slots.pop_front();
      end_batch();
      on_new_batch();
      on_new_head();
      check_drained();
      continue;
    }
    if (r == nullptr) {
      finish_slot(h);
      slots.pop_front();
      on_new_head();
      check_drained();
      continue;
    }
    on_result(h, r);
    if (PQstatus(pg) == CONNECTION_BAD) {
      break_connection(make_error_code(error::connection_lost));
      break;
    }
  }
  take_notifications();
  processing = false;
}

void connection_state::on_result(slot& h, PGresult* r) noexcept {
  switch (PQresultStatus(r)) {
    case PGRES_SINGLE_TUPLE:
      if (h.op == nullptr) {
        PQclear(r);
        return;
      }
      h.op->pending_row_ = r;
      wake(h.op);
      return;
    case PGRES_TUPLES_OK:
    case PGRES_COMMAND_OK:
      // Copied out and freed now (when small): libpq's next result then reuses its memory (result.cpp). Its
      // status is read once, here.
      dispose(h.res);
      h.res = adopt_successful(r);
      if (h.out == outcome::none) h.out = outcome::ok;
      return;
    case PGRES_EMPTY_QUERY:
      dispose(h.res);
      h.res.pg = r;
      if (h.out == outcome::none) h.out = outcome::ok;
      return;
    case PGRES_PIPELINE_ABORTED:
      dispose(h.res);
      h.res.pg = r;
      h.out = outcome::aborted;
      return;
    case PGRES_FATAL_ERROR:
      dispose(h.res);
      h.res.pg = r;
      h.out = outcome::failed;  // its error is read from the report when the slot ends (failure_of)
      return;
    default:
      // A COPY started by query() (COPY needs copy_in() or copy_out(): PostgreSQL allows none in a pipeline), or
      // a response libpq could not make sense of. The session is then in a state the pipeline cannot continue.
      dispose(h.res);
      PQclear(r);
      h.out = outcome::failed;  // without a report: bad_response (failure_of)
      error_text = "unexpected response in pipeline mode (COPY needs copy_in() or copy_out())";
      break_connection(make_error_code(error::bad_response));
      return;
  }
}

std::error_code connection_state::failure_of(const slot& h) const noexcept {
  return h.res.pg != nullptr ? error_of(h.res.pg, pg) : make_error_code(error::bad_response);
}

void connection_state::finish_slot(slot& h) noexcept {
  query_op* op = h.op;
  const bool failed = h.out == outcome::failed || h.out == outcome::aborted;
  if (failed) batch_failed = true;
  if (h.kind == slot_kind::prepare) {
    prepared_entry* const made = parsing.front();
    parsing.pop_front();
    if (h.out == outcome::ok) {
      made->st = prepared_entry::state::ready;
      ++stats.prepared;
    } else {
      auto& entries = prepared[made->statement_id];
      std::erase_if(entries, [&](const auto& e) { return e.get() == made; });
    }
    if (h.out == outcome::failed && op != nullptr) {
      // The statement's own error: its execution, skipped after it, reports this one.
      op->ec_ = failure_of(h);
      op->res_ = std::exchange(h.res, {});
    }
    dispose(h.res);
    return;
  }
  const std::error_code ec = h.out == outcome::failed ? failure_of(h) : tern::detail::success;
  if (h.cancelled && (h.out == outcome::aborted || (h.out == outcome::failed && ec == sqlstate::query_canceled))) {
    ++stats.cancels_confirmed;
  }
  if (op == nullptr) {
    dispose(h.res);
    return;
  }
  if (h.out == outcome::ok && h.isolated && !h.single_row) {
    // The common case, without touching the op: a query whose Parse failed has its own slot aborted, not ok.
    held.push_back({op, std::exchange(h.res, {})});
    return;
  }
  // A query_canceled this query did not ask for, right after a cancel request meant for another: it is the victim
  // of the race every PostgreSQL cancel has (the server had moved on to it), and runs again. Up to three times: the
  // server signals the cancelled process twice for one request (the process and its group), so a second signal can
  // hit the query sent again after the first.
  const bool victim = h.out == outcome::failed && ec == sqlstate::query_canceled && h.isolated &&
                      op->resends_ < max_victim_resends &&
                      std::chrono::steady_clock::now() - last_cancel < stray_cancel_window;
  if (h.single_row) {
    op->rows_ended_ = true;
    if (!op->ec_) {
      if (h.out == outcome::failed) op->ec_ = ec;
      if (h.out == outcome::aborted) op->ec_ = make_error_code(error::pipeline_aborted);
    }
    if (op->res_.empty()) {
      op->res_ = std::exchange(h.res, {});
    } else {
      dispose(h.res);
    }
    complete(op);
    return;
  }
  bool again = false;
  if (op->ec_) {  // its Parse failed
    dispose(h.res);
  } else if (h.out == outcome::ok) {
    op->res_ = std::exchange(h.res, {});
  } else if (h.out == outcome::failed && !victim) {
    op->ec_ = ec;
    op->res_ = std::exchange(h.res, {});
  } else if (h.isolated) {
    again = true;
    dispose(h.res);
  } else {
    op->ec_ = make_error_code(error::pipeline_aborted);
    op->res_ = std::exchange(h.res, {});
  }
  if (!h.isolated) {
    complete(op);
  } else if (again) {
    op->phase_ = query_op::phase::resend;
    resend.push_back(op);
  } else {
    op->phase_ = query_op::phase::held;
    held.push_back({op, {}});
  }
}

void connection_state::end_batch() noexcept {
  const bool failed = std::exchange(batch_failed, false);
  // Nothing below adds to held: complete() queues the waiter's resumption (or calls a batch's on_done, whose queries
  // are not isolated), and resend_alone() comes after.
  const std::size_t n = held.size();
  for (std::size_t i = 0; i < n; ++i) {
    held_result e = held[i];
    query_op* op = e.op;
    if (op == nullptr) {
      dispose(e.res);
    } else if (!failed || op->ec_) {
      if (!e.res.empty()) op->res_ = e.res;
      complete(op);
    } else {
      // It ran, but in the implicit transaction another query of the batch aborted: it was rolled back.
      dispose(e.res);
      dispose(op->res_);
      op->phase_ = query_op::phase::resend;
      resend.push_back(op);
    }
  }
  held.clear();
  while (query_op* op = resend.pop_front()) resend_alone(op);
}

void connection_state::unhold(query_op* op) noexcept {
  for (std::size_t i = 0; i < held.size(); ++i) {
    if (held[i].op != op) continue;
    held[i].op = nullptr;
    dispose(held[i].res);
    return;
  }
}

void connection_state::resend_alone(query_op* op) noexcept {
  ++op->resends_;
  ++stats.resent;
  if (closed || broken) {
    op->ec_ = make_error_code(closed ? error::connection_closed : error::connection_lost);
    complete(op);
    return;
  }
  if (!gate_open_for(op)) {
    enqueue_gate(op);
    return;
  }
  if (dirty) sync();
  if (!send(op)) {
    complete(op);
    return;
  }
  sync();  // alone in its batch
  schedule_flush();
}

void connection_state::on_new_head() noexcept {
  if (slots.empty()) return;
  slot& h = slots.front();
  if (h.kind != slot_kind::query) return;
  if (h.single_row && h.op != nullptr && !h.op->single_row_set_) {
    h.op->single_row_set_ = PQsetSingleRowMode(pg) == 1;
  }
}

bool connection_state::in_first_batch(std::size_t i) noexcept {
  for (std::size_t j = 0; j < i; ++j) {
    if (slots[j].kind == slot_kind::sync) return false;
  }
  return true;
}

void connection_state::cancel_first_batch() noexcept {
  if (first_batch_cancelled) return;  // one request ends the batch
  first_batch_cancelled = true;
  cancel_until_stopped();
}

void connection_state::cancel_until_stopped() noexcept {
  request_cancel();
  stop_cancel_retry();
  cancel_retry = std::stop_source();
  try {
    tern::spawn(*ctx, resend_cancel(this, cancel_retry.get_token()), cancel_retry.get_token()).detach();
  } catch (...) {
    // Out of memory: the request is sent once.
  }
}

void connection_state::stop_cancel_retry() noexcept {
  if (cancel_retry.stop_possible()) cancel_retry.request_stop();
  cancel_retry = std::stop_source(std::nostopstate);
}

void connection_state::on_new_batch() noexcept {
  first_batch_cancelled = false;
  stop_cancel_retry();
  for (std::size_t i = 0; i < slots.size() && slots[i].kind != slot_kind::sync; ++i) {
    if (slots[i].cancel_wanted && slots[i].out == outcome::none) {
      cancel_first_batch();
      return;
    }
  }
}

// ---- Completion, cancellation, failure ----

void connection_state::complete(query_op* op) noexcept {
  op->phase_ = query_op::phase::done;
  if (op->on_done_ != nullptr) {
    op->on_done_(op);
    return;
  }
  wake(op);
}

void connection_state::wake(query_op* op) noexcept {
  if (op->suspended_ && op->waiter_) {
    op->suspended_ = false;
    resume_later(*ctx, std::exchange(op->waiter_, {}));
  } else if (op->row_waiter_) {
    resume_later(*ctx, std::exchange(op->row_waiter_, {}));
  }
}

void connection_state::detach(query_op* op, bool send_cancel) noexcept {
  switch (op->phase_) {
    case query_op::phase::at_gate:
      for (std::size_t i = gate_head; i < gate.size(); ++i) {
        if (gate[i].op == op) gate[i].op = nullptr;
      }
      break;
    case query_op::phase::in_flight:
      for (std::size_t i = 0; i < slots.size(); ++i) {
        slot& sl = slots[i];
        if (sl.op != op) continue;
        sl.op = nullptr;
        if (sl.kind != slot_kind::query) continue;
        sl.cancelled = true;
        if (!send_cancel || sl.out != outcome::none) continue;
        // The server runs some query of the first batch now (it sends a batch's results only at its sync point,
        // so which one is not known): a cancel request ends the one it runs, and the batch with it, which sends
        // the others again. A query of a later batch is cancelled once its batch is the first.
        if (in_first_batch(i)) {
          cancel_first_batch();
        } else {
          sl.cancel_wanted = true;
        }
      }
      if (op->pending_row_ != nullptr) PQclear(std::exchange(op->pending_row_, nullptr));
      unhold(op);  // its result may be in, held for its batch's sync point
      kick();      // the rows of a detached stream are read and dropped
      break;
    case query_op::phase::held: unhold(op); break;
    case query_op::phase::resend: resend.remove(op); break;
    default: break;
  }
}

void connection_state::cancel_op(query_op* op) noexcept {
  if (op->phase_ == query_op::phase::idle || op->phase_ == query_op::phase::done) {
    // A stream's rows are waited for in row_wait; nothing else of it is pending here.
    return;
  }
  detach(op, true);
  dispose(op->res_);
  op->ec_ = make_error_code(tern::error::operation_canceled);
  op->rows_ended_ = true;
  complete(op);
}

void connection_state::forget_op(query_op* op) noexcept {
  if (op->phase_ == query_op::phase::idle || op->phase_ == query_op::phase::done) return;
  detach(op, true);
  op->phase_ = query_op::phase::done;
}

void connection_state::request_cancel() noexcept {
  last_cancel = std::chrono::steady_clock::now();
  ++stats.cancels_sent;
  if (!cancel.valid) ++stats.cancels_by_thread;
  ++cancels_in_flight;
  retain(this);  // the request's task ends on this loop (move_to refuses a connection while one is on its way)
  send_cancel_request(*ctx, cancel, &cancel_landed, this);
}

void connection_state::cancel_landed(void* state) noexcept {
  auto* s = static_cast<connection_state*>(state);
  if (--s->cancels_in_flight == 0) {
    s->wake_settled();
    if (!s->closed) s->check_drained();
  }
  release(s);
}

void connection_state::wake_settled() noexcept {
  while (settle_wait* w = settle_waiters) {
    settle_waiters = w->next;
    w->linked = false;
    resume_later(*ctx, w->waiter);
  }
}

void connection_state::fail_all(std::error_code ec) noexcept {
  auto end_op = [&](query_op* op) {
    if (op == nullptr || op->phase_ == query_op::phase::done) return;
    if (!op->ec_) op->ec_ = ec;
    if (op->res_.empty() && ec == error::connection_lost) op->res_.pg = connection_report(pg);
    if (op->pending_row_ != nullptr) PQclear(std::exchange(op->pending_row_, nullptr));
    op->rows_ended_ = true;
    complete(op);
  };
  while (!slots.empty()) {
    slot sl = slots.front();
    slots.pop_front();
    if (sl.kind == slot_kind::prepare) parsing.pop_front();
    dispose(sl.res);
    end_op(sl.op);
  }
  while (!held.empty()) {
    held_result e = held.front();
    held.pop_front();
    if (e.op != nullptr && !e.res.empty()) {
      e.op->res_ = e.res;
    } else {
      dispose(e.res);
    }
    end_op(e.op);
  }
  while (query_op* op = resend.pop_front()) end_op(op);
  for (std::size_t i = gate_head; i < gate.size(); ++i) {
    gate_entry e = gate[i];
    if (e.op != nullptr) end_op(e.op);
    if (e.wait != nullptr) {
      e.wait->queued = false;
      e.wait->ec = ec;
      e.wait->done = true;
      if (e.wait->waiter) resume_later(*ctx, e.wait->waiter);
    }
  }
  gate.clear();
  gate_head = 0;
  if (exclusive_wait* w = std::exchange(drain_waiter, nullptr)) {
    w->draining = false;
    w->ec = ec;
    w->done = true;
    if (w->waiter) resume_later(*ctx, w->waiter);
  }
  if (notification_wait* w = std::exchange(notify_waiter, nullptr)) w->complete(nullptr, ec);
  wake_settled();
  dirty = false;
}

void connection_state::break_connection(std::error_code ec) noexcept {
  if (broken || closed) return;
  broken = true;
  stop_cancel_retry();
  if (pg != nullptr && error_text.empty()) {
    error_text = PQerrorMessage(pg);
    while (!error_text.empty() && error_text.back() == '\n') error_text.pop_back();
  }
  fail_all(ec);
  if (driver_wait != nullptr) driver_wait->cancel();
}

// ---- The gate ----

void connection_state::enqueue_gate(query_op* op) {
  op->phase_ = query_op::phase::at_gate;
  gate.push_back({op, nullptr});
}

void connection_state::enqueue_gate(exclusive_wait* w) {
  w->queued = true;
  gate.push_back({nullptr, w});
}

void connection_state::release_gate(std::uint32_t id) noexcept {
  if (id == 0 || owner != id) return;
  owner = 0;
  drain_gate();
}

bool connection_state::grant(exclusive_wait* w) noexcept {
  w->granted = owner = next_owner++;
  if (next_owner == 0) next_owner = 1;
  if (!ready_to_hold(w)) {
    w->draining = true;
    drain_waiter = w;
    if (dirty) schedule_flush();  // what waits for a sync point must get one
    return false;
  }
  return true;
}

void connection_state::drain_gate() noexcept {
  while (owner == 0 && gate_head < gate.size()) {
    gate_entry e = gate[gate_head++];
    if (e.op != nullptr) {
      if (!send_now(e.op)) complete(e.op);
    } else if (e.wait != nullptr) {
      e.wait->queued = false;
      if (grant(e.wait)) {
        e.wait->done = true;
        resume_later(*ctx, e.wait->waiter);
      }
    }
  }
  if (gate_head == gate.size()) {
    gate.clear();
    gate_head = 0;
  }
}

void connection_state::wake_drained() noexcept {
  if (!ready_to_hold(drain_waiter)) return;
  exclusive_wait* w = std::exchange(drain_waiter, nullptr);
  w->draining = false;
  w->done = true;
  resume_later(*ctx, w->waiter);
}

// ---- query_op ----

void query_op::release() noexcept {
  if (s_ != nullptr && phase_ != phase::idle && phase_ != phase::done) s_->forget_op(this);
  dispose(res_);
  if (pending_row_ != nullptr) PQclear(std::exchange(pending_row_, nullptr));
}

bool query_op::await_ready() {
  if (s_ == nullptr || s_->closed) {
    ec_ = make_error_code(error::connection_closed);
    return true;
  }
  if (!s_->ctx->running_here()) {
    ec_ = make_error_code(tern::error::wrong_loop);
    return true;
  }
  if (s_->broken) {
    ec_ = make_error_code(error::connection_lost);
    res_.pg = connection_report(s_->pg);
    return true;
  }
  if (!s_->submit(this)) {
    phase_ = phase::done;
    return true;
  }
  return phase_ == phase::done;
}

void query_op::start_with(void (*on_done)(query_op*), void* owner_data) noexcept {
  on_done_ = on_done;
  owner_data_ = owner_data;
  if (await_ready()) {
    phase_ = phase::done;
    on_done_(this);
  }
}

void query_op::cancel() noexcept {
  if (s_ != nullptr) s_->cancel_op(this);
}

io_context& query_op::context() const noexcept { return *s_->ctx; }


}  // namespace tern::pg::detail
