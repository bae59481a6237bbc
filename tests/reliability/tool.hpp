// Shared by the subcommands of reliability_tool (tests/reliability/): the failure record and the end-state checks,
// the verified byte streams, the arguments, connect/listen/serve helpers with deadlines, and the registry through
// which each source file adds its subcommands.
//
// Design: a check's subcommands live in a source file of their own (faults, HTTP, soak...) and register themselves
// with TERN_RELIABILITY_COMMAND, so a new check touches no other file. One loop per process: the counters below
// are plain integers.
#pragma once
#include <tern/tern.hpp>

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <functional>

namespace reltool {

namespace net = tern::net;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// ---- failures and the end-state checks ----------------------------------------------------------------------------

inline std::string g_failure;  // the first failure; later ones are printed only
inline std::uint64_t g_live_tasks = 0;  // tasks of this tool still running (one loop per process: no atomics needed)

inline void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void fail(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "failure: %s\n", buf);
  if (g_failure.empty()) g_failure = buf;
}
inline bool failed() { return !g_failure.empty(); }

// Held by every task the tool spawns, so that the end can tell whether one is stuck.
struct live_task {
  live_task() { ++g_live_tasks; }
  ~live_task() { --g_live_tasks; }
  live_task(const live_task&) = delete;
  live_task& operator=(const live_task&) = delete;
};

inline int count_fds() {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n - 1;  // the directory's own descriptor
}

// The most descriptors seen open at once, for finish() to report. The kernel keeps no peak of its own, so this is
// the largest of the samples a check takes with note_fds() where it knows it holds the most (and finish()'s).
// Sampling when every task starts was tried: it slowed cancel-storm's 100,000 tasks by about 150 ms.
inline int g_fds_peak = 0;
inline void note_fds() { g_fds_peak = std::max(g_fds_peak, count_fds()); }

// A "Field: N kB" line of /proc/PID/status in KiB (0 when unreadable): VmRSS now, VmHWM its peak.
inline long status_kib(long pid, const char* field) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%ld/status", pid);
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  char line[256];
  long kib = 0;
  std::size_t len = std::strlen(field);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, field, len) == 0 && line[len] == ':' && std::sscanf(line + len + 1, "%ld", &kib) == 1) break;
  }
  std::fclose(f);
  return kib;
}
inline long rss_kib(long pid) { return status_kib(pid, "VmRSS"); }

// utime + stime of a process, in clock ticks (-1 when unreadable).
inline long cpu_ticks(long pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return -1;
  char buf[2048];
  std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  // The command name may hold spaces and parentheses: the fields start after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return -1;
  unsigned long utime = 0, stime = 0;
  // Fields 3.. after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
  if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2) return -1;
  return static_cast<long>(utime + stime);
}

inline std::uint64_t pending_ops(const tern::io_context& ctx) {
  auto s = tern::metrics::snapshot(ctx);
  std::uint64_t started = 0, completed = 0;
  for (const auto& o : s.ops) {
    started += o.started;
    completed += o.completed;
  }
  return started - completed;
}

// The end-state checks every subcommand shares; prints the RESULT line and gives the exit status.
inline int finish(tern::io_context& ctx, int fds_at_start, const std::string& summary) {
  // Closes handed to the loop complete on its next turns: let it run them before counting.
  ctx.block_on([]() -> tern::task<> { co_await tern::sleep_for(50ms); }());
  int fds = count_fds();
  if (fds != fds_at_start) fail("descriptors: %d open at the start, %d at the end", fds_at_start, fds);
  if (g_live_tasks != 0) fail("%" PRIu64 " tasks still alive at the end", g_live_tasks);
  if (auto p = pending_ops(ctx); p != 0) fail("%" PRIu64 " operations still pending at the end", p);
  if (failed()) {
    std::printf("RESULT fail %s\n", g_failure.c_str());
    return 1;
  }
  note_fds();
  std::printf("RESULT ok backend=%s fds=%d->%d fds_peak=%d rss_peak_kib=%ld tasks_left=0 pending_ops=0 %s\n",
              tern::to_string(ctx.backend()), fds_at_start, fds, std::max(g_fds_peak, fds_at_start),
              status_kib(::getpid(), "VmHWM"), summary.c_str());
  return 0;
}

// ---- the byte streams ------------------------------------------------------------------------------------------------

inline std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Bytes [pos, pos + out.size()) of the stream named seed: byte i is byte i % 8 of splitmix(seed-mix + i / 8).
inline void fill_pattern(std::uint64_t seed, std::uint64_t pos, char* out, std::size_t n) {
  const std::uint64_t base = splitmix(seed) * 0x2545F4914F6CDD1Dull;
  std::size_t i = 0;
  while (i < n) {
    std::uint64_t word = splitmix(base + (pos + i) / 8);
    std::size_t from = (pos + i) % 8;
    std::size_t take = std::min<std::size_t>(8 - from, n - i);
    std::memcpy(out + i, reinterpret_cast<const char*>(&word) + from, take);
    i += take;
  }
}

// Checks data against bytes [pos, pos + n) of the stream; the stream offset of the first difference, if any.
inline std::optional<std::uint64_t> check_pattern(std::uint64_t seed, std::uint64_t pos, const char* data, std::size_t n) {
  char expected[4096];
  for (std::size_t done = 0; done < n;) {
    std::size_t k = std::min(sizeof expected, n - done);
    fill_pattern(seed, pos + done, expected, k);
    if (std::memcmp(expected, data + done, k) != 0) {
      for (std::size_t j = 0; j < k; ++j) {
        if (expected[j] != data[done + j]) return pos + done + j;
      }
    }
    done += k;
  }
  return std::nullopt;
}

// ---- arguments -------------------------------------------------------------------------------------------------------

struct args {
  std::map<std::string, std::string, std::less<>> values;
  std::string get(std::string_view key, std::string_view fallback = {}) const {
    auto it = values.find(key);
    return it == values.end() ? std::string(fallback) : it->second;
  }
  std::uint64_t num(std::string_view key, std::uint64_t fallback) const {
    auto it = values.find(key);
    if (it == values.end()) return fallback;
    char* end = nullptr;
    std::uint64_t v = std::strtoull(it->second.c_str(), &end, 10);
    if (end == it->second.c_str() || *end != 0) {
      std::fprintf(stderr, "--%s: '%s' is not a number\n", it->first.c_str(), it->second.c_str());
      std::exit(2);
    }
    return v;
  }
  net::endpoint endpoint(std::string_view key) const {
    auto it = values.find(key);
    if (it == values.end()) {
      std::fprintf(stderr, "--%.*s is required\n", static_cast<int>(key.size()), key.data());
      std::exit(2);
    }
    auto ep = net::endpoint::parse(it->second);
    if (!ep) {
      std::fprintf(stderr, "--%s: '%s' is not HOST:PORT\n", it->first.c_str(), it->second.c_str());
      std::exit(2);
    }
    return *ep;
  }
};

// The deadline of every wait on the network: long enough for TCP to retransmit through 5% loss many times over,
// short enough that a lost byte ends the run with a reason instead of a hang.
constexpr auto io_deadline = 60s;

inline const char* ec_text(std::error_code ec) {
  static thread_local std::string s;
  s = ec.message();
  return s.c_str();
}

// Reads exactly b.size() bytes with the deadline; false (with the failure recorded) otherwise.
template <class Socket>
tern::task<bool> read_fully(Socket& s, tern::mutable_buffer b, const char* what) {
  auto [ec, n] = co_await tern::with_timeout(s.read_exact(b), io_deadline);
  if (ec) {
    fail("%s: read %zu of %zu bytes: %s", what, n, b.size(), ec_text(ec));
    co_return false;
  }
  co_return true;
}

template <class Socket>
tern::task<bool> write_fully(Socket& s, tern::const_buffer b, const char* what) {
  auto [ec, n] = co_await tern::with_timeout(s.write_all(b), io_deadline);
  if (ec) {
    fail("%s: wrote %zu of %zu bytes: %s", what, n, b.size(), ec_text(ec));
    co_return false;
  }
  co_return true;
}

inline tern::task<std::optional<net::tcp_socket>> connect_to(tern::io_context& ctx, net::endpoint ep, const char* what) {
  net::tcp_socket s(ctx);
  auto ec = co_await tern::with_timeout(s.connect(ep), io_deadline);
  if (ec) {
    fail("%s: connect to %s: %s", what, ep.to_string().c_str(), ec_text(ec));
    co_return std::nullopt;
  }
  co_return std::optional<net::tcp_socket>(std::move(s));
}

inline std::optional<net::tcp_acceptor> listen_on(tern::io_context& ctx, net::endpoint ep) {
  net::tcp_acceptor a(ctx);
  if (auto ec = a.listen(ep)) {
    fail("listen on %s: %s", ep.to_string().c_str(), ec_text(ec));
    return std::nullopt;
  }
  auto [ec, local] = a.local_endpoint();
  std::printf("listening on %s (%s)\n", ec ? ep.to_string().c_str() : local.to_string().c_str(),
              tern::to_string(ctx.backend()));
  std::fflush(stdout);
  return a;
}

// Accepts k connections and runs handler(socket) for each as a child of one group; returns when all have ended.
template <class Handler>
tern::task<> serve_k(tern::io_context& ctx, net::tcp_acceptor& acceptor, std::uint64_t k, Handler handler) {
  co_await tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
    for (std::uint64_t i = 0; i < k && !failed(); ++i) {
      // No deadline: the client may start late; the script's timeout bounds the whole run.
      auto [ec, s] = co_await acceptor.accept();
      if (ec) {
        fail("accept: %s", ec_text(ec));
        co_return;
      }
      (void)s.set_no_delay(true);
      g.spawn(handler, std::move(s));
    }
  });
}

// ---- stream: N bytes each way on one connection, every byte checked ---------------------------------------------------

struct stream_header {
  std::uint32_t magic = 0x5354524d;  // "STRM"
  std::uint32_t reserved = 0;
  std::uint64_t bytes = 0;
  std::uint64_t seed = 0;
};

// Receives `bytes` bytes of stream seed on s, checking each, then expects the peer's end of stream.
inline tern::task<bool> receive_stream(net::tcp_socket& s, std::uint64_t seed, std::uint64_t bytes, const char* who) {
  std::vector<char> buf(256 * 1024);
  std::uint64_t got = 0;
  while (got < bytes) {
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), bytes - got));
    auto [ec, n] = co_await tern::with_timeout(s.read_some(tern::mutable_buffer(buf.data(), want)), io_deadline);
    if (ec) {
      fail("%s: stream read after %" PRIu64 " of %" PRIu64 " bytes: %s", who, got, bytes, ec_text(ec));
      co_return false;
    }
    if (auto bad = check_pattern(seed, got, buf.data(), n)) {
      fail("%s: stream byte %" PRIu64 " differs from what was sent", who, *bad);
      co_return false;
    }
    got += n;
  }
  char extra;
  auto [ec, n] = co_await tern::with_timeout(s.read_some(tern::mutable_buffer(&extra, 1)), io_deadline);
  if (ec != net::error::eof) {
    fail("%s: after %" PRIu64 " bytes expected the end of the stream, got %s", who, bytes,
         ec ? ec_text(ec) : "more bytes");
    co_return false;
  }
  co_return true;
}

// Sends `bytes` bytes of stream seed, then shuts the sending side.
inline tern::task<bool> send_stream(net::tcp_socket& s, std::uint64_t seed, std::uint64_t bytes, const char* who) {
  std::vector<char> buf(256 * 1024);
  std::uint64_t sent = 0;
  while (sent < bytes) {
    std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), bytes - sent));
    fill_pattern(seed, sent, buf.data(), k);
    if (!co_await write_fully(s, tern::const_buffer(buf.data(), k), who)) co_return false;
    sent += k;
  }
  if (auto ec = s.shutdown(net::shutdown_how::send)) {
    fail("%s: shutdown: %s", who, ec_text(ec));
    co_return false;
  }
  co_return true;
}


// ---- the subcommands' registry -------------------------------------------------------------------------------------

using command_fn = int (*)(const args&);

struct command_entry {
  command_fn fn;
  const char* usage;  // one line: "NAME --key V ...   what it does"
};

inline std::map<std::string, command_entry, std::less<>>& commands() {
  static std::map<std::string, command_entry, std::less<>> all;
  return all;
}

inline bool register_command(const char* name, command_fn fn, const char* usage) {
  commands().emplace(name, command_entry{fn, usage});
  return true;
}

}  // namespace reltool

// Adds a subcommand: TERN_RELIABILITY_COMMAND("name", function, "usage line"), at namespace scope in its source file.
#define TERN_RELIABILITY_CONCAT2(a, b) a##b
#define TERN_RELIABILITY_CONCAT(a, b) TERN_RELIABILITY_CONCAT2(a, b)
#define TERN_RELIABILITY_COMMAND(name, fn, usage)                                                     \
  [[maybe_unused]] static const bool TERN_RELIABILITY_CONCAT(tern_reliability_registered_, __LINE__) = \
      ::reltool::register_command(name, fn, usage)
