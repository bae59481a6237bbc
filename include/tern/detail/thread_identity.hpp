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

#if defined(__x86_64__) && defined(__clang__)
// A volatile load through the fs segment: read anew every time like the asm statement below, but, unlike any asm
// statement clang compiles, not a compiler barrier for the memory around it, so values the caller just stored
// (an awaiter's fields in a coroutine frame) need not be loaded again after it.
inline std::uintptr_t thread_identity() noexcept {
  return *reinterpret_cast<const volatile std::uintptr_t __attribute__((address_space(257)))*>(0);
}
#elif defined(__x86_64__)
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

// A number that names the calling thread for the whole life of the process. The thread pointer above is unique
// among live threads only: a new thread may get the one of a thread that exited, and the kernel, which binds an
// io_uring ring to a task, would then refuse the newcomer. What binds a loop to the thread that first ran it
// (io_context::claim_thread). Out of line: a thread-local read, made when a run starts, never per item.
std::uint64_t thread_serial() noexcept;

}  // namespace tern::detail
