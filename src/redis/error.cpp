// The "tern.redis" error category (see tern/redis/error.hpp).
#include "tern/redis/error.hpp"

namespace tern::redis {

namespace detail {

constinit const error_category_impl error_category_instance;
constinit const condition_category_impl condition_category_instance;

std::string error_category_impl::message(int value) const {
  switch (static_cast<error>(value)) {
    case error::server_error: return "the server answered with an error";
    case error::wrong_type: return "the server refused it: an operation against a key holding the wrong type";
    case error::no_auth: return "the server refused it: authentication required";
    case error::wrong_pass: return "the server refused it: wrong user name or password";
    case error::no_perm: return "the server refused it: the user has no permission";
    case error::exec_abort: return "the server refused the transaction: a command was refused when queued";
    case error::busy: return "the server refused it: a script is running";
    case error::loading: return "the server refused it: it is loading its data set";
    case error::read_only: return "the server refused it: a write to a read-only replica";
    case error::no_script: return "the server refused it: no script with that SHA1";
    case error::unexpected_type: return "the reply's type does not convert to the type asked for";
    case error::null_value: return "a null reply for a type that cannot hold one";
    case error::not_a_number: return "the reply is not the number asked for";
    case error::protocol_error: return "a malformed reply (not RESP)";
    case error::bulk_too_large: return "a bulk string in the reply is longer than the limit";
    case error::nesting_too_deep: return "the reply nests aggregates deeper than the limit";
    case error::aggregate_too_large: return "an aggregate in the reply has more elements than the limit";
    case error::line_too_long: return "a line of the reply is longer than the limit";
    case error::not_connected: return "not connected to the server";
    case error::connection_lost: return "the connection failed before the reply arrived (the command may have run)";
    case error::closed: return "the connection was closed";
    case error::transaction_aborted: return "the transaction was aborted: a watched key changed";
    case error::reserved_command: return "this command would desynchronise a shared connection; see command()";
    case error::resp3_required: return "pub/sub needs RESP3, which the server does not speak";
  }
  return "unknown Redis error";
}

std::error_condition error_category_impl::default_error_condition(int value) const noexcept {
  switch (static_cast<error>(value)) {
    case error::protocol_error: return std::errc::protocol_error;
    case error::bulk_too_large:
    case error::nesting_too_deep:
    case error::aggregate_too_large:
    case error::line_too_long: return std::errc::message_size;
    case error::not_connected:
    case error::closed: return std::errc::not_connected;
    case error::connection_lost: return std::errc::connection_aborted;
    case error::reserved_command: return std::errc::invalid_argument;
    case error::resp3_required: return std::errc::not_supported;
    default: return {value, *this};
  }
}

bool error_category_impl::equivalent(int value, const std::error_condition& c) const noexcept {
  if (c.category() == condition_category_instance) {
    return c.value() == static_cast<int>(condition::server_error) && value >= static_cast<int>(error::server_error) &&
           value <= static_cast<int>(error::no_script);
  }
  return default_error_condition(value) == c;
}

std::string condition_category_impl::message(int value) const {
  if (static_cast<condition>(value) == condition::server_error) return "the server answered with an error";
  return "unknown Redis condition";
}

}  // namespace detail

error server_error_code(std::string_view text) noexcept {
  const std::string_view word = text.substr(0, text.find(' '));
  struct entry {
    std::string_view word;
    error code;
  };
  static constexpr entry known[] = {
      {"WRONGTYPE", error::wrong_type}, {"NOAUTH", error::no_auth},       {"WRONGPASS", error::wrong_pass},
      {"NOPERM", error::no_perm},       {"EXECABORT", error::exec_abort}, {"BUSY", error::busy},
      {"LOADING", error::loading},      {"READONLY", error::read_only},   {"NOSCRIPT", error::no_script},
  };
  for (const entry& e : known) {
    if (e.word == word) return e.code;
  }
  return error::server_error;
}

bool is_server_error(const std::error_code& ec) noexcept { return ec == condition::server_error; }

}  // namespace tern::redis
