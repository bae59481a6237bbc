// The commands a shared connection refuses (see tern/redis/request.hpp).
#include "tern/redis/request.hpp"

namespace tern::redis::detail {

reserved_kind reserved(std::string_view name) noexcept {
  // Every reserved name is 4 to 12 letters long; the common short commands (GET, SET) leave at the first test.
  if (name.size() < 4 || name.size() > 12) return reserved_kind::none;
  char upper[12];
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    upper[i] = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  }
  const std::string_view n(upper, name.size());
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
