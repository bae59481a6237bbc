// tern/redis/connection.hpp
//
// redis::connection: one connection to a Redis server, shared by any number of tasks, with automatic pipelining,
// pub/sub, health checks and reconnection.
//
//   redis::connection conn(ctx, {.host = "127.0.0.1", .port = 6379});
//   if (auto ec = co_await conn.connect()) ...                          // the first connection (HELLO 3 done)
//   co_await conn.command<redis::ignore_t>("SET", "greeting", "hello");
//   auto [ec, text] = co_await conn.command<std::string>("GET", "greeting");
//   auto [ec2, n] = co_await with_timeout(conn.command<std::int64_t>("INCR", "visits"), 100ms);
//
// Pipelining: a command is formatted into the connection's output buffer when it is awaited, and its slot queued;
// a writer task sends whatever has gathered once the tasks that were ready have run, so the commands of many
// tasks (and of other workers, whose commands are handed to this loop) leave in one write, and their replies,
// which come back in order, are matched to them in order. A thousand concurrent GETs cost a few system calls.
//
// Connecting: by name through tern's resolver and Happy Eyeballs (net::connect), or a Unix socket (unix_path), or
// TLS with config::tls (<tern/redis/tls.hpp>). Then HELLO 3 with AUTH and SETNAME when configured, and SELECT;
// a server without HELLO (before Redis 6) gets AUTH, CLIENT SETNAME and SELECT and is spoken to in RESP2 (no
// pub/sub then: resp3_required). connect() waits for the first connection and reports its error; whatever
// happens, the connection goes on reconnecting in the background until close().
//
// When a connection fails, every command it had sent and not yet had the reply to gets connection_lost (the
// server may or may not have run it), except those marked idempotent (command(redis::idempotent, ...),
// pipeline::set_idempotent), which are sent again on the next connection. Commands not sent yet stay queued.
// While there is no connection, a new command waits for one, for at most config::disconnected_wait (then
// not_connected), or fails at once with not_connected when config::fail_fast is set. The connection is
// re-established with exponential backoff between reconnect_min and reconnect_max (with jitter), and its channel
// and pattern subscriptions are made again on the new connection before any queued command is sent.
//
// Cancellation: every awaitable here is a cancellable operation (with_timeout, with_stop, a task's stop token). A
// cancelled command that has not been sent is taken out of the output and never sent; one already sent completes
// at once with operation_canceled (timed_out under with_timeout), and its reply, when it comes, is read and
// dropped, so the replies that follow still reach their own commands.
//
// Health: when nothing has arrived for config::health_interval, the connection sends a PING; when nothing arrives
// within the next interval, it counts the connection as failed and reconnects. A blocking command (BLPOP ...) that
// may wait longer than that needs a connection with health_interval 0.
//
// Pub/sub (RESP3 only): subscribe(), psubscribe() and their opposites complete once the server has confirmed each
// channel; messages (RESP3 pushes on the same connection) queue up for receive(), at most
// config::message_queue of them: when the queue is full the connection stops reading until a receive() takes
// one (nothing is dropped; a connection whose messages are not received stalls its other replies too).
//
// Threads: the connection belongs to the loop it was made on, and is made, closed and destroyed there. Its
// awaitables may be awaited on any loop of the process (another worker's task): the request is handed to the
// connection's loop and the task resumes on its own. Such a request holds the connection's state, so the
// connection may be closed or destroyed meanwhile: the request then ends with error::closed (also one made before
// and awaited after). The arguments of a command are read when it is formatted, on the connection's loop, which
// may be after the co_await began (and again on a replay): like any awaited operation's arguments, they must
// outlive the co_await, which temporaries in the awaited expression do.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>

#include "tern/io_context.hpp"
#include "tern/net/tcp.hpp"
#include "tern/redis/detail/request_op.hpp"
#include "tern/redis/error.hpp"
#include "tern/redis/reply.hpp"
#include "tern/redis/request.hpp"
#include "tern/redis/resp.hpp"
#include "tern/redis/transport.hpp"
#include "tern/sync/channel.hpp"
#include "tern/task.hpp"

namespace tern::redis {

struct config {
  std::string host = "127.0.0.1";  // a name (resolved with tern's resolver) or an address
  std::uint16_t port = 6379;
  std::string unix_path;           // when set: a Unix socket at this path instead of TCP
  std::string username;            // AUTH (in HELLO): "" with a password is the default user
  std::string password;            // "" sends no AUTH
  std::string client_name;         // CLIENT SETNAME (in HELLO); "" sends none
  int database = 0;                // SELECT when not 0
  resp::limits limits;             // of the replies read
  std::chrono::milliseconds connect_timeout{10'000};     // resolve, connect, TLS handshake and HELLO together
  std::chrono::milliseconds health_interval{5'000};      // PING after this long without input; 0: never
  std::chrono::milliseconds reconnect_min{50};           // first wait before reconnecting; doubles each failure
  std::chrono::milliseconds reconnect_max{2'000};        // longest wait between attempts
  std::chrono::milliseconds disconnected_wait{5'000};    // how long a command waits for a connection
  bool fail_fast = false;          // no connection: fail new commands at once with not_connected instead
  std::size_t message_queue = 1024;  // pub/sub messages held for receive() (at least 1)
  transport_factory tls;           // wraps each TCP connection (tls_transport in <tern/redis/tls.hpp>)
};

// The mark of a command that may be sent again after its connection failed before the reply (see above).
struct idempotent_t {};
inline constexpr idempotent_t idempotent{};

// A pub/sub message.
struct message {
  enum class kind : std::uint8_t {
    message,          // to a channel subscribed with subscribe()
    pattern_message,  // to a channel matching a pattern of psubscribe()
  };
  message::kind type = kind::message;
  std::string pattern;  // pattern_message: the pattern it matched
  std::string channel;
  std::string payload;
};

namespace detail {

// The value a command's awaiter builds: its own (command), or the caller's (command_into).
template <class T>
struct owned_value {
  T value{};
  T& get() noexcept { return value; }
  result<T> finish(std::error_code ec, std::string message) {
    return {ec, std::move(value), std::move(message)};
  }
};
template <class T>
struct borrowed_value {
  T* target;
  T& get() noexcept { return *target; }
  result<void> finish(std::error_code ec, std::string message) { return {ec, std::move(message)}; }
};

template <class Value, class T, class... Args>
class [[nodiscard]] command_op final : public request_op {
 public:
  command_op(io_context& home, connection_state& s, bool idempotent_request, Value v, const Args&... args)
      : request_op(home, s), value_(std::move(v)), args_(args...) {
    ops = &table_;
    idempotent = idempotent_request;
    if (reserved(command_name(args...), subcommand_name(args...)) != reserved_kind::none) {
      outcome_ = make_error_code(error::reserved_command);
    }
  }
  command_op(command_op&&) noexcept = default;

  auto await_resume() {
    if (outcome_) return value_.finish(outcome_, {});
    conversion_error& e = converter_.error();
    // Success hands over an empty message built here, not the moved one (whose move copies its bytes by a call).
    if (!e.failed()) return value_.finish(outcome_, {});
    return value_.finish(e.ec, std::move(e.message));
  }

 private:
  static void write_request(request_slot* s, output_buffer& out) {
    auto* self = static_cast<command_op*>(s);
    self->converter_.start(self->value_.get());
    std::apply([&out](const Args&... a) { write_command(out, a...); }, self->args_);
  }
  static void deliver_node(request_slot* s, std::uint32_t, const resp::node& n) {
    auto* self = static_cast<command_op*>(s);
    self->converter_.feed(self->value_.get(), n);
  }
  static constexpr operations table_{&write_request, &deliver_node, &on_finish};

  Value value_;
  std::tuple<const Args&...> args_;
  converter<T> converter_;
};

// execute(pipeline): the pipeline's commands in one request; a transaction's wrapped in MULTI and EXEC.
class [[nodiscard]] pipeline_op final : public request_op {
 public:
  pipeline_op(connection_state& s, pipeline& p);
  pipeline_op(pipeline_op&&) noexcept = default;
  result<void> await_resume() {
    if (outcome_) return {outcome_, {}};
    return {error_.ec, std::move(error_.message)};
  }

 private:
  static void write_request(request_slot* s, output_buffer& out);
  static void deliver_node(request_slot* s, std::uint32_t index, const resp::node& n);
  void deliver_exec(const resp::node& n);
  static const operations table_;

  pipeline* p_;
  conversion_error error_;
  std::uint64_t element_left_ = 0;  // transaction: nodes still to come of EXEC's current element
  std::size_t element_ = 0;         // transaction: EXEC's current element
};

// subscribe() and the others: one command, confirmed by one push per channel or pattern.
template <class... Args>
class [[nodiscard]] subscription_op final : public request_op {
 public:
  subscription_op(connection_state& s, std::string_view verb, const Args&... names)
      : request_op(s), verb_(verb), names_(names...) {
    ops = &table_;
    what = kind::subscription;
    idempotent = true;  // the server's subscription state is the same however often it is sent
    replies = static_cast<std::uint32_t>((std::size_t{0} + ... + argument_count(names)));
    if (replies == 0) outcome_ = std::make_error_code(std::errc::invalid_argument);
  }
  subscription_op(subscription_op&&) noexcept = default;

  result<void> await_resume() {
    if (outcome_) return {outcome_, {}};
    return {error_.ec, std::move(error_.message)};
  }

 private:
  static void write_request(request_slot* s, output_buffer& out) {
    auto* self = static_cast<subscription_op*>(s);
    self->error_ = {};
    std::apply([&](const Args&... a) { write_command(out, self->verb_, a...); }, self->names_);
  }
  static void deliver_node(request_slot* s, std::uint32_t, const resp::node& n) {
    auto* self = static_cast<subscription_op*>(s);
    if (!take_error(n, self->error_)) self->error_.set(error::unexpected_type);
  }
  static constexpr operations table_{&write_request, &deliver_node, &on_finish};

  std::string_view verb_;
  std::tuple<const Args&...> names_;
  conversion_error error_;
};

sync::channel<message>& message_channel(connection_state& s) noexcept;

}  // namespace detail

// Counters of a connection, for tests and monitoring.
struct connection_stats {
  std::uint64_t connects = 0;          // connections established (the first included)
  std::uint64_t failed_attempts = 0;   // attempts that did not get as far as a ready connection
  std::uint64_t writes = 0;            // writes of the output (each carries every command gathered)
  std::uint64_t commands_sent = 0;     // requests formatted into the output (pipelines and replays count once each)
  std::uint64_t replies_dropped = 0;   // replies to cancelled requests, read and dropped
  std::uint64_t replayed = 0;          // idempotent requests sent again after a connection failed
  std::uint64_t health_pings = 0;      // PINGs sent by the health check
};

class connection {
 public:
  // A connection of ctx with cfg; nothing happens before connect().
  explicit connection(io_context& ctx, redis::config cfg = {});
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  // close().
  ~connection();

  // Awaitable: starts the connection (once) and waits for the first attempt: empty when connected, else its error
  // (the connection keeps trying in the background: see above). Later calls wait for the current state: empty once
  // connected.
  task<std::error_code> connect();
  // Ends the connection: requests still queued or sent complete with error::closed, receive() with
  // sync::error::closed, and nothing reconnects. Idempotent; the background task ends soon after.
  void close() noexcept;

  // Awaitable: sends a command (its arguments: see request.hpp) and yields result<T> (see reply.hpp).
  template <class T = reply, detail::argument... Args>
    requires(sizeof...(Args) > 0)
  auto command(const Args&... args) {
    return detail::command_op<detail::owned_value<T>, T, Args...>(*ctx_, *state_, false, {}, args...);
  }
  // The same, marked idempotent: sent again after a connection failure (see above) instead of connection_lost.
  template <class T = reply, detail::argument... Args>
    requires(sizeof...(Args) > 0)
  auto command(idempotent_t, const Args&... args) {
    return detail::command_op<detail::owned_value<T>, T, Args...>(*ctx_, *state_, true, {}, args...);
  }
  // Awaitable: a command whose reply is converted into out (a string's capacity is reused: no allocation for a
  // value that fits); yields result<void>. out must outlive the co_await.
  template <class T, detail::argument... Args>
    requires(sizeof...(Args) > 0)
  auto command_into(T& out, const Args&... args) {
    return detail::command_op<detail::borrowed_value<T>, T, Args...>(*ctx_, *state_, false, {&out}, args...);
  }
  // Awaitable: the commands of p (a transaction's in MULTI/EXEC) in one request; yields result<void>. Each
  // command's reply is then p.reply(i). p must outlive the co_await.
  detail::pipeline_op execute(pipeline& p) { return detail::pipeline_op(*state_, p); }

  // Awaitable: SUBSCRIBE to channels (names, or ranges of them); yields result<void> once each is confirmed.
  template <detail::argument... Names>
  auto subscribe(const Names&... channels) {
    return detail::subscription_op<Names...>(*state_, "SUBSCRIBE", channels...);
  }
  template <detail::argument... Names>
  auto unsubscribe(const Names&... channels) {
    return detail::subscription_op<Names...>(*state_, "UNSUBSCRIBE", channels...);
  }
  // Awaitable: PSUBSCRIBE to glob-style patterns ("news.*").
  template <detail::argument... Names>
  auto psubscribe(const Names&... patterns) {
    return detail::subscription_op<Names...>(*state_, "PSUBSCRIBE", patterns...);
  }
  template <detail::argument... Names>
  auto punsubscribe(const Names&... patterns) {
    return detail::subscription_op<Names...>(*state_, "PUNSUBSCRIBE", patterns...);
  }
  // Awaitable: the next pub/sub message; yields sync::receive_result<message> ({ec, optional<message>}; ec is
  // sync::error::closed after close()). Any loop; several receivers take turns.
  auto receive() { return detail::message_channel(*state_).receive(); }

  // True while connected (HELLO done).
  bool connected() const noexcept;
  // 3 (RESP3) or 2 (RESP2: a server without HELLO), 0 before the first connection.
  int protocol() const noexcept;
  // The server's version from HELLO ("7.0.15"), "" in RESP2 or before the first connection.
  std::string_view server_version() const noexcept;
  // The channels and patterns subscribed now (as confirmed by the server).
  std::size_t subscriptions() const noexcept;
  connection_stats stats() const noexcept;
  const redis::config& config() const noexcept;
  io_context& context() const noexcept;

 private:
  io_context* ctx_;  // the connection's loop, known to its commands without a call
  std::shared_ptr<detail::connection_state> state_;
};

}  // namespace tern::redis
