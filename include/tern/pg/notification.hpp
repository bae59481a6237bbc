// tern/pg/notification.hpp
//
// notification: one NOTIFY a listening connection received (connection::listen, next_notification).
//
//   co_await conn.listen("jobs");
//   for (;;) {
//     auto [ec, n] = co_await conn.next_notification();
//     if (ec) break;
//     handle(n.channel(), n.payload());
//   }
#pragma once

#include <coroutine>
#include <memory>
#include <string_view>

#include "tern/io_context.hpp"
#include "tern/io_result.hpp"

struct pgNotify;  // libpq's PGnotify

namespace tern::pg {

namespace detail {
struct connection_state;
struct notify_deleter {
  void operator()(pgNotify* n) const noexcept;
};
}  // namespace detail

class notification {
 public:
  notification() noexcept = default;
  // Takes ownership of a PGnotify.
  explicit notification(pgNotify* n) noexcept : n_(n) {}

  // The channel it was sent on, its payload ("" when none), and the server process that sent it.
  std::string_view channel() const noexcept;
  std::string_view payload() const noexcept;
  int sender_pid() const noexcept;
  explicit operator bool() const noexcept { return n_ != nullptr; }

 private:
  std::unique_ptr<pgNotify, detail::notify_deleter> n_;
};

namespace detail {
// The awaiter of next_notification(): yields io_result<notification>.
class [[nodiscard]] notification_wait {
 public:
  explicit notification_wait(connection_state* s) noexcept : s_(s) {}
  notification_wait(const notification_wait& o) noexcept : s_(o.s_) {}
  notification_wait& operator=(const notification_wait&) = delete;
  ~notification_wait();

  bool await_ready() noexcept;
  void await_suspend(std::coroutine_handle<> h) noexcept;
  io_result<notification> await_resume() noexcept { return {ec_, notification(n_)}; }
  void cancel() noexcept;
  io_context& context() const noexcept;

  // The connection's side.
  void complete(pgNotify* n, std::error_code ec) noexcept;

 private:
  connection_state* s_;
  std::coroutine_handle<> waiter_;
  pgNotify* n_ = nullptr;
  std::error_code ec_;
  bool waiting_ = false;
};
}  // namespace detail

}  // namespace tern::pg
