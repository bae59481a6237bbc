// Counting global operator new for tern-bench-tern: every form of operator new counts one call on the calling
// thread, then allocates as the default one would. The meters turn the count into allocs_per_op.
//
// The counter is a plain thread_local integer with no dynamic initialisation: an increment of a TLS slot, no
// atomic operation, no shared cache line, so it costs the measured code nothing measurable even where it
// allocates. Linked into the tern worker only; the other workers keep the library's operator new.
#include "../harness/allocations.hpp"

#include <cstdint>
#include <cstdlib>
#include <new>

namespace {

constinit thread_local std::uint64_t calls = 0;

std::uint64_t read_calls() noexcept { return calls; }

[[maybe_unused]] const bool registered = (tern_bench::register_allocation_counter(&read_calls), true);

void* allocate(std::size_t n) noexcept {
    ++calls;
    return std::malloc(n == 0 ? 1 : n);
}

void* allocate_aligned(std::size_t n, std::align_val_t align) noexcept {
    ++calls;
    std::size_t a = static_cast<std::size_t>(align);
    if (a < sizeof(void*)) a = sizeof(void*);
    void* p = nullptr;
    return ::posix_memalign(&p, a, n == 0 ? 1 : n) == 0 ? p : nullptr;
}

// The throwing forms: retry through the new-handler as the standard requires, then throw bad_alloc.
template <class Alloc>
void* allocate_or_throw(Alloc alloc) {
    for (;;) {
        if (void* p = alloc()) return p;
        std::new_handler h = std::get_new_handler();
        if (!h) throw std::bad_alloc();
        h();
    }
}

}  // namespace

void* operator new(std::size_t n) { return allocate_or_throw([n] { return allocate(n); }); }
void* operator new[](std::size_t n) { return allocate_or_throw([n] { return allocate(n); }); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new(std::size_t n, std::align_val_t a) { return allocate_or_throw([=] { return allocate_aligned(n, a); }); }
void* operator new[](std::size_t n, std::align_val_t a) {
    return allocate_or_throw([=] { return allocate_aligned(n, a); });
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return allocate_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return allocate_aligned(n, a);
}

void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
