// The faults of the reliability suite that reliability_tool.cpp does not hold: subcommands of reliability_tool.
//
//   enfile-client  --connect EP --pid PID [--conns M] [--before B] [--window-ms W]
//                  the system-wide file table full (fs.file-max lowered for a moment) under an echo server
//   ring-dry       [--conns C] [--bytes N]     C streams into receive() with a pool of 4 to 16 buffers
//   full-disk      --dir D [--files F]         writes to a small file system until ENOSPC, then after freeing space
//   close-pending  [--count N]                 sockets closed by another task under pending operations
//
// scripts/reliability/faults.sh runs them; docs/reliability.md ("Faults: the system's limits") says what each
// verifies and why. The conventions are the tool's (tool.hpp): every byte checked against its stream, a deadline
// on every network wait, a RESULT line, and the end state checked by finish().
#include "tool.hpp"

#include <tern/fs/file.hpp>
#include <tern/leased_buffer.hpp>

#include <fcntl.h>

#include <deque>

using namespace reltool;

namespace {

// ---- enfile-client: the system-wide file table full ----------------------------------------------------------------

// /proc/sys/fs/file-max, or a "file-nr" field: 0 allocated, 2 the maximum. -1 when unreadable.
long long read_proc_number(const char* path, int field) {
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return -1;
  long long v[3] = {-1, -1, -1};
  int n = std::fscanf(f, "%lld %lld %lld", &v[0], &v[1], &v[2]);
  std::fclose(f);
  return n > field ? v[field] : -1;
}

bool write_file_max(long long value) {
  int fd = ::open("/proc/sys/fs/file-max", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[32];
  int len = std::snprintf(buf, sizeof buf, "%lld\n", value);
  bool ok = ::write(fd, buf, static_cast<std::size_t>(len)) == len;
  ::close(fd);
  return ok;
}

// Puts fs.file-max back when it goes out of scope, whatever path the check took (the script restores it too,
// in case this process is killed in between).
struct file_max_guard {
  long long original = -1;
  bool lowered = false;
  void restore() {
    if (!lowered) return;
    lowered = false;
    if (!write_file_max(original)) {
      fail("enfile: could not restore fs.file-max to %lld: %s", original, std::strerror(errno));
    }
    std::printf("fs.file-max restored to %lld\n", original);
    std::fflush(stdout);
  }
  ~file_max_guard() { restore(); }
};

// One verified echo of 64 bytes (seed) on s, under `limit`; false when it did not come, with the failure recorded
// unless it merely timed out with nothing read (a connection waiting in the server's backlog).
tern::task<bool> ping(net::tcp_socket& s, std::uint64_t seed, std::chrono::milliseconds limit, bool send,
                      const char* who) {
  char out[64], in[64];
  fill_pattern(seed, 0, out, sizeof out);
  if (send && !co_await write_fully(s, tern::const_buffer(out, sizeof out), who)) co_return false;
  auto [ec, n] = co_await tern::with_timeout(s.read_exact(tern::mutable_buffer(in, sizeof in)), limit);
  if (ec) {
    if (ec != tern::error::timed_out || n != 0) {
      fail("%s: echo %" PRIu64 ": %s after %zu bytes", who, seed, ec_text(ec), n);
    }
    co_return false;
  }
  if (std::memcmp(in, out, sizeof in) != 0) {
    fail("%s: echo %" PRIu64 " differs from what was sent", who, seed);
    co_return false;
  }
  co_return true;
}

double cpu_share(long t0, long t1, double wall) {
  return t0 < 0 || t1 < 0 ? -1 : (t1 - t0) / static_cast<double>(::sysconf(_SC_CLK_TCK)) / wall;
}

int enfile_client(const args& a) {
  tern::io_context ctx;
  int fds = count_fds();
  net::endpoint ep = a.endpoint("connect");
  long pid = static_cast<long>(a.num("pid", 0));
  std::uint64_t before = a.num("before", 16);
  std::uint64_t conns = a.num("conns", 200);
  auto window = std::chrono::milliseconds(a.num("window-ms", 1500));
  if (pid == 0) {
    std::fprintf(stderr, "enfile-client: --pid is required\n");
    return 2;
  }
  std::vector<net::tcp_socket> old_socks, socks;
  for (std::uint64_t i = 0; i < before; ++i) old_socks.emplace_back(ctx);
  for (std::uint64_t i = 0; i < conns; ++i) socks.emplace_back(ctx);
  std::vector<char> served(conns, 0);
  std::uint64_t old_echoes = 0, served_first = 0, recovered = 0;
  long long lowered_to = 0, allocated = 0;
  double cpu = -1;
  file_max_guard guard;

  // 1. Connections made while the table has room: all served.
  ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
    for (std::uint64_t i = 0; i < before; ++i) {
      g.spawn([&, i]() -> tern::task<> {
        live_task live;
        if (auto ec = co_await tern::with_timeout(old_socks[i].connect(ep), io_deadline)) {
          fail("enfile-client: connect %" PRIu64 ": %s", i, ec_text(ec));
          co_return;
        }
        if (co_await ping(old_socks[i], i, 10s, true, "enfile-client (before)")) ++old_echoes;
        else if (!failed()) fail("enfile-client: connection %" PRIu64 " not served before the table was full", i);
      });
    }
    co_return;
  }));

  // 2. The table full for processes without CAP_SYS_ADMIN: fs.file-max at the number of descriptors this process
  //    holds itself. This process keeps the capability (root), and its own files alone are as many as the maximum,
  //    so the table is over it whatever other programs open or close meanwhile. Lower than the system's use, not
  //    just above it, because other programs on a shared machine open and close thousands of descriptors a second:
  //    with the maximum at the use plus 16, and then at half the use, some runs gave the server room for every
  //    connection (others had closed more files than that in the moment after the count was read), which tests
  //    nothing. For a process without the capability every maximum below the use is the same: no new file.
  if (!failed()) {
    guard.original = read_proc_number("/proc/sys/fs/file-max", 0);
    allocated = read_proc_number("/proc/sys/fs/file-nr", 0);
    if (guard.original <= 0 || allocated <= 0) {
      fail("enfile-client: cannot read /proc/sys/fs/file-max and file-nr");
    } else {
      lowered_to = std::max(1, count_fds());
      if (lowered_to >= guard.original || lowered_to < 1) {
        fail("enfile-client: fs.file-max %lld is already at the use (%lld)", guard.original, allocated);
      } else if (!write_file_max(lowered_to)) {
        fail("enfile-client: cannot write /proc/sys/fs/file-max: %s", std::strerror(errno));
      } else {
        guard.lowered = true;
        std::printf("fs.file-max lowered from %lld to %lld (%lld allocated)\n", guard.original, lowered_to, allocated);
        std::fflush(stdout);
      }
    }
  }

  // 3. New connections while the table is full: the server cannot take their descriptors, so they wait in the
  //    backlog. Meanwhile the old connections must still be served, and the
  //    server's CPU over the window shows whether its accept loop backs off or spins.
  if (!failed()) {
    ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
      for (std::uint64_t i = 0; i < conns; ++i) {
        g.spawn([&, i]() -> tern::task<> {
          live_task live;
          if (auto ec = co_await tern::with_timeout(socks[i].connect(ep), io_deadline)) {
            fail("enfile-client: connect %" PRIu64 " while the table was full: %s", i, ec_text(ec));
            co_return;
          }
          if (co_await ping(socks[i], 1000 + i, 1s, true, "enfile-client")) served[i] = 1;
        });
      }
      co_return;
    }));
    served_first = std::count(served.begin(), served.end(), 1);
    note_fds();
    std::printf("served while the table was full: %" PRIu64 " of %" PRIu64 "\n", served_first, conns);
    if (!failed() && served_first == conns) {
      fail("enfile-client: all %" PRIu64 " new connections were served with fs.file-max at %lld: the server never "
           "met ENFILE (does it hold CAP_SYS_ADMIN?)", conns, lowered_to);
    }
    long t0 = cpu_ticks(pid);
    auto w0 = steady::now();
    ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
      g.spawn([&]() -> tern::task<> {
        live_task live;
        co_await tern::sleep_for(window);
      });
      for (std::uint64_t i = 0; i < before; ++i) {
        g.spawn([&, i]() -> tern::task<> {
          live_task live;
          if (co_await ping(old_socks[i], 2000 + i, 10s, true, "enfile-client (during)")) ++old_echoes;
          else if (!failed()) fail("enfile-client: old connection %" PRIu64 " not served while the table was full", i);
        });
      }
      co_return;
    }));
    long t1 = cpu_ticks(pid);
    double wall = std::chrono::duration<double>(steady::now() - w0).count();
    cpu = cpu_share(t0, t1, wall);
    std::printf("server CPU while the table was full: %.1f%% of one CPU over %.2f s\n", cpu * 100, wall);
    if (cpu < 0) fail("enfile-client: cannot read /proc/%ld/stat", pid);
    else if (cpu > 0.25) {
      fail("enfile-client: the server used %.0f%% of a CPU while the table was full (spinning)", cpu * 100);
    }
  }

  // 4. Room again: every waiting connection must now be accepted and its ping echoed.
  guard.restore();
  if (!failed()) {
    ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
      for (std::uint64_t i = 0; i < conns; ++i) {
        if (served[i]) continue;
        g.spawn([&, i]() -> tern::task<> {
          live_task live;
          // The ping was sent before; its echo is due once the server accepts.
          char out[64], in[64];
          fill_pattern(1000 + i, 0, out, sizeof out);
          auto [ec, n] = co_await tern::with_timeout(socks[i].read_exact(tern::mutable_buffer(in, sizeof in)), 20s);
          if (ec) {
            fail("enfile-client: connection %" PRIu64 " not served after fs.file-max was restored: %s", i, ec_text(ec));
          } else if (std::memcmp(in, out, sizeof in) != 0) {
            fail("enfile-client: connection %" PRIu64 ": wrong echo", i);
          } else {
            ++recovered;
          }
        });
      }
      co_return;
    }));
  }
  old_socks.clear();
  socks.clear();
  char summary[320];
  std::snprintf(summary, sizeof summary,
                "file_max=%lld lowered_to=%lld new_conns=%" PRIu64 " served_while_full=%" PRIu64
                " served_after_restore=%" PRIu64 " old_conn_echoes=%" PRIu64 " server_cpu_while_full=%.1f%%",
                guard.original, lowered_to, conns, served_first, recovered, old_echoes, cpu * 100);
  if (!failed() && served_first + recovered != conns) {
    fail("enfile-client: %" PRIu64 " of %" PRIu64 " connections served", served_first + recovered, conns);
  }
  return finish(ctx, fds, summary);
}

// ---- ring-dry: the receive pool running dry under many streams ------------------------------------------------------

// The pool of this check: 4 buffers of 4 KiB at first, growing by 4 up to 16. Each connection's reader holds two
// leases and pauses 1 ms per receive, so the streams want far more buffers than the pool may have.
constexpr std::size_t ring_buffer_size = 4096;
constexpr unsigned ring_buffers = 4;
constexpr unsigned ring_buffers_max = 16;

struct ring_counts {
  std::uint64_t bytes_verified = 0;
  std::uint64_t receives = 0;
  std::uint64_t exchanges = 0;
};

// Reads one stream with receive(): its header, then `bytes` bytes checked against the stream, then the end.
tern::task<> ring_serve_one(ring_counts& counts, net::tcp_socket s) {
  live_task live;
  stream_header h;
  std::size_t have_header = 0;
  std::uint64_t got = 0;
  std::deque<tern::leased_buffer> held;  // the last two leases, kept while the next ones are received
  for (;;) {
    auto [ec, lease] = co_await tern::with_timeout(s.receive(), io_deadline);
    if (ec == net::error::eof) break;
    if (ec) {
      fail("ring-dry: receive after %" PRIu64 " bytes: %s", got, ec_text(ec));
      co_return;
    }
    ++counts.receives;
    std::size_t off = 0;
    if (have_header < sizeof h) {
      std::size_t k = std::min(sizeof h - have_header, lease.size());
      std::memcpy(reinterpret_cast<char*>(&h) + have_header, lease.data(), k);
      have_header += k;
      off = k;
      if (have_header == sizeof h && h.magic != stream_header{}.magic) {
        fail("ring-dry: bad stream header");
        co_return;
      }
    }
    std::size_t n = lease.size() - off;
    if (n != 0) {
      if (got + n > h.bytes) {
        fail("ring-dry: stream %" PRIu64 ": %" PRIu64 " bytes received, %" PRIu64 " sent", h.seed, got + n, h.bytes);
        co_return;
      }
      if (auto bad = check_pattern(h.seed, got, lease.data() + off, n)) {
        fail("ring-dry: stream %" PRIu64 ": byte %" PRIu64 " differs from what was sent", h.seed, *bad);
        co_return;
      }
      got += n;
    }
    held.push_back(std::move(lease));
    if (held.size() > 2) held.pop_front();
    co_await tern::sleep_for(1ms);
  }
  held.clear();
  if (got != h.bytes || have_header != sizeof h) {
    fail("ring-dry: stream %" PRIu64 " ended after %" PRIu64 " of %" PRIu64 " bytes", h.seed, got, h.bytes);
    co_return;
  }
  counts.bytes_verified += got;
}

// Request/response on one connection, holding up to `hold` leases at once (each request fits one buffer): with
// `hold` the whole pool, a buffer that did not come back after the streams makes the pool run dry again. The held
// leases are given back before the answer that fills the group is written, so the next request never finds them
// out.
tern::task<> ring_echo_one(ring_counts& counts, net::tcp_socket s, std::size_t hold) {
  live_task live;
  std::vector<tern::leased_buffer> held;
  for (;;) {
    auto [ec, lease] = co_await tern::with_timeout(s.receive(), io_deadline);
    if (ec == net::error::eof) co_return;
    if (ec) {
      fail("ring-dry: echo receive: %s", ec_text(ec));
      co_return;
    }
    bool last_of_group = held.size() + 1 >= hold;
    if (last_of_group) held.clear();
    if (!co_await write_fully(s, lease.buffer(), "ring-dry echo")) co_return;
    if (!last_of_group) held.push_back(std::move(lease));
    ++counts.exchanges;
  }
}

int ring_dry(const args& a) {
  tern::io_context_options opts;
  opts.receive_buffer_size = ring_buffer_size;
  opts.receive_buffers = ring_buffers;
  opts.receive_buffers_max = ring_buffers_max;
  tern::io_context ctx(opts);
  int fds = count_fds();
  std::uint64_t conns = a.num("conns", 64);
  std::uint64_t bytes = a.num("bytes", 1 << 20);
  ring_counts counts;
  tern::metrics::loop_snapshot storm{}, after{};
  std::uint32_t capacity = 0, in_ring = 0;
  bool kernel_ring = false;
  std::uint64_t echoes = 0;
  {
    auto acceptor = listen_on(ctx, net::endpoint::loopback_v4(0));
    if (!acceptor) return finish(ctx, fds, "");
    net::endpoint ep = acceptor->local_endpoint().value;
    // 1. C streams at once into receive().
    ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
      g.spawn([&]() -> tern::task<> {
        co_await serve_k(ctx, *acceptor, conns,
                         [&counts](net::tcp_socket s) { return ring_serve_one(counts, std::move(s)); });
      });
      for (std::uint64_t c = 0; c < conns; ++c) {
        g.spawn([&, c]() -> tern::task<> {
          live_task live;
          auto s = co_await connect_to(ctx, ep, "ring-dry client");
          if (!s) co_return;
          stream_header h;
          h.bytes = bytes;
          h.seed = 500 + c;
          if (!co_await write_fully(*s, tern::const_buffer(&h, sizeof h), "ring-dry client header")) co_return;
          note_fds();  // the connections open up front and stay open while they stream: the peak is among these
          if (!co_await send_stream(*s, h.seed, bytes, "ring-dry client")) co_return;
          char extra;
          auto [ec, n] = co_await tern::with_timeout(s->read_some(tern::mutable_buffer(&extra, 1)), io_deadline);
          if (ec != net::error::eof) {
            fail("ring-dry client: expected the server's close, got %s", ec ? ec_text(ec) : "bytes");
          }
        });
      }
      co_return;
    }));
    storm = ctx.metrics();
    note_fds();
    // Under io_uring a bundled receive that takes the ring's last buffer counts as running dry, so there the
    // exchanges hold one buffer less than the whole pool; under epoll the stack's last buffer may be taken.
    std::size_t hold = ctx.receive_pool().kernel_ring() != nullptr ? ring_buffers_max - 1 : ring_buffers_max;
    // 2. The pool after the storm: one connection of request/response exchanges.
    ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
      g.spawn([&]() -> tern::task<> {
        live_task live;
        auto [ec, s] = co_await tern::with_timeout(acceptor->accept(), io_deadline);
        if (ec) {
          fail("ring-dry: accept: %s", ec_text(ec));
          co_return;
        }
        co_await ring_echo_one(counts, std::move(s), hold);
      });
      g.spawn([&]() -> tern::task<> {
        live_task live;
        auto s = co_await connect_to(ctx, ep, "ring-dry echo client");
        if (!s) co_return;
        std::vector<char> out(3000), in(3000);
        for (std::uint64_t i = 0; i < 200 && !failed(); ++i) {
          fill_pattern(9000 + i, 0, out.data(), out.size());
          if (!co_await write_fully(*s, tern::const_buffer(out.data(), out.size()), "ring-dry echo client")) co_return;
          if (!co_await read_fully(*s, tern::mutable_buffer(in.data(), in.size()), "ring-dry echo client")) co_return;
          if (in != out) {
            fail("ring-dry: echo %" PRIu64 " differs", i);
            co_return;
          }
          ++echoes;
        }
      });
      co_return;
    }));
    after = ctx.metrics();
  }
  // The pool's own figures (the loop's internal object, read here only to check what its documentation promises).
  {
    auto& pool = ctx.receive_pool();
    capacity = pool.capacity();
    kernel_ring = pool.kernel_ring() != nullptr;
    in_ring = pool.in_ring();
  }
  std::printf("pool: %u buffers of %zu bytes (from %u, at most %u); during the streams: ran dry %" PRIu64
              " times, %" PRIu64 " overflow receives, %" PRIu64 " bundles; %s\n",
              capacity, ring_buffer_size, ring_buffers, ring_buffers_max, storm.receive_pool_dry,
              storm.receive_overflows, storm.receive_bundles,
              kernel_ring ? "a provided-buffer ring" : "a free stack (no kernel ring)");
  if (!failed()) {
    if (counts.bytes_verified != conns * bytes) {
      fail("ring-dry: %" PRIu64 " bytes verified of %" PRIu64, counts.bytes_verified, conns * bytes);
    } else if (storm.receive_pool_dry == 0) {
      fail("ring-dry: the pool never ran dry (%" PRIu64 " receives)", counts.receives);
    } else if (capacity != ring_buffers_max) {
      fail("ring-dry: the pool has %u buffers after running dry %" PRIu64 " times; it grows to %u", capacity,
           storm.receive_pool_dry, ring_buffers_max);
    } else if (storm.receive_overflows == 0) {
      fail("ring-dry: no receive used an overflow buffer with every pool buffer out");
    } else if (echoes != 200) {
      fail("ring-dry: %" PRIu64 " of 200 echoes after the streams", echoes);
    } else if (after.receive_pool_dry != storm.receive_pool_dry || after.receive_overflows != storm.receive_overflows) {
      fail("ring-dry: after the streams, one connection's exchanges ran the pool dry %" PRIu64 " more times (%" PRIu64
           " overflows): buffers did not come back", after.receive_pool_dry - storm.receive_pool_dry,
           after.receive_overflows - storm.receive_overflows);
    } else if (kernel_ring && in_ring != capacity) {
      fail("ring-dry: %u of the pool's %u buffers are back in the kernel's ring at the end", in_ring, capacity);
    } else if (ctx.backend() == tern::backend_kind::io_uring && !kernel_ring) {
      fail("ring-dry: io_uring without a provided-buffer ring: the multishot path was not tested");
    }
  }
  char summary[400];
  std::snprintf(summary, sizeof summary,
                "connections=%" PRIu64 " bytes_verified=%" PRIu64 " receives=%" PRIu64 " pool_dry=%" PRIu64
                " overflow_receives=%" PRIu64 " bundles=%" PRIu64 " pool_buffers=%u->%u echoes_after=%" PRIu64
                " dry_after=%" PRIu64 " buffers_back_in_ring=%s",
                conns, counts.bytes_verified, counts.receives, storm.receive_pool_dry, storm.receive_overflows,
                storm.receive_bundles, ring_buffers, capacity, echoes, after.receive_pool_dry - storm.receive_pool_dry,
                kernel_ring ? (std::to_string(in_ring) + "/" + std::to_string(capacity)).c_str() : "n/a");
  return finish(ctx, fds, summary);
}

// ---- full-disk: writes until ENOSPC, then after space is freed ---------------------------------------------------

struct disk_file {
  std::string path;
  std::uint64_t written = 0;  // what the API reported written
  bool full = false;          // the last write ended with no_space_on_device
};

std::uint64_t g_short_writes = 0;  // write_all_at calls that wrote part of their bytes and then met ENOSPC

// Writes stream `seed` to f from `written` on, in write_all_at calls of 63 KiB + 24 bytes (not a multiple of a
// page, so that the disk fills in the middle of a call as well as between calls), until `until` bytes or an error.
// Returns the error (no_space_on_device expected when the disk fills) and adds the bytes reported written.
tern::task<std::error_code> write_stream(tern::fs::file& f, std::uint64_t seed, std::uint64_t& written,
                                         std::uint64_t until) {
  std::vector<char> buf(63 * 1024 + 24);
  while (written < until) {
    std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), until - written));
    fill_pattern(seed, written, buf.data(), k);
    auto [ec, n] = co_await f.write_all_at(tern::const_buffer(buf.data(), k), written);
    written += n;
    if (ec == std::errc::no_space_on_device && n != 0) ++g_short_writes;
    if (ec) co_return ec;
    if (n != k) co_return std::make_error_code(std::errc::io_error);  // write_all_at: all, or an error
  }
  co_return std::error_code{};
}

// Reads the file back: its size must be exactly what was reported written, and every byte the stream's.
tern::task<bool> verify_file(tern::io_context& ctx, const disk_file& d, std::uint64_t seed) {
  auto st = co_await tern::fs::status(ctx, d.path.c_str());
  if (st.ec) {
    fail("full-disk: stat %s: %s", d.path.c_str(), ec_text(st.ec));
    co_return false;
  }
  if (st.value.size != d.written) {
    fail("full-disk: %s holds %" PRIu64 " bytes, %" PRIu64 " were reported written", d.path.c_str(), st.value.size,
         d.written);
    co_return false;
  }
  auto [oec, f] = co_await tern::fs::file::open(ctx, d.path);
  if (oec) {
    fail("full-disk: open %s: %s", d.path.c_str(), ec_text(oec));
    co_return false;
  }
  std::vector<char> buf(256 * 1024);
  for (std::uint64_t pos = 0; pos < d.written;) {
    std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), d.written - pos));
    auto [ec, n] = co_await f.read_exact_at(tern::mutable_buffer(buf.data(), k), pos);
    if (ec) {
      fail("full-disk: %s: read at %" PRIu64 ": %s after %zu bytes", d.path.c_str(), pos, ec_text(ec), n);
      co_return false;
    }
    if (auto bad = check_pattern(seed, pos, buf.data(), k)) {
      fail("full-disk: %s: byte %" PRIu64 " differs from what was written", d.path.c_str(), *bad);
      co_return false;
    }
    pos += k;
  }
  char c;
  auto [eec, en] = co_await f.read_at(tern::mutable_buffer(&c, 1), d.written);
  if (eec != tern::error::eof) {
    fail("full-disk: %s: a read at the end gave '%s'", d.path.c_str(), eec ? ec_text(eec) : "a byte");
    co_return false;
  }
  co_return true;
}

int full_disk(const args& a) {
  tern::io_context ctx;
  int fds = count_fds();
  std::string dir = a.get("dir");
  std::uint64_t nfiles = a.num("files", 4);
  if (dir.empty() || nfiles < 2) {
    std::fprintf(stderr, "full-disk: --dir is required, --files at least 2\n");
    return 2;
  }
  // Per file, more than the file system this check is given holds: a disk that never fills fails the check (and
  // does not fill the machine's memory, tmpfs being RAM).
  const std::uint64_t cap = a.num("cap-mib", 1024) << 20;
  std::vector<disk_file> files(nfiles);
  for (std::uint64_t i = 0; i < nfiles; ++i) files[i].path = dir + "/fill-" + std::to_string(i);
  std::uint64_t verified = 0, resumed = 0, freed = 0;
  std::string enospc_text, allocate_text;
  ctx.block_on([&]() -> tern::task<> {
    std::vector<tern::fs::file> handles;
    tern::fs::open_options w;
    w.access = tern::fs::open_options::write_only;
    w.create = true;
    w.truncate = true;
    for (auto& d : files) {
      auto [ec, f] = co_await tern::fs::file::open(ctx, d.path, w);
      if (ec) {
        fail("full-disk: create %s: %s", d.path.c_str(), ec_text(ec));
        co_return;
      }
      handles.push_back(std::move(f));
    }
    note_fds();
    // 1. Every file written at once until the file system is full (under epoll, several writes on the blocking
    //    pool at a time).
    co_await tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
      for (std::uint64_t i = 0; i < nfiles; ++i) {
        g.spawn([&, i]() -> tern::task<> {
          live_task live;
          auto ec = co_await write_stream(handles[i], 100 + i, files[i].written, cap);
          if (ec == std::errc::no_space_on_device) {
            files[i].full = true;
            enospc_text = ec.message();
          } else {
            fail("full-disk: %s: writing until the disk is full ended with '%s' after %" PRIu64 " bytes",
                 files[i].path.c_str(), ec ? ec_text(ec) : "success", files[i].written);
          }
        });
      }
      co_return;
    });
    if (failed()) co_return;
    // 2. Reserving space on the full disk: no_space_on_device too.
    {
      auto aec = co_await handles[0].allocate(files[0].written, 1 << 20);
      allocate_text = aec ? aec.message() : "success";
      if (aec != std::errc::no_space_on_device) {
        fail("full-disk: allocate() on the full disk gave '%s'", allocate_text.c_str());
        co_return;
      }
      auto st = co_await handles[0].stat();
      if (!st.ec && st.value.size != files[0].written) {
        fail("full-disk: a failed allocate() changed the size of %s", files[0].path.c_str());
        co_return;
      }
    }
    for (auto& f : handles) {
      if (auto ec = co_await f.sync()) fail("full-disk: sync: %s", ec_text(ec));
    }
    // 3. Nothing reported written is lost: each file read back in full.
    for (std::uint64_t i = 0; i < nfiles && !failed(); ++i) {
      if (co_await verify_file(ctx, files[i], 100 + i)) verified += files[i].written;
    }
    if (failed()) co_return;
    // 4. Free the first file's space, and the others go on from where they stopped: each gets a share of it.
    handles[0].close();
    if (auto ec = co_await tern::fs::remove(ctx, files[0].path.c_str())) {
      fail("full-disk: remove %s: %s", files[0].path.c_str(), ec_text(ec));
      co_return;
    }
    freed = files[0].written;
    std::uint64_t share = freed / 2 / (nfiles - 1) / 4096 * 4096;
    if (share == 0) {
      fail("full-disk: the first file held only %" PRIu64 " bytes", freed);
      co_return;
    }
    co_await tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
      for (std::uint64_t i = 1; i < nfiles; ++i) {
        g.spawn([&, i]() -> tern::task<> {
          live_task live;
          std::uint64_t start = files[i].written;
          if (auto ec = co_await write_stream(handles[i], 100 + i, files[i].written, start + share)) {
            fail("full-disk: %s: writing after space was freed: %s after %" PRIu64 " of %" PRIu64 " bytes",
                 files[i].path.c_str(), ec_text(ec), files[i].written - start, share);
          }
          resumed += files[i].written - start;
        });
      }
      co_return;
    });
    for (std::uint64_t i = 1; i < nfiles; ++i) {
      if (auto ec = co_await handles[i].sync()) fail("full-disk: sync after freeing: %s", ec_text(ec));
    }
    handles.clear();
    for (std::uint64_t i = 1; i < nfiles && !failed(); ++i) {
      if (co_await verify_file(ctx, files[i], 100 + i)) verified += share;
    }
    for (std::uint64_t i = 1; i < nfiles; ++i) (void)co_await tern::fs::remove(ctx, files[i].path.c_str());
  }());
  std::uint64_t first_total = 0;
  for (auto& d : files) first_total += d.written;
  first_total -= resumed;
  std::printf("written until full: %" PRIu64 " bytes in %" PRIu64 " files ('%s'); allocate on the full disk: '%s'; "
              "after freeing %" PRIu64 " bytes: %" PRIu64 " more written\n",
              first_total, nfiles, enospc_text.c_str(), allocate_text.c_str(), freed, resumed);
  char summary[400];
  std::snprintf(summary, sizeof summary,
                "files=%" PRIu64 " written_until_enospc=%" PRIu64 " error='%s' partial_writes_then_enospc=%" PRIu64
                " allocate_on_full='%s' freed=%" PRIu64 " written_after_freeing=%" PRIu64
                " bytes_read_back_verified=%" PRIu64,
                nfiles, first_total, enospc_text.c_str(), g_short_writes, allocate_text.c_str(), freed, resumed,
                verified);
  return finish(ctx, fds, summary);
}

// ---- close-pending: sockets closed by another task under pending operations ----------------------------------------

enum op_kind { k_read, k_receive, k_read_partial, k_write_blocked, k_read_beside_write, k_accept, k_connect, kinds };
const char* const kind_names[kinds] = {"read_some", "receive", "read_exact(half arrived)", "write_all(blocked)",
                                       "read_some(beside the write)", "accept", "connect(SYN dropped)"};

struct pending_result {
  int completions = 0;
  std::error_code ec;
  std::size_t n = 0;
};

struct close_state {
  std::vector<pending_result> results[kinds];
  std::uint64_t completed_early[kinds] = {};
  bool closing = false;  // set when the closer starts: a completion before it is early
  steady::time_point closed_at{};
  steady::time_point last_completion{};
};

void record_completion(close_state& st, op_kind k, std::size_t i, std::error_code ec, std::size_t n) {
  auto& r = st.results[k][i];
  ++r.completions;
  r.ec = ec;
  r.n = n;
  if (!st.closing) ++st.completed_early[k];
  st.last_completion = steady::now();
}

// The good client: verified echoes of 4000 bytes on its own connection, until told to stop; counts them.
tern::task<> good_echo_server(net::tcp_socket s) {
  live_task live;
  std::vector<char> buf(64 * 1024);
  for (;;) {
    auto [ec, n] = co_await tern::with_timeout(s.read_some(tern::mutable_buffer(buf.data(), buf.size())), io_deadline);
    if (ec == net::error::eof) co_return;
    if (ec) {
      fail("close-pending: good server read: %s", ec_text(ec));
      co_return;
    }
    if (!co_await write_fully(s, tern::const_buffer(buf.data(), n), "close-pending good server")) co_return;
  }
}

tern::task<bool> good_round(net::tcp_socket& s, std::uint64_t seed) {
  std::vector<char> out(4000), in(4000);
  fill_pattern(seed, 0, out.data(), out.size());
  if (!co_await write_fully(s, tern::const_buffer(out.data(), out.size()), "close-pending good client")) {
    co_return false;
  }
  if (!co_await read_fully(s, tern::mutable_buffer(in.data(), in.size()), "close-pending good client")) co_return false;
  if (in != out) {
    fail("close-pending: good client echo %" PRIu64 " differs", seed);
    co_return false;
  }
  co_return true;
}

int close_pending(const args& a) {
  tern::io_context ctx;
  int fds = count_fds();
  const std::uint64_t n = a.num("count", 100);
  constexpr std::size_t partial = 4096;             // bytes of the read_exact that arrive before the close
  // Far more than the writer's small send buffer and the peer's receive window take. The peer's receive buffer is
  // left alone: shrunk as well, its window opens by less than a segment when it reads, and the closed writer's
  // remaining bytes then wait for the zero-window probes (seconds, backing off) instead of flowing.
  constexpr std::size_t blocked_write = 1 << 20;
  close_state st;
  for (auto& r : st.results) r.resize(n);
  std::uint64_t good_during = 0, good_after = 0, early_connects = 0, refused_after = 0, write_taken = 0;
  bool storm_done = false;
  std::uint64_t canceled = 0, total = 0;
  std::uint64_t write_verified = 0;
  int fds_before = 0, fds_closed = 0, fds_expected_closed = 0;
  double settle_ms = 0;

  auto main_acceptor = listen_on(ctx, net::endpoint::loopback_v4(0));
  if (!main_acceptor) return finish(ctx, fds, "");
  net::endpoint ep = main_acceptor->local_endpoint().value;
  ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& top) -> tern::task<> {
    // The good client and its server, on connections of their own, the whole time.
    auto good = co_await connect_to(ctx, ep, "close-pending good client");
    auto [gec, good_peer] = co_await tern::with_timeout(main_acceptor->accept(), io_deadline);
    if (!good || gec) {
      fail("close-pending: good connection: %s", gec ? ec_text(gec) : "connect failed");
      co_return;
    }
    top.spawn(good_echo_server, std::move(good_peer));
    // The client owns its socket, and the flags it reads live outside this body, so that an early return here
    // (after a failure) leaves it nothing dangling: it stops on the failure.
    top.spawn([&](net::tcp_socket s) -> tern::task<> {
      live_task live;
      for (std::uint64_t r = 0; !storm_done && !failed(); ++r) {
        if (!co_await good_round(s, r)) co_return;
        ++good_during;
      }
      for (std::uint64_t r = 0; r < 20 && !failed(); ++r) {
        if (co_await good_round(s, 1000 + r)) ++good_after;
      }
    }, std::move(*good));  // closed at the end: its server sees the end of the stream and ends
    fds_before = count_fds();

    // The sockets: for reads, receives, partial reads and blocked writes, connected pairs (the peer end is ours
    // too); acceptors nobody connects to; connects to a listener whose accept queue is full.
    std::vector<net::tcp_socket> socks[kinds], peers[kinds];
    std::vector<net::tcp_acceptor> acceptors;
    std::vector<net::endpoint> acceptor_eps;
    for (op_kind k : {k_read, k_receive, k_read_partial, k_write_blocked}) {
      for (std::uint64_t i = 0; i < n; ++i) {
        auto s = co_await connect_to(ctx, ep, "close-pending");
        auto [ec, p] = co_await tern::with_timeout(main_acceptor->accept(), io_deadline);
        if (!s || ec) {
          fail("close-pending: connection %" PRIu64 ": %s", i, ec ? ec_text(ec) : "connect failed");
          co_return;
        }
        if (k == k_write_blocked) (void)s->set_send_buffer_size(4096);
        socks[k].push_back(std::move(*s));
        peers[k].push_back(std::move(p));
      }
    }
    for (std::uint64_t i = 0; i < n; ++i) {
      net::tcp_acceptor acc(ctx);
      if (auto ec = acc.listen(net::endpoint::loopback_v4(0))) {
        fail("close-pending: listen: %s", ec_text(ec));
        co_return;
      }
      acceptor_eps.push_back(acc.local_endpoint().value);
      acceptors.push_back(std::move(acc));
    }
    // A backlog of 1 takes two connections; the SYNs of the next ones are dropped while nobody accepts, so their
    // connects stay in progress (the kernel retries the SYN after 1 s, 3 s, ...).
    net::tcp_acceptor full_listener(ctx);
    net::acceptor_options lo;
    lo.backlog = 1;
    if (auto ec = full_listener.listen(net::endpoint::loopback_v4(0), lo)) {
      fail("close-pending: listen: %s", ec_text(ec));
      co_return;
    }
    net::endpoint full_ep = full_listener.local_endpoint().value;
    std::vector<net::tcp_socket> fillers;
    for (int i = 0; i < 2; ++i) {
      auto s = co_await connect_to(ctx, full_ep, "close-pending backlog filler");
      if (!s) co_return;
      fillers.push_back(std::move(*s));
    }
    for (std::uint64_t i = 0; i < n; ++i) socks[k_connect].emplace_back(ctx);
    for (std::uint64_t i = 0; i < n; ++i) {
      std::vector<char> half(partial);
      fill_pattern(300 + i, 0, half.data(), half.size());
      auto& peer = peers[k_read_partial][i];
      if (!co_await write_fully(peer, tern::const_buffer(half.data(), half.size()), "close-pending partial")) {
        co_return;
      }
    }
    // One stream for every writer (the same bytes, so that 1000 writers do not need 1 GiB): what each peer gets
    // must be exactly its first bytes, as many as its writer's write_all reported.
    std::vector<char> big(blocked_write);
    fill_pattern(700, 0, big.data(), big.size());

    // The operations, each in a task of its own under a deadline far past the close: one that the close does not
    // end shows up as timed_out.
    const auto limit = 30s;
    co_await tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
      for (std::uint64_t i = 0; i < n; ++i) {
        g.spawn([&, i]() -> tern::task<> {
          live_task live;
          char c;
          auto [ec, m] = co_await tern::with_timeout(socks[k_read][i].read_some(tern::mutable_buffer(&c, 1)), limit);
          record_completion(st, k_read, i, ec, m);
        });
        g.spawn([&, i]() -> tern::task<> {
          live_task live;
          auto [ec, lease] = co_await tern::with_timeout(socks[k_receive][i].receive(), limit);
          record_completion(st, k_receive, i, ec, lease.size());
        });
        g.spawn([&, i]() -> tern::task<> {
          live_task live;
          std::vector<char> buf(2 * partial);
          auto [ec, m] = co_await tern::with_timeout(
              socks[k_read_partial][i].read_exact(tern::mutable_buffer(buf.data(), buf.size())), limit);
          record_completion(st, k_read_partial, i, ec, m);
          if (m > 0 && m <= buf.size()) {
            if (auto bad = check_pattern(300 + i, 0, buf.data(), std::min(m, partial))) {
              fail("close-pending: partial read %" PRIu64 ": byte %" PRIu64 " differs", i, *bad);
            }
          }
        });
        g.spawn([&, i]() -> tern::task<> {
          live_task live;
          auto [ec, m] = co_await tern::with_timeout(
              socks[k_write_blocked][i].write_all(tern::const_buffer(big.data(), big.size())),
              limit);
          record_completion(st, k_write_blocked, i, ec, m);
        });
        g.spawn([&, i]() -> tern::task<> {
          live_task live;
          char c;
          auto [ec, m] = co_await tern::with_timeout(socks[k_write_blocked][i].read_some(tern::mutable_buffer(&c, 1)),
                                                     limit);
          record_completion(st, k_read_beside_write, i, ec, m);
        });
        g.spawn([&, i]() -> tern::task<> {
          live_task live;
          auto [ec, s] = co_await tern::with_timeout(acceptors[i].accept(), limit);
          record_completion(st, k_accept, i, ec, 0);
        });
        g.spawn([&, i]() -> tern::task<> {
          live_task live;
          auto ec = co_await tern::with_timeout(socks[k_connect][i].connect(full_ep), limit);
          record_completion(st, k_connect, i, ec, 0);
        });
      }
      // The closer: once every operation had time to start and block, it closes every socket and acceptor at once.
      g.spawn([&]() -> tern::task<> {
        live_task live;
        co_await tern::sleep_for(500ms);
        note_fds();
        st.closing = true;
        st.closed_at = steady::now();
        for (op_kind k : {k_read, k_receive, k_read_partial, k_write_blocked}) {
          for (auto& s : socks[k]) s.close();
        }
        for (std::uint64_t i = 0; i < n; ++i) {
          if (st.results[k_connect][i].completions == 0) socks[k_connect][i].close();
        }
        for (auto& acc : acceptors) acc.close();
      });
      co_return;
    });
    settle_ms = std::chrono::duration<double, std::milli>(st.last_completion - st.closed_at).count();
    early_connects = st.completed_early[k_connect];
    // Every pending operation completed once, with operation_canceled (the partial read with the bytes that had
    // arrived, the blocked write with those the kernel took).
    if (!failed()) {
      for (int k = 0; k < kinds && !failed(); ++k) {
        for (std::uint64_t i = 0; i < n && !failed(); ++i) {
          const auto& r = st.results[k][i];
          if (k == k_connect && st.completed_early[k] != 0 && r.completions == 1 && !r.ec) continue;  // got through
          ++total;
          if (r.completions != 1) {
            fail("close-pending: %s %" PRIu64 " completed %d times", kind_names[k], i, r.completions);
          } else if (r.ec != tern::error::operation_canceled) {
            fail("close-pending: %s %" PRIu64 " closed under it completed with '%s', not operation_canceled",
                 kind_names[k], i, r.ec ? ec_text(r.ec) : "success");
          } else if (k == k_read_partial && r.n != partial) {
            fail("close-pending: read_exact %" PRIu64 " reported %zu bytes read, %zu had arrived", i, r.n, partial);
          } else if ((k == k_read || k == k_read_beside_write || k == k_receive) && r.n != 0) {
            fail("close-pending: %s %" PRIu64 " reported %zu bytes", kind_names[k], i, r.n);
          } else if (k == k_write_blocked && r.n >= blocked_write) {
            fail("close-pending: write_all %" PRIu64 " was not blocked (all %zu bytes taken)", i, r.n);
          } else {
            ++canceled;
          }
        }
        if (k != k_connect && st.completed_early[k] != 0 && !failed()) {
          fail("close-pending: %" PRIu64 " %s operations completed before the close", st.completed_early[k],
               kind_names[k]);
        }
      }
    }
    if (failed()) co_return;

    // The closed descriptors are free now: every one of them, and no other (the peers, fillers and the listener
    // are still open).
    for (auto& s : socks[k_connect]) {
      if (s.is_open()) ++fds_expected_closed;  // connected early: still open, closed below
    }
    fds_expected_closed += fds_before + static_cast<int>(4 * n /* peers */ + 2 /* fillers */ + 1 /* listener */);
    for (int tries = 0; tries < 500; ++tries) {  // the loop finishes handing closes to the kernel on its next turns
      fds_closed = count_fds();
      if (fds_closed == fds_expected_closed) break;
      co_await tern::sleep_for(10ms);
    }
    if (fds_closed != fds_expected_closed) {
      fail("close-pending: %d descriptors open after the closes, %d expected: closed descriptors were not freed",
           fds_closed, fds_expected_closed);
    }
    // The listening ports are gone: a connect to each is refused.
    for (std::uint64_t i = 0; i < n && !failed(); ++i) {
      net::tcp_socket probe(ctx);
      auto ec = co_await tern::with_timeout(probe.connect(acceptor_eps[i]), 5s);
      if (ec == std::errc::connection_refused) ++refused_after;
      else fail("close-pending: a connect to closed acceptor %" PRIu64 " gave '%s'", i, ec ? ec_text(ec) : "success");
    }
    // Each blocked writer's peer reads exactly the bytes the cancelled write reported, then the end of the stream
    // (one after the other: each closed writer's kernel socket drains on its own as its peer reads).
    for (std::uint64_t i = 0; i < n && !failed(); ++i) {
      std::size_t taken = st.results[k_write_blocked][i].n;
      if (co_await receive_stream(peers[k_write_blocked][i], 700, taken, "close-pending blocked writer's peer")) {
        write_verified += taken;
      }
    }
    for (auto& r : st.results[k_write_blocked]) write_taken += r.n;
    storm_done = true;  // the good client does its rounds "after" now
  }));
  main_acceptor.reset();
  if (!failed() && early_connects > 4) {
    fail("close-pending: %" PRIu64 " of %" PRIu64 " connects to the full listener got through: the test's "
         "premise (SYNs dropped) does not hold", early_connects, n);
  }
  if (!failed() && write_verified != write_taken) fail("close-pending: blocked writers' bytes verified short");
  if (!failed() && good_during == 0) fail("close-pending: the good client was not served during the closes");
  if (!failed() && good_after != 20) fail("close-pending: the good client was not served after the closes");
  char summary[400];
  std::snprintf(summary, sizeof summary,
                "per_kind=%" PRIu64 " kinds=%d completed_canceled=%" PRIu64 "/%" PRIu64
                " last_completion_after_close_ms=%.1f blocked_write_bytes_verified=%" PRIu64
                " connects_through_early=%" PRIu64 " closed_ports_refused=%" PRIu64 " fds_after_closes=%d"
                " good_echoes_during=%" PRIu64 " good_echoes_after=%" PRIu64,
                n, static_cast<int>(kinds), canceled, total, settle_ms, write_verified, early_connects, refused_after,
                fds_closed, good_during, good_after);
  return finish(ctx, fds, summary);
}

}  // namespace

TERN_RELIABILITY_COMMAND("enfile-client", enfile_client,
                         "--connect EP --pid PID [--conns M] [--before B] [--window-ms W]   ENFILE under a server");
TERN_RELIABILITY_COMMAND("ring-dry", ring_dry, "[--conns C] [--bytes N]   streams into receive() with a tiny pool");
TERN_RELIABILITY_COMMAND("full-disk", full_disk, "--dir D [--files F]   writes until ENOSPC, then after freeing space");
TERN_RELIABILITY_COMMAND("close-pending", close_pending, "[--count N]   sockets closed under pending operations");
