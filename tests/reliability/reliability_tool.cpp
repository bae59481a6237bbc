// reliability_tool: the programs scripts/reliability.sh runs against tern, one subcommand each.
//
//   stream-server   --listen EP --conns K                accept K streams, verify and answer each, then exit
//   stream-client   --connect EP --bytes N [--conns C]   C streams of N bytes each way, every byte verified
//   exchange-server --listen EP --conns K                answer request/response exchanges on K connections
//   exchange-client --connect EP --count N [--conns C] [--max-len B] [--deadline-every D]
//   proxy           --listen EP --upstream EP --conns K [--delay-ms 50] [--slice 1]
//   hold-client     --connect EP --conns N [--hold-ms T] [--size S]   N echo connections held open, verified
//   emfile-client   --connect EP --pid PID --conns M [--window-ms W]  EMFILE on the server's accept, then recovery
//   reset           [--rounds R]                          peers that reset mid-read and mid-write
//   refused                                               connect to a port nobody listens on
//   slow-reader     [--conns C] [--stall-ms T]            writers to peers that stop reading
//   cancel-storm    [--count N]                           N timeouts firing at once
//
// Other checks keep their subcommands in source files of their own beside this one; each registers itself with
// TERN_RELIABILITY_COMMAND (tool.hpp), and `reliability_tool` without arguments lists them all.
//
// Design: every byte a check sends is a deterministic pseudo-random stream (splitmix64 of a seed and the byte's
// position), so the receiver checks each byte against the stream it expects, at whatever split the network
// delivered it, and names the first offset that differs. Each subcommand prints what it did and ends with one
// line, "RESULT ok key=value..." or "RESULT fail <reason>", and exits 0 or 1; the script reads that line. Every
// subcommand also checks its own end state: the descriptors it opened are closed (the /proc/self/fd count is back
// to its start), no operation is pending on its loop (the loop's metrics: every operation started has completed)
// and no task it spawned is still alive (a counter every task holds). Every operation that waits on the network
// has a deadline (with_timeout), so a lost byte shows up as a named failure, never as a hang.
#include "tool.hpp"

#include <csignal>

using namespace reltool;

namespace {
std::uint64_t g_stream_bytes = 0;

tern::task<> stream_serve_one(net::tcp_socket s) {
  live_task live;
  stream_header h;
  if (!co_await read_fully(s, tern::mutable_buffer(&h, sizeof h), "stream-server header")) co_return;
  if (h.magic != stream_header{}.magic) {
    fail("stream-server: bad header magic %08x", h.magic);
    co_return;
  }
  // Both directions at once: a read and a write in flight together on one socket.
  auto [in_ok, out_ok] = co_await tern::when_all(receive_stream(s, h.seed, h.bytes, "stream-server"),
                                                send_stream(s, h.seed + 1, h.bytes, "stream-server"));
  if (in_ok && out_ok) g_stream_bytes += 2 * h.bytes;
}

int stream_server(const args& a) {
  tern::io_context ctx;
  int fds = count_fds();
  std::uint64_t conns = a.num("conns", 1);
  {
    auto acceptor = listen_on(ctx, a.endpoint("listen"));
    if (acceptor) ctx.block_on(serve_k(ctx, *acceptor, conns, stream_serve_one));
  }
  return finish(ctx, fds, "connections=" + std::to_string(conns) + " bytes_verified=" + std::to_string(g_stream_bytes));
}

tern::task<> stream_client_one(tern::io_context& ctx, net::endpoint ep, std::uint64_t seed, std::uint64_t bytes) {
  live_task live;
  auto s = co_await connect_to(ctx, ep, "stream-client");
  if (!s) co_return;
  (void)s->set_no_delay(true);
  stream_header h;
  h.bytes = bytes;
  h.seed = seed;
  if (!co_await write_fully(*s, tern::const_buffer(&h, sizeof h), "stream-client header")) co_return;
  auto [out_ok, in_ok] = co_await tern::when_all(send_stream(*s, seed, bytes, "stream-client"),
                                                receive_stream(*s, seed + 1, bytes, "stream-client"));
  if (in_ok && out_ok) g_stream_bytes += 2 * bytes;
}

int stream_client(const args& a) {
  tern::io_context ctx;
  int fds = count_fds();
  net::endpoint ep = a.endpoint("connect");
  std::uint64_t conns = a.num("conns", 1);
  std::uint64_t bytes = a.num("bytes", 64ull << 20);
  auto t0 = steady::now();
  ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
    for (std::uint64_t c = 0; c < conns; ++c) g.spawn(stream_client_one, std::ref(ctx), ep, 1000 + 2 * c, bytes / conns);
    co_return;
  }));
  double secs = std::chrono::duration<double>(steady::now() - t0).count();
  char summary[256];
  std::snprintf(summary, sizeof summary, "connections=%" PRIu64 " bytes_verified=%" PRIu64 " seconds=%.2f MiB/s=%.1f",
                conns, g_stream_bytes, secs, g_stream_bytes / secs / (1 << 20));
  if (!failed() && g_stream_bytes != 2 * (bytes / conns) * conns) fail("stream-client: verified fewer bytes than sent");
  return finish(ctx, fds, summary);
}

// ---- exchange: request/response pairs, each checked ------------------------------------------------------------------

struct exchange_header {
  std::uint32_t magic = 0x45584348;  // "EXCH"
  std::uint32_t length = 0;          // payload bytes after the header
  std::uint64_t id = 0;
  std::uint32_t delay_ms = 0;        // the server waits this long before answering (the deadline check)
  std::uint32_t reserved = 0;
};
constexpr std::uint32_t max_exchange_payload = 1 << 20;
std::uint64_t response_seed(std::uint64_t id) { return ~id * 31; }

std::uint64_t g_exchanges = 0;
std::uint64_t g_deadlines_hit = 0;
std::vector<double> g_latencies_ms;

tern::task<> exchange_serve_one(net::tcp_socket s) {
  live_task live;
  std::vector<char> payload;
  for (;;) {
    exchange_header h;
    auto [ec, n] = co_await tern::with_timeout(s.read_exact(tern::mutable_buffer(&h, sizeof h)), io_deadline);
    if (ec == net::error::eof && n == 0) co_return;  // the client is done
    if (ec) {
      fail("exchange-server: request header: %s after %zu bytes", ec_text(ec), n);
      co_return;
    }
    if (h.magic != exchange_header{}.magic || h.length > max_exchange_payload) {
      fail("exchange-server: bad request header (magic %08x, length %u)", h.magic, h.length);
      co_return;
    }
    payload.resize(sizeof h + h.length);
    if (!co_await read_fully(s, tern::mutable_buffer(payload.data(), h.length), "exchange-server payload")) co_return;
    if (auto bad = check_pattern(h.id, 0, payload.data(), h.length)) {
      fail("exchange-server: request %" PRIu64 " byte %" PRIu64 " differs", h.id, *bad);
      co_return;
    }
    if (h.delay_ms != 0) co_await tern::sleep_for(std::chrono::milliseconds(h.delay_ms));
    std::memcpy(payload.data(), &h, sizeof h);
    fill_pattern(response_seed(h.id), 0, payload.data() + sizeof h, h.length);
    if (!co_await write_fully(s, tern::const_buffer(payload.data(), payload.size()), "exchange-server response")) co_return;
  }
}

int exchange_server(const args& a) {
  tern::io_context ctx;
  int fds = count_fds();
  std::uint64_t conns = a.num("conns", 1);
  {
    auto acceptor = listen_on(ctx, a.endpoint("listen"));
    if (acceptor) ctx.block_on(serve_k(ctx, *acceptor, conns, exchange_serve_one));
  }
  return finish(ctx, fds, "connections=" + std::to_string(conns));
}

struct exchange_plan {
  std::uint64_t count;
  std::uint64_t conns;
  std::uint64_t max_len;
  std::uint64_t deadline_every;  // every D-th exchange is answered late and first read under a short deadline
};

tern::task<> exchange_client_one(tern::io_context& ctx, net::endpoint ep, exchange_plan plan, std::uint64_t first) {
  live_task live;
  auto s = co_await connect_to(ctx, ep, "exchange-client");
  if (!s) co_return;
  (void)s->set_no_delay(true);
  std::vector<char> buf;
  for (std::uint64_t id = first; id < plan.count && !failed(); id += plan.conns) {
    exchange_header h;
    h.id = id;
    h.length = static_cast<std::uint32_t>(1 + splitmix(id) % plan.max_len);
    bool late = plan.deadline_every != 0 && id % plan.deadline_every == plan.deadline_every - 1;
    h.delay_ms = late ? 300 : 0;
    buf.resize(sizeof h + h.length);
    std::memcpy(buf.data(), &h, sizeof h);
    fill_pattern(id, 0, buf.data() + sizeof h, h.length);
    auto t0 = steady::now();
    if (!co_await write_fully(*s, tern::const_buffer(buf.data(), buf.size()), "exchange-client request")) co_return;
    exchange_header r;
    std::size_t have = 0;
    if (late) {
      // The answer comes 300 ms late: a 100 ms deadline must expire with nothing read, and the same bytes must
      // then arrive whole on the next read (a timed-out read loses nothing).
      auto [ec, n] = co_await tern::with_timeout(s->read_exact(tern::mutable_buffer(&r, sizeof r)), 100ms);
      if (ec != tern::error::timed_out) {
        fail("exchange-client: exchange %" PRIu64 ": a 100 ms deadline on an answer due in 300 ms gave '%s'", id,
             ec ? ec_text(ec) : "success");
        co_return;
      }
      have = n;
      ++g_deadlines_hit;
    }
    if (!co_await read_fully(*s, tern::mutable_buffer(reinterpret_cast<char*>(&r) + have, sizeof r - have),
                             "exchange-client response header")) {
      co_return;
    }
    if (r.magic != h.magic || r.id != id || r.length != h.length) {
      fail("exchange-client: exchange %" PRIu64 ": answer for id %" PRIu64 " length %u (expected length %u)", id, r.id,
           r.length, h.length);
      co_return;
    }
    if (!co_await read_fully(*s, tern::mutable_buffer(buf.data(), r.length), "exchange-client response")) co_return;
    if (auto bad = check_pattern(response_seed(id), 0, buf.data(), r.length)) {
      fail("exchange-client: exchange %" PRIu64 ": answer byte %" PRIu64 " differs", id, *bad);
      co_return;
    }
    g_latencies_ms.push_back(std::chrono::duration<double, std::milli>(steady::now() - t0).count());
    ++g_exchanges;
  }
  (void)s->shutdown(net::shutdown_how::send);
  char extra;
  auto [ec, n] = co_await tern::with_timeout(s->read_some(tern::mutable_buffer(&extra, 1)), io_deadline);
  if (!failed() && ec != net::error::eof) fail("exchange-client: expected the server's close, got %s", ec ? ec_text(ec) : "bytes");
}

int exchange_client(const args& a) {
  tern::io_context ctx;
  int fds = count_fds();
  net::endpoint ep = a.endpoint("connect");
  exchange_plan plan{a.num("count", 2000), a.num("conns", 16), a.num("max-len", 2048), a.num("deadline-every", 100)};
  if (plan.conns == 0 || plan.max_len == 0 || plan.max_len > max_exchange_payload) {
    std::fprintf(stderr, "exchange-client: --conns and --max-len must be in range\n");
    return 2;
  }
  auto t0 = steady::now();
  ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
    for (std::uint64_t c = 0; c < plan.conns; ++c) g.spawn(exchange_client_one, std::ref(ctx), ep, plan, c);
    co_return;
  }));
  double secs = std::chrono::duration<double>(steady::now() - t0).count();
  std::uint64_t expected_deadlines = plan.deadline_every ? plan.count / plan.deadline_every : 0;
  if (!failed() && g_exchanges != plan.count) {
    fail("exchange-client: %" PRIu64 " of %" PRIu64 " exchanges answered", g_exchanges, plan.count);
  }
  if (!failed() && g_deadlines_hit != expected_deadlines) {
    fail("exchange-client: %" PRIu64 " deadlines expired, %" PRIu64 " expected", g_deadlines_hit, expected_deadlines);
  }
  std::sort(g_latencies_ms.begin(), g_latencies_ms.end());
  auto pct = [](double p) {
    return g_latencies_ms.empty() ? 0.0 : g_latencies_ms[std::min(g_latencies_ms.size() - 1, std::size_t(p * g_latencies_ms.size()))];
  };
  char summary[256];
  std::snprintf(summary, sizeof summary,
                "exchanges_verified=%" PRIu64 " deadlines_expired=%" PRIu64 " seconds=%.2f p50_ms=%.2f p99_ms=%.1f max_ms=%.1f",
                g_exchanges, g_deadlines_hit, secs, pct(0.5), pct(0.99), g_latencies_ms.empty() ? 0.0 : g_latencies_ms.back());
  return finish(ctx, fds, summary);
}

// ---- proxy: a delay line that slices writes ---------------------------------------------------------------------------

struct chunk {
  steady::time_point arrived;
  std::string bytes;
};

struct proxy_plan {
  std::chrono::milliseconds delay;
  std::size_t slice;  // bytes per write
};

std::uint64_t g_proxy_bytes = 0;
std::uint64_t g_proxy_writes = 0;

// Reads from `from` and queues what arrives with its arrival time; the channel's bound is the backpressure.
tern::task<> proxy_read(net::tcp_socket& from, tern::sync::channel<chunk>& line, const char* dir) {
  std::vector<char> buf(16 * 1024);
  for (;;) {
    auto [ec, n] = co_await tern::with_timeout(from.read_some(tern::mutable_buffer(buf.data(), buf.size())), io_deadline);
    if (ec == net::error::eof) break;
    if (ec) {
      fail("proxy %s: read: %s", dir, ec_text(ec));
      break;
    }
    // Named before the send: g++ 12 relocates a braced aggregate temporary in a co_await operand bitwise.
    chunk c{steady::now(), std::string(buf.data(), n)};
    if (auto sec = co_await line.send(std::move(c)); sec) break;
  }
  line.close();
}

// Writes each chunk `delay` after it arrived, `slice` bytes per write; then passes the end of stream on.
tern::task<> proxy_write(net::tcp_socket& to, tern::sync::channel<chunk>& line, proxy_plan plan, const char* dir) {
  for (;;) {
    auto [ec, c] = co_await line.receive();
    if (ec) break;  // closed and drained
    co_await tern::sleep_until(c->arrived + plan.delay);
    for (std::size_t i = 0; i < c->bytes.size(); i += plan.slice) {
      std::size_t k = std::min(plan.slice, c->bytes.size() - i);
      if (!co_await write_fully(to, tern::const_buffer(c->bytes.data() + i, k), dir)) {
        line.close();
        co_return;
      }
      ++g_proxy_writes;
    }
    g_proxy_bytes += c->bytes.size();
  }
  (void)to.shutdown(net::shutdown_how::send);
}

tern::task<> proxy_one(tern::io_context& ctx, net::endpoint upstream, proxy_plan plan, net::tcp_socket down) {
  live_task live;
  auto up = co_await connect_to(ctx, upstream, "proxy");
  if (!up) co_return;
  (void)up->set_no_delay(true);
  (void)down.set_no_delay(true);
  tern::sync::channel<chunk> to_up(64), to_down(64);
  co_await tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
    g.spawn(proxy_read(down, to_up, "client->server"));
    g.spawn(proxy_write(*up, to_up, plan, "client->server"));
    g.spawn(proxy_read(*up, to_down, "server->client"));
    g.spawn(proxy_write(down, to_down, plan, "server->client"));
    co_return;
  });
}

int proxy(const args& a) {
  tern::io_context ctx;
  int fds = count_fds();
  net::endpoint upstream = a.endpoint("upstream");
  proxy_plan plan{std::chrono::milliseconds(a.num("delay-ms", 50)), static_cast<std::size_t>(a.num("slice", 1))};
  if (plan.slice == 0) plan.slice = 1;
  std::uint64_t conns = a.num("conns", 1);
  {
    auto acceptor = listen_on(ctx, a.endpoint("listen"));
    if (acceptor) {
      ctx.block_on(serve_k(ctx, *acceptor, conns, [&ctx, upstream, plan](net::tcp_socket s) {
        return proxy_one(ctx, upstream, plan, std::move(s));
      }));
    }
  }
  return finish(ctx, fds,
                "connections=" + std::to_string(conns) + " bytes_forwarded=" + std::to_string(g_proxy_bytes) +
                    " writes=" + std::to_string(g_proxy_writes));
}

// ---- hold-client: many echo connections held open ---------------------------------------------------------------------

std::uint64_t g_rounds_verified = 0;

// One verified echo of `size` bytes on s (stream seed from the connection and round).
tern::task<bool> echo_round(net::tcp_socket& s, std::uint64_t seed, std::size_t size, const char* who) {
  std::vector<char> out(size), in(size);
  fill_pattern(seed, 0, out.data(), size);
  if (!co_await write_fully(s, tern::const_buffer(out.data(), size), who)) co_return false;
  if (!co_await read_fully(s, tern::mutable_buffer(in.data(), size), who)) co_return false;
  if (auto bad = check_pattern(seed, 0, in.data(), size)) {
    fail("%s: echo byte %" PRIu64 " differs", who, *bad);
    co_return false;
  }
  ++g_rounds_verified;
  co_return true;
}

tern::task<> hold_open_one(tern::io_context& ctx, net::endpoint ep, std::size_t size, std::uint64_t i,
                           std::vector<net::tcp_socket>& held) {
  live_task live;
  auto s = co_await connect_to(ctx, ep, "hold-client");
  if (!s) co_return;
  if (!co_await echo_round(*s, i << 16, size, "hold-client first echo")) co_return;
  held[i] = std::move(*s);
}

tern::task<> hold_round_one(net::tcp_socket& s, std::uint64_t seed, std::size_t size) {
  live_task live;
  co_await echo_round(s, seed, size, "hold-client echo");
}

int hold_client(const args& a) {
  tern::io_context ctx;
  int fds = count_fds();
  net::endpoint ep = a.endpoint("connect");
  std::uint64_t conns = a.num("conns", 1000);
  auto hold = std::chrono::milliseconds(a.num("hold-ms", 3000));
  std::size_t size = a.num("size", 256);
  std::uint64_t batch = a.num("batch", 500);  // connects in flight at once: below the listen backlog
  std::vector<net::tcp_socket> held;
  held.reserve(conns);
  for (std::uint64_t i = 0; i < conns; ++i) held.emplace_back(ctx);
  auto t0 = steady::now();
  for (std::uint64_t from = 0; from < conns && !failed(); from += batch) {
    ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
      for (std::uint64_t i = from; i < std::min(conns, from + batch); ++i) {
        g.spawn(hold_open_one, std::ref(ctx), ep, size, i, std::ref(held));
      }
      co_return;
    }));
  }
  double open_secs = std::chrono::duration<double>(steady::now() - t0).count();
  std::uint64_t open = std::count_if(held.begin(), held.end(), [](auto& s) { return s.is_open(); });
  if (!failed() && open != conns) fail("hold-client: %" PRIu64 " of %" PRIu64 " connections open", open, conns);
  if (!failed()) {
    std::printf("held %" PRIu64 " connections (opened and verified in %.2f s)\n", open, open_secs);
    std::fflush(stdout);
    // Every connection echoes again each 500 ms while they are held, so the server holds them busy, not idle.
    auto until = steady::now() + hold;
    std::uint64_t round = 1;
    while (steady::now() < until && !failed()) {
      ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
        for (std::uint64_t i = 0; i < conns; ++i) g.spawn(hold_round_one(held[i], (i << 16) + round, size));
        co_return;
      }));
      ++round;
      ctx.block_on([]() -> tern::task<> { co_await tern::sleep_for(500ms); }());
    }
  }
  held.clear();  // closes them all
  std::printf("closed\n");
  std::fflush(stdout);
  return finish(ctx, fds,
                "connections=" + std::to_string(conns) + " echoes_verified=" + std::to_string(g_rounds_verified));
}

// ---- emfile-client: fill the server's descriptor table, watch its CPU, free descriptors ---------------------------------

int emfile_client(const args& a) {
  tern::io_context ctx;
  int fds = count_fds();
  net::endpoint ep = a.endpoint("connect");
  long pid = static_cast<long>(a.num("pid", 0));
  std::uint64_t conns = a.num("conns", 200);
  auto window = std::chrono::milliseconds(a.num("window-ms", 2000));
  if (pid == 0) {
    std::fprintf(stderr, "emfile-client: --pid is required\n");
    return 2;
  }
  std::vector<net::tcp_socket> socks;
  std::vector<char> served(conns, 0);
  for (std::uint64_t i = 0; i < conns; ++i) socks.emplace_back(ctx);
  // 1. Connect all (the kernel completes the handshakes into the backlog whether or not the server accepts) and send
  //    each a ping; those the server could accept echo it within a second.
  ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
    for (std::uint64_t i = 0; i < conns; ++i) {
      g.spawn([&, i]() -> tern::task<> {
        live_task live;
        if (auto ec = co_await tern::with_timeout(socks[i].connect(ep), io_deadline)) {
          fail("emfile-client: connect %" PRIu64 ": %s", i, ec_text(ec));
          co_return;
        }
        std::uint64_t ping = i;
        if (!co_await write_fully(socks[i], tern::const_buffer(&ping, sizeof ping), "emfile-client ping")) co_return;
        std::uint64_t echo = 0;
        auto [ec, n] = co_await tern::with_timeout(socks[i].read_exact(tern::mutable_buffer(&echo, sizeof echo)), 1s);
        if (!ec && echo != ping) fail("emfile-client: connection %" PRIu64 ": wrong echo", i);
        if (!ec) served[i] = 1;
        else if (ec != tern::error::timed_out || n != 0) fail("emfile-client: connection %" PRIu64 ": %s", i, ec_text(ec));
      });
    }
    co_return;
  }));
  std::uint64_t served_first = std::count(served.begin(), served.end(), 1);
  std::printf("served at once: %" PRIu64 " of %" PRIu64 " (the rest wait in the backlog)\n", served_first, conns);
  if (!failed() && (served_first == 0 || served_first == conns)) {
    fail("emfile-client: %" PRIu64 " of %" PRIu64 " served at once: the server's descriptor limit was not reached "
         "(or nothing was served)", served_first, conns);
  }
  // 2. The server is now out of descriptors with connections waiting: its CPU time over the window shows whether its
  //    accept loop backs off or spins.
  long t0 = cpu_ticks(pid);
  auto w0 = steady::now();
  ctx.block_on([](auto d) -> tern::task<> { co_await tern::sleep_for(d); }(window));
  long t1 = cpu_ticks(pid);
  double wall = std::chrono::duration<double>(steady::now() - w0).count();
  double cpu = t0 < 0 || t1 < 0 ? -1 : (t1 - t0) / static_cast<double>(::sysconf(_SC_CLK_TCK)) / wall;
  std::printf("server CPU while out of descriptors: %.1f%% of one CPU over %.2f s\n", cpu * 100, wall);
  if (cpu < 0) fail("emfile-client: cannot read /proc/%ld/stat", pid);
  else if (cpu > 0.25) fail("emfile-client: the server used %.0f%% of a CPU while out of descriptors (spinning)", cpu * 100);
  // 3. Free the served connections' descriptors: the waiting ones must now be accepted and echoed, as slots free up.
  for (std::uint64_t i = 0; i < conns; ++i) {
    if (served[i]) socks[i].close();
  }
  std::uint64_t recovered = 0;
  ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
    for (std::uint64_t i = 0; i < conns; ++i) {
      if (served[i]) continue;
      g.spawn([&, i]() -> tern::task<> {
        live_task live;
        std::uint64_t echo = 0;
        auto [ec, n] = co_await tern::with_timeout(socks[i].read_exact(tern::mutable_buffer(&echo, sizeof echo)), 20s);
        if (ec) fail("emfile-client: connection %" PRIu64 " not served after descriptors were freed: %s", i, ec_text(ec));
        else if (echo != i) fail("emfile-client: connection %" PRIu64 ": wrong echo", i);
        else ++recovered;
        socks[i].close();  // each one served frees its slot for the next: the server holds only ~limit at once
      });
    }
    co_return;
  }));
  socks.clear();
  char summary[256];
  std::snprintf(summary, sizeof summary, "connections=%" PRIu64 " served_before=%" PRIu64 " served_after_free=%" PRIu64
                " server_cpu_while_full=%.1f%%", conns, served_first, recovered, cpu * 100);
  return finish(ctx, fds, summary);
}

// ---- reset: peers that reset mid-read and mid-write --------------------------------------------------------------------

struct reset_counts {
  std::uint64_t reset_while_reading = 0;
  std::uint64_t reset_while_writing = 0;
  std::uint64_t other_errors = 0;
  std::uint64_t clean_closes = 0;
};

// The server side: an echo whose outcome is recorded by the phase it was in when the connection ended.
tern::task<> reset_echo(net::tcp_socket s, reset_counts& counts) {
  live_task live;
  std::vector<char> buf(64 * 1024);
  for (;;) {
    auto [ec, n] = co_await tern::with_timeout(s.read_some(tern::mutable_buffer(buf.data(), buf.size())), io_deadline);
    if (ec == net::error::eof) {
      ++counts.clean_closes;
      co_return;
    }
    if (ec == std::errc::connection_reset) {
      ++counts.reset_while_reading;
      co_return;
    }
    if (ec) {
      std::fprintf(stderr, "reset: server read: %s\n", ec_text(ec));
      ++counts.other_errors;
      co_return;
    }
    auto [wec, w] = co_await tern::with_timeout(s.write_all(tern::const_buffer(buf.data(), n)), io_deadline);
    if (wec == std::errc::connection_reset || wec == std::errc::broken_pipe) {
      ++counts.reset_while_writing;
      co_return;
    }
    if (wec) {
      std::fprintf(stderr, "reset: server write: %s\n", ec_text(wec));
      ++counts.other_errors;
      co_return;
    }
  }
}

tern::task<> reset_accept_loop(tern::io_context& ctx, net::tcp_acceptor& acceptor, reset_counts& counts,
                               std::uint64_t& accepted) {
  co_await tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
    for (;;) {
      auto [ec, s] = co_await acceptor.accept();  // the group's cancel() ends it
      if (ec == tern::error::operation_canceled) co_return;
      if (ec) {
        fail("reset: accept: %s", ec_text(ec));
        co_return;
      }
      ++accepted;
      note_fds();  // the peak is somewhere among the accepts (150 samples of a few hundred entries: cheap)
      g.spawn(reset_echo, std::move(s), std::ref(counts));
    }
  });
}

void abort_connection(net::tcp_socket& s) {
  (void)s.set_option(net::option::linger{true, 0s});  // close() now sends RST instead of FIN
  s.close();
}

// A peer that sends half a request and resets while the server waits for the rest.
tern::task<> reset_mid_read(tern::io_context& ctx, net::endpoint ep) {
  live_task live;
  auto s = co_await connect_to(ctx, ep, "reset mid-read");
  if (!s) co_return;
  std::uint64_t seed = 7;
  if (!co_await echo_round(*s, seed, 1000, "reset mid-read warm-up")) co_return;
  co_await tern::sleep_for(20ms);  // the server is back in read_some
  abort_connection(*s);
}

// A peer that sends far more than it reads, so the server's echo write blocks on a full buffer, then resets.
tern::task<> reset_mid_write(tern::io_context& ctx, net::endpoint ep) {
  live_task live;
  auto s = co_await connect_to(ctx, ep, "reset mid-write");
  if (!s) co_return;
  (void)s->set_receive_buffer_size(4096);
  std::vector<char> junk(64 * 1024, 'x');
  // Keep writing until our own sends stall too: the server is then blocked writing to us.
  for (int i = 0; i < 1024; ++i) {
    auto [ec, n] = co_await tern::with_timeout(s->write_all(tern::const_buffer(junk.data(), junk.size())), 200ms);
    if (ec == tern::error::timed_out) break;
    if (ec) {
      fail("reset mid-write: write: %s", ec_text(ec));
      co_return;
    }
  }
  abort_connection(*s);
}

tern::task<> reset_good_client(tern::io_context& ctx, net::endpoint ep, std::uint64_t i) {
  live_task live;
  auto s = co_await connect_to(ctx, ep, "reset good client");
  if (!s) co_return;
  for (std::uint64_t r = 0; r < 20 && !failed(); ++r) {
    if (!co_await echo_round(*s, (i << 8) + r, 4000, "reset good client")) co_return;
  }
}

int reset(const args& a) {
  tern::io_context ctx;
  int fds = count_fds();
  std::uint64_t rounds = a.num("rounds", 50);
  reset_counts counts;
  std::uint64_t accepted = 0;
  {
    auto acceptor = listen_on(ctx, net::endpoint::loopback_v4(0));
    if (acceptor) {
      net::endpoint ep = acceptor->local_endpoint().value;
      ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& server) -> tern::task<> {
        server.spawn(reset_accept_loop, std::ref(ctx), std::ref(*acceptor), std::ref(counts), std::ref(accepted));
        // Resets and well-behaved clients interleaved: every good client must be served in full meanwhile.
        co_await tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
          for (std::uint64_t i = 0; i < rounds; ++i) {
            g.spawn(reset_mid_read, std::ref(ctx), ep);
            g.spawn(reset_mid_write, std::ref(ctx), ep);
            g.spawn(reset_good_client, std::ref(ctx), ep, i);
          }
          co_return;
        });
        // Then the server must still accept and serve.
        co_await reset_good_client(ctx, ep, 1u << 20);
        co_await tern::sleep_for(100ms);  // let the server's handlers see the last closes
        server.cancel();
      }));
    }
  }
  std::uint64_t good_echoes = g_rounds_verified - rounds;  // the mid-read peers' warm-ups are counted too
  if (!failed()) {
    // Every reset is seen once. A mid-read peer's is always seen by a read; a mid-write peer resets once its own
    // writes have stalled for 200 ms, which nearly always means the server is blocked writing to it, but on a loop
    // busy for that long (the full load: 1500 peers at once) the server may still be waiting in its read, which
    // then sees the reset: 1 in 500 in one run. So at least half of the mid-write peers' resets must reach a
    // blocked write, and the rest a read.
    if (counts.reset_while_reading + counts.reset_while_writing != 2 * rounds) {
      fail("reset: %" PRIu64 " resets seen by a read and %" PRIu64 " by a write, %" PRIu64 " in all expected",
           counts.reset_while_reading, counts.reset_while_writing, 2 * rounds);
    } else if (counts.reset_while_reading < rounds) {
      fail("reset: %" PRIu64 " resets seen by a pending read, at least %" PRIu64 " expected", counts.reset_while_reading,
           rounds);
    } else if (counts.reset_while_writing < (rounds + 1) / 2) {
      fail("reset: %" PRIu64 " resets seen by a pending write, at least %" PRIu64 " expected",
           counts.reset_while_writing, (rounds + 1) / 2);
    } else if (counts.other_errors != 0) {
      fail("reset: %" PRIu64 " unexpected errors on the server", counts.other_errors);
    } else if (good_echoes != (rounds + 1) * 20) {
      fail("reset: %" PRIu64 " echoes of the good clients verified, %" PRIu64 " expected", good_echoes, (rounds + 1) * 20);
    }
  }
  char summary[256];
  std::snprintf(summary, sizeof summary,
                "accepted=%" PRIu64 " reset_mid_read=%" PRIu64 " reset_mid_write=%" PRIu64 " good_echoes=%" PRIu64,
                accepted, counts.reset_while_reading, counts.reset_while_writing, good_echoes);
  return finish(ctx, fds, summary);
}

// ---- refused -----------------------------------------------------------------------------------------------------------

int refused(const args&) {
  tern::io_context ctx;
  int fds = count_fds();
  net::endpoint ep = net::endpoint::loopback_v4(0);
  {
    // A port that was just free: bind it, learn it, close it. Nobody listens there now.
    net::tcp_acceptor a(ctx);
    if (auto ec = a.listen(ep)) fail("refused: listen: %s", ec_text(ec));
    ep = a.local_endpoint().value;
  }
  std::string message;
  ctx.block_on([&]() -> tern::task<> {
    for (int i = 0; i < 100 && !failed(); ++i) {
      net::tcp_socket s(ctx);
      auto ec = co_await tern::with_timeout(s.connect(ep), 5s);
      if (ec != std::errc::connection_refused) {
        fail("refused: connect to %s gave '%s', expected connection refused", ep.to_string().c_str(),
             ec ? ec_text(ec) : "success");
      } else if (s.is_open()) {
        fail("refused: the socket stayed open after a failed connect");
      }
      message = ec.message();
    }
  }());
  std::printf("connect to %s: %s\n", ep.to_string().c_str(), message.c_str());
  return finish(ctx, fds, "attempts=100 error='" + message + "'");
}

// ---- slow-reader: writers to peers that stop reading ------------------------------------------------------------------

int slow_reader(const args& a) {
  tern::io_context ctx;
  int fds = count_fds();
  std::uint64_t conns = a.num("conns", 64);
  auto stall = std::chrono::milliseconds(a.num("stall-ms", 2000));
  std::vector<std::uint64_t> written(conns, 0);
  std::uint64_t verified = 0;
  long rss_start = rss_kib(::getpid()), rss_mid = 0, rss_end = 0;
  std::uint64_t at_mid = 0, at_end = 0;
  auto acceptor = listen_on(ctx, net::endpoint::loopback_v4(0));
  if (!acceptor) return finish(ctx, fds, "");
  net::endpoint ep = acceptor->local_endpoint().value;
  std::vector<net::tcp_socket> writers, readers;
  ctx.block_on([&]() -> tern::task<> {
    for (std::uint64_t i = 0; i < conns; ++i) {
      auto w = co_await connect_to(ctx, ep, "slow-reader");
      auto [ec, r] = co_await tern::with_timeout(acceptor->accept(), io_deadline);
      if (!w || ec) {
        fail("slow-reader: connection %" PRIu64 ": %s", i, ec ? ec_text(ec) : "connect failed");
        co_return;
      }
      writers.push_back(std::move(*w));
      readers.push_back(std::move(r));
    }
  }());
  note_fds();  // every connection open: the peak
  acceptor->close();
  if (!failed()) {
    ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
      // The writers: an endless stream each, in 256 KiB writes, until the group is cancelled.
      for (std::uint64_t i = 0; i < conns; ++i) {
        g.spawn([&, i]() -> tern::task<> {
          live_task live;
          std::vector<char> buf(256 * 1024);
          for (;;) {
            fill_pattern(i, written[i], buf.data(), buf.size());
            // No deadline here: the stall is the point; the group's cancel() ends it.
            auto [ec, n] = co_await writers[i].write_all(tern::const_buffer(buf.data(), buf.size()));
            written[i] += n;  // a cancelled write counts what the kernel took, so the reader can check it all
            if (ec == tern::error::operation_canceled) co_return;
            if (ec) {
              fail("slow-reader: write: %s", ec_text(ec));
              co_return;
            }
          }
        });
      }
      co_await tern::sleep_for(stall / 2);
      rss_mid = rss_kib(::getpid());
      for (auto w : written) at_mid += w;
      co_await tern::sleep_for(stall / 2);
      rss_end = rss_kib(::getpid());
      for (auto w : written) at_end += w;
      g.cancel();
    }));
  }
  std::printf("stalled writers: %" PRIu64 " bytes taken at the half, %" PRIu64 " at the end; RSS %ld -> %ld -> %ld KiB\n",
              at_mid, at_end, rss_start, rss_mid, rss_end);
  if (!failed() && at_end != at_mid) {
    fail("slow-reader: writers kept writing (%" PRIu64 " -> %" PRIu64 " bytes) to peers that read nothing", at_mid, at_end);
  }
  if (!failed() && rss_end > rss_mid + 1024) {
    fail("slow-reader: RSS grew from %ld to %ld KiB while the writers were stalled", rss_mid, rss_end);
  }
  // The readers now read everything the writers' sockets took, and it must be exactly the stream.
  if (!failed()) {
    for (auto& w : writers) (void)w.shutdown(net::shutdown_how::send);
    ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
      for (std::uint64_t i = 0; i < conns; ++i) {
        g.spawn([&, i]() -> tern::task<> {
          live_task live;
          if (co_await receive_stream(readers[i], i, written[i], "slow-reader reader")) verified += written[i];
        });
      }
      co_return;
    }));
  }
  writers.clear();
  readers.clear();
  acceptor.reset();
  char summary[256];
  std::snprintf(summary, sizeof summary,
                "connections=%" PRIu64 " taken_per_connection_kib=%" PRIu64 " bytes_verified=%" PRIu64
                " rss_kib=%ld/%ld/%ld", conns, conns ? at_end / conns / 1024 : 0, verified, rss_start, rss_mid, rss_end);
  return finish(ctx, fds, summary);
}

// ---- cancel-storm: N deadlines expiring together -----------------------------------------------------------------------

int cancel_storm(const args& a) {
  tern::io_context ctx;
  int fds = count_fds();
  std::uint64_t count = a.num("count", 100000);
  std::uint64_t sockets = a.num("sockets", 1000);
  std::uint64_t timed_out = 0;
  steady::time_point last_done{};
  const auto deadline = 300ms;
  std::vector<net::unix_stream_socket> ends;
  auto t0 = steady::now();
  ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
    // Three shapes, all with the same deadline: a timer wait, a whole task (the stop-token path), and a read on a
    // socket nobody writes to (an operation the backend must cancel in the kernel).
    for (std::uint64_t i = 0; i < count; ++i) {
      if (i % 2 == 0) {
        g.spawn([&]() -> tern::task<> {
          live_task live;
          auto ec = co_await tern::with_timeout(tern::sleep_for(1h), deadline);
          if (ec == tern::error::timed_out) ++timed_out;
          else fail("cancel-storm: a timer wait under a deadline gave '%s'", ec ? ec_text(ec) : "success");
          last_done = steady::now();
        });
      } else {
        g.spawn([&]() -> tern::task<> {
          live_task live;
          auto ec = co_await tern::with_timeout([]() -> tern::task<std::error_code> { co_return co_await tern::sleep_for(1h); }(),
                                                deadline);
          if (ec == tern::error::timed_out) ++timed_out;
          else fail("cancel-storm: a task under a deadline gave '%s'", ec ? ec_text(ec) : "success");
          last_done = steady::now();
        });
      }
    }
    for (std::uint64_t i = 0; i < sockets; ++i) {
      auto [ec, pair] = net::unix_stream_socket::pair(ctx);
      if (ec) {
        fail("cancel-storm: socketpair: %s", ec_text(ec));
        break;
      }
      ends.push_back(std::move(pair.first));
      ends.push_back(std::move(pair.second));
    }
    note_fds();  // every socket pair open: the peak
    for (auto& s : ends) {
      g.spawn([&]() -> tern::task<> {
        live_task live;
        char c;
        auto [ec, n] = co_await tern::with_timeout(s.read_some(tern::mutable_buffer(&c, 1)), deadline);
        if (ec == tern::error::timed_out) ++timed_out;
        else fail("cancel-storm: a read under a deadline gave '%s'", ec ? ec_text(ec) : "bytes");
        last_done = steady::now();
      });
    }
    co_return;
  }));
  ends.clear();
  double spread = std::chrono::duration<double>(last_done - t0 - deadline).count();
  std::uint64_t total = count + 2 * sockets;
  if (!failed() && timed_out != total) fail("cancel-storm: %" PRIu64 " of %" PRIu64 " timed out", timed_out, total);
  // All deadlines were set within the time it took to spawn them; the last must complete soon after the last is due.
  if (!failed() && spread > 5.0) fail("cancel-storm: the last deadline completed %.2f s late", spread);
  char summary[256];
  std::snprintf(summary, sizeof summary,
                "timeouts=%" PRIu64 " (timers=%" PRIu64 " tasks=%" PRIu64 " socket_reads=%" PRIu64
                ") last_done_after_deadline_s=%.3f", timed_out, (count + 1) / 2, count / 2, 2 * sockets, spread);
  return finish(ctx, fds, summary);
}

}  // namespace

TERN_RELIABILITY_COMMAND("stream-server", stream_server, "--listen EP --conns K   accept K streams, verify and answer each");
TERN_RELIABILITY_COMMAND("stream-client", stream_client, "--connect EP --bytes N [--conns C]   C streams of N bytes each way");
TERN_RELIABILITY_COMMAND("exchange-server", exchange_server, "--listen EP --conns K   answer request/response exchanges");
TERN_RELIABILITY_COMMAND("exchange-client", exchange_client,
                         "--connect EP --count N [--conns C] [--max-len B] [--deadline-every D]");
TERN_RELIABILITY_COMMAND("proxy", proxy, "--listen EP --upstream EP --conns K [--delay-ms 50] [--slice 1]");
TERN_RELIABILITY_COMMAND("hold-client", hold_client, "--connect EP --conns N [--hold-ms T] [--size S]");
TERN_RELIABILITY_COMMAND("emfile-client", emfile_client, "--connect EP --pid PID --conns M [--window-ms W]");
TERN_RELIABILITY_COMMAND("reset", reset, "[--rounds R]   peers that reset mid-read and mid-write");
TERN_RELIABILITY_COMMAND("refused", refused, "   connect to a port nobody listens on");
TERN_RELIABILITY_COMMAND("slow-reader", slow_reader, "[--conns C] [--stall-ms T]   writers to peers that stop reading");
TERN_RELIABILITY_COMMAND("cancel-storm", cancel_storm, "[--count N]   N timeouts firing at once");

namespace {

int usage() {
  std::fprintf(stderr, "usage: reliability_tool SUBCOMMAND [--key value]...\n");
  for (const auto& [name, entry] : commands()) std::fprintf(stderr, "  %s %s\n", name.c_str(), entry.usage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string_view cmd = argv[1];
  args a;
  for (int i = 2; i < argc; ++i) {
    std::string_view k = argv[i];
    if (k.substr(0, 2) != "--" || i + 1 >= argc) {
      std::fprintf(stderr, "bad argument '%s' (options are --key value)\n", argv[i]);
      return 2;
    }
    a.values[std::string(k.substr(2))] = argv[++i];
  }
  // A backend asked for by name must be the one in use: no check may pass on the other one by a silent fallback.
  if (const char* want = std::getenv("TERN_BACKEND"); want != nullptr && *want != 0) {
    tern::io_context probe;
    if (std::string_view(tern::to_string(probe.backend())) != want) {
      std::printf("RESULT fail TERN_BACKEND=%s but the loop uses %s\n", want, tern::to_string(probe.backend()));
      return 1;
    }
  }
  // Peers reset connections on purpose: a write to one must be an error code, never a SIGPIPE.
  ::signal(SIGPIPE, SIG_DFL);
  auto it = commands().find(cmd);
  if (it == commands().end()) return usage();
  try {
    return it->second.fn(a);
  } catch (const std::exception& e) {
    std::printf("RESULT fail exception: %s\n", e.what());
    return 1;
  }
}
