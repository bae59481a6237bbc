// tern/pg/error.hpp
//
// The errors of tern::pg, in two categories:
//
// | category          | values                         | message                                                |
// |-------------------|--------------------------------|--------------------------------------------------------|
// | "tern.pg"         | pg::error (below)              | tern's own text                                        |
// | "tern.pg.sqlstate"| the server's SQLSTATE, encoded | "SQLSTATE 23505 (unique_violation)"                    |
//
// A query the server refused reports its SQLSTATE as an error code, so it can be compared without strings:
//
//   if (ec == tern::pg::sqlstate::unique_violation) ...    // exact
//   if (ec == std::errc::operation_canceled) ...           // 57014 query_canceled, among its equivalents
//   tern::pg::sqlstate_text(ec)                            // "23505"
//
// The server's own words (the message, its detail and hint, the constraint) stay with the result that failed:
// pg::result::error_message(), error_field(). Connection errors (connecting, a connection lost) keep libpq's
// message in connection::error_message(). Errors of the socket and of tern itself (timed_out, operation_canceled,
// wrong_loop) pass through unchanged.
//
// SQLSTATE codes are five characters from 0-9 and A-Z; the value of the error code is that string read as a
// base-36 number, so every code the server can send has one, and "00000" (success) is never an error.
#pragma once

#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace tern::pg {

enum class error {
  connection_failed = 1,  // connecting failed: refused, authentication, TLS, an unknown database (see the message)
  connection_lost,        // the connection broke while the operation was under way, or is broken already
  connection_closed,      // the connection (or the pool) was closed by this side
  pipeline_aborted,       // a query before it in the same batch failed, so the server skipped it
  bad_response,           // the server's answer made no sense to libpq (or was not of the kind asked for)
  unexpected_null,        // a NULL field read as a type that cannot hold one (read it as std::optional<T>)
  bad_value,              // a field that does not read as the type asked for (range, syntax, its format)
  no_such_column,         // a column name the result does not have, or an index past its last column
  unsupported,            // a field type that has no conversion to the type asked for, in the format it came in
  transaction_rolled_back,  // commit() of a transaction the server had aborted: it rolled back instead
  not_in_copy,            // a COPY stream used after it ended, or a COPY statement that did not start one
  cancel_failed,          // the cancel request could not be delivered to the server
};

namespace detail {
// A SQLSTATE's five characters as a base-36 number.
constexpr int encode_sqlstate(const char (&s)[6]) noexcept {
  int v = 0;
  for (int i = 0; i < 5; ++i) v = v * 36 + (s[i] <= '9' ? s[i] - '0' : s[i] - 'A' + 10);
  return v;
}
}  // namespace detail

// Common SQLSTATE codes by name: each compares equal to the error codes of its state. Every other state has a
// code too, without a name here: sqlstate_code("22P02").
enum class sqlstate : int {
  unique_violation = detail::encode_sqlstate("23505"),
  foreign_key_violation = detail::encode_sqlstate("23503"),
  not_null_violation = detail::encode_sqlstate("23502"),
  check_violation = detail::encode_sqlstate("23514"),
  division_by_zero = detail::encode_sqlstate("22012"),
  invalid_text_representation = detail::encode_sqlstate("22P02"),
  numeric_value_out_of_range = detail::encode_sqlstate("22003"),
  syntax_error = detail::encode_sqlstate("42601"),
  undefined_table = detail::encode_sqlstate("42P01"),
  undefined_column = detail::encode_sqlstate("42703"),
  undefined_function = detail::encode_sqlstate("42883"),
  duplicate_table = detail::encode_sqlstate("42P07"),
  insufficient_privilege = detail::encode_sqlstate("42501"),
  invalid_password = detail::encode_sqlstate("28P01"),
  invalid_authorization = detail::encode_sqlstate("28000"),
  query_canceled = detail::encode_sqlstate("57014"),
  admin_shutdown = detail::encode_sqlstate("57P01"),
  serialization_failure = detail::encode_sqlstate("40001"),
  deadlock_detected = detail::encode_sqlstate("40P01"),
  in_failed_transaction = detail::encode_sqlstate("25P02"),
  read_only_transaction = detail::encode_sqlstate("25006"),
  invalid_catalog_name = detail::encode_sqlstate("3D000"),
  too_many_connections = detail::encode_sqlstate("53300"),
  bad_copy_format = detail::encode_sqlstate("22P04"),
  raise_exception = detail::encode_sqlstate("P0001"),
};

// The error code of a five-character SQLSTATE ("42P01"); an empty code for anything else.
std::error_code sqlstate_code(std::string_view state) noexcept;
// The five characters of an error code of the sqlstate category; empty for any other error code.
std::string sqlstate_text(const std::error_code& ec);

namespace detail {
class error_category_impl final : public std::error_category {
 public:
  constexpr error_category_impl() noexcept = default;
  const char* name() const noexcept override { return "tern.pg"; }
  std::string message(int value) const override;
  std::error_condition default_error_condition(int value) const noexcept override;
};
class sqlstate_category_impl final : public std::error_category {
 public:
  constexpr sqlstate_category_impl() noexcept = default;
  const char* name() const noexcept override { return "tern.pg.sqlstate"; }
  std::string message(int value) const override;
  std::error_condition default_error_condition(int value) const noexcept override;
};
extern const error_category_impl error_category_instance;
extern const sqlstate_category_impl sqlstate_category_instance;
}  // namespace detail


// The category of pg::error ("tern.pg").
inline const std::error_category& category() noexcept { return detail::error_category_instance; }
// The category of the server's SQLSTATE codes ("tern.pg.sqlstate").
inline const std::error_category& sqlstate_category() noexcept { return detail::sqlstate_category_instance; }

inline std::error_code make_error_code(error e) noexcept { return {static_cast<int>(e), category()}; }
inline std::error_code make_error_code(sqlstate s) noexcept { return {static_cast<int>(s), sqlstate_category()}; }

}  // namespace tern::pg

template <>
struct std::is_error_code_enum<tern::pg::error> : std::true_type {};
template <>
struct std::is_error_code_enum<tern::pg::sqlstate> : std::true_type {};
