// One connection of an http::server (internal; see server.cpp for how it keeps its buffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "tern/detail/stream_ops.hpp"
#include "tern/detail/timer_wheel.hpp"
#include "tern/http/chunked.hpp"
#include "tern/http/parser.hpp"
#include "tern/http/request.hpp"
#include "tern/http/response.hpp"
#include "tern/http/router.hpp"
#include "tern/http/server.hpp"
#include "tern/http/stream.hpp"
#include "tern/http/transport.hpp"
#include "tern/net/tcp.hpp"
#include "tern/timer.hpp"

#include "out_buffer.hpp"

namespace tern::http::detail {

class connection final : public exchange {
 public:
  connection(server& s, net::tcp_socket socket, const net::endpoint& remote);
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection();

  // Serves requests until the connection ends.
  task<void> run();
  // Closes the socket under whatever the connection is waiting for (stop() of idle ones, shutdown's cut).
  void cut() noexcept;
  // The peer's bytes wait in the kernel's receive queue: an idle connection is not cut by stop() then (server.cpp).
  bool input_waiting() const noexcept;

  // The streaming form's side (stream.hpp). Each refuses a call from another loop than the server's with
  // tern::error::wrong_loop before it touches the connection.
  task<io_result<std::size_t>> read_body_some(mutable_buffer b) override;
  bool body_done() const noexcept override {
    return body_left_ == 0 && (framing_ != body_framing::chunked || chunked_.done());
  }
  std::optional<std::uint64_t> body_length() const noexcept override;
  const field_list& body_trailers() const noexcept override { return no_trailers_; }
  task<std::error_code> send_head(response_stream& s, int status, const fields& f,
                                  std::optional<std::uint64_t> length) override;
  task<std::error_code> send_body(response_stream& s, const_buffer b) override;
  task<std::error_code> send_end(response_stream& s, const fields* trailers) override;

  connection* prev_ = nullptr;  // in the server's list
  connection* next_ = nullptr;
  bool idle_ = false;           // waiting for a request's first byte, nothing to write
  stop_listener* taken_ = nullptr;  // the protocol serving the connection after a hand-over (protocol.hpp)

 private:
  task<std::error_code> read_head();
  task<std::error_code> read_body(std::string_view& body);
  bool body_at_hand(std::string_view& body) noexcept;
  task<io_result<std::size_t>> read_more(clock::time_point deadline);
  task<std::error_code> flush();
  task<std::error_code> write_now(std::string_view data);
  task<bool> run_stream(const router::route& route, request& req, bool close);
  task<void> hand_over(response& r);
  bool on_loop() const noexcept { return server_->context().running_here(); }
  // HTTP/2 (server_options::http2): the connection preface seen, an Upgrade: h2c asked for, the hand-over.
  bool http2_preface() const noexcept;
  bool h2c_requested(const request_head& h) const noexcept;
  task<void> upgrade_h2c();
  task<void> take_over(const request_head* upgraded, std::string_view body, std::string_view settings);
  bool make_room();
  void keep_room_after_head();
  std::size_t max_capacity() const noexcept;
  clock::time_point body_deadline(std::uint64_t received) const noexcept;
  clock::time_point loop_now() const noexcept;
  // The deadlines of the plain socket's reads and writes (server.cpp, "I/O deadlines"): watch before awaiting op,
  // watched_done with its result.
  struct watched {
    void* op = nullptr;  // the operation waiting, which the node cancels
    void (*cancel)(void*) noexcept = nullptr;
    std::uint64_t deadline_ns = 0;
    bool expired = false;  // the node cancelled it
  };
  template <class Op>
  void watch(watched& w, Op& op, clock::time_point deadline) noexcept {
    watch(w, &op, [](void* o) noexcept { static_cast<Op*>(o)->cancel(); }, deadline);
  }
  void watch(watched& w, void* op, void (*cancel)(void*) noexcept, clock::time_point deadline) noexcept;
  std::error_code watched_done(watched& w, std::error_code ec) noexcept;
  // A plain socket's read or write awaited by the connection's own task (read_head): watched by the deadline node,
  // and not bound to the task's stop token, since every cancel of the server's group comes with a cut() of each
  // connection (server::cut_all), which closes the socket under the operation. Not cancellable_operation, so a
  // task's await_transform passes it through (no stop_callback registered and unregistered per operation). The
  // operations a handler awaits (a streaming handler's body reads and writes) stay bound: its own timeouts and
  // stops must reach them.
  // A class with a constructor, not an aggregate: g++ 12 destroys an aggregate temporary of an awaiting
  // expression twice (design.md, "g++ 12 miscompiles two coroutine shapes"), and Op's destructor forgets the op.
  // The operation is made by `make` in place (no copy of it).
  template <class Op>
  struct [[nodiscard]] own_op {
    template <class Make>
    own_op(connection& conn, watched& watch, Make&& make, std::uint64_t deadline) noexcept
        : c(conn), w(watch), op(make()), deadline_ns(deadline) {}
    connection& c;
    watched& w;
    Op op;
    std::uint64_t deadline_ns;
    bool await_ready() noexcept { return op.await_ready(); }
    bool await_suspend(std::coroutine_handle<> h) noexcept {
      c.watch_ns(w, &op, [](void* o) noexcept { static_cast<Op*>(o)->cancel(); }, deadline_ns);
      return op.await_suspend(h);
    }
    io_result<std::size_t> await_resume() noexcept {
      io_result<std::size_t> r = op.await_resume();
      r.ec = c.watched_done(w, r.ec);
      return r;
    }
  };
  void watch_ns(watched& w, void* op, void (*cancel)(void*) noexcept, std::uint64_t deadline_ns) noexcept;
  bool file_watch(std::uint64_t deadline_ns) noexcept;
  static void on_watch(tern::detail::timer_node* n) noexcept;
  bool write_head(int status, const fields& f, std::optional<std::uint64_t> body_size, bool chunked, bool close,
                  version v, bool close_field = false);
  bool answer(const response& r, bool head_only, bool close, version v);
  void answer_error(int status, std::string_view why);

  server* server_;
  const server_options* opts_;
  // The bytes go through secure_ when the server has a transport (TLS), else straight through socket_ (each I/O
  // site branches, so the plain path has no task or virtual call between it and the socket). The branches are
  // if/else statements: g++ 12 miscompiles `c ? co_await a : co_await b` (a crash in the HTTPS tests).
  net::tcp_socket socket_;
  std::unique_ptr<transport> secure_;
  net::endpoint remote_;
  request_parser parser_;
  chunked_decoder chunked_;
  std::size_t capacity_;
  std::unique_ptr<char[]> buffer_;
  std::size_t begin_ = 0;   // unread bytes: [begin_, end_)
  std::size_t end_ = 0;
  std::size_t pinned_ = 0;  // bytes before it stay in place (the current request's head)
  std::string body_;        // a body that did not come whole with its head
  out_buffer out_;          // responses not yet written
  std::string allow_;       // a 405's Allow value, its memory kept
  std::uint64_t requests_ = 0;
  // Requests answered since the last read, and how many the connection answers before it lets others run.
  static constexpr std::uint32_t pipelined_burst = 16;
  std::uint32_t served_since_read_ = 0;
  clock::time_point body_start_{};
  struct deadline_node : tern::detail::timer_node {
    connection* owner = nullptr;
  };
  deadline_node watch_;  // on the loop's wheel at some operation's deadline, or not
  watched reading_;
  watched writing_;
  // The streaming form's body state: its framing, and the Content-Length bytes still to read.
  body_framing framing_ = body_framing::none;
  std::uint64_t body_left_ = 0;
  version version_ = http11;
  bool head_only_ = false;
  bool close_ = false;
  field_list no_trailers_;
};

}  // namespace tern::http::detail
