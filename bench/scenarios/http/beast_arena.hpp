// A per-connection arena for Boost.Beast's header fields, shared by the Beast servers and clients of
// tern-bench-http (beast_ping.cpp, beast_minimal.cpp).
//
// Beast allocates one node per header field through the fields' allocator and frees them all when the parser or
// message that holds them is destroyed, which the benchmarks do once per request. A bump allocator that rewinds
// when its last live block is freed therefore serves every request of a connection from the same bytes: a warm
// connection allocates nothing for its fields. A head too large for the arena goes to the heap.
#pragma once

#include <cstddef>
#include <new>

namespace tern_bench::http_impl {

constexpr std::size_t field_arena_size = 4096;  // a request's and its response's field nodes

class field_arena {
public:
    void* allocate(std::size_t n, std::size_t align) {
        std::size_t start = (used_ + align - 1) & ~(align - 1);
        if (start + n > sizeof bytes_) return ::operator new(n);
        used_ = start + n;
        ++live_;
        return bytes_ + start;
    }
    void deallocate(void* p) noexcept {
        char* c = static_cast<char*>(p);
        if (c < bytes_ || c >= bytes_ + sizeof bytes_) return ::operator delete(p);
        if (--live_ == 0) used_ = 0;
    }

private:
    alignas(std::max_align_t) char bytes_[field_arena_size];
    std::size_t used_ = 0;
    std::size_t live_ = 0;
};

// The standard allocator interface over a field_arena, for http::basic_fields<arena_allocator<char>>.
template <class T>
class arena_allocator {
public:
    using value_type = T;

    explicit arena_allocator(field_arena& a) noexcept : arena_(&a) {}
    template <class U>
    arena_allocator(const arena_allocator<U>& other) noexcept : arena_(other.arena()) {}

    T* allocate(std::size_t n) { return static_cast<T*>(arena_->allocate(n * sizeof(T), alignof(T))); }
    void deallocate(T* p, std::size_t) noexcept { arena_->deallocate(p); }
    field_arena* arena() const noexcept { return arena_; }

    template <class U>
    bool operator==(const arena_allocator<U>& o) const noexcept { return arena_ == o.arena(); }
    template <class U>
    bool operator!=(const arena_allocator<U>& o) const noexcept { return arena_ != o.arena(); }

private:
    field_arena* arena_;
};

}  // namespace tern_bench::http_impl
