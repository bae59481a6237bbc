// What the fuzz targets in tests/fuzz/ share: how a violated invariant is reported, the deterministic choices an
// input makes (limits, where to split it), and buffers of an exact size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace tern::fuzz {

// A violated invariant is a finding like a crash: the message says which, and the trap makes libFuzzer keep the
// input (libFuzzer handles SIGILL as a crash).
[[noreturn]] inline void invariant_failed(const char* what, const char* file, int line) noexcept {
  std::fprintf(stderr, "%s:%d: invariant violated: %s\n", file, line, what);
  std::fflush(stderr);
  __builtin_trap();
}

#define TERN_FUZZ_CHECK(...) \
  ((__VA_ARGS__) ? void(0) : ::tern::fuzz::invariant_failed(#__VA_ARGS__, __FILE__, __LINE__))

// Choices derived from the input's bytes (limits, split points): the same input always makes the same ones, so a
// crash input reproduces, and a mutated input makes other ones. A hash of the whole input seeds them rather than a
// prefix of it, so that the corpus files are plain messages.
class choices {
 public:
  explicit choices(std::string_view data) noexcept {
    std::uint64_t h = 0xcbf29ce484222325u;  // FNV-1a
    for (unsigned char c : data) h = (h ^ c) * 0x100000001b3u;
    state_ = h;
  }

  std::uint64_t next() noexcept {  // splitmix64
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
  }
  // In [0, n); 0 for n == 0.
  std::uint64_t below(std::uint64_t n) noexcept { return n == 0 ? 0 : next() % n; }
  // In [lo, hi].
  std::uint64_t between(std::uint64_t lo, std::uint64_t hi) noexcept { return lo + below(hi - lo + 1); }
  bool one_in(std::uint64_t n) noexcept { return below(n) == 0; }

 private:
  std::uint64_t state_;
};

// A copy of some bytes in a heap block of exactly their size. A parser given a view into a larger buffer could
// read past the view's end unnoticed; here AddressSanitizer reports it.
class exact_copy {
 public:
  explicit exact_copy(std::string_view bytes) : bytes_(new char[bytes.size()]), size_(bytes.size()) {
    if (size_ != 0) std::memcpy(bytes_.get(), bytes.data(), size_);
  }
  std::string_view view() const noexcept { return {bytes_.get(), size_}; }

 private:
  std::unique_ptr<char[]> bytes_;
  std::size_t size_;
};

// Whether the view lies within buffer (an empty view lies anywhere: it points at nothing). Compared as integers:
// relational comparison of pointers into different objects is unspecified.
inline bool inside(std::string_view view, std::string_view buffer) noexcept {
  if (view.empty()) return true;
  const auto v = reinterpret_cast<std::uintptr_t>(view.data());
  const auto b = reinterpret_cast<std::uintptr_t>(buffer.data());
  return v >= b && v - b <= buffer.size() && view.size() <= buffer.size() - (v - b);
}

// Where view starts in buffer (it must lie inside).
inline std::size_t offset_in(std::string_view view, std::string_view buffer) noexcept {
  return static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(view.data()) -
                                  reinterpret_cast<std::uintptr_t>(buffer.data()));
}

// Two views are the same part of two buffers that hold the same bytes: the same offset and the same bytes. Empty
// views match whatever they point at.
inline bool same_view(std::string_view a, std::string_view a_buffer, std::string_view b,
                      std::string_view b_buffer) noexcept {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return offset_in(a, a_buffer) == offset_in(b, b_buffer) && a == b;
}

// The lengths of the growing prefixes a connection might hand a parser, ending with the whole input: cut where the
// framing is (around each CR and LF: a CRLF cut in two is where an incremental parser slips), or after strides of
// random size, small or large, or once anywhere.
inline std::vector<std::size_t> cut_points(std::string_view data, choices& pick) {
  std::vector<std::size_t> cuts;
  const std::size_t n = data.size();
  switch (pick.below(4)) {
    case 0:
      for (std::size_t i = 0; i < n; ++i) {
        if (data[i] != '\r' && data[i] != '\n') continue;
        if (cuts.empty() || cuts.back() < i) cuts.push_back(i);
        cuts.push_back(i + 1);
      }
      break;
    case 1:
    case 2: {
      const std::uint64_t max_stride = pick.below(2) == 0 ? 8 : 300;
      for (std::size_t at = pick.below(4); at < n; at += pick.between(1, max_stride)) cuts.push_back(at);
      break;
    }
    default:
      cuts.push_back(pick.below(n + 1));
      break;
  }
  if (cuts.empty() || cuts.back() != n) cuts.push_back(n);
  return cuts;
}

}  // namespace tern::fuzz
