// Every loop of the process, for metrics::process_snapshot (private to the library; defined in metrics.cpp).
#pragma once

#include "tern/metrics.hpp"

namespace tern {
class io_context;
}

namespace tern::detail {

// The live loops, linked through io_context's registry_prev_/registry_next_, and the counts of the destroyed ones,
// under one mutex: taken when a loop is made or destroyed and by process_snapshot, never on a loop's hot path.
struct loop_registry {
  static void add(io_context* c);
  // From c's destructor, with its counters still alive: they join the destroyed loops' totals.
  static void retire(io_context* c) noexcept;
  static metrics::loop_snapshot total();
};

}  // namespace tern::detail
