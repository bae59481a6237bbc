// tern/run.hpp
//
// tern::run(main_task): the entry point for main(). Creates a loop, runs the task on it to completion, and returns
// its value (or rethrows its exception).
#pragma once

#include <utility>

#include "tern/io_context.hpp"
#include "tern/spawn.hpp"
#include "tern/task.hpp"

namespace tern {

// Runs t on a new loop made with opts; returns t's value or rethrows its exception.
template <class T>
T run(task<T> t, io_context_options opts = {}) {
  io_context ctx(opts);
  return ctx.block_on(std::move(t));
}

}  // namespace tern
