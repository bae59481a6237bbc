// tern/redis/error.hpp
//
// What tern::redis reports, in one category ("tern.redis"): the server's own errors, by their first word, replies
// that do not convert to the type asked for, replies that break the protocol or a limit, and what became of a
// command whose connection failed.
//
// A server error keeps the server's text (redis::result<T>::message(): "WRONGTYPE Operation against a key holding
// the wrong kind of value"); its code says which kind it is, and every one of them compares equal to
// redis::condition::server_error, so code that only asks "did the server refuse it" tests that. Malformed replies
// and broken limits compare equal to std::errc::protocol_error or std::errc::message_size; the outcomes of a
// failed connection to std::errc::not_connected or std::errc::connection_aborted.
//
// | redis::error                      | what                                                    | std::errc          |
// |-----------------------------------|---------------------------------------------------------|--------------------|
// | server_error, wrong_type, no_auth, | the server answered with an error (-ERR, -WRONGTYPE,    | (condition         |
// | wrong_pass, no_perm, exec_abort,   | -NOAUTH, -WRONGPASS, -NOPERM, -EXECABORT, -BUSY,        |  server_error)     |
// | busy, loading, read_only, no_script| -LOADING, -READONLY, -NOSCRIPT)                         |                    |
// | unexpected_type                   | the reply's type does not convert to the one asked for  | (none)             |
// | null_value                        | a null reply for a type that cannot hold it             | (none)             |
// | not_a_number                      | text that is not the integer or double asked for        | (none)             |
// | protocol_error                    | bytes that are not RESP (the connection is closed)      | protocol_error     |
// | bulk_too_large, nesting_too_deep, | a reply over the parser's limits (the connection is     | message_size       |
// | aggregate_too_large, line_too_long|   closed: the rest of the reply cannot be skipped)      |                    |
// | not_connected                     | no connection, and the command may not wait for one     | not_connected      |
// | connection_lost                   | sent, but the connection failed before the reply: the   | connection_aborted |
// |                                   |   server may or may not have run it                     |                    |
// | closed                            | the connection was closed by close()                    | not_connected      |
// | transaction_aborted               | EXEC answered null: a WATCHed key changed               | (none)             |
// | reserved_command                  | a command that would desynchronise the connection       | invalid_argument   |
// |                                   |   (SUBSCRIBE, MONITOR, MULTI, HELLO, ...: see command())|                    |
// | resp3_required                    | pub/sub on a server that speaks RESP2 only              | not_supported      |
#pragma once

#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace tern::redis {

enum class error {
  server_error = 1,     // -ERR, or an error kind without a code of its own
  wrong_type,           // -WRONGTYPE
  no_auth,              // -NOAUTH: authentication required
  wrong_pass,           // -WRONGPASS: wrong user name or password
  no_perm,              // -NOPERM: the ACL does not allow it
  exec_abort,           // -EXECABORT: a command of a transaction was refused when queued
  busy,                 // -BUSY: a script is running
  loading,              // -LOADING: the server is loading its data set
  read_only,            // -READONLY: a write to a replica
  no_script,            // -NOSCRIPT: EVALSHA of an unknown script
  unexpected_type,      // the reply's type does not convert to the type asked for
  null_value,           // a null reply where the type asked for has no null
  not_a_number,         // text that is not the number asked for (or out of its range)
  protocol_error,       // bytes that are not RESP
  bulk_too_large,       // a bulk string longer than the limit
  nesting_too_deep,     // aggregates nested deeper than the limit
  aggregate_too_large,  // an aggregate with more elements than the limit
  line_too_long,        // a simple string, error or number line longer than the limit
  not_connected,        // no connection, and the command may not wait for one (or waited too long)
  connection_lost,      // sent, then the connection failed before the reply: the server may have run it
  closed,               // close() was called
  transaction_aborted,  // EXEC answered null: a WATCHed key changed
  reserved_command,     // a command that would desynchronise a shared connection
  resp3_required,       // pub/sub needs RESP3 (HELLO 3), which the server did not accept
};

// Conditions that group the codes above.
enum class condition {
  server_error = 1,  // every error the server answered with
};

namespace detail {
class error_category_impl final : public std::error_category {
 public:
  constexpr error_category_impl() noexcept = default;
  const char* name() const noexcept override { return "tern.redis"; }
  std::string message(int value) const override;
  std::error_condition default_error_condition(int value) const noexcept override;
  bool equivalent(int value, const std::error_condition& c) const noexcept override;
};
class condition_category_impl final : public std::error_category {
 public:
  constexpr condition_category_impl() noexcept = default;
  const char* name() const noexcept override { return "tern.redis.condition"; }
  std::string message(int value) const override;
};
extern const error_category_impl error_category_instance;
extern const condition_category_impl condition_category_instance;

// A success, built once: a default std::error_code calls system_category() (out of line in libstdc++), and every
// command would build several. Copied only by requests, conversions and parses, which run after static
// initialisation.
inline const std::error_code no_error{};
}  // namespace detail

// The "tern.redis" category.
inline const std::error_category& category() noexcept { return detail::error_category_instance; }
inline std::error_code make_error_code(error e) noexcept { return {static_cast<int>(e), category()}; }
inline std::error_condition make_error_condition(condition c) noexcept {
  return {static_cast<int>(c), detail::condition_category_instance};
}

// The code of a server error's text, from its first word ("WRONGTYPE ..." is wrong_type; unknown words are
// server_error).
error server_error_code(std::string_view text) noexcept;

// True for every error the server answered with (ec == condition::server_error).
bool is_server_error(const std::error_code& ec) noexcept;

}  // namespace tern::redis

template <>
struct std::is_error_code_enum<tern::redis::error> : std::true_type {};
template <>
struct std::is_error_condition_enum<tern::redis::condition> : std::true_type {};
