// The error category of tern::sync (see tern/sync/error.hpp). Defined here, once, so that every translation unit
// and every shared object compares against the same category object.
#include "tern/sync/error.hpp"

#include <string>

namespace tern::sync {

const std::error_category& sync_category() noexcept {
  struct category final : std::error_category {
    const char* name() const noexcept override { return "tern.sync"; }
    std::string message(int v) const override {
      switch (static_cast<error>(v)) {
        case error::closed: return "the channel is closed";
        case error::full: return "the channel is full";
      }
      return "unknown error";
    }
  };
  static const category instance;
  return instance;
}

}  // namespace tern::sync
