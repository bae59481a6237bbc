// tern/sync/error.hpp
//
// The errors of tern::sync. A wait that is cancelled (cancel(), with_stop) reports std::errc::operation_canceled
// and one that times out (with_timeout, with_deadline) std::errc::timed_out, as every operation of tern does; the
// only errors of the primitives' own are those of a channel, below.
#pragma once

#include <system_error>
#include <type_traits>

namespace tern::sync {

enum class error {
  closed = 1,  // the channel is closed: a send is refused, or a receive found it closed and drained
  full,        // try_send found a bounded channel full (and no receiver waiting)
};

// The category of tern::sync::error ("tern.sync").
const std::error_category& sync_category() noexcept;

inline std::error_code make_error_code(error e) noexcept { return {static_cast<int>(e), sync_category()}; }

}  // namespace tern::sync

template <>
struct std::is_error_code_enum<tern::sync::error> : std::true_type {};
