// Pools of connections (see tern/pg/pool.hpp).
//
// The shared state is guarded by one mutex: the idle connections, how many exist (total, against max_size), and
// the FIFO of waiting acquire()s. Everything slow (connecting, moving a connection to the caller's loop, the
// health check, cleaning a returned connection) happens outside the lock, on the loop that owns the connection at
// that moment. A waiter is granted either a connection or the right to open one (capacity), under the lock, and
// resumed through its own loop's queue.
#include "tern/pg/pool.hpp"

#include <poll.h>

#include <deque>
#include <mutex>
#include <vector>

#include "exclusive.hpp"
#include "state.hpp"
#include "tern/cancel.hpp"
#include "tern/error.hpp"
#include "tern/spawn.hpp"
#include "tern/timer.hpp"
#include "tern/yield.hpp"

namespace tern::pg {

namespace detail {

struct pool_waiter;

struct pool_state : std::enable_shared_from_this<pool_state> {
  explicit pool_state(pool_options o) : opts(std::move(o)) {}

  struct idle_connection {
    connection c;
    std::chrono::steady_clock::time_point since;
  };

  pool_options opts;
  mutable std::mutex m;
  std::deque<idle_connection> idle;  // guarded by m; the most recently returned at the back
  std::size_t total = 0;             // guarded by m
  pool_waiter* head = nullptr;       // guarded by m: the FIFO of waiters
  pool_waiter* tail = nullptr;
  bool closed = false;               // guarded by m
  pool_stats counts;                 // guarded by m (its size, idle and waiting are filled in by stats())
  std::string last_error;            // guarded by m: libpq's message about the last connect that failed

  // A connection comes back (from a lease, or after its cleaning): to the first waiter, to the idle list, or, if
  // broken or the pool is closed, closed.
  void give_back(connection c);
  // A connection is gone (broken): its capacity goes to the first waiter.
  void drop_one();
  // A connection that was to be opened could not be: its capacity goes to the first waiter.
  void release_capacity(std::string message);
  void unlink(pool_waiter* w) noexcept;
};

// What a waiter was granted: an idle connection (and since when it was idle), or the capacity to open one.
struct pool_grant {
  bool capacity = false;
  connection c;
  std::chrono::steady_clock::time_point since{};
};

// The wait of an acquire(): granted an idle connection, the capacity to open one, or refused.
struct pool_waiter {
  enum class outcome : std::uint8_t { waiting, connection, capacity, closed, cancelled };

  pool_waiter(pool_state* p, io_context* loop) noexcept : p_(p), loop_(loop) {}
  pool_waiter(const pool_waiter& o) noexcept : p_(o.p_), loop_(o.loop_) {}
  pool_waiter& operator=(const pool_waiter&) = delete;
  ~pool_waiter() {
    if (queued_) {
      std::lock_guard lock(p_->m);
      if (queued_) p_->unlink(this);
    }
  }

  bool await_ready() noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    h_ = h;
    std::lock_guard lock(p_->m);
    if (p_->closed) {
      result_ = outcome::closed;
      return false;
    }
    if (!p_->idle.empty()) {
      // One of this loop's own first (no move), the most recent (the warmest).
      auto it = p_->idle.end();
      for (auto i = p_->idle.rbegin(); i != p_->idle.rend(); ++i) {
        if (&i->c.context() == loop_) {
          it = std::prev(i.base());
          break;
        }
      }
      if (it == p_->idle.end()) it = p_->idle.begin();
      granted_ = std::move(it->c);
      idle_since_ = it->since;
      p_->idle.erase(it);
      result_ = outcome::connection;
      return false;
    }
    if (p_->total < p_->opts.max_size) {
      ++p_->total;
      result_ = outcome::capacity;
      return false;
    }
    // Queued: from here on another thread may grant it and resume h_.
    prev_ = p_->tail;
    next_ = nullptr;
    (p_->tail != nullptr ? p_->tail->next_ : p_->head) = this;
    p_->tail = this;
    queued_ = true;
    return true;
  }
  io_result<pool_grant> await_resume() noexcept {
    switch (result_) {
      case outcome::connection: return {{}, {false, std::move(granted_), idle_since_}};
      case outcome::capacity: return {{}, {true, connection(), {}}};
      case outcome::closed: return {make_error_code(error::connection_closed), {}};
      default: return {make_error_code(tern::error::operation_canceled), {}};
    }
  }
  void cancel() noexcept {
    {
      std::lock_guard lock(p_->m);
      if (!queued_) return;  // granted already: the grant stands
      p_->unlink(this);
      result_ = outcome::cancelled;
    }
    loop_->post([h = h_] { h.resume(); });
  }
  io_context& context() const noexcept { return *loop_; }

  // Under the lock: grants and resumes (through the waiter's loop).
  void grant(outcome o, connection c = {}, std::chrono::steady_clock::time_point since = {}) {
    p_->unlink(this);
    result_ = o;
    granted_ = std::move(c);
    idle_since_ = since;
    loop_->post([h = h_] { h.resume(); });
  }

  pool_state* p_;
  io_context* loop_;
  std::coroutine_handle<> h_;
  outcome result_ = outcome::waiting;
  connection granted_;
  std::chrono::steady_clock::time_point idle_since_{};
  pool_waiter* prev_ = nullptr;
  pool_waiter* next_ = nullptr;
  bool queued_ = false;
};

void pool_state::unlink(pool_waiter* w) noexcept {
  (w->prev_ != nullptr ? w->prev_->next_ : head) = w->next_;
  (w->next_ != nullptr ? w->next_->prev_ : tail) = w->prev_;
  w->prev_ = w->next_ = nullptr;
  w->queued_ = false;
}

void pool_state::drop_one() {
  std::lock_guard lock(m);
  ++counts.dropped;
  if (head != nullptr && !closed) {
    head->grant(pool_waiter::outcome::capacity);  // the total stays: the waiter takes it over
  } else {
    --total;
  }
}

void pool_state::release_capacity(std::string message) {
  std::lock_guard lock(m);
  last_error = std::move(message);
  if (head != nullptr && !closed) {
    head->grant(pool_waiter::outcome::capacity);  // the total stays: the waiter takes it over
  } else {
    --total;
  }
}

void pool_state::give_back(connection c) {
  // A connection whose state something else still holds (a row stream or a COPY handle kept past its lease) is
  // not lent again: the next borrower could move it to another loop while the holder, on this one, still counts
  // references to that state. It is closed (the holder sees it closed) and its capacity goes to the next.
  if (!c.is_open() || c.state()->refs > 1) {
    c.close();
    drop_one();
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  std::unique_lock lock(m);
  if (closed) {
    --total;
    lock.unlock();
    c.close();
    return;
  }
  if (head != nullptr) {
    head->grant(pool_waiter::outcome::connection, std::move(c), now);
    return;
  }
  idle.push_back({std::move(c), now});
}

namespace {

// Whether an idle connection still looks alive: the server has sent nothing (a closed or terminated session
// shows as readable), or what it sent leaves the connection good.
bool quick_check(connection& c) {
  PGconn* pg = c.native_handle();
  if (pg == nullptr || !c.is_open() || PQstatus(pg) != CONNECTION_OK) return false;
  // A session the server ended sends its reason and then closes: two reads to see the close. A few more for what
  // an idle session may legitimately get (a parameter's new value).
  for (int reads = 0; reads < 4; ++reads) {
    pollfd p{PQsocket(pg), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return true;
    if (PQconsumeInput(pg) == 0 || PQstatus(pg) != CONNECTION_OK) return false;
  }
  return true;
}

// Cleans a connection that came back not ready for its next user, then gives it back (or drops it).
task<> clean_and_give_back(std::shared_ptr<pool_state> p, connection c) {
  using namespace std::chrono_literals;
  // First the queries still in flight (cancelled ones whose answers are on their way): the session's state is
  // known once they are done.
  if (c.is_open()) {
    auto [ec, id] = co_await tern::with_timeout(exclusive_awaiter(c.state(), true), 30s);
    if (ec) {
      c.close();
    } else {
      c.state()->release_gate(id);
    }
  }
  if (c.is_open() && PQtransactionStatus(c.native_handle()) != PQTRANS_IDLE && co_await c.execute("ROLLBACK")) {
    c.close();
  }
  if (c.is_open() && c.state()->listening && co_await c.unlisten_all()) c.close();
  // The driver ends a turn after its last result. A cancel request still on its way is waited for past that
  // second (its own steps are bounded): lent before it lands, the connection's next query could be the one cancelled.
  const auto deadline = std::chrono::steady_clock::now() + 1s;
  while (c.is_open() && c.busy() &&
         (std::chrono::steady_clock::now() < deadline || c.state()->cancels_in_flight != 0)) {
    co_await tern::sleep_for(1ms);
  }
  if (c.busy()) c.close();
  p->give_back(std::move(c));
}

bool needs_cleaning(connection& c) {
  if (c.busy()) return true;
  PGconn* pg = c.native_handle();
  return c.state()->listening || (pg != nullptr && PQtransactionStatus(pg) != PQTRANS_IDLE);
}

}  // namespace

}  // namespace detail

// ---- pooled_connection ----

pooled_connection::pooled_connection(std::shared_ptr<detail::pool_state> p, connection c) noexcept
    : p_(std::move(p)), c_(std::move(c)) {}

pooled_connection& pooled_connection::operator=(pooled_connection&& o) noexcept {
  if (this != &o) {
    this->~pooled_connection();
    new (this) pooled_connection(std::move(o));
  }
  return *this;
}

pooled_connection::~pooled_connection() {
  if (!p_) return;
  std::shared_ptr<detail::pool_state> p = std::move(p_);
  if (c_.is_open() && detail::needs_cleaning(c_)) {
    io_context& loop = c_.context();
    try {
      tern::spawn(loop, &detail::clean_and_give_back, p, std::move(c_)).detach();
      return;
    } catch (...) {
      c_.close();
    }
  }
  p->give_back(std::move(c_));
}

void pooled_connection::discard() noexcept {
  c_.close();
}

// ---- pool ----

pool::pool(pool_options opts) : p_(std::make_shared<detail::pool_state>(std::move(opts))) {}

pool::~pool() { close(); }

void pool::close() noexcept {
  std::deque<detail::pool_state::idle_connection> idle;
  {
    std::lock_guard lock(p_->m);
    if (p_->closed) return;
    p_->closed = true;
    idle.swap(p_->idle);
    p_->total -= idle.size();
    while (p_->head != nullptr) p_->head->grant(detail::pool_waiter::outcome::closed);
  }
  for (auto& i : idle) i.c.close();
}

pool_stats pool::stats() const {
  std::lock_guard lock(p_->m);
  pool_stats s = p_->counts;
  s.size = p_->total;
  s.idle = p_->idle.size();
  for (detail::pool_waiter* w = p_->head; w != nullptr; w = w->next_) ++s.waiting;
  return s;
}

task<io_result<pooled_connection>> pool::acquire() {
  using lease = io_result<pooled_connection>;
  io_context* here = io_context::current();
  if (here == nullptr) co_return lease{make_error_code(tern::error::wrong_loop), pooled_connection()};
  const pool_options& o = p_->opts;
  const auto deadline = std::chrono::steady_clock::now() + o.acquire_timeout;
  for (;;) {
    detail::pool_waiter w(p_.get(), here);
    io_result<detail::pool_grant> got;
    if (o.acquire_timeout.count() == 0) {
      got = co_await w;
    } else {
      const auto left = std::max(deadline - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration{});
      got = co_await tern::with_timeout(w, std::chrono::duration_cast<clock::duration>(left));
    }
    if (got.ec) {
      if (got.ec == tern::error::timed_out) {
        std::lock_guard lock(p_->m);
        ++p_->counts.timeouts;
      }
      co_return lease{got.ec, pooled_connection()};
    }
    if (got.value.capacity) {
      auto [ec, c] = co_await connection::connect(*here, o.conninfo, o.connect);
      if (ec) {
        p_->release_capacity(c.error_message());
        co_return lease{ec, pooled_connection()};
      }
      {
        std::lock_guard lock(p_->m);
        ++p_->counts.connects;
      }
      co_return lease{std::error_code{}, pooled_connection(p_, std::move(c))};
    }
    connection c = std::move(got.value.c);
    if (&c.context() != here && c.move_to(*here)) {
      c.close();
      p_->drop_one();
      continue;
    }
    if (!detail::quick_check(c)) {
      c.close();
      p_->drop_one();
      continue;
    }
    if (std::chrono::steady_clock::now() - got.value.since > o.health_check_after) {
      auto [pec, pr] = co_await c.query("SELECT 1");
      if (pec) {
        c.close();
        p_->drop_one();
        continue;
      }
    }
    co_return lease{std::error_code{}, pooled_connection(p_, std::move(c))};
  }
}

std::string pool::last_connect_error() const {
  std::lock_guard lock(p_->m);
  return p_->last_error;
}

}  // namespace tern::pg
