// tern::redis's connection (see tern/redis/connection.hpp).
//
// One connection_state per connection, shared by the connection object and its background task (run), both on
// the connection's loop: nothing here is locked. What it holds:
// - the queue: an entry per request owed replies, in the order they were formatted into the output. Entries before
//   unsent_seq_ have gone to the kernel (their replies come back in that order); the others' bytes are the output
//   buffer out_, in the same order. An entry whose awaiter gave up (cancelled) keeps its place with a null slot, so
//   that its replies are still read and dropped; if its bytes were never sent, they are taken out of out_ instead.
// - the writer task, parked on a doorbell while out_ is empty: the first request formatted into an empty out_ rings
//   it, and it runs after the tasks that were ready before it, so it sends whatever they all formatted in one write
//   (flight_ holds the bytes in flight while out_ fills again).
// - the reader, which parses the input in place (resp::parser) and hands each node to the front entry's slot, or,
//   for a RESP3 push, builds a pub/sub message or counts a subscription's confirmation.
// - run(): connect (resolve, TCP or Unix, TLS, HELLO) under a stop source of its own and connect_timeout; a
//   session (reader inline, writer and health check spawned beside it) until the connection fails; then each sent
//   request's outcome (connection_lost, or a replay for an idempotent one), backoff, and again.
#include "tern/redis/connection.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "tern/cancel.hpp"
#include "tern/net/connect.hpp"
#include "tern/net/resolver.hpp"
#include "tern/net/socket_option.hpp"
#include "tern/net/unix.hpp"
#include "tern/spawn.hpp"
#include "tern/sync/event.hpp"
#include "tern/timer.hpp"

namespace tern::redis {

namespace detail {

struct pipeline_access {
  static const output_buffer& buffer(const pipeline& p) noexcept { return p.buffer_; }
  static std::vector<redis::reply>& replies(pipeline& p) noexcept { return p.replies_; }
  static bool reserved(const pipeline& p) noexcept { return p.reserved_; }
};

namespace {

constexpr std::size_t input_initial = 16 * 1024;
constexpr std::size_t input_min_free = 4 * 1024;
// Buffers grown past this by a large value are given back once they are empty again.
constexpr std::size_t buffer_keep = std::size_t{1} << 20;

struct queue_entry {
  request_slot* slot = nullptr;  // null once withdrawn: its replies are read and dropped
  std::uint32_t replies_left = 0;
  std::uint32_t index = 0;       // the reply being received
  std::size_t bytes = 0;         // while unsent: its bytes in out_
  request_slot::kind what = request_slot::kind::command;
  bool rewrite = false;          // sent on a connection that failed; idempotent: formatted again on the next
};

// The queue's storage: a ring of a power-of-two size that doubles when full, so that a steady stream of requests
// neither allocates nor moves entries.
class entry_ring {
 public:
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  queue_entry& operator[](std::size_t i) noexcept { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  queue_entry& front() noexcept { return slots_[head_]; }
  void pop_front() noexcept {
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }
  void push_back(const queue_entry& e) {
    if (size_ == slots_.size()) grow();
    (*this)[size_++] = e;
  }
  void push_front(const queue_entry& e) {
    if (size_ == slots_.size()) grow();
    head_ = (head_ + slots_.size() - 1) & (slots_.size() - 1);
    slots_[head_] = e;
    ++size_;
  }
  void truncate(std::size_t n) noexcept { size_ = n; }
  void clear() noexcept { size_ = 0; }

 private:
  // Out of line: the ring grows a few times in a connection's life, and inlined into push_back it would make
  // every enqueue save and restore the registers the copy loop takes.
  [[gnu::noinline]] void grow() {
    std::vector<queue_entry> fresh(std::max<std::size_t>(16, slots_.size() * 2));
    for (std::size_t i = 0; i < size_; ++i) fresh[i] = (*this)[i];
    slots_.swap(fresh);
    head_ = 0;
  }

  std::vector<queue_entry> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

// The kinds of push a connection knows.
enum class push_kind : std::uint8_t {
  other, message, pmessage, subscribe, unsubscribe, psubscribe, punsubscribe
};

push_kind classify(std::string_view k) noexcept {
  if (k == "message") return push_kind::message;
  if (k == "pmessage") return push_kind::pmessage;
  if (k == "subscribe") return push_kind::subscribe;
  if (k == "unsubscribe") return push_kind::unsubscribe;
  if (k == "psubscribe") return push_kind::psubscribe;
  if (k == "punsubscribe") return push_kind::punsubscribe;
  return push_kind::other;
}

bool starts_with(std::string_view s, std::string_view prefix) noexcept {
  return s.size() >= prefix.size() && s.substr(0, prefix.size()) == prefix;
}

template <class S>
constexpr bool is_transport = std::is_same_v<S, std::unique_ptr<transport>>;

template <class S>
auto read_some(S& s, mutable_buffer b) {
  if constexpr (is_transport<S>) {
    return s->read_some(b);
  } else {
    return s.read_some(b);
  }
}

template <class S>
auto write_all(S& s, const_buffer b) {
  if constexpr (is_transport<S>) {
    return s->write_all(b);
  } else {
    return s.write_all(b);
  }
}

template <class S>
basic_descriptor& descriptor_of(S& s) noexcept {
  if constexpr (is_transport<S>) {
    return s->socket();
  } else {
    return s;
  }
}

}  // namespace

class connection_state : public std::enable_shared_from_this<connection_state> {
 public:
  connection_state(io_context& c, redis::config config)
      : ctx(c),
        cfg(std::move(config)),
        parser_(cfg.limits),
        health_timer_(c),
        messages_(std::max<std::size_t>(1, cfg.message_queue)),
        backoff_timer_(c),
        jitter_(reinterpret_cast<std::uintptr_t>(this) | 1) {
    ping_slot_.state = this;
    ping_slot_.ops = &ping_ops;
    for (request_slot& r : resubscribe_) {
      r.state = this;
      r.what = request_slot::kind::subscription;
    }
    resubscribe_[0].ops = &resubscribe_ops[0];
    resubscribe_[1].ops = &resubscribe_ops[1];
  }
  connection_state(const connection_state&) = delete;
  connection_state& operator=(const connection_state&) = delete;

  io_context& ctx;
  const redis::config cfg;

  // ---- requests -------------------------------------------------------------------------------------------------

  std::error_code submit(request_slot& slot) {
    if (phase_ == phase::closed) return error::closed;
    if (slot.what == request_slot::kind::subscription && protocol_ == 2) return error::resp3_required;
    const bool ready = phase_ == phase::ready;
    if (!ready && (cfg.fail_fast || cfg.disconnected_wait.count() <= 0)) return error::not_connected;
    enqueue(slot);
    if (ready) {
      wake_writer();
    } else {
      arm_wait(slot);
    }
    return no_error;
  }

  bool withdraw(request_slot& slot) noexcept {
    if (slot.seq < front_seq_ || slot.seq - front_seq_ >= queue_.size()) return false;
    const std::size_t i = slot.seq - front_seq_;
    queue_entry& e = queue_[i];
    if (e.slot != &slot) return false;
    disarm(slot);
    e.slot = nullptr;
    if (slot.seq >= unsent_seq_) {
      // Never sent: its bytes leave the output, and it expects nothing.
      std::size_t offset = 0;
      for (std::size_t k = unsent_seq_ - front_seq_; k < i; ++k) offset += queue_[k].bytes;
      out_.erase(offset, e.bytes);
      e.bytes = 0;
      e.replies_left = 0;
      e.rewrite = false;
    }
    return true;
  }

  // ---- life -----------------------------------------------------------------------------------------------------

  void start() {
    if (started_ || phase_ == phase::closed) return;
    started_ = true;
    std::shared_ptr<connection_state> self = shared_from_this();
    if (!cfg.unix_path.empty()) {
      tern::spawn(ctx, run<net::unix_stream_socket>(std::move(self))).detach();
    } else if (cfg.tls) {
      tern::spawn(ctx, run<std::unique_ptr<transport>>(std::move(self))).detach();
    } else {
      tern::spawn(ctx, run<net::tcp_socket>(std::move(self))).detach();
    }
  }

  task<std::error_code> wait_attempt() {
    (void)co_await attempt_done_.wait();
    if (phase_ == phase::closed) co_return make_error_code(error::closed);
    if (phase_ == phase::ready) co_return std::error_code{};
    co_return last_error_ ? last_error_ : make_error_code(error::not_connected);
  }

  void close() noexcept {
    if (phase_ == phase::closed) return;
    phase_ = phase::closed;
    attempt_stop_.request_stop();
    fail(make_error_code(error::closed));
    backoff_timer_.cancel();
    for (std::size_t i = 0; i < queue_.size(); ++i) {
      if (request_slot* slot = queue_[i].slot) {
        queue_[i].slot = nullptr;
        end(*slot, make_error_code(error::closed));
      }
    }
    queue_.clear();
    front_seq_ += 1u << 20;  // no seq of a finished slot can match an entry again
    unsent_seq_ = front_seq_;
    out_.clear();
    messages_.close();
    attempt_done_.set();
  }

  bool connected() const noexcept { return phase_ == phase::ready; }
  int protocol() const noexcept { return protocol_; }
  std::string_view server_version() const noexcept { return server_version_; }
  std::size_t subscriptions() const noexcept { return channels_.size() + patterns_.size(); }
  const connection_stats& stats() const noexcept { return stats_; }
  sync::channel<message>& messages() noexcept { return messages_; }

 private:
  enum class phase : std::uint8_t { idle, connecting, ready, closed };

  // The internal requests: the health check's PING, and the subscriptions made again on a new connection.
  static const request_slot::operations ping_ops;
  static const request_slot::operations resubscribe_ops[2];

  // ---- the queue ------------------------------------------------------------------------------------------------

  void enqueue(request_slot& slot) {
    const std::size_t before = out_.size();
    slot.ops->write(&slot, out_);
    slot.seq = front_seq_ + queue_.size();
    queue_.push_back({&slot, slot.replies, 0, out_.size() - before, slot.what, false});
    ++stats_.commands_sent;
  }

  // While there is no connection, a queued request waits at most disconnected_wait.
  void arm_wait(request_slot& slot) noexcept {
    if (slot.linked()) return;
    slot.deadline_ns = tern::detail::deadline_after(ctx, cfg.disconnected_wait);
    slot.fire = &on_wait_expired;
    if (!ctx.timers().insert(&slot)) on_wait_expired(&slot);
  }
  static void on_wait_expired(tern::detail::timer_node* n) {
    auto* slot = static_cast<request_slot*>(n);
    connection_state& s = *slot->state;
    if (s.withdraw(*slot)) slot->ops->finish(slot, make_error_code(error::not_connected));
  }
  void disarm(request_slot& slot) noexcept {
    if (slot.linked()) ctx.timers().remove(&slot);
  }
  void end(request_slot& slot, std::error_code ec) {
    disarm(slot);
    slot.ops->finish(&slot, ec);
  }

  // The front entry that still expects replies (dropping the finished ones before it), or null.
  queue_entry* head() noexcept {
    while (!queue_.empty() && queue_.front().replies_left == 0) pop_front();
    return queue_.empty() ? nullptr : &queue_.front();
  }
  void pop_front() noexcept {
    queue_.pop_front();
    ++front_seq_;
    if (unsent_seq_ < front_seq_) unsent_seq_ = front_seq_;
  }
  void complete_front() {
    request_slot* slot = queue_.front().slot;
    pop_front();
    if (slot != nullptr) {
      end(*slot, no_error);
    } else {
      ++stats_.replies_dropped;
    }
  }
  void renumber() noexcept {
    for (std::size_t i = 0; i < queue_.size(); ++i) {
      if (request_slot* slot = queue_[i].slot) slot->seq = front_seq_ + i;
    }
  }

  // ---- output ---------------------------------------------------------------------------------------------------

  void wake_writer() noexcept {
    if (!writer_parked_) return;
    writer_parked_ = false;
    ctx.schedule(&writer_resume_);
  }
  struct writer_wait {
    connection_state* s;
    bool await_ready() const noexcept { return s->broken_ || !s->out_.empty(); }
    void await_suspend(std::coroutine_handle<> h) noexcept {
      s->writer_resume_.handle = h;
      s->writer_parked_ = true;
    }
    void await_resume() const noexcept {}
  };

  template <class S>
  task<void> writer(S& s) {
    for (;;) {
      if (broken_) break;
      if (out_.empty()) {
        co_await writer_wait{this};
        continue;
      }
      flight_.swap(out_);
      unsent_seq_ = front_seq_ + queue_.size();  // every entry queued so far leaves with this write
      ++stats_.writes;
      auto [ec, n] = co_await write_all(s, const_buffer(flight_.data(), flight_.size()));
      flight_.clear();
      flight_.release_if_over(buffer_keep);
      if (ec) {
        fail(ec);
        break;
      }
    }
    session_task_done();
  }

  // ---- input ----------------------------------------------------------------------------------------------------

  // Room to read into, for a node that takes need bytes from in_begin_ (0: not known).
  void prepare_input(std::size_t need) {
    if (in_begin_ == in_end_) {
      in_begin_ = in_end_ = 0;
      if (in_cap_ > buffer_keep && need <= input_initial) {
        in_.reset();
        in_cap_ = 0;
      }
    }
    const std::size_t held = in_end_ - in_begin_;
    const std::size_t want = std::max(need, held + input_min_free);
    if (in_cap_ - in_end_ >= input_min_free && in_cap_ - in_begin_ >= want) return;
    if (want <= in_cap_) {
      std::memmove(in_.get(), in_.get() + in_begin_, held);
    } else {
      const std::size_t cap = std::max({want, in_cap_ * 2, input_initial});
      auto fresh = std::make_unique_for_overwrite<char[]>(cap);
      if (held != 0) std::memcpy(fresh.get(), in_.get() + in_begin_, held);
      in_ = std::move(fresh);
      in_cap_ = cap;
    }
    in_begin_ = 0;
    in_end_ = held;
  }

  void reset_input() noexcept {
    parser_.reset();
    in_begin_ = in_end_ = 0;
    in_push_ = false;
  }

  template <class S>
  task<void> reader(S& s) {
    while (!broken_) {
      const resp::parser::result r = parser_.next(in_.get() + in_begin_, in_end_ - in_begin_);
      if (r.what == resp::parser::status::node) {
        in_begin_ += r.consumed;
        if (dispatch(r.n)) co_await queue_message();
        continue;
      }
      if (r.what == resp::parser::status::failed) {
        // The reply being read broke the protocol or a limit: its request learns why, the others that were sent
        // lose their connection.
        queue_entry* e = head();
        if (e != nullptr && front_seq_ < unsent_seq_ && e->slot != nullptr) {
          request_slot* slot = std::exchange(e->slot, nullptr);
          end(*slot, r.ec);
        }
        fail(r.ec);
        break;
      }
      prepare_input(r.need);
      auto [ec, n] = co_await read_some(s, mutable_buffer(in_.get() + in_end_, in_cap_ - in_end_));
      if (ec) {
        fail(ec);
        break;
      }
      in_end_ += n;
      input_seen_ = true;
    }
  }

  // One node: to the front request's slot, or into a push. True when a pub/sub message is ready in push_msg_.
  bool dispatch(const resp::node& n) {
    if (in_push_) return push_node(n);
    if (n.depth == 0 && n.type == resp::type::push) {
      in_push_ = true;
      push_kind_ = push_kind::other;
      push_index_ = 0;
      push_name_null_ = false;
      return push_node(n);
    }
    queue_entry* e = head();
    if (e == nullptr || front_seq_ >= unsent_seq_) {
      fail(make_error_code(error::protocol_error));  // a reply to nothing sent
      return false;
    }
    if (e->slot != nullptr) e->slot->ops->deliver(e->slot, e->index, n);
    if (!parser_.at_reply_boundary()) return false;
    // A subscription's reply (not a push) is its refusal: the whole request ends with it.
    if (e->what == request_slot::kind::subscription) e->replies_left = 1;
    ++e->index;
    if (--e->replies_left == 0) complete_front();
    return false;
  }

  bool push_node(const resp::node& n) {
    if (n.depth == 1 && !n.in_attribute) {
      switch (push_index_) {
        case 0: push_kind_ = classify(n.value); break;
        case 1:
          if (push_kind_ == push_kind::message) {
            push_msg_.channel.assign(n.value);
          } else if (push_kind_ == push_kind::pmessage) {
            push_msg_.pattern.assign(n.value);
          } else {
            push_name_.assign(n.value);
            push_name_null_ = n.type == resp::type::null;
          }
          break;
        case 2:
          if (push_kind_ == push_kind::message) {
            push_msg_.payload.assign(n.value);
          } else if (push_kind_ == push_kind::pmessage) {
            push_msg_.channel.assign(n.value);
          }
          break;
        case 3:
          if (push_kind_ == push_kind::pmessage) push_msg_.payload.assign(n.value);
          break;
        default: break;
      }
      ++push_index_;
    }
    if (!parser_.at_reply_boundary()) return false;
    in_push_ = false;
    switch (push_kind_) {
      case push_kind::message:
        push_msg_.type = message::kind::message;
        push_msg_.pattern.clear();
        return push_index_ == 3;
      case push_kind::pmessage:
        push_msg_.type = message::kind::pattern_message;
        return push_index_ == 4;
      case push_kind::other: return false;
      default: confirmed(); return false;
    }
  }

  // A (p)(un)subscribe confirmation: the subscriptions change, and the request waiting for it counts it.
  void confirmed() {
    if (!push_name_null_) {
      std::set<std::string, std::less<>>& names =
          (push_kind_ == push_kind::subscribe || push_kind_ == push_kind::unsubscribe) ? channels_ : patterns_;
      if (push_kind_ == push_kind::subscribe || push_kind_ == push_kind::psubscribe) {
        if (names.find(push_name_) == names.end()) names.emplace(push_name_);
      } else if (auto it = names.find(push_name_); it != names.end()) {
        names.erase(it);
      }
    }
    queue_entry* e = head();
    if (e == nullptr || front_seq_ >= unsent_seq_ || e->what != request_slot::kind::subscription) return;
    if (--e->replies_left == 0) complete_front();
  }

  task<void> queue_message() {
    std::error_code ec = messages_.try_send(std::move(push_msg_));
    if (ec == sync::error::full) {
      auto send = messages_.send(std::move(push_msg_));
      push_send_ = &send;
      ec = co_await send;
      push_send_ = nullptr;
    }
    push_msg_ = message{};
  }

  // ---- health ---------------------------------------------------------------------------------------------------

  task<void> health() {
    if (cfg.health_interval.count() > 0) {
      for (;;) {
        health_timer_.expires_after(cfg.health_interval);
        (void)co_await health_timer_.wait();
        if (broken_) break;
        if (input_seen_) {
          input_seen_ = false;
          continue;
        }
        if (ping_pending_) {  // a PING an interval old, and still nothing came back
          fail(make_error_code(tern::error::timed_out));
          break;
        }
        ping_pending_ = true;
        ++stats_.health_pings;
        enqueue(ping_slot_);
        wake_writer();
      }
    }
    session_task_done();
  }

  // ---- failure --------------------------------------------------------------------------------------------------

  // Breaks off the session: every task of it sees broken_ and ends, its pending operations cancelled.
  void fail(std::error_code ec) noexcept {
    if (broken_ || !in_session_) return;
    broken_ = true;
    break_reason_ = ec;
    if (phase_ == phase::ready) phase_ = phase::connecting;
    if (io_ != nullptr) io_->cancel();
    wake_writer();
    health_timer_.cancel();
    if (push_send_ != nullptr) push_send_->cancel();
  }

  // After a session: the outcome of every request sent and not answered (connection_lost, or kept for a replay
  // when idempotent), and the queue compacted to what waits for the next connection.
  void connection_lost() {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < queue_.size(); ++i) {
      queue_entry e = queue_[i];
      if (e.slot == nullptr) continue;
      if (front_seq_ + i < unsent_seq_ || e.rewrite) {
        if (!e.slot->idempotent) {
          end(*e.slot, make_error_code(error::connection_lost));
          continue;
        }
        e.rewrite = true;
        e.bytes = 0;
        e.index = 0;
        e.replies_left = e.slot->replies;
      }
      queue_[kept++] = e;
    }
    queue_.truncate(kept);
    unsent_seq_ = front_seq_;
    renumber();
    flight_.clear();
    if (phase_ != phase::closed) {
      for (std::size_t i = 0; i < queue_.size(); ++i) arm_wait(*queue_[i].slot);
    }
  }

  // A connection is ready: re-subscriptions first, then the replays, then what was queued.
  void prepare_session() {
    output_buffer& head_bytes = flight_;
    head_bytes.clear();
    std::size_t resubscribed = 0;
    queue_entry resub[2];
    if (protocol_ == 3) {
      const std::size_t counts[2] = {channels_.size(), patterns_.size()};
      for (int k = 0; k < 2; ++k) {
        if (counts[k] == 0) continue;
        request_slot& slot = resubscribe_[k];
        slot.replies = static_cast<std::uint32_t>(counts[k]);
        const std::size_t before = head_bytes.size();
        slot.ops->write(&slot, head_bytes);
        resub[resubscribed++] = {&slot, slot.replies, 0, head_bytes.size() - before, slot.what, false};
      }
    }
    std::size_t kept = 0;
    for (std::size_t i = 0; i < queue_.size(); ++i) {
      queue_entry e = queue_[i];
      if (e.slot == nullptr) continue;
      disarm(*e.slot);
      if (e.what == request_slot::kind::subscription && protocol_ == 2) {
        end(*e.slot, make_error_code(error::resp3_required));
        continue;
      }
      if (e.rewrite) {
        const std::size_t before = head_bytes.size();
        e.slot->ops->write(e.slot, head_bytes);
        e.bytes = head_bytes.size() - before;
        e.rewrite = false;
        ++stats_.replayed;
      }
      queue_[kept++] = e;
    }
    queue_.truncate(kept);
    // What was queued, unsent, is out_ as it stands (cancelled requests already taken out).
    head_bytes.append(out_.data(), out_.size());
    out_.swap(head_bytes);
    head_bytes.clear();
    while (resubscribed > 0) queue_.push_front(resub[--resubscribed]);
    unsent_seq_ = front_seq_;
    renumber();
  }

  template <class S>
  task<void> session(S& s) {
    in_session_ = true;
    broken_ = false;
    io_ = &descriptor_of(s);
    input_seen_ = false;
    ping_pending_ = false;
    session_tasks_ = 2;
    tern::spawn(ctx, writer(s)).detach();
    tern::spawn(ctx, health()).detach();
    co_await reader(s);
    co_await session_end{this};
    io_ = nullptr;
    in_session_ = false;
    push_msg_ = message{};
  }
  void session_task_done() noexcept {
    if (--session_tasks_ == 0 && session_waiting_) {
      session_waiting_ = false;
      ctx.schedule(&session_resume_);
    }
  }
  struct session_end {
    connection_state* s;
    bool await_ready() const noexcept { return s->session_tasks_ == 0; }
    void await_suspend(std::coroutine_handle<> h) noexcept {
      s->session_resume_.handle = h;
      s->session_waiting_ = true;
    }
    void await_resume() const noexcept {}
  };

  // ---- connecting -----------------------------------------------------------------------------------------------

  // One node after another until a whole reply is in out (pushes, which a server may send first, are skipped).
  template <class S>
  task<std::error_code> read_reply(S& s, reply& out) {
    out.clear();
    bool skipping_push = false;
    for (;;) {
      const resp::parser::result r = parser_.next(in_.get() + in_begin_, in_end_ - in_begin_);
      if (r.what == resp::parser::status::node) {
        in_begin_ += r.consumed;
        if (r.n.depth == 0 && r.n.type == resp::type::push) skipping_push = true;
        if (!skipping_push) out.add(r.n);
        if (parser_.at_reply_boundary()) {
          if (!skipping_push) co_return std::error_code{};
          skipping_push = false;
        }
        continue;
      }
      if (r.what == resp::parser::status::failed) co_return r.ec;
      prepare_input(r.need);
      auto [ec, n] = co_await read_some(s, mutable_buffer(in_.get() + in_end_, in_cap_ - in_end_));
      if (ec) co_return ec;
      in_end_ += n;
    }
  }

  std::error_code server_refusal(const reply& r) {
    last_error_message_.assign(r.root().value);
    return make_error_code(server_error_code(r.root().value));
  }

  // HELLO 3 (AUTH, SETNAME), SELECT; RESP2's AUTH, CLIENT SETNAME and SELECT when the server has no HELLO.
  template <class S>
  task<std::error_code> hello(S& s) {
    reset_input();
    output_buffer out;
    const bool auth = !cfg.password.empty();
    const bool named = !cfg.client_name.empty();
    const std::string_view user = cfg.username.empty() ? std::string_view("default") : cfg.username;
    if (auth && named) {
      write_command(out, "HELLO", "3", "AUTH", user, cfg.password, "SETNAME", cfg.client_name);
    } else if (auth) {
      write_command(out, "HELLO", "3", "AUTH", user, cfg.password);
    } else if (named) {
      write_command(out, "HELLO", "3", "SETNAME", cfg.client_name);
    } else {
      write_command(out, "HELLO", "3");
    }
    if (cfg.database != 0) write_command(out, "SELECT", cfg.database);
    if (auto [ec, n] = co_await write_all(s, const_buffer(out.data(), out.size())); ec) co_return ec;
    reply r;
    if (std::error_code ec = co_await read_reply(s, r)) co_return ec;
    if (!r.is_error()) {
      protocol_ = 3;
      server_version_.clear();
      for (std::size_t i = 0; i + 1 < r.size(); ++i) {
        const resp::node key = r.node(i);
        if (key.depth == 1 && key.value == "version" && r.node(i + 1).depth == 1) {
          server_version_.assign(r.node(i + 1).value);
          break;
        }
      }
      if (cfg.database != 0) {
        if (std::error_code ec = co_await read_reply(s, r)) co_return ec;
        if (r.is_error()) co_return server_refusal(r);
      }
      co_return std::error_code{};
    }
    const std::string_view text = r.root().value;
    if (!starts_with(text, "ERR unknown command") && !starts_with(text, "NOPROTO")) co_return server_refusal(r);
    // A server without RESP3: its answer to the SELECT sent with HELLO does not count.
    if (cfg.database != 0) {
      if (std::error_code ec = co_await read_reply(s, r)) co_return ec;
    }
    out.clear();
    int expected = 0;
    if (auth) {
      if (cfg.username.empty()) {
        write_command(out, "AUTH", cfg.password);
      } else {
        write_command(out, "AUTH", cfg.username, cfg.password);
      }
      ++expected;
    }
    if (named) {
      write_command(out, "CLIENT", "SETNAME", cfg.client_name);
      ++expected;
    }
    if (cfg.database != 0) {
      write_command(out, "SELECT", cfg.database);
      ++expected;
    }
    if (expected != 0) {
      if (auto [ec, n] = co_await write_all(s, const_buffer(out.data(), out.size())); ec) co_return ec;
    }
    std::error_code refused;
    for (int i = 0; i < expected; ++i) {
      if (std::error_code ec = co_await read_reply(s, r)) co_return ec;
      if (r.is_error() && !refused) refused = server_refusal(r);
    }
    if (refused) co_return refused;
    protocol_ = 2;
    server_version_.clear();
    co_return std::error_code{};
  }

  net::resolver& resolver() {
    if (!resolver_) resolver_ = std::make_unique<net::resolver>(ctx);
    return *resolver_;
  }

  template <class S>
  task<io_result<S>> open_stream() {
    if constexpr (std::is_same_v<S, net::unix_stream_socket>) {
      net::unix_stream_socket socket(ctx);
      const std::optional<net::unix_endpoint> where = net::unix_endpoint::path(cfg.unix_path);
      if (!where) co_return io_result<S>{std::make_error_code(std::errc::invalid_argument), std::move(socket)};
      std::error_code ec = co_await socket.connect(*where);
      co_return io_result<S>{ec, std::move(socket)};
    } else {
      auto [ec, socket] = co_await net::connect(resolver(), cfg.host, std::to_string(cfg.port));
      if (!ec) (void)socket.set_option(net::option::no_delay{true});
      if constexpr (is_transport<S>) {
        if (ec) co_return io_result<S>{ec, nullptr};
        std::unique_ptr<transport> t = cfg.tls(std::move(socket), cfg.host);
        std::error_code hec = co_await t->handshake();
        co_return io_result<S>{hec, std::move(t)};
      } else {
        co_return io_result<S>{ec, std::move(socket)};
      }
    }
  }

  template <class S>
  task<io_result<S>> attempt() {
    io_result<S> r = co_await open_stream<S>();
    if (r.ec) co_return r;
    r.ec = co_await hello(r.value);
    co_return r;
  }

  // One attempt under connect_timeout, and under a stop source that close() requests.
  template <class S>
  task<io_result<S>> run_attempt() {
    attempt_stop_ = std::stop_source();
    auto h = tern::spawn(ctx, with_timeout(attempt<S>(), cfg.connect_timeout), attempt_stop_.get_token());
    co_return co_await std::move(h);
  }

  std::chrono::milliseconds jittered(std::chrono::milliseconds d) noexcept {
    jitter_ ^= jitter_ << 13;
    jitter_ ^= jitter_ >> 7;
    jitter_ ^= jitter_ << 17;
    // Between 3/4 and 5/4 of d: connections that failed together do not all come back at once.
    const auto base = d.count();
    return std::chrono::milliseconds(base * 3 / 4 + static_cast<long long>(jitter_ % (base / 2 + 1)));
  }

  // The connection's background task; keep holds the state alive until it ends, whatever happens to the
  // connection object.
  template <class S>
  task<void> run(std::shared_ptr<connection_state> keep) {
    std::chrono::milliseconds backoff = std::max(cfg.reconnect_min, std::chrono::milliseconds(1));
    while (phase_ != phase::closed) {
      phase_ = phase::connecting;
      attempt_done_.reset();
      io_result<S> r = co_await run_attempt<S>();
      if (phase_ == phase::closed) break;
      if (!r.ec) {
        ++stats_.connects;
        last_error_.clear();
        last_error_message_.clear();
        prepare_session();
        phase_ = phase::ready;
        attempt_done_.set();
        backoff = std::max(cfg.reconnect_min, std::chrono::milliseconds(1));
        co_await session(r.value);
        last_error_ = break_reason_;
        connection_lost();
        if (phase_ == phase::closed) break;
      } else {
        ++stats_.failed_attempts;
        last_error_ = r.ec;
        attempt_done_.set();
      }
      backoff_timer_.expires_after(jittered(backoff));
      (void)co_await backoff_timer_.wait();
      backoff = std::min(backoff * 2, std::max(cfg.reconnect_max, backoff));
    }
    attempt_done_.set();
    (void)keep;
  }

  // ---- state ----------------------------------------------------------------------------------------------------

  phase phase_ = phase::idle;
  bool started_ = false;

  entry_ring queue_;
  std::uint64_t front_seq_ = 0;   // seq of queue_[0]
  std::uint64_t unsent_seq_ = 0;  // seq of the first entry not handed to the kernel
  output_buffer out_;             // the unsent entries' bytes, in order
  output_buffer flight_;          // the bytes of the write in progress

  std::unique_ptr<char[]> in_;
  std::size_t in_cap_ = 0;
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;
  resp::parser parser_;

  // The session.
  bool in_session_ = false;
  bool broken_ = false;
  std::error_code break_reason_;
  basic_descriptor* io_ = nullptr;
  bool input_seen_ = false;
  tern::detail::resume_item writer_resume_;
  bool writer_parked_ = false;
  unsigned session_tasks_ = 0;
  tern::detail::resume_item session_resume_;
  bool session_waiting_ = false;
  tern::timer health_timer_;
  request_slot ping_slot_;
  bool ping_pending_ = false;

  // Pushes.
  bool in_push_ = false;
  push_kind push_kind_ = push_kind::other;
  std::uint64_t push_index_ = 0;
  message push_msg_;
  std::string push_name_;
  bool push_name_null_ = false;
  sync::channel<message> messages_;
  sync::channel<message>::send_awaiter* push_send_ = nullptr;

  // Subscriptions, as the server confirmed them, made again on every new connection.
  std::set<std::string, std::less<>> channels_;
  std::set<std::string, std::less<>> patterns_;
  request_slot resubscribe_[2];

  // Connecting.
  int protocol_ = 0;
  std::string server_version_;
  std::error_code last_error_;
  std::string last_error_message_;
  sync::manual_reset_event attempt_done_;
  std::stop_source attempt_stop_{std::nostopstate};
  tern::timer backoff_timer_;
  std::unique_ptr<net::resolver> resolver_;
  std::uint64_t jitter_;

  connection_stats stats_;
};

const request_slot::operations connection_state::ping_ops{
    [](request_slot*, output_buffer& out) { write_command(out, "PING"); },
    [](request_slot*, std::uint32_t, const resp::node&) {},
    [](request_slot* s, std::error_code) { s->state->ping_pending_ = false; }};
const request_slot::operations connection_state::resubscribe_ops[2] = {
    {[](request_slot* s, output_buffer& out) { write_command(out, "SUBSCRIBE", s->state->channels_); },
     [](request_slot*, std::uint32_t, const resp::node&) {}, [](request_slot*, std::error_code) {}},
    {[](request_slot* s, output_buffer& out) { write_command(out, "PSUBSCRIBE", s->state->patterns_); },
     [](request_slot*, std::uint32_t, const resp::node&) {}, [](request_slot*, std::error_code) {}}};

io_context& home_loop(const connection_state& s) noexcept { return s.ctx; }
std::shared_ptr<connection_state> share(connection_state& s) noexcept { return s.shared_from_this(); }
std::error_code submit(connection_state& s, request_slot& slot) { return s.submit(slot); }
bool withdraw(connection_state& s, request_slot& slot) noexcept { return s.withdraw(slot); }
sync::channel<message>& message_channel(connection_state& s) noexcept { return s.messages(); }

// ---- pipelines ----------------------------------------------------------------------------------------------------

const request_slot::operations pipeline_op::table_{&pipeline_op::write_request, &pipeline_op::deliver_node,
                                                   &pipeline_op::on_finish};

pipeline_op::pipeline_op(connection_state& s, pipeline& p) : request_op(s), p_(&p) {
  ops = &table_;
  idempotent = p.idempotent();
  replies = static_cast<std::uint32_t>(p.size() + (p.is_transaction() ? 2 : 0));
  if (p.empty()) {
    outcome_ = std::make_error_code(std::errc::invalid_argument);
  } else if (pipeline_access::reserved(p)) {
    outcome_ = make_error_code(error::reserved_command);
  }
}

void pipeline_op::write_request(request_slot* s, output_buffer& out) {
  auto* self = static_cast<pipeline_op*>(s);
  pipeline& p = *self->p_;
  self->error_ = {};
  self->element_ = 0;
  self->element_left_ = 0;
  std::vector<redis::reply>& replies = pipeline_access::replies(p);
  if (replies.size() < p.size()) replies.resize(p.size());
  for (redis::reply& r : replies) r.clear();
  const output_buffer& commands = pipeline_access::buffer(p);
  if (p.is_transaction()) write_command(out, "MULTI");
  out.append(commands.data(), commands.size());
  if (p.is_transaction()) write_command(out, "EXEC");
}

void pipeline_op::deliver_node(request_slot* s, std::uint32_t index, const resp::node& n) {
  auto* self = static_cast<pipeline_op*>(s);
  pipeline& p = *self->p_;
  std::vector<redis::reply>& replies = pipeline_access::replies(p);
  if (!p.is_transaction()) {
    replies[index].add(n);
    return;
  }
  if (index == 0) {  // MULTI's +OK
    if (n.depth == 0 && resp::is_error(n.type)) self->error_.server(n.value);
  } else if (index <= p.size()) {
    // +QUEUED, or the command's refusal: kept as its reply (EXEC then answers EXECABORT).
    if (resp::is_error(n.type) || n.depth > 0) replies[index - 1].add(n);
  } else {
    self->deliver_exec(n);
  }
}

void pipeline_op::deliver_exec(const resp::node& n) {
  std::vector<redis::reply>& replies = pipeline_access::replies(*p_);
  if (n.depth == 0) {
    if (n.in_attribute) return;
    if (resp::is_error(n.type)) {
      error_.server(n.value);
    } else if (n.type == resp::type::null) {
      error_.set(error::transaction_aborted);
    } else if (n.type != resp::type::array || n.size != p_->size()) {
      error_.set(error::unexpected_type);
    }
    return;
  }
  if (element_ >= replies.size()) return;
  resp::node inner = n;
  --inner.depth;
  replies[element_].add(inner);
  if (n.in_attribute) return;
  if (element_left_ == 0) element_left_ = 1;
  --element_left_;
  if (resp::is_aggregate(n.type)) element_left_ += n.type == resp::type::map ? n.size * 2 : n.size;
  if (element_left_ == 0) ++element_;
}

}  // namespace detail

// ---- connection -----------------------------------------------------------------------------------------------------

connection::connection(io_context& ctx, redis::config cfg)
    : ctx_(&ctx), state_(std::make_shared<detail::connection_state>(ctx, std::move(cfg))) {}

connection::~connection() { close(); }

task<std::error_code> connection::connect() {
  std::shared_ptr<detail::connection_state> s = state_;
  s->start();
  co_return co_await s->wait_attempt();
}

void connection::close() noexcept {
  if (state_) state_->close();
}

bool connection::connected() const noexcept { return state_->connected(); }
int connection::protocol() const noexcept { return state_->protocol(); }
std::string_view connection::server_version() const noexcept { return state_->server_version(); }
std::size_t connection::subscriptions() const noexcept { return state_->subscriptions(); }
connection_stats connection::stats() const noexcept { return state_->stats(); }
const redis::config& connection::config() const noexcept { return state_->cfg; }
io_context& connection::context() const noexcept { return state_->ctx; }

}  // namespace tern::redis
