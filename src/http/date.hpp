// The Date field's value (RFC 9110 §5.6.7, "Sun, 06 Nov 1994 08:49:37 GMT"), made once per second per thread
// (internal).
#pragma once

#include <string_view>

namespace tern::http::detail {

// Now, as an IMF-fixdate; valid until the calling thread's next call.
std::string_view http_date_now() noexcept;

}  // namespace tern::http::detail
