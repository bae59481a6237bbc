// The Date field, formatted when the second changes: each loop thread keeps its own copy, so a response costs a
// clock read (the vDSO's, no system call) and a copy of 29 bytes.
#include "date.hpp"

#include <ctime>

namespace tern::http::detail {

namespace {

struct date_cache {
  std::time_t second = -1;
  char text[30] = {};
};

void format(std::time_t t, char* out) noexcept {
  static constexpr char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  const auto two = [](char* p, int v) {
    p[0] = static_cast<char>('0' + v / 10);
    p[1] = static_cast<char>('0' + v % 10);
  };
  // "Sun, 06 Nov 1994 08:49:37 GMT"
  for (int i = 0; i < 3; ++i) out[i] = days[tm.tm_wday][i];
  out[3] = ',';
  out[4] = ' ';
  two(out + 5, tm.tm_mday);
  out[7] = ' ';
  for (int i = 0; i < 3; ++i) out[8 + i] = months[tm.tm_mon][i];
  out[11] = ' ';
  const int year = tm.tm_year + 1900;
  two(out + 12, year / 100);
  two(out + 14, year % 100);
  out[16] = ' ';
  two(out + 17, tm.tm_hour);
  out[19] = ':';
  two(out + 20, tm.tm_min);
  out[22] = ':';
  two(out + 23, tm.tm_sec);
  out[25] = ' ';
  out[26] = 'G';
  out[27] = 'M';
  out[28] = 'T';
  out[29] = '\0';
}

}  // namespace

std::string_view http_date_now() noexcept {
  thread_local date_cache cache;
  const std::time_t now = std::time(nullptr);
  if (now != cache.second) {
    format(now, cache.text);
    cache.second = now;
  }
  return {cache.text, 29};
}

}  // namespace tern::http::detail

namespace tern::http {

std::string_view date_now() noexcept { return detail::http_date_now(); }

}  // namespace tern::http
