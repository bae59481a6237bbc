// libFuzzer target: tern::redis's RESP3 parser (tern/redis/resp.hpp), the code a redis::connection reads every
// reply with, given arbitrary bytes under limits the input chooses, driven the way the connection drives it (each
// call given exactly the bytes not consumed yet, in a buffer of their size), and the conversions of reply.hpp fed
// with the nodes of each whole reply. Checks:
// - a node never reaches outside the input it was given: what it consumed, and its text, lie within it; need_more
//   consumes nothing, and a need it states is more than it had;
// - the limits hold: no node deeper than max_depth, no aggregate of more than max_elements, no string longer than
//   max_bulk, no line longer than max_line;
// - once failed, the parser stays failed with the same error, of the redis category;
// - the nodes, the reply boundaries and the verdict are the same whole, a byte at a time, and cut anywhere;
// - the conversions to a string, an integer, a vector, a map and a redis::reply never misbehave on any reply, and
//   a reply kept whole converts the same as the nodes fed one by one.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "tern/redis/reply.hpp"
#include "tern/redis/resp.hpp"

namespace {

namespace resp = tern::redis::resp;
namespace redis = tern::redis;
using namespace tern::fuzz;

struct settings {
  resp::limits limits;
  std::vector<std::size_t> cuts;  // growing prefixes of the input that arrive
};

// The conversions a connection would run on one reply's nodes, compared with the reply kept whole.
class conversions {
 public:
  void start() {
    text_.start(text_value_);
    number_.start(number_value_);
    list_.start(list_value_);
    map_.start(map_value_);
    whole_.start(whole_value_);
  }
  void feed(const resp::node& n) {
    text_.feed(text_value_, n);
    number_.feed(number_value_, n);
    list_.feed(list_value_, n);
    map_.feed(map_value_, n);
    whole_.feed(whole_value_, n);
  }
  // The verdicts, as text; the reply kept whole must convert to the same.
  std::string finish() {
    std::string out = "{" + std::to_string(text_.error().ec.value()) + "," + std::to_string(number_.error().ec.value()) +
                      "," + std::to_string(list_.error().ec.value()) + "," + std::to_string(map_.error().ec.value()) +
                      "}";
    const auto t = whole_value_.to<std::string>();
    TERN_FUZZ_CHECK(t.ec == text_.error().ec);
    if (!t.ec) TERN_FUZZ_CHECK(t.value == text_value_);
    const auto i = whole_value_.to<std::optional<std::int64_t>>();
    TERN_FUZZ_CHECK(!i.ec || i.ec.category() == redis::category());
    const auto l = whole_value_.to<std::vector<std::optional<std::string>>>();
    TERN_FUZZ_CHECK(l.ec == list_.error().ec);
    if (!l.ec) TERN_FUZZ_CHECK(l.value == list_value_);
    return out;
  }

 private:
  redis::detail::converter<std::string> text_;
  std::string text_value_;
  redis::detail::converter<std::optional<std::int64_t>> number_;
  std::optional<std::int64_t> number_value_;
  redis::detail::converter<std::vector<std::optional<std::string>>> list_;
  std::vector<std::optional<std::string>> list_value_;
  redis::detail::converter<std::map<std::string, std::vector<double>>> map_;
  std::map<std::string, std::vector<double>> map_value_;
  redis::detail::converter<redis::reply> whole_;
  redis::reply whole_value_;
};

std::string describe(const resp::node& n) {
  std::string s = "[" + std::to_string(n.depth) + " " + resp::to_string(n.type) + (n.in_attribute ? " attr " : " ") +
                  std::to_string(n.size) + " ";
  s.append(n.value);
  s.append(n.format);
  s += " " + std::to_string(n.integer) + "]";
  return s;
}

// Runs the parser over the input as it arrives at the given cuts; returns everything it reported, as text.
std::string transcript(std::string_view input, const settings& s) {
  resp::parser p(s.limits);
  const resp::limits& l = p.limits();
  std::string log;
  std::string buf;
  std::size_t arrived = 0, cut = 0;
  std::error_code failure;
  conversions convert;
  bool in_reply = false;
  for (int steps = 0;; ++steps) {
    TERN_FUZZ_CHECK(steps < 10'000'000);
    const exact_copy exact(buf);
    const resp::parser::result r = p.next(exact.view());
    if (failure) {
      TERN_FUZZ_CHECK(r.what == resp::parser::status::failed && r.ec == failure);
      return log + "[failed " + std::to_string(r.ec.value()) + "]";
    }
    switch (r.what) {
      case resp::parser::status::failed:
        TERN_FUZZ_CHECK(r.ec.category() == redis::category());
        failure = r.ec;
        continue;  // once more: it must say the same
      case resp::parser::status::need_more:
        TERN_FUZZ_CHECK(r.consumed == 0);
        TERN_FUZZ_CHECK(r.need == 0 || r.need > buf.size());
        if (arrived == input.size()) return log + "[end " + std::to_string(buf.size()) + "]";
        {
          const std::size_t next = cut < s.cuts.size() ? std::max(arrived, s.cuts[cut++]) : input.size();
          buf.append(input.substr(arrived, next - arrived));
          arrived = next;
        }
        continue;
      case resp::parser::status::node: {
        const resp::node& n = r.n;
        TERN_FUZZ_CHECK(r.consumed > 0 && r.consumed <= buf.size());
        TERN_FUZZ_CHECK(inside(n.value, exact.view().substr(0, r.consumed)));
        TERN_FUZZ_CHECK(inside(n.format, exact.view().substr(0, r.consumed)));
        TERN_FUZZ_CHECK(n.depth < l.max_depth || !resp::is_aggregate(n.type) || n.size == 0);
        TERN_FUZZ_CHECK(n.depth <= l.max_depth);
        if (resp::is_aggregate(n.type)) TERN_FUZZ_CHECK(n.size <= l.max_elements);
        if (n.type == resp::type::blob_string || n.type == resp::type::blob_error) {
          TERN_FUZZ_CHECK(n.value.size() <= l.max_bulk);
        } else if (n.type == resp::type::verbatim_string) {
          TERN_FUZZ_CHECK(n.value.size() + 4 <= l.max_bulk && n.format.size() == 3);
        } else {
          TERN_FUZZ_CHECK(n.value.size() <= l.max_line);
        }
        log += describe(n);
        if (!in_reply) {
          convert.start();
          in_reply = true;
        }
        convert.feed(n);
        buf.erase(0, r.consumed);
        if (p.at_reply_boundary()) {
          log += convert.finish() + "|";
          in_reply = false;
        }
        continue;
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  choices pick(input);
  settings s;
  if (pick.one_in(2)) {
    s.limits.max_bulk = pick.between(0, 300);
    s.limits.max_depth = static_cast<std::uint32_t>(pick.between(1, 8));
    s.limits.max_elements = pick.between(0, 40);
    s.limits.max_line = pick.between(1, 100);
  }
  const std::string whole = transcript(input, s);

  // A byte at a time (short inputs: each call copies the buffer).
  if (size <= 4096) {
    settings bytewise = s;
    for (std::size_t i = 1; i <= size; ++i) bytewise.cuts.push_back(i);
    TERN_FUZZ_CHECK(transcript(input, bytewise) == whole);
  }
  // Cut where the input's own choices say.
  settings cut = s;
  cut.cuts = cut_points(input, pick);
  TERN_FUZZ_CHECK(transcript(input, cut) == whole);
  return 0;
}
