// The allocator tern's nghttp2 sessions use (internal; see memory.cpp). Null under AddressSanitizer, so that
// nghttp2's own blocks are checked there one by one (nghttp2 then uses malloc).
#pragma once

#include <nghttp2/nghttp2.h>

namespace tern::http2::detail {

nghttp2_mem* pooled_memory() noexcept;

}  // namespace tern::http2::detail
