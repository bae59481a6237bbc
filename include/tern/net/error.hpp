// tern/net/error.hpp
//
// The errors of tern::net are tern's own (tern/error.hpp); net::error names the same enum, so both
// tern::net::error::eof and tern::error::eof work. Everything the kernel reports stays a std::system_category code.
#pragma once

#include "tern/error.hpp"

namespace tern::net {
using tern::error;
}  // namespace tern::net
