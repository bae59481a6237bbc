// The state of one tern::pg connection (see tern/pg/connection.hpp): libpq's PGconn, the watched duplicate of its
// socket, and the bookkeeping that drives libpq's pipeline mode from the loop.
//
// The pieces:
// - slots: one per message libpq will return a result for, in the order they were sent (a query, the Parse of a
//   statement prepared on first use, a sync point). libpq returns results in that order, so the head slot always
//   says whose result comes next. A slot names its query_op, or nobody once the query was cancelled (its results
//   are then dropped).
// - Sending: a query is handed to libpq (PQsendQueryParams or PQsendQueryPrepared: into libpq's buffer, no system
//   call) as soon as it is awaited, and a flush is posted to the loop. The flush runs after the tasks that were
//   ready with it, so the queries they send meanwhile join the same batch: one PQpipelineSync (which writes) per
//   batch, however many tasks.
// - The driver: a task that runs while results are expected (or notifications, when listening): it waits for the
//   socket (readable, and writable while libpq has unsent data), lets libpq read, and dispatches the results. It
//   ends when there is nothing to wait for, so an idle connection holds no operation on its loop and can move to
//   another loop.
// - Batches of independent queries: a query's result is held until the sync point of its batch. If any query of
//   the batch failed, the others were rolled back or skipped by the server (one implicit transaction per batch),
//   so they are sent again, each alone in a batch of its own; only the failed one reports its error.
// - The gate: a transaction, a COPY or a script holds the connection (owner); other queries wait in a FIFO and are
//   sent when it ends, in order.
// - Cancel requests go on a connection of their own, made on the loop with tern's sockets from the backend's
//   address, process id and secret key (read from libpq's PGcancel; cancel.cpp). The server sends a batch's
//   results only at its sync point, so which query of the first batch it runs is not known: cancelling a query of
//   the first batch sends a request at once, which ends the query the server runs and so the rest of the batch,
//   and the other tasks' queries of the batch are sent again. A query of a later batch is marked, and cancelled
//   when its batch becomes the first. A query that fails with query_canceled without having been cancelled, shortly
//   after a request, was hit by one meant for another (the server had moved on): it is sent again, not failed.
//   A request that reaches the server while it waits for the batch to arrive is dropped by the server (it cancels
//   only a running query), so while the cancelled batch has not ended the request is sent again, after 0.5 s and
//   then at doubling intervals up to 8 s.
#pragma once

#include <libpq-fe.h>

#include <sys/socket.h>

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <vector>

#include "tern/io_context.hpp"
#include "tern/pg/connection.hpp"
#include "tern/pg/detail/query_op.hpp"
#include "tern/pg/notification.hpp"
#include "tern/watched_descriptor.hpp"

#include "cancel.hpp"

namespace tern::pg::detail {

// A FIFO in one growing array: no allocation once it has grown to the connection's depth. The capacity and mask
// are kept, not derived from the vector's size, which for an element of other than a power of two bytes is a
// division (a multiplication by its inverse) at every access.
template <class T>
class ring {
 public:
  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  T& front() noexcept { return items_[head_]; }
  const T& front() const noexcept { return items_[head_]; }
  T& operator[](std::size_t i) noexcept { return items_[(head_ + i) & mask_]; }
  void push_back(const T& v) {
    if (size_ == capacity_) [[unlikely]] grow();
    items_[(head_ + size_) & mask_] = v;
    ++size_;
  }
  void push_front(const T& v) {
    if (size_ == capacity_) [[unlikely]] grow();
    head_ = (head_ + mask_) & mask_;
    items_[head_] = v;
    ++size_;
  }
  void pop_front() noexcept {
    head_ = (head_ + 1) & mask_;
    --size_;
  }
  // Drops every element (their contents are the caller's to have handled).
  void clear() noexcept {
    head_ = 0;
    size_ = 0;
  }

 private:
  [[gnu::noinline]] void grow() {
    std::vector<T> bigger(capacity_ == 0 ? 16 : capacity_ * 2);
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = (*this)[i];
    items_.swap(bigger);
    capacity_ = items_.size();
    mask_ = capacity_ - 1;
    head_ = 0;
  }
  std::vector<T> items_;
  std::size_t capacity_ = 0;
  std::size_t mask_ = 0;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

// A statement as prepared on this connection, for one list of parameter types.
struct prepared_entry {
  enum class state : std::uint8_t { pending, ready };
  std::uint64_t statement_id;
  std::vector<oid> types;
  std::string name;
  state st = state::pending;
};

enum class slot_kind : std::uint8_t { query, prepare, sync };
enum class outcome : std::uint8_t { none, ok, failed, aborted };

// 32 bytes, two to a cache line, aligned: a slot is written as its query is sent and read as its results come, a
// batch of hundreds later, when its line is out of the cache (at 56 bytes most slots lay across two lines). So a
// failed slot's error is read from its report when its end is handled (failure_of), and a Parse's statement entry
// waits in a FIFO of its own (connection_state::parsing), rather than taking room in every slot.
struct alignas(32) slot {
  query_op* op = nullptr;       // null: nobody waits for it
  result_source res;            // its result, once in
  slot_kind kind = slot_kind::query;
  outcome out = outcome::none;
  bool cancel_wanted = false;   // a cancel request is to be sent when it reaches the head
  bool cancelled = false;       // its query was cancelled (its query_canceled is the confirmation)
  bool isolated = false;
  bool single_row = false;      // its query's req_.single_row, read here so that the op's line is not touched for it
};
static_assert(sizeof(slot) == 32);

// An isolated query whose result is in, until its batch's sync point: the result stays here rather than in the op,
// so that a query's op is touched once as the batch ends instead of also as its result comes (hundreds of ops of a
// batch, each in its task's frame, are too many cache lines to stay in the cache between the two). res is empty
// for a query that failed on its own (its op holds its error and report). op null: it was cancelled meanwhile.
struct held_result {
  query_op* op = nullptr;
  result_source res;
};

// An intrusive FIFO of query_ops (through next_).
struct op_list {
  query_op* head = nullptr;
  query_op* tail = nullptr;
  bool empty() const noexcept { return head == nullptr; }
  void push_back(query_op* op) noexcept {
    op->next_ = nullptr;
    if (tail != nullptr) {
      tail->next_ = op;
    } else {
      head = op;
    }
    tail = op;
  }
  query_op* pop_front() noexcept {
    query_op* op = head;
    if (op != nullptr) {
      head = op->next_;
      if (head == nullptr) tail = nullptr;
      op->next_ = nullptr;
    }
    return op;
  }
  bool remove(query_op* op) noexcept {
    query_op* prev = nullptr;
    for (query_op* p = head; p != nullptr; prev = p, p = p->next_) {
      if (p != op) continue;
      (prev != nullptr ? prev->next_ : head) = p->next_;
      if (tail == p) tail = prev;
      p->next_ = nullptr;
      return true;
    }
    return false;
  }
};

// A task waiting for the connection's cancel requests on their way to end (cancels_settled).
struct settle_wait {
  std::coroutine_handle<> waiter;
  settle_wait* next = nullptr;
  bool linked = false;
};

// Someone waiting to hold the connection (a transaction, a COPY, a script, a batch being sent).
struct exclusive_wait {
  connection_state* s = nullptr;
  std::coroutine_handle<> waiter;
  std::error_code ec;
  std::uint32_t granted = 0;
  bool drain = false;      // needs the pipeline empty, not only the gate
  bool queued = false;     // in the gate's queue
  bool draining = false;   // granted, waiting for the pipeline to empty (or the cancel requests to end)
  bool done = false;
  exclusive_wait* next = nullptr;
};

struct connection_state {
  explicit connection_state(io_context& c) : ctx(&c), watch(c) {}
  connection_state(const connection_state&) = delete;
  connection_state& operator=(const connection_state&) = delete;
  ~connection_state();

  io_context* ctx;
  PGconn* pg = nullptr;
  watched_descriptor watch;
  int refs = 1;
  bool closed = false;
  bool broken = false;
  std::string error_text;  // libpq's message when the connection broke

  ring<slot> slots;
  ring<prepared_entry*> parsing;  // the entries the prepare slots make, in the slots' order
  bool dirty = false;          // queries sent since the last sync point
  bool flush_posted = false;
  bool want_write = false;     // libpq holds data it could not write yet
  bool processing = false;     // inside process_input (no re-entry)
  bool batch_failed = false;   // a query of the batch now being read failed or was skipped
  ring<held_result> held;      // isolated queries whose result is in, waiting for their batch's sync point (their
                               // ops stay in_flight, or held when they failed on their own)
  op_list resend;              // isolated queries to send again once the batch's sync point is in

  // The driver task, and what it waits for now (so that a new need re-arms its wait).
  bool driving = false;
  readiness driver_wants = readiness::none;
  tern::detail::readiness_awaiter* driver_wait = nullptr;

  // The gate.
  std::uint32_t owner = 0;
  std::uint32_t next_owner = 1;
  bool pipeline_off = false;   // a COPY or a script runs outside pipeline mode
  struct gate_entry {
    query_op* op = nullptr;        // a query waiting to be sent, or
    exclusive_wait* wait = nullptr;  // someone waiting to hold the connection
  };
  std::vector<gate_entry> gate;    // FIFO, front at gate_head
  std::size_t gate_head = 0;
  exclusive_wait* drain_waiter = nullptr;

  // Prepared statements by statement id.
  std::unordered_map<std::uint64_t, std::vector<std::unique_ptr<prepared_entry>>> prepared;
  // The suffix of the next name of a statement prepared again for other parameter types: it only grows, so a
  // name is never given twice on one connection (an entry whose Parse failed is removed from its list).
  std::uint64_t next_name_suffix = 1;

  // Notifications.
  bool listening = false;
  ring<PGnotify*> notifications;
  notification_wait* notify_waiter = nullptr;

  // Cancel requests.
  cancel_target cancel;
  bool first_batch_cancelled = false;  // a cancel request went out for the batch the server runs now
  std::chrono::steady_clock::time_point last_cancel{};
  // Cancel requests on their way. The server signals the backend twice for one request (its process, then its
  // process group), and under load the second signal can come late: a backend that has started the next statement
  // by then cancels that one instead. Once the server has closed a request's connection both signals are out, and
  // a signal that reaches an idle backend is dropped. So while one is on its way nothing that holds the connection
  // for itself (a script, a COPY) starts, no exchange that sent one hands the connection back, and busy() is true
  // (the pipeline's own queries are covered by the victim rule instead: they run again).
  std::uint32_t cancels_in_flight = 0;
  settle_wait* settle_waiters = nullptr;  // woken when cancels_in_flight reaches 0, or the connection ends
  // Stops the task that sends the first batch's cancel request again (stop_cancel_retry: the batch ended, or the
  // connection did). The task checks it before touching the state, so the state may be gone by then.
  std::stop_source cancel_retry{std::nostopstate};

  connection_stats stats;
  std::function<void(std::string_view, std::string_view)> on_notice;

  // ---- connection.cpp ----
  // Hands op to libpq (or to the gate's queue); false with op->ec_ set if it could not be sent. Inlined into
  // query_op::await_ready, its one caller, with the sending below.
  [[gnu::always_inline]] inline bool submit(query_op* op);
  // Sends a query now, a stream in a batch of its own, and schedules the flush; false with op->ec_ set on failure.
  // Inlined, as is send(), into the await of a query: the path every query takes, a call and a set of saved
  // registers less each; a prepared statement and a failure stay out of line.
  [[gnu::always_inline]] inline bool send_now(query_op* op);
  // Hands a query to libpq; false with op->ec_ set on failure.
  [[gnu::always_inline]] inline bool send(query_op* op);
  // send() of a prepared statement (its Parse first, when new on this connection): what PQsendQueryPrepared
  // returned, or -1 with op->ec_ set when the Parse could not be queued.
  int send_prepared(query_op* op);
  // send() failed: op->ec_ and the connection's report set, op's slots (a Parse) left without it.
  [[gnu::noinline]] void send_failed(query_op* op) noexcept;
  // A sync point now, ending the batch.
  void sync();
  // Queues the batch's flush on the loop (once per batch) and makes sure the driver runs.
  void schedule_flush();
  void flush_now();
  // Starts the driver if it is not running, or re-arms its wait if it waits for less than is needed now.
  void kick();
  readiness wanted() const noexcept;
  // Reads every result libpq has parsed, and dispatches them.
  void process_input();
  // The connection broke (or was closed): every waiting operation ends with ec.
  void fail_all(std::error_code ec) noexcept;
  void break_connection(std::error_code ec) noexcept;
  void complete(query_op* op) noexcept;
  // Resumes whoever waits on op (the query's awaiter, or a stream's reader).
  void wake(query_op* op) noexcept;
  void cancel_op(query_op* op) noexcept;
  void forget_op(query_op* op) noexcept;
  // The error of a failed slot: the server's, from the report it keeps, or bad_response for a response libpq could
  // not make sense of (none kept).
  std::error_code failure_of(const slot& h) const noexcept;
  // Takes op out of the held results (its result freed), if it is there.
  void unhold(query_op* op) noexcept;
  // Unlinks op from whatever holds it; with send_cancel, asks the server to cancel it if it runs it.
  void detach(query_op* op, bool send_cancel) noexcept;
  // Sends a cancel request for whatever the server runs now.
  void request_cancel() noexcept;
  // A request of request_cancel() has ended (its callback, on this loop).
  static void cancel_landed(void* state) noexcept;
  // Sends a cancel request for whatever the server runs now, and again (as for the first batch) until
  // stop_cancel_retry(): for a script given up, which the server may still be reading when the first one comes.
  void cancel_until_stopped() noexcept;
  // Stops sending the cancel request again.
  void stop_cancel_retry() noexcept;
  // Resumes the tasks waiting for the cancel requests on their way to end (through the loop).
  void wake_settled() noexcept;

  // The gate.
  bool gate_open_for(const query_op* op) const noexcept { return owner == 0 || op->req_.owner == owner; }
  void enqueue_gate(query_op* op);
  void enqueue_gate(exclusive_wait* w);
  void release_gate(std::uint32_t id) noexcept;
  // Makes w the owner; false when it must still wait for the pipeline to empty (drain_waiter).
  bool grant(exclusive_wait* w) noexcept;
  void drain_gate() noexcept;
  bool pipeline_empty() const noexcept { return slots.empty() && held.empty() && resend.empty(); }
  // What an exclusive holder that drains waits for: the pipeline empty and no cancel request on its way.
  bool drained() const noexcept { return pipeline_empty() && !dirty && cancels_in_flight == 0; }
  // What any exclusive holder waits for: a transaction's BEGIN or a batch's queries, which are not sent again as
  // the pipeline's own are, must not go out while a request's late second signal could still cancel them.
  bool ready_to_hold(const exclusive_wait* w) const noexcept {
    return w->drain ? drained() : cancels_in_flight == 0;
  }
  // Inline: nobody waits for the pipeline to empty after nearly every result.
  void check_drained() noexcept {
    if (drain_waiter != nullptr) wake_drained();
  }
  void wake_drained() noexcept;

  // Notifications.
  void take_notifications() noexcept;

 private:
  // Inlined into process_input, their one caller: two calls, and the registers each saved, less per result.
  [[gnu::always_inline]] inline void on_result(slot& h, PGresult* r) noexcept;
  [[gnu::always_inline]] inline void finish_slot(slot& h) noexcept;
  void end_batch() noexcept;
  void resend_alone(query_op* op) noexcept;
  void on_new_head() noexcept;
  // Whether slot i is in the first batch (the one the server runs now: no sync point before it).
  bool in_first_batch(std::size_t i) noexcept;
  // Asks the server to cancel what it runs now, once per batch (again while the batch does not end).
  void cancel_first_batch() noexcept;
  // The first batch has ended: cancels the next one if a query of it was cancelled meanwhile.
  void on_new_batch() noexcept;
  prepared_entry* prepared_for(const query_op* op);
};

// Resumes h on its loop through the run queue.
inline void resume_later(io_context& ctx, std::coroutine_handle<> h) {
  ctx.post([h] { h.resume(); });
}

// The error code of a failed result: its SQLSTATE, or connection_lost when the connection broke.
std::error_code error_of(const PGresult* r, const PGconn* pg) noexcept;

}  // namespace tern::pg::detail
