// The commands a shared connection refuses (see tern/redis/request.hpp).
#include "tern/redis/request.hpp"

namespace tern::redis::detail {

namespace {

bool equals_upper(std::string_view s, std::string_view upper) noexcept {
  if (s.size() != upper.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (((c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c) != upper[i]) return false;
  }
  return true;
}

}  // namespace

reserved_kind reserved(std::string_view name, std::string_view subcommand) noexcept {
  // Every reserved name is 4 to 12 letters long; the common short commands (GET, SET) leave at the first test.
  if (name.size() < 4 || name.size() > 12) return reserved_kind::none;
  char upper[12];
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    upper[i] = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  }
  const std::string_view n(upper, name.size());
  if (n == "CLIENT") return equals_upper(subcommand, "REPLY") ? reserved_kind::always : reserved_kind::none;
  static constexpr std::string_view always[] = {"SUBSCRIBE",    "PSUBSCRIBE",   "SSUBSCRIBE", "UNSUBSCRIBE",
                                                "PUNSUBSCRIBE", "SUNSUBSCRIBE", "MONITOR",    "HELLO",
                                                "RESET"};
  static constexpr std::string_view alone[] = {"MULTI", "EXEC", "DISCARD"};
  for (std::string_view r : always) {
    if (n == r) return reserved_kind::always;
  }
  for (std::string_view r : alone) {
    if (n == r) return reserved_kind::outside_pipeline;
  }
  return reserved_kind::none;
}

}  // namespace tern::redis::detail
