// tern/net/error.hpp
//
// Errors of tern's own. Everything the kernel reports stays a std::system_category code (compare with
// std::errc::connection_reset, std::errc::operation_canceled, ...); the only addition is eof, because a read that
// returns zero bytes is not an errno but must not look like success to a loop that reads until done.
#pragma once

#include <system_error>
#include <type_traits>

namespace tern::net {

enum class error {
  eof = 1,  // the peer closed its sending side: no more data will arrive
};

// The category of tern::net::error ("tern.net").
const std::error_category& net_category() noexcept;

inline std::error_code make_error_code(error e) noexcept { return {static_cast<int>(e), net_category()}; }

}  // namespace tern::net

template <>
struct std::is_error_code_enum<tern::net::error> : std::true_type {};
