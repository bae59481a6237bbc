// tern/error.hpp
//
// tern's own errors, in one category ("tern").
//
// What the kernel reports stays a std::system_category code (connection_reset, connection_refused, ...). What tern
// itself decides is a tern::error: a cancellation, a timeout, an operation started on the wrong loop, the end of a
// stream, a closed channel, a line over its limit. Each one that has a standard meaning compares equal to the
// std::errc value of that meaning, so code written against the standard conditions keeps working:
//
//   ec == tern::error::timed_out            exact: tern's timeout
//   ec == std::errc::timed_out              also true for it (and for a kernel ETIMEDOUT)
//
// | tern::error            | message                                             | equal to std::errc       |
// |------------------------|-----------------------------------------------------|--------------------------|
// | operation_canceled     | operation canceled                                  | operation_canceled       |
// | timed_out              | operation timed out                                 | timed_out                |
// | wrong_loop             | used from a thread that does not run its loop       | (none)                   |
// | eof                    | end of stream: the peer closed the connection       | (none)                   |
// | closed                 | the channel is closed                               | (none)                   |
// | full                   | the channel is full                                 | resource_unavailable_try_again |
// | line_too_long          | the line is longer than the reader's limit          | message_size             |
// | operation_in_progress  | an operation is pending on the object               | operation_in_progress    |
// | message_truncated      | a datagram (or its descriptors) did not fit         | message_size             |
// | stale_socket_file      | a Unix socket file nobody listens on is in the way  | address_in_use           |
// | misaligned             | O_DIRECT I/O whose buffer, offset or size is not aligned | invalid_argument    |
// | table_full             | the loop's table of registered files or buffers is full  | (none)              |
//
// Every cancellation tern reports is tern::error::operation_canceled, whichever way it came (cancel(), a stop
// token, a closed socket, the kernel's ECANCELED), and every deadline tern::error::timed_out.
//
// One question has a spelling in every library: did the peer end the stream? Each keeps its own code, because
// the differences matter (a clean end, or one inside a message, or without TLS's close_notify, or with a
// WebSocket close code), and each compares equal to one condition that asks only that:
//
//   if (ec == tern::condition::end_of_stream) ...   // tern::error::eof, http::error::partial_message,
//                                                   // tls::error::truncated, any ws::close_code
//
// A reset (std::errc::connection_reset) is not an end of stream but a failure: it matches nothing here.
#pragma once

#include <string>
#include <system_error>
#include <type_traits>

namespace tern {

enum class error {
  operation_canceled = 1,  // cancel(), a stop request, or close() of the object under a pending operation
  timed_out,               // with_timeout / with_deadline: the deadline passed first
  wrong_loop,              // an I/O object was used from a thread that is not running the loop it belongs to
  eof,                     // the peer closed its sending side: no more data will arrive
  closed,                  // the channel is closed: a send is refused, or a receive found it closed and drained
  full,                    // try_send found a bounded channel full (and no receiver waiting)
  line_too_long,           // buffered_reader: no delimiter within the reader's limit
  operation_in_progress,   // the object has a pending operation (release() of a socket in use)
  message_truncated,       // a datagram longer than the buffer, or more passed descriptors than room for them
  stale_socket_file,       // bind of a Unix socket: a socket file nobody listens on is in the way
  misaligned,              // O_DIRECT file I/O whose buffer address, offset or size breaks the file's alignment
  table_full,              // io_uring: no free slot in the loop's table of registered files or of registered buffers
};

namespace detail {
class error_category_impl final : public std::error_category {
 public:
  constexpr error_category_impl() noexcept = default;
  const char* name() const noexcept override { return "tern"; }
  std::string message(int value) const override;
  std::error_condition default_error_condition(int value) const noexcept override;
};
// Constant-initialised in the library, so making an error_code reads no guard variable.
extern const error_category_impl error_category_instance;
// An empty error_code, built once: a default-constructed one calls libstdc++'s out-of-line system_category(),
// and every operation that succeeds reports one. A copy is two moves. Read only by operations, which run after
// static initialisation.
inline const std::error_code success{};
}  // namespace detail

// The category of tern::error.
inline const std::error_category& category() noexcept { return detail::error_category_instance; }

inline std::error_code make_error_code(error e) noexcept {
  return {static_cast<int>(e), detail::error_category_instance};
}

// Conditions (std::error_condition) that the codes of several categories compare equal to (see above).
enum class condition {
  end_of_stream = 1,  // the peer ended the stream: no more data will arrive (cleanly or not; not by a reset)
};

namespace detail {
class condition_category_impl final : public std::error_category {
 public:
  constexpr condition_category_impl() noexcept = default;
  const char* name() const noexcept override { return "tern.condition"; }
  std::string message(int value) const override;
  bool equivalent(const std::error_code& code, int value) const noexcept override;
};
extern const condition_category_impl condition_category_instance;
}  // namespace detail

// The category of tern::condition. Other categories say which of their codes match a condition (their
// equivalent()); this one knows tern's own.
inline const std::error_category& condition_category() noexcept { return detail::condition_category_instance; }

inline std::error_condition make_error_condition(condition c) noexcept {
  return {static_cast<int>(c), detail::condition_category_instance};
}

}  // namespace tern

template <>
struct std::is_error_code_enum<tern::error> : std::true_type {};
template <>
struct std::is_error_condition_enum<tern::condition> : std::true_type {};
