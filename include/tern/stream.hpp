// tern/stream.hpp
//
// What tern's generic I/O helpers (buffered_reader, buffered_writer) need of a stream: read_some and write_some
// operations whose awaited result is io_result<std::size_t>. A TCP socket is one; so is anything else that offers
// the same two operations (Unix stream sockets, pipes, a TLS stream), whether its operations are awaiters or
// tasks. A stream that belongs to a loop says which (loop_bound).
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <utility>

#include "tern/buffer.hpp"
#include "tern/io_result.hpp"

namespace tern {

class io_context;

namespace detail {
// The type co_await yields for an awaitable (an awaiter, or a type with operator co_await such as task).
template <class A>
auto awaited_value(A& a) {
  if constexpr (requires { std::move(a).operator co_await(); }) {
    return std::move(a).operator co_await().await_resume();
  } else {
    return a.await_resume();
  }
}
template <class A>
using awaited_t = decltype(awaited_value(std::declval<A&>()));
}  // namespace detail

// S has read_some(mutable_buffer), awaited as io_result<std::size_t> (at least one byte, or an error such as eof).
template <class S>
concept read_stream = requires(S& s, mutable_buffer b) {
  { s.read_some(b) };
  requires std::same_as<detail::awaited_t<decltype(s.read_some(b))>, io_result<std::size_t>>;
};

// S has write_some(const_buffer), awaited as io_result<std::size_t>.
template <class S>
concept write_stream = requires(S& s, const_buffer b) {
  { s.write_some(b) };
  requires std::same_as<detail::awaited_t<decltype(s.write_some(b))>, io_result<std::size_t>>;
};

// S also writes several buffers with one operation: write_some(std::span<const const_buffer>), awaited as
// io_result<std::size_t> (stream sockets: sendmsg). Layers above a stream use it, where they can, to send parts
// that live apart without copying them together.
template <class S>
concept gather_write_stream = write_stream<S> && requires(S& s, std::span<const const_buffer> bufs) {
  { s.write_some(bufs) };
  requires std::same_as<detail::awaited_t<decltype(s.write_some(bufs))>, io_result<std::size_t>>;
};

// S belongs to a loop, which context() names (a socket, or a stream layered on one, such as tls::stream): its
// operations are awaited by tasks of that loop. Layers above it check that before they touch their own state.
template <class S>
concept loop_bound = requires(const S& s) {
  { s.context() } -> std::same_as<io_context&>;
};

}  // namespace tern
