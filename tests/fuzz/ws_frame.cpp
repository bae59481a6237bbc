// libFuzzer target: tern::ws's frame decoder (tern/ws/detail/frame.hpp), the code a ws::stream reads every frame
// with, given arbitrary bytes as a server (masked frames expected) or as a client, with or without
// permessage-deflate and a message size limit, driven the way the stream drives it: data handed out in pieces of
// varying size, text validated as UTF-8, compressed messages inflated (with zlib, through tern's inflater). Checks:
// - a result never reaches outside the input it was given: what it consumed, and its payload, lie within it; a
//   control frame's payload is at most 125 bytes; need_more consumes nothing;
// - once failed, the decoder stays failed with the same error;
// - the messages, control frames and the verdict (and where it came) are the same whole, a byte at a time, and
//   cut anywhere, whatever sizes the data is taken in;
// - a message delivered whole without failure is of a type and size that the frames declared, and its text is
//   UTF-8.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "tern/ws/detail/deflate.hpp"
#include "tern/ws/detail/frame.hpp"
#include "tern/ws/error.hpp"

namespace {

namespace d = tern::ws::detail;
using namespace tern::fuzz;

constexpr std::size_t max_inflated = 1 << 20;  // a compressed message is cut off there (a zip bomb's answer)

struct settings {
  d::decoder_options opts;
  std::vector<std::size_t> cuts;  // growing prefixes of the input that arrive
  std::uint64_t take_seed;        // how much of each data piece is taken
};

// Runs the decoder over data as it arrives at the given cuts; returns everything it reported, as text.
std::string transcript(std::string_view input, const settings& s) {
  d::frame_decoder dec(s.opts);
  choices take(std::string_view(reinterpret_cast<const char*>(&s.take_seed), sizeof s.take_seed));
  std::string log, message;
  std::string buf;  // the unconsumed input, as a stream's buffer holds it (the decoder unmasks in place)
  std::size_t arrived = 0, cut = 0;
  bool failed = false;
  std::error_code failure;
  d::utf8_validator utf8;
  std::unique_ptr<d::inflater> inflater;
  if (s.opts.deflate) inflater = std::make_unique<d::inflater>(false);
  // Keeps at most max_inflated + 1 bytes of a message, so that the same bytes are validated however it arrives.
  auto deliver = [&](const unsigned char* p, std::size_t n, bool text) {
    n = std::min(n, max_inflated + 1 - std::min(message.size(), max_inflated + 1));
    message.append(reinterpret_cast<const char*>(p), n);
    return !text || utf8.feed(p, n);
  };
  for (int steps = 0;; ++steps) {
    // Each call sees a heap block of exactly the unconsumed bytes, so that a read past them is caught.
    std::unique_ptr<unsigned char[]> exact(new unsigned char[buf.size() + 1]);
    std::memcpy(exact.get(), buf.data(), buf.size());
    const d::frame_decoder::result r = dec.next(exact.get(), buf.size());
    std::memcpy(buf.data(), exact.get(), buf.size());  // keep what was unmasked in place
    TERN_FUZZ_CHECK(r.consumed <= buf.size());
    if (failed) {
      TERN_FUZZ_CHECK(r.what == d::frame_decoder::event::failed && r.ec == failure);
      return log + "[failed " + std::to_string(r.ec.value()) + "]";
    }
    switch (r.what) {
      case d::frame_decoder::event::failed:
        failed = true;
        failure = r.ec;
        TERN_FUZZ_CHECK(r.ec.category() == tern::ws::category());
        continue;  // once more: it must say the same
      case d::frame_decoder::event::need_more:
        TERN_FUZZ_CHECK(r.consumed == 0);
        if (arrived == input.size()) return log + "[end " + std::to_string(buf.size()) + "]";
        {
          const std::size_t next = cut < s.cuts.size() ? std::max(arrived, s.cuts[cut++]) : input.size();
          buf.append(input.substr(arrived, next - arrived));
          arrived = next;
        }
        continue;
      case d::frame_decoder::event::control: {
        TERN_FUZZ_CHECK(r.size <= d::max_control_payload);
        TERN_FUZZ_CHECK(r.payload >= exact.get() && r.payload + r.size == exact.get() + r.consumed);
        log += "[control " + std::to_string(static_cast<int>(r.op)) + " " +
               std::string(reinterpret_cast<const char*>(r.payload), r.size) + "]";
        buf.erase(0, r.consumed);
        continue;
      }
      case d::frame_decoder::event::data: {
        TERN_FUZZ_CHECK(r.payload == exact.get() + r.consumed);
        TERN_FUZZ_CHECK(r.size <= buf.size() - r.consumed);
        TERN_FUZZ_CHECK(dec.message_opcode() == d::opcode::text || dec.message_opcode() == d::opcode::binary);
        const bool text = dec.message_opcode() == d::opcode::text;
        std::size_t n = std::min<std::size_t>(r.size, take.between(0, 70000));
        if (n == 0 && r.size != 0 && !take.one_in(4)) n = 1;
        const bool done = r.message_end && n == r.size;
        bool ok = true;
        if (!dec.message_compressed()) {
          ok = deliver(r.payload, n, text);
        } else {
          const unsigned char* in = r.payload;
          std::size_t left = n;
          while (ok && left > 0 && message.size() <= max_inflated) {
            unsigned char out[4096];
            unsigned char* o = out;
            std::size_t room = sizeof out;
            const std::size_t before = left;
            const bool bad = static_cast<bool>(inflater->run(in, left, o, room));
            ok = deliver(out, sizeof out - room, text);  // what came out before an error counts first
            if (bad) return log + (ok ? "[bad compression]" : "[bad utf8]");
            // zlib takes input or gives output while it has both: a stream relies on it not to spin.
            TERN_FUZZ_CHECK(left < before || room < sizeof out);
          }
          for (bool tail_done = !done; ok && !tail_done && message.size() <= max_inflated;) {
            unsigned char out[4096];
            unsigned char* o = out;
            std::size_t room = sizeof out;
            const bool bad = static_cast<bool>(inflater->finish(o, room, tail_done));
            ok = deliver(out, sizeof out - room, text);
            if (bad) return log + (ok ? "[bad compression]" : "[bad utf8]");
          }
        }
        dec.consume_payload(n);
        buf.erase(0, r.consumed + n);
        if (!ok) return log + "[bad utf8]";
        if (message.size() > max_inflated) return log + "[too big]";
        if (done) {
          if (text && !utf8.complete()) return log + "[bad utf8]";
          if (!dec.message_compressed() && s.opts.max_message != 0) {
            TERN_FUZZ_CHECK(message.size() <= s.opts.max_message);
          }
          log += (text ? "[text " : "[binary ") + message + "]";
          message.clear();
          utf8.reset();
        }
        TERN_FUZZ_CHECK(steps < 100'000'000);
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
  s.opts.server = !pick.one_in(4);
  s.opts.deflate = pick.one_in(2);
  s.opts.max_message = pick.one_in(3) ? pick.between(1, 4096) : 0;
  s.take_seed = pick.next();
  const std::string whole = transcript(input, s);

  // A byte at a time (short inputs: each call copies the buffer).
  if (size <= 4096) {
    settings bytewise = s;
    for (std::size_t i = 1; i <= size; ++i) bytewise.cuts.push_back(i);
    bytewise.take_seed = pick.next();
    TERN_FUZZ_CHECK(transcript(input, bytewise) == whole);
  }
  // Cut where the input's own choices say, taking the data in other piece sizes.
  settings cut = s;
  cut.cuts = cut_points(input, pick);
  cut.take_seed = pick.next();
  TERN_FUZZ_CHECK(transcript(input, cut) == whole);
  return 0;
}
