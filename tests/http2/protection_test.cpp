// The known HTTP/2 attacks against tern's server, on both backends. The server runs as a process of its own
// (peer_server), so that its memory and CPU are its own; an attacker writes crafted frames on one connection
// while a well-behaved client (nghttp2's session, h2_support.hpp) keeps asking on another. For each attack:
// - the server ends the attack (GOAWAY, a reset of the abusive streams, or the connection closed) or contains it
//   (it stops reading a peer that does not read, and closes it after the write timeout);
// - its peak resident memory grows by less than 64 MiB, and its CPU time stays within a bound far below what
//   serving the attack in full would cost;
// - every request of the good client is answered, none slower than a second (the p99 within 2x of the quiet
//   one is the reliability suite's check, where the machine is not shared: here only the gross failure, a loop
//   held for seconds, is caught).
// The 2019 set (CVE-2019-9511 to 9518), HPACK bombs (CVE-2016-1544, CVE-2016-6581), Rapid Reset
// (CVE-2023-44487), MadeYouReset (CVE-2025-8671), the CONTINUATION flood (CVE-2024-27316, CVE-2024-28182), the
// HPACK amplification with a stalled window (CVE-2026-49975), and a peer whose window stays shut.
#include "h2_routes.hpp"

#include <fcntl.h>

#include <fstream>
#include <sstream>

namespace {

using namespace tern_test;

class http2_protection_test : public ::testing::TestWithParam<tern::backend_kind> {};
TERN_INSTANTIATE_BACKENDS(http2_protection_test);

// The server is the shell's process itself (exec), so that its memory and CPU are what usage_of reads.
std::string backend_env(tern::backend_kind k) { return "TERN_BACKEND=" + backend_label(k) + " exec "; }

// ---- HPACK, by hand (RFC 7541) ----

std::string hpack_integer(std::uint8_t first, int prefix_bits, std::size_t v) {
  const std::size_t max = (std::size_t{1} << prefix_bits) - 1;
  std::string out;
  if (v < max) {
    out.push_back(static_cast<char>(first | v));
    return out;
  }
  out.push_back(static_cast<char>(first | max));
  v -= max;
  while (v >= 128) {
    out.push_back(static_cast<char>((v & 127) | 128));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string hpack_string(std::string_view s) { return hpack_integer(0, 7, s.size()) + std::string(s); }
// A literal without indexing, its name from the static table (4: :path, 1: :authority).
std::string literal(std::size_t name_index, std::string_view value) {
  return hpack_integer(0x00, 4, name_index) + hpack_string(value);
}
// A literal with incremental indexing and a new name: it enters the dynamic table (index 62 once it is the last).
std::string indexed_literal(std::string_view name, std::string_view value) {
  return std::string(1, '\x40') + hpack_string(name) + hpack_string(value);
}
std::string request_block(std::string_view method_index_byte, std::string_view path) {
  return std::string(method_index_byte) + "\x86" + literal(4, path) + literal(1, "attack");
}
std::string get_block(std::string_view path) { return request_block("\x82", path); }
std::string post_block(std::string_view path) { return request_block("\x83", path); }

constexpr std::uint8_t data_type = 0, headers_type = 1, priority_type = 2, rst_type = 3, settings_type = 4,
                       ping_type = 6, window_update_type = 8, continuation_type = 9;
constexpr std::uint8_t end_stream = 1, end_headers = 4;

std::string settings(std::initializer_list<std::pair<std::uint16_t, std::uint32_t>> entries) {
  std::string payload;
  for (auto [id, v] : entries) {
    payload.push_back(static_cast<char>(id >> 8));
    payload.push_back(static_cast<char>(id & 0xff));
    payload += be32(v);
  }
  return h2_frame(settings_type, 0, 0, payload);
}
const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// ---- the attacker: a raw connection that writes frames and follows what comes back ----

class attacker {
 public:
  explicit attacker(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  }
  attacker(const attacker&) = delete;
  attacker& operator=(const attacker&) = delete;
  ~attacker() { ::close(fd_); }

  // Sends all of bytes unless the server closes, or takes nothing more for `patience` (it stopped reading).
  bool send(std::string_view bytes, std::chrono::milliseconds patience = 2s) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n > 0) {
        bytes.remove_prefix(static_cast<std::size_t>(n));
        sent_ += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        closed_ = true;
        return false;
      }
      if (reading_) drain();
      if (closed_) return false;
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(patience.count())) == 0) {
        stalled_ = true;
        return false;
      }
    }
    return true;
  }
  // Reads what has arrived without waiting; follows the frames for a GOAWAY.
  void drain() {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        closed_ = true;
        return;
      }
      if (n < 0) return;
      frames(std::string_view(buf, static_cast<std::size_t>(n)));
    }
  }
  // Sends what next() makes, again and again, until the server ends the connection (GOAWAY or close), stops
  // reading it, or limit passes.
  template <class Next>
  void flood(Next next, std::chrono::milliseconds limit = 10s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!ended() && std::chrono::steady_clock::now() < until) {
      std::string batch;
      while (batch.size() < 16384) batch += next();
      if (!send(batch)) break;
      if (reading_) drain();
    }
  }
  void flood(const std::string& unit, std::chrono::milliseconds limit = 10s) {
    flood([&unit] { return unit; }, limit);
  }
  // Waits for the server to close the connection: reading (and dropping) what it sends meanwhile, or, for an
  // attacker that never reads, looking only for the server's end (its FIN or reset).
  bool wait_closed(std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!closed_ && std::chrono::steady_clock::now() < until) {
      pollfd p{fd_, static_cast<short>(reading_ ? POLLIN : POLLRDHUP), 0};
      if (::poll(&p, 1, 50) != 1) continue;
      if (reading_) drain();
      else closed_ = (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
    }
    return closed_;
  }

  void read_as_it_goes(bool on) { reading_ = on; }
  bool ended() const { return closed_ || goaway_code_ >= 0; }
  bool closed() const { return closed_; }
  bool stalled() const { return stalled_; }
  long goaway_code() const { return goaway_code_; }
  int resets() const { return resets_; }
  std::size_t sent() const { return sent_; }

 private:
  void frames(std::string_view in) {
    while (!in.empty()) {
      if (skip_ != 0) {
        const std::size_t k = std::min(skip_, in.size());
        if (type_ == 7 && goaway_.size() < 8) {
          goaway_.append(in.substr(0, std::min(k, 8 - goaway_.size())));
          if (goaway_.size() == 8) {
            const auto* u = reinterpret_cast<const unsigned char*>(goaway_.data()) + 4;
            goaway_code_ = (long{u[0]} << 24) | (long{u[1]} << 16) | (long{u[2]} << 8) | u[3];
          }
        }
        skip_ -= k;
        in.remove_prefix(k);
        continue;
      }
      header_.push_back(in.front());
      in.remove_prefix(1);
      if (header_.size() < 9) continue;
      const auto* h = reinterpret_cast<const unsigned char*>(header_.data());
      skip_ = (std::size_t{h[0]} << 16) | (std::size_t{h[1]} << 8) | h[2];
      type_ = h[3];
      if (type_ == 3) ++resets_;
      header_.clear();
      goaway_.clear();
    }
  }

  int fd_ = -1;
  bool closed_ = false, stalled_ = false, reading_ = true;
  std::size_t sent_ = 0;
  std::string header_, goaway_;
  std::size_t skip_ = 0;
  std::uint8_t type_ = 0;
  long goaway_code_ = -1;
  int resets_ = 0;
};

// ---- the server process, and the good client beside the attack ----

struct usage {
  std::size_t hwm_kib = 0;
  double cpu_seconds = 0;
};

usage usage_of(pid_t pid) {
  usage u;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmHWM:")) u.hwm_kib = std::stoul(line.substr(6));
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream fields(all.substr(all.rfind(')') + 2));
  std::string f;
  unsigned long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoul(f);
    if (i == 15) stime = std::stoul(f);
  }
  u.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  return u;
}

class good_client {
 public:
  explicit good_client(std::uint16_t port) : thread_([this, port] { run(port); }) {}
  ~good_client() { stop(); }
  void stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int answered() const { return answered_; }
  int failed() const { return failed_; }
  std::chrono::milliseconds slowest() const { return slowest_; }

 private:
  void run(std::uint16_t port) {
    h2_client c(port);
    while (!done_) {
      const auto start = std::chrono::steady_clock::now();
      const auto id = c.request("GET", "/");
      if (c.finish(id, 5s) && c.answer(id).status == 200) ++answered_;
      else ++failed_;
      slowest_ = std::max(slowest_, std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now() - start));
      std::this_thread::sleep_for(5ms);
    }
  }

  std::atomic<bool> done_{false};
  std::atomic<int> answered_{0}, failed_{0};
  std::chrono::milliseconds slowest_{0};
  std::thread thread_;
};

// Runs one attack against a fresh server with a good client beside it, and checks the bounds common to all. The
// time bounds are three times wider under a sanitizer, whose server does the same work several times slower.
template <class Attack>
void under_attack(tern::backend_kind backend, const std::string& server_flags, Attack attack,
                  double cpu_bound = 4.0) {
  constexpr int slowdown = sanitized_build() ? 3 : 1;
  peer_process server(backend_env(backend) + TERN_H2_PEER_SERVER + " --write-timeout 1000 " + server_flags);
  ASSERT_NE(server.port(), 0);
  const usage before = usage_of(server.pid());
  {
    good_client good(server.port());
    attack(server.port());
    std::this_thread::sleep_for(100ms);
    good.stop();
    EXPECT_GT(good.answered(), 0);
    EXPECT_EQ(good.failed(), 0);
    EXPECT_LT(good.slowest(), 1000ms * slowdown);
  }
  const usage after = usage_of(server.pid());
  EXPECT_LT(after.hwm_kib, before.hwm_kib + 64 * 1024) << "peak RSS grew from " << before.hwm_kib << " KiB";
  EXPECT_LT(after.cpu_seconds - before.cpu_seconds, cpu_bound * slowdown) << "server CPU seconds";
}

const std::string hello = preface + settings({});

// ---- the 2019 set ----

TEST_P(http2_protection_test, data_dribble_cve_2019_9511) {
  under_attack(GetParam(), "", [](std::uint16_t port) {
    attacker a(port);
    // A large response through a window of one byte, reopened a byte at a time.
    ASSERT_TRUE(a.send(preface + settings({{4, 1}}) + h2_frame(headers_type, end_stream | end_headers, 1,
                                                                 get_block("/bytes/100000000"))));
    a.flood(h2_frame(window_update_type, 0, 1, be32(1)) + h2_frame(window_update_type, 0, 0, be32(1)));
    EXPECT_EQ(a.goaway_code(), NGHTTP2_ENHANCE_YOUR_CALM);
  });
}

TEST_P(http2_protection_test, ping_flood_cve_2019_9512) {
  under_attack(GetParam(), "", [](std::uint16_t port) {
    attacker a(port);
    a.read_as_it_goes(false);  // the answers are never read
    ASSERT_TRUE(a.send(hello));
    a.flood(h2_frame(ping_type, 0, 0, "12345678"));
    // The server ends it, or stops reading and then cuts it after its write timeout.
    EXPECT_TRUE(a.ended() || a.stalled());
    EXPECT_TRUE(a.wait_closed(5s));
  });
}

TEST_P(http2_protection_test, resource_loop_cve_2019_9513) {
  under_attack(GetParam(), "", [](std::uint16_t port) {
    attacker a(port);
    ASSERT_TRUE(a.send(hello));
    // PRIORITY frames shuffling a dependency tree over many streams.
    std::string unit;
    for (std::uint32_t s = 1; s < 200; s += 2) unit += h2_frame(priority_type, 0, s, be32(s + 2) + "\x10");
    a.flood(unit);
    EXPECT_EQ(a.goaway_code(), NGHTTP2_ENHANCE_YOUR_CALM);
  });
}

TEST_P(http2_protection_test, reset_flood_cve_2019_9514) {
  under_attack(GetParam(), "", [](std::uint16_t port) {
    attacker a(port);
    ASSERT_TRUE(a.send(hello));
    // Requests the server must reset (a connection-specific field makes a request malformed), as fast as they go.
    std::uint32_t s = 1;
    a.flood([&] {
      s += 2;
      return h2_frame(headers_type, end_stream | end_headers, s,
                      get_block("/") + std::string(1, '\0') + hpack_string("connection") + hpack_string("close"));
    }, 5s);
    EXPECT_EQ(a.goaway_code(), NGHTTP2_ENHANCE_YOUR_CALM);
  });
}

TEST_P(http2_protection_test, settings_flood_cve_2019_9515) {
  under_attack(GetParam(), "", [](std::uint16_t port) {
    attacker a(port);
    a.read_as_it_goes(false);
    ASSERT_TRUE(a.send(hello));
    a.flood(settings({{4, 65535}}));
    EXPECT_TRUE(a.ended() || a.stalled());
    EXPECT_TRUE(a.wait_closed(5s));
  });
}

TEST_P(http2_protection_test, zero_length_headers_cve_2019_9516) {
  under_attack(GetParam(), "", [](std::uint16_t port) {
    attacker a(port);
    ASSERT_TRUE(a.send(hello));
    // Header fields with empty names and values, many to a request, on stream after stream.
    std::string block = get_block("/");
    for (int i = 0; i < 50; ++i) block += std::string("\x40\x00\x00", 3);
    std::uint32_t s = 1;
    a.flood([&] {
      s += 2;
      return h2_frame(headers_type, end_stream | end_headers, s, block);
    }, 5s);
    EXPECT_EQ(a.goaway_code(), NGHTTP2_ENHANCE_YOUR_CALM);
  });
}

TEST_P(http2_protection_test, internal_data_buffering_cve_2019_9517) {
  under_attack(GetParam(), "", [](std::uint16_t port) {
    attacker a(port);
    a.read_as_it_goes(false);
    // Windows wide open, large answers asked for, and the socket never read.
    std::string asks = preface + settings({{4, 0x7fffffff}}) + h2_frame(window_update_type, 0, 0, be32(0x7fff0000));
    for (std::uint32_t s = 1; s < 200; s += 2) {
      asks += h2_frame(headers_type, end_stream | end_headers, s, get_block("/bytes/50000000"));
    }
    ASSERT_TRUE(a.send(asks));
    // The server holds what its buffers hold, and cuts the connection after its write timeout.
    EXPECT_TRUE(a.wait_closed(8s));
  });
}

TEST_P(http2_protection_test, empty_frames_flood_cve_2019_9518) {
  under_attack(GetParam(), "", [](std::uint16_t port) {
    attacker a(port);
    ASSERT_TRUE(a.send(hello + h2_frame(headers_type, end_headers, 1, post_block("/sha"))));
    a.flood(h2_frame(data_type, 0, 1, ""));
    EXPECT_EQ(a.goaway_code(), NGHTTP2_ENHANCE_YOUR_CALM);
  });
}

// ---- HPACK ----

TEST_P(http2_protection_test, hpack_bomb_cve_2016_1544_and_6581) {
  under_attack(GetParam(), "", [](std::uint16_t port) {
    attacker a(port);
    ASSERT_TRUE(a.send(hello));
    // A 4 KiB entry in the dynamic table, then header blocks that name it thousands of times: a few KiB that
    // decode into tens of MiB. Each such stream is reset once far past the limit (nghttp2 then stops checking
    // every copy), the connection going on.
    ASSERT_TRUE(a.send(h2_frame(headers_type, end_stream | end_headers, 1,
                                get_block("/") + indexed_literal("x-bomb", std::string(4000, 'b')))));
    std::string refs(16000, '\xbe');  // index 62: the entry just added
    for (std::uint32_t s = 3; s < 60; s += 2) {
      ASSERT_TRUE(a.send(h2_frame(headers_type, end_stream | end_headers, s, get_block("/") + refs)));
    }
    a.wait_closed(1s);
    EXPECT_FALSE(a.closed());
    EXPECT_LT(a.goaway_code(), 0);
  });
}

// ---- Rapid Reset, MadeYouReset ----

TEST_P(http2_protection_test, rapid_reset_cve_2023_44487) {
  under_attack(GetParam(), "", [](std::uint16_t port) {
    attacker a(port);
    ASSERT_TRUE(a.send(hello));
    std::uint32_t s = 1;
    a.flood([&] {
      s += 2;
      return h2_frame(headers_type, end_stream | end_headers, s, get_block("/bytes/1000000")) +
             h2_frame(rst_type, 0, s, be32(NGHTTP2_CANCEL));
    }, 5s);
    EXPECT_TRUE(a.goaway_code() == NGHTTP2_ENHANCE_YOUR_CALM || a.closed());
  });
}

TEST_P(http2_protection_test, made_you_reset_cve_2025_8671) {
  under_attack(GetParam(), "", [](std::uint16_t port) {
    attacker a(port);
    ASSERT_TRUE(a.send(hello));
    // Streams the server resets itself: a WINDOW_UPDATE of 0 is a stream error (RFC 9113 §6.9).
    std::uint32_t s = 1;
    a.flood([&] {
      s += 2;
      return h2_frame(headers_type, end_headers, s, post_block("/sha")) + h2_frame(window_update_type, 0, s, be32(0));
    }, 5s);
    // The connection is ended, by tern's budget (ENHANCE_YOUR_CALM) or by nghttp2's own limit on the streams it
    // resets, whichever comes first (the latter's code is not ours to fix); the good client's latency is checked
    // beside it either way.
    EXPECT_TRUE(a.goaway_code() >= 0 || a.closed()) << "goaway " << a.goaway_code();
  });
}

// ---- CONTINUATION ----

TEST_P(http2_protection_test, continuation_flood_cve_2024_27316_and_28182) {
  under_attack(GetParam(), "", [](std::uint16_t port) {
    attacker a(port);
    ASSERT_TRUE(a.send(hello + h2_frame(headers_type, 0, 1, get_block("/"))));
    // A header block that never ends.
    a.flood(h2_frame(continuation_type, 0, 1, indexed_literal("x-more", std::string(1000, 'c'))));
    EXPECT_TRUE(a.ended());
  });
}

// ---- the HPACK amplification with a stalled window ----

TEST_P(http2_protection_test, hpack_amplification_with_a_stalled_window_cve_2026_49975) {
  under_attack(GetParam(), "", [](std::uint16_t port) {
    // Many connections, each with every stream it may open carrying a header list near the limit that costs it a
    // few bytes (references to one dynamic-table entry), and no window for the answers: the server holds the
    // streams open. It keeps views of its decoder's entries, not copies, so each stream costs it little. Starting
    // the 20 connections' 1980 streams holds the server's loop for about 0.2 s here (the good client's slowest
    // request), several times that under a sanitizer, which gets 5 connections.
    std::vector<std::unique_ptr<attacker>> conns;
    for (int c = 0; c < (sanitized_build() ? 5 : 20); ++c) {
      auto a = std::make_unique<attacker>(port);
      std::string out = preface + settings({{4, 0}}) +
                        h2_frame(headers_type, end_stream | end_headers, 1,
                                 get_block("/bytes/100000") + indexed_literal("x-a", std::string(3900, 'a')));
      for (std::uint32_t s = 3; s < 200; s += 2) {
        out += h2_frame(headers_type, end_stream | end_headers, s, get_block("/bytes/100000") + std::string(7, '\xbe'));
      }
      ASSERT_TRUE(a->send(out));
      conns.push_back(std::move(a));
    }
    std::this_thread::sleep_for(500ms);
    for (auto& a : conns) a->drain();
    // The windows stay shut: after the write timeout each connection goes (a peer that reads nothing it asked).
    for (auto& a : conns) EXPECT_TRUE(a->wait_closed(5s));
  });
}

// ---- a peer whose window stays shut ----

TEST_P(http2_protection_test, a_zero_window_peer_is_closed_after_the_write_timeout) {
  under_attack(GetParam(), "", [](std::uint16_t port) {
    attacker a(port);
    // Reads everything, opens no window: the connection's 64 KiB go, then nothing can be sent.
    ASSERT_TRUE(a.send(preface + settings({{4, 0}}) +
                       h2_frame(headers_type, end_stream | end_headers, 1, get_block("/bytes/10000000"))));
    const auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(a.wait_closed(5s));
    EXPECT_GE(std::chrono::steady_clock::now() - start, 900ms);  // not before the write timeout
    EXPECT_EQ(a.goaway_code(), NGHTTP2_NO_ERROR);
  });
}

// ---- whole bodies at the defaults ----

using sent_bodies = std::vector<std::pair<std::int32_t, std::string>>;  // stream id, the answer it should get

// Upload i of body_size bytes (its bytes differ from the other uploads'), and the answer /whole gives for it.
std::pair<std::string, std::string> whole_body(std::size_t i, std::size_t body_size) {
  std::string body(body_size, '\0');
  for (std::size_t k = 0; k < body_size; ++k) body[k] = static_cast<char>((k * 131 + i * 7) >> 3);
  std::string expected = std::to_string(body_size) + " " + std::to_string(fnv1a(body));
  return {std::move(body), std::move(expected)};
}

// Runs c until every stream of sent is closed (false if that takes over a minute), then checks each: refused
// unanswered (REFUSED_STREAM: not processed), or answered 200 with its own body's hash and closed cleanly. At
// least one answered, every one accounted for; answered counts those.
bool expect_answered_or_refused(h2_client& c, const sent_bodies& sent, std::size_t& answered) {
  const bool closed = c.run_until([&] {
    for (auto& [id, expected] : sent) {
      if (!c.answer(id).closed) return false;
    }
    return true;
  }, 60s);
  EXPECT_TRUE(closed) << "streams still open after a minute";
  if (!closed) return false;
  std::size_t refused = 0;
  answered = 0;
  for (auto& [id, expected] : sent) {
    const h2_answer& a = c.answer(id);
    if (a.close_code == NGHTTP2_REFUSED_STREAM && a.status == 0) {
      ++refused;
      continue;
    }
    EXPECT_EQ(a.close_code, static_cast<std::uint32_t>(NGHTTP2_NO_ERROR)) << "stream " << id;
    EXPECT_EQ(a.status, 200) << "stream " << id;
    EXPECT_EQ(a.body, expected) << "stream " << id;
    ++answered;
  }
  EXPECT_GT(answered, 0u);
  EXPECT_EQ(answered + refused, sent.size());
  return true;
}

// Many whole-body uploads on one connection at the default options: the server holds each body until it is whole,
// bounded together (held bodies, the connection window, the parked bytes, the first's stream window: docs/design.md,
// HTTP/2: 33 MiB). Its peak memory stays within that bound plus a margin (8 MiB, 16 under ASan) for the rest of
// the process, and every stream is answered 200 with its own body's hash, or refused (REFUSED_STREAM: not
// processed), never anything else (under ThreadSanitizer only that: its shadow memory is not tern's). Measured
// here: +27 MiB (+35 under ASan); +49 to 63 MiB (+84) while the bodies grew in strings.
TEST_P(http2_protection_test, concurrent_whole_body_uploads_at_the_defaults_stay_within_the_bound) {
  constexpr std::size_t streams = 99, body_size = 1024 * 1024;
  constexpr std::size_t bound_kib = 33 * 1024;
  constexpr std::size_t margin_kib = sanitized_build() ? 16 * 1024 : 8 * 1024;
  peer_process server(backend_env(GetParam()) + TERN_H2_PEER_SERVER);
  ASSERT_NE(server.port(), 0);
  const usage before = usage_of(server.pid());
  h2_client c(server.port());
  sent_bodies sent;
  for (std::size_t i = 0; i < streams; ++i) {
    auto [body, expected] = whole_body(i, body_size);
    sent.emplace_back(c.request("POST", "/whole", {{"content-length", std::to_string(body_size)}}, std::move(body)),
                      std::move(expected));
  }
  std::size_t answered = 0;
  ASSERT_TRUE(expect_answered_or_refused(c, sent, answered));
  const usage after = usage_of(server.pid());
  // Not under ThreadSanitizer: its shadow of the 1 MiB bodies (+69 MiB where the program held +26) is not tern's.
  if (!thread_sanitized_build()) {
    EXPECT_LT(after.hwm_kib, before.hwm_kib + bound_kib + margin_kib)
        << "peak RSS grew from " << before.hwm_kib << " KiB; " << answered << " of " << streams << " answered";
  }
}

// The same uploads one after the other, from a peer that opens no window for the answers
// (SETTINGS_INITIAL_WINDOW_SIZE 0): each handler answers, but its answer's DATA cannot go, so its stream stays
// open and its body held. A body that has all arrived is taken whatever the room; beyond the shared bound, what is
// so held counts against the cap on parked bytes, and past it the stream is refused (REFUSED_STREAM). Without
// that, every body was held, each the first of the line when it completed: +103 MiB here (now +26). Once the
// window opens, the held ones are answered with their hashes.
TEST_P(http2_protection_test, whole_bodies_whose_answers_cannot_go_stay_within_the_bound) {
  constexpr std::size_t streams = 99, body_size = 1024 * 1024;
  constexpr std::size_t bound_kib = 33 * 1024;
  constexpr std::size_t margin_kib = sanitized_build() ? 16 * 1024 : 8 * 1024;
  peer_process server(backend_env(GetParam()) + TERN_H2_PEER_SERVER);
  ASSERT_NE(server.port(), 0);
  const usage before = usage_of(server.pid());
  h2_client_options o;
  o.window = 0;
  h2_client c(server.port(), o);
  sent_bodies sent;
  for (std::size_t i = 0; i < streams; ++i) {
    auto [body, expected] = whole_body(i, body_size);
    const std::int32_t id =
        c.request("POST", "/whole", {{"content-length", std::to_string(body_size)}}, std::move(body));
    sent.emplace_back(id, std::move(expected));
    // One body after the other: each answered (its head: the DATA waits for the window) or refused.
    ASSERT_TRUE(c.run_until([&] { return c.answer(id).status != 0 || c.answer(id).closed; }, 10s)) << "stream " << id;
  }
  const usage held = usage_of(server.pid());
  if (!thread_sanitized_build()) {  // as above: ThreadSanitizer's shadow is not tern's memory
    EXPECT_LT(held.hwm_kib, before.hwm_kib + bound_kib + margin_kib)
        << "peak RSS grew from " << before.hwm_kib << " KiB";
  }
  const nghttp2_settings_entry open_window{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20};
  nghttp2_submit_settings(c.session(), NGHTTP2_FLAG_NONE, &open_window, 1);
  std::size_t answered = 0;
  EXPECT_TRUE(expect_answered_or_refused(c, sent, answered));
}

}  // namespace
