// The calling thread's errno as a std::error_code: what a failed system call hands back to tern's caller.
#pragma once

#include <cerrno>
#include <system_error>

namespace tern::detail {

inline std::error_code last_error() noexcept { return {errno, std::system_category()}; }

}  // namespace tern::detail
