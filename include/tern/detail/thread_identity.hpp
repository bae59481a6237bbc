// tern/detail/thread_identity.hpp
//
// A cheap identity of the calling thread: its thread pointer (the TLS base register).
//
// Why: the hot paths ask "is the caller on the thread that runs this loop?" on every post and resumption. A
// thread_local read would answer it, but tern's code is inlined into coroutine bodies, a coroutine can resume on
// another thread, and clang may keep a thread-local address computed before a suspension (the thread pointer is a
// "constant" to its optimiser). Reading the register with a volatile asm statement is one instruction that the
// compiler can neither hoist nor reuse across a suspension point. Elsewhere an out-of-line call returns the address
// of a thread_local, which is unique per live thread too.
#pragma once

#include <cstdint>

namespace tern::detail {

#if defined(__x86_64__)
inline std::uintptr_t thread_identity() noexcept {
  std::uintptr_t p;
  asm volatile("mov %%fs:0, %0" : "=r"(p));
  return p;
}
#elif defined(__aarch64__)
inline std::uintptr_t thread_identity() noexcept {
  std::uintptr_t p;
  asm volatile("mrs %0, tpidr_el0" : "=r"(p));
  return p;
}
#else
std::uintptr_t thread_identity() noexcept;  // io_context.cpp
#define TERN_THREAD_IDENTITY_OUT_OF_LINE 1
#endif

}  // namespace tern::detail
