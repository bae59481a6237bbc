// Explicit batches (see tern/pg/batch.hpp): the queries' texts and parameters are copied into the batch's own
// memory at add(), and run() sends them all, with one sync point, while it holds the connection (so that nothing
// of another task's can fall between them), then waits for every outcome.
#include "tern/pg/batch.hpp"

#include <cstring>

#include "exclusive.hpp"
#include "state.hpp"
#include "tern/error.hpp"
#include "tern/pg/connection.hpp"

namespace tern::pg {

namespace {

// Awaitable: waits until every query of a batch has its outcome; cancelling it cancels them all.
class [[nodiscard]] batch_wait {
 public:
  batch_wait(std::size_t& pending, std::coroutine_handle<>& waiter, std::vector<detail::query_op>& ops) noexcept
      : pending_(&pending), waiter_(&waiter), ops_(&ops) {}
  bool await_ready() const noexcept { return *pending_ == 0; }
  void await_suspend(std::coroutine_handle<> h) noexcept { *waiter_ = h; }
  void await_resume() const noexcept {}
  void cancel() noexcept {
    for (detail::query_op& op : *ops_) op.cancel();
  }
  io_context& context() const noexcept { return *ops_->front().s_->ctx; }

 private:
  std::size_t* pending_;
  std::coroutine_handle<>* waiter_;
  std::vector<detail::query_op>* ops_;
};

}  // namespace

batch::batch(connection& c) noexcept : s_(c.state()), owner_(0) {}

batch::batch(transaction& tx) noexcept : s_(tx.s_), owner_(tx.owner_) {}

void batch::add_encoded(std::string_view sql, const statement* st, format results, const param_list& p) {
  entry e{text_.size(), st, results, param_entries_.size(), p.count};
  if (st == nullptr) {
    text_.append(sql);
    text_.push_back('\0');
  }
  for (int i = 0; i < p.count; ++i) {
    param_entry pe{data_.size(), p.lengths[i], p.values[i] == nullptr, p.formats[i], p.types[i]};
    if (!pe.null) {
      if (pe.fmt == 0) {  // text: NUL-terminated, its length unknown to libpq
        pe.length = static_cast<int>(std::strlen(p.values[i]));
        data_.append(p.values[i], static_cast<std::size_t>(pe.length));
        data_.push_back('\0');
      } else {
        data_.append(p.values[i], static_cast<std::size_t>(pe.length));
      }
    }
    param_entries_.push_back(pe);
  }
  entries_.push_back(e);
}

void batch::clear() noexcept {
  entries_.clear();
  param_entries_.clear();
  text_.clear();
  data_.clear();
  ops_.clear();
  outcomes_.clear();
}

void batch::on_done(detail::query_op* op) {
  auto* self = static_cast<batch*>(op->owner_data_);
  if (--self->pending_ == 0 && self->waiter_) {
    detail::resume_later(*op->s_->ctx, std::exchange(self->waiter_, {}));
  }
}

task<std::error_code> batch::run() {
  detail::connection_state* s = s_;
  ops_.clear();
  outcomes_.clear();
  if (std::error_code ec = detail::refusal(s)) {
    for (std::size_t i = 0; i < entries_.size(); ++i) outcomes_.push_back({ec, result()});
    co_return ec;
  }
  // The parameter arrays libpq reads, now that data_ no longer moves.
  const std::size_t n = param_entries_.size();
  values_.resize(n);
  lengths_.resize(n);
  formats_.resize(n);
  types_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const param_entry& pe = param_entries_[i];
    values_[i] = pe.null ? nullptr : data_.data() + pe.offset;
    lengths_[i] = pe.length;
    formats_[i] = pe.fmt;
    types_[i] = pe.type;
  }
  detail::retain(s);
  struct keep {
    detail::connection_state* s;
    ~keep() { detail::release(s); }
  } kept{s};
  std::uint32_t id = owner_;
  if (owner_ == 0) {
    auto [gec, granted] = co_await detail::exclusive_awaiter(s, false);
    if (gec) {
      for (std::size_t i = 0; i < entries_.size(); ++i) outcomes_.push_back({gec, result()});
      co_return gec;
    }
    id = granted;
  }
  if (s->dirty) s->sync();  // the batch is one implicit transaction of its own
  ops_.reserve(entries_.size());  // the ops are linked into the connection: they must not move
  pending_ = entries_.size();
  for (const entry& e : entries_) {
    param_list p{e.param_count, values_.data() + e.first_param, lengths_.data() + e.first_param,
                 formats_.data() + e.first_param, types_.data() + e.first_param};
    const char* sql = e.stmt != nullptr ? e.stmt->sql().c_str() : text_.data() + e.sql_offset;
    ops_.emplace_back(s, detail::request{sql, e.stmt, p, e.results, id, false});
  }
  for (detail::query_op& op : ops_) op.start_with(&batch::on_done, this);
  if (!s->closed && !s->broken) {
    if (s->dirty) s->sync();
    s->schedule_flush();
  }
  if (owner_ == 0) s->release_gate(id);
  co_await batch_wait(pending_, waiter_, ops_);
  std::error_code first;
  outcomes_.reserve(ops_.size());
  for (detail::query_op& op : ops_) {
    if (op.ec_ && !first) first = op.ec_;
    outcomes_.push_back({op.ec_, result(op.take_result())});
  }
  co_return first;
}

}  // namespace tern::pg
