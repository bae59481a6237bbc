// The message every ws/echo client sends, the same bytes for every stack (tern, Beast, the raw floor): a pattern
// that differs from position to position, so that an echo shifted or cut shows in the client's check.
#pragma once

#include <cstddef>
#include <string>

namespace tern_bench::ws_bench {

inline std::string make_message(std::size_t size) {
    std::string m(size, '\0');
    for (std::size_t i = 0; i < size; ++i) m[i] = static_cast<char>('a' + (i * 7) % 26);
    return m;
}

}  // namespace tern_bench::ws_bench
