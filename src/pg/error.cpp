// The two error categories of tern::pg (see tern/pg/error.hpp).
#include "tern/pg/error.hpp"

#include <array>
#include <cerrno>

namespace tern::pg {

namespace detail {

constinit const error_category_impl error_category_instance;
constinit const sqlstate_category_impl sqlstate_category_instance;

namespace {

constexpr int states = 36 * 36 * 36 * 36 * 36;

// The names of the SQLSTATE codes that have one in pg::sqlstate, for messages.
struct named_state {
  sqlstate code;
  const char* name;
};
constexpr std::array named_states{
    named_state{sqlstate::unique_violation, "unique_violation"},
    named_state{sqlstate::foreign_key_violation, "foreign_key_violation"},
    named_state{sqlstate::not_null_violation, "not_null_violation"},
    named_state{sqlstate::check_violation, "check_violation"},
    named_state{sqlstate::division_by_zero, "division_by_zero"},
    named_state{sqlstate::invalid_text_representation, "invalid_text_representation"},
    named_state{sqlstate::numeric_value_out_of_range, "numeric_value_out_of_range"},
    named_state{sqlstate::syntax_error, "syntax_error"},
    named_state{sqlstate::undefined_table, "undefined_table"},
    named_state{sqlstate::undefined_column, "undefined_column"},
    named_state{sqlstate::undefined_function, "undefined_function"},
    named_state{sqlstate::duplicate_table, "duplicate_table"},
    named_state{sqlstate::insufficient_privilege, "insufficient_privilege"},
    named_state{sqlstate::invalid_password, "invalid_password"},
    named_state{sqlstate::invalid_authorization, "invalid_authorization_specification"},
    named_state{sqlstate::query_canceled, "query_canceled"},
    named_state{sqlstate::admin_shutdown, "admin_shutdown"},
    named_state{sqlstate::serialization_failure, "serialization_failure"},
    named_state{sqlstate::deadlock_detected, "deadlock_detected"},
    named_state{sqlstate::in_failed_transaction, "in_failed_sql_transaction"},
    named_state{sqlstate::read_only_transaction, "read_only_sql_transaction"},
    named_state{sqlstate::invalid_catalog_name, "invalid_catalog_name"},
    named_state{sqlstate::too_many_connections, "too_many_connections"},
    named_state{sqlstate::bad_copy_format, "bad_copy_file_format"},
    named_state{sqlstate::raise_exception, "raise_exception"},
};

std::string text_of(int value) {
  std::string s(5, '0');
  for (int i = 4; i >= 0; --i) {
    const int d = value % 36;
    s[static_cast<std::size_t>(i)] = static_cast<char>(d < 10 ? '0' + d : 'A' + d - 10);
    value /= 36;
  }
  return s;
}

}  // namespace

std::string error_category_impl::message(int value) const {
  switch (static_cast<error>(value)) {
    case error::connection_failed: return "could not connect to the server";
    case error::connection_lost: return "the connection to the server was lost";
    case error::connection_closed: return "the connection was closed";
    case error::pipeline_aborted: return "not run: an earlier query of the same pipeline batch failed";
    case error::bad_response: return "unexpected response from the server";
    case error::unexpected_null: return "the field is NULL";
    case error::bad_value: return "the field's value does not fit the type asked for";
    case error::no_such_column: return "no such column";
    case error::unsupported: return "no conversion from the field's type to the type asked for";
    case error::transaction_rolled_back: return "the transaction was rolled back instead of committed";
    case error::not_in_copy: return "no COPY is under way";
    case error::cancel_failed: return "the cancel request could not be sent";
  }
  return "unknown tern.pg error";
}

std::error_condition error_category_impl::default_error_condition(int value) const noexcept {
  switch (static_cast<error>(value)) {
    case error::connection_failed: return std::errc::connection_refused;
    case error::connection_lost: return std::errc::connection_reset;
    case error::bad_value: return std::errc::result_out_of_range;
    case error::no_such_column: return std::errc::invalid_argument;
    case error::unsupported: return std::errc::not_supported;
    default: return {value, *this};
  }
}

std::string sqlstate_category_impl::message(int value) const {
  if (value <= 0 || value >= states) return "unknown SQLSTATE";
  std::string m = "SQLSTATE " + text_of(value);
  for (const named_state& n : named_states) {
    if (static_cast<int>(n.code) == value) {
      m += " (";
      m += n.name;
      m += ")";
      break;
    }
  }
  return m;
}

std::error_condition sqlstate_category_impl::default_error_condition(int value) const noexcept {
  const std::string s = value > 0 && value < states ? text_of(value) : std::string();
  if (value == static_cast<int>(sqlstate::query_canceled)) return std::errc::operation_canceled;
  if (s.starts_with("08") || value == static_cast<int>(sqlstate::admin_shutdown)) return std::errc::connection_aborted;
  if (s.starts_with("28") || value == static_cast<int>(sqlstate::insufficient_privilege)) {
    return std::errc::permission_denied;
  }
  if (s.starts_with("22")) return std::errc::invalid_argument;
  return {value, *this};
}

}  // namespace detail

std::error_code sqlstate_code(std::string_view state) noexcept {
  if (state.size() != 5) return {};
  int v = 0;
  for (char c : state) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'A' && c <= 'Z') {
      d = c - 'A' + 10;
    } else {
      return {};
    }
    v = v * 36 + d;
  }
  if (v == 0) return {};
  return {v, sqlstate_category()};
}

std::string sqlstate_text(const std::error_code& ec) {
  if (ec.category() != sqlstate_category() || ec.value() <= 0 || ec.value() >= detail::states) return {};
  return detail::text_of(ec.value());
}

}  // namespace tern::pg
