// The RESP3 parser (tern/redis/resp.hpp) on its own: every type, any split, the limits, malformed input.
#include "support.hpp"

#include <tern/redis/resp.hpp>

namespace {
}  // namespace
