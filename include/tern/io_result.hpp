// tern/io_result.hpp
//
// io_result<T>: the outcome of an operation that produces a value. ec is set on failure; value is then what the
// operation documents (default-constructed, or for transfers the byte count that moved before the error).
// Structured bindings read both: `auto [ec, n] = co_await s.read_some(buf);`.
#pragma once

#include <system_error>

namespace tern {

template <class T>
struct io_result {
  std::error_code ec;
  T value;
};

}  // namespace tern
