// Allocation counting for the steady-state tests: the executable that links counting_new.cpp replaces the global
// operator new and delete, and counts every allocation between start_counting() and stop_counting().
#pragma once

#include <cstddef>

namespace tern_test {

void start_counting() noexcept;
// Stops counting; the number of allocations since start_counting().
std::size_t stop_counting() noexcept;

}  // namespace tern_test
