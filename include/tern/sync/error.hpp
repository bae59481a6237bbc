// tern/sync/error.hpp
//
// The errors of tern::sync are tern's own (tern/error.hpp); sync::error names the same enum, so
// tern::sync::error::closed and tern::error::closed are one value. A wait that is cancelled (cancel(), with_stop)
// reports tern::error::operation_canceled and one that times out tern::error::timed_out, as every operation of tern
// does; the channel adds closed (a send is refused, or a receive found it closed and drained) and full (try_send on
// a full bounded channel).
#pragma once

#include "tern/error.hpp"

namespace tern::sync {
using tern::error;
}  // namespace tern::sync
