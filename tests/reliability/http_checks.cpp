// The HTTP checks' subcommands of reliability_tool (scripts/reliability/http.sh runs them against
// examples/http_ping_server and examples/echo_server):
//
//   http-attack     --connect EP --duration-ms T --header-timeout-ms H [--slowloris N] [--flood K] [--max-body B]
//                   [--write-timeout-ms W]
//                   hostile clients for T ms: slowloris, oversized heads and bodies, invalid chunked bodies,
//                   request-smuggling shapes, pipelining floods (read, and never read); every answer and every close
//                   checked
//   shutdown-client --connect EP --proto http|echo --conns C
//                   C connections sending verified requests back to back until the server closes them (SIGTERM)
//
// Design: the answers are read by a small HTTP/1.1 response reader of this file, not by tern::http's parser: the
// check must not trust the code it checks. It understands what the ping server sends (a status line, fields, a
// Content-Length body) and treats anything else (a chunked answer, a head without Content-Length) as a failure.
#include "tool.hpp"

#include <cctype>

using namespace reltool;

namespace {

// ---- an independent reader of HTTP/1.1 responses --------------------------------------------------------------------

enum class got {
  response,   // a whole response (head and Content-Length body)
  closed,     // the end of the stream (FIN) before any byte of a response
  reset,      // ECONNRESET/EPIPE before any byte of a response
  partial,    // the stream ended (FIN or RST) inside a response
  timed_out,  // nothing whole before the deadline (the bytes read so far stay in the buffer)
  malformed,  // bytes that are not a response the ping server could send
  error,      // another error code
};

const char* got_name(got g) {
  switch (g) {
    case got::response: return "response";
    case got::closed: return "closed";
    case got::reset: return "reset";
    case got::partial: return "partial response";
    case got::timed_out: return "timed out";
    case got::malformed: return "malformed response";
    case got::error: return "error";
  }
  return "?";
}

struct response_in {
  got what = got::error;
  int status = 0;
  bool close = false;  // Connection: close
  std::string body;
  std::string why;  // for malformed and error
};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

// Parses a whole response at the start of buf if one is there: its size (consumed by the caller), 0 if incomplete,
// -1 if malformed (out.why says why).
long parse_response(std::string_view buf, response_in& out) {
  auto head_end = buf.find("\r\n\r\n");
  if (head_end == std::string_view::npos) {
    if (buf.size() > 64 * 1024) {
      out.why = "a response head over 64 KiB";
      return -1;
    }
    return 0;
  }
  std::string_view head = buf.substr(0, head_end);
  auto line_end = head.find("\r\n");
  std::string_view status_line = head.substr(0, line_end);
  if (status_line.size() < 12 || status_line.substr(0, 9) != "HTTP/1.1 " || !std::isdigit(status_line[9]) ||
      !std::isdigit(status_line[10]) || !std::isdigit(status_line[11])) {
    out.why = "status line '" + std::string(status_line.substr(0, 40)) + "'";
    return -1;
  }
  out.status = (status_line[9] - '0') * 100 + (status_line[10] - '0') * 10 + (status_line[11] - '0');
  std::optional<std::uint64_t> length;
  out.close = false;
  std::size_t pos = line_end == std::string_view::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    auto e = head.find("\r\n", pos);
    std::string_view line = head.substr(pos, e == std::string_view::npos ? std::string_view::npos : e - pos);
    pos = e == std::string_view::npos ? head.size() : e + 2;
    auto colon = line.find(':');
    if (colon == std::string_view::npos) {
      out.why = "a field line without a colon";
      return -1;
    }
    std::string_view name = line.substr(0, colon), value = trim(line.substr(colon + 1));
    if (iequals(name, "content-length")) {
      std::uint64_t n = 0;
      if (value.empty() || value.size() > 12) {
        out.why = "Content-Length '" + std::string(value) + "'";
        return -1;
      }
      for (char c : value) {
        if (!std::isdigit(static_cast<unsigned char>(c))) {
          out.why = "Content-Length '" + std::string(value) + "'";
          return -1;
        }
        n = n * 10 + static_cast<std::uint64_t>(c - '0');
      }
      if (length && *length != n) {
        out.why = "two different Content-Lengths";
        return -1;
      }
      length = n;
    } else if (iequals(name, "transfer-encoding")) {
      out.why = "a Transfer-Encoding in an answer of the ping server";
      return -1;
    } else if (iequals(name, "connection")) {
      out.close = iequals(value, "close");
    }
  }
  // Every answer of the ping server (refusals included) says its length; 1xx and 204/304 carry no body.
  if (!length) {
    if (out.status / 100 == 1 || out.status == 204 || out.status == 304) {
      length = 0;
    } else {
      out.why = "a " + std::to_string(out.status) + " answer without Content-Length";
      return -1;
    }
  }
  std::size_t total = head_end + 4 + static_cast<std::size_t>(*length);
  if (buf.size() < total) return 0;
  out.body.assign(buf.substr(head_end + 4, static_cast<std::size_t>(*length)));
  return static_cast<long>(total);
}

bool is_reset(std::error_code ec) {
  return ec == std::errc::connection_reset || ec == std::errc::broken_pipe;
}

// Reads the next response on s into out, reading into buf (which keeps bytes of later responses, and of an
// incomplete one across a timed-out call: a timed-out read loses nothing). 1xx answers are skipped.
tern::task<response_in> read_response(net::tcp_socket& s, std::string& buf, steady::time_point deadline) {
  response_in out;
  char chunk[16 * 1024];
  for (;;) {
    long n = parse_response(buf, out);
    if (n < 0) {
      out.what = got::malformed;
      co_return out;
    }
    if (n > 0) {
      buf.erase(0, static_cast<std::size_t>(n));
      if (out.status / 100 == 1) {
        out = response_in{};
        continue;
      }
      out.what = got::response;
      co_return out;
    }
    auto [ec, k] = co_await tern::with_deadline(s.read_some(tern::mutable_buffer(chunk, sizeof chunk)), deadline);
    if (ec == tern::error::timed_out) {
      out.what = got::timed_out;
      co_return out;
    }
    if (ec == net::error::eof || is_reset(ec)) {
      out.what = !buf.empty() ? got::partial : ec == net::error::eof ? got::closed : got::reset;
      co_return out;
    }
    if (ec) {
      out.what = got::error;
      out.why = ec.message();
      co_return out;
    }
    buf.append(chunk, k);
  }
}

std::string ping_request(std::uint64_t sequence, bool close = false) {
  std::string body = "{\"sequence\": " + std::to_string(sequence) + "}";
  return "POST /ping HTTP/1.1\r\nHost: rel\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + (close ? "\r\nConnection: close" : "") + "\r\n\r\n" + body;
}

std::string ping_answer(std::uint64_t sequence) { return "{\"sequence\":" + std::to_string(sequence) + "}"; }

// ---- http-attack ----------------------------------------------------------------------------------------------------

struct attack {
  const char* name;
  std::string bytes;      // what the attacker sends (then it reads the answer)
  std::vector<int> want;  // the statuses that are right (each one documented in tern/http/parser.hpp or server.hpp)
};

std::vector<attack> attacks(std::uint64_t max_body) {
  const std::string h = "Host: rel\r\nContent-Type: application/json\r\n";
  // After each request that must be refused, a second one that a desynchronised server would answer: it must never
  // be, since every refusal closes the connection.
  const std::string smuggled = "GET /smuggled HTTP/1.1\r\nHost: rel\r\n\r\n";
  std::vector<attack> v;
  v.push_back({"request line over 8 KiB", "GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: rel\r\n\r\n", {414}});
  v.push_back({"header section over 32 KiB",
               "GET / HTTP/1.1\r\nHost: rel\r\nX-Big: " + std::string(33 * 1024, 'b') + "\r\n\r\n", {431}});
  {
    std::string many = "GET / HTTP/1.1\r\nHost: rel\r\n";
    for (int i = 0; i < 120; ++i) many += "X-F" + std::to_string(i) + ": v\r\n";
    v.push_back({"120 header fields", many + "\r\n", {431}});
  }
  v.push_back({"Content-Length over max_body",
               "POST /ping HTTP/1.1\r\n" + h + "Content-Length: " + std::to_string(max_body + 1) + "\r\n\r\n", {413}});
  {
    // A chunked body that grows past max_body: refused once the bytes received pass it.
    std::string big = "POST /ping HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n";
    std::string data(16 * 1024, 'c');
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    for (std::uint64_t sent = 0; sent <= max_body; sent += data.size()) big += size + data + "\r\n";
    v.push_back({"chunked body over max_body", big + "0\r\n\r\n", {413}});
  }
  v.push_back({"chunk size not hex",
               "POST /ping HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", {400}});
  v.push_back({"chunk data longer than its size",
               "POST /ping HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX\r\n0\r\n\r\n", {400}});
  v.push_back({"chunk size overflowing 64 bits",
               "POST /ping HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n1ffffffffffffffff\r\nx\r\n0\r\n\r\n",
               {400, 413}});
  v.push_back({"Content-Length and Transfer-Encoding",
               "POST /ping HTTP/1.1\r\n" + h + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
                   smuggled,
               {400}});
  v.push_back({"two different Content-Lengths",
               "POST /ping HTTP/1.1\r\n" + h + "Content-Length: 16\r\nContent-Length: 5\r\n\r\n{\"sequence\": 1}" +
                   smuggled,
               {400}});
  v.push_back({"obs-fold", "GET / HTTP/1.1\r\nHost: rel\r\nX-Folded: a\r\n b\r\n\r\n" + smuggled, {400}});
  v.push_back({"bare CR in a field", "GET / HTTP/1.1\r\nHost: rel\r\nX-Cr: a\rb\r\n\r\n" + smuggled, {400}});
  v.push_back({"bare LF ending a line", "GET / HTTP/1.1\nHost: rel\r\n\r\n" + smuggled, {400}});
  v.push_back({"space before the colon", "GET / HTTP/1.1\r\nHost : rel\r\n\r\n" + smuggled, {400}});
  v.push_back({"Transfer-Encoding not ending in chunked",
               "POST /ping HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" + smuggled,
               {400}});
  v.push_back({"Transfer-Encoding gzip",
               "POST /ping HTTP/1.1\r\n" + h + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n" + smuggled, {501}});
  v.push_back({"two Host fields", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n" + smuggled, {400}});
  return v;
}

struct attack_counts {
  std::map<std::string, std::uint64_t> refused;  // attack name -> refusals with the right status and a close
  std::uint64_t resets = 0;            // refusals seen as a reset (the server closed with our bytes unread)
  std::uint64_t slowloris_cut = 0;     // slowloris connections answered 408 and closed
  std::uint64_t slowloris_bytes = 0;
  double slowloris_min_s = 1e9, slowloris_max_s = 0;
  std::uint64_t pipelined = 0;         // pipelined requests answered and verified
  std::uint64_t floods = 0;
  std::uint64_t unread_floods = 0;     // floods never read, cut by the server's write timeout
  std::uint64_t unread_flood_bytes = 0;
  double unread_flood_max_s = 0;
};
attack_counts g_attack;

// Reads what is left after a refusal: the end of the stream, nothing else (a second answer would mean the server
// read on after refusing, the way a smuggled request gets through).
tern::task<bool> expect_end(net::tcp_socket& s, std::string& buf, const char* what) {
  if (!buf.empty()) {
    fail("http-attack: %s: %zu more bytes after the refusal ('%.30s')", what, buf.size(), buf.c_str());
    co_return false;
  }
  auto next = co_await read_response(s, buf, steady::now() + 10s);
  if (next.what == got::closed || next.what == got::reset) co_return true;
  if (next.what == got::response) {
    fail("http-attack: %s: a second answer (%d) after the refusal: the connection was read on", what, next.status);
  } else {
    fail("http-attack: %s: after the refusal expected the close, got %s", what, got_name(next.what));
  }
  co_return false;
}

tern::task<> attack_one(tern::io_context& ctx, net::endpoint ep, const attack& a) {
  auto s = co_await connect_to(ctx, ep, "http-attack");
  if (!s) co_return;
  // The server may refuse before it has read everything (a limit passed): the rest of the write then fails with a
  // reset or a broken pipe, which is the server doing its job; the answer is read either way.
  auto [wec, wn] = co_await tern::with_timeout(s->write_all(tern::const_buffer(a.bytes.data(), a.bytes.size())), 10s);
  if (wec && !is_reset(wec)) {
    fail("http-attack: %s: write: %s", a.name, ec_text(wec));
    co_return;
  }
  std::string buf;
  auto r = co_await read_response(*s, buf, steady::now() + 10s);
  if (r.what == got::reset) {
    // The server closed with bytes of ours unread, so the kernel sent a reset, which may overtake its answer.
    ++g_attack.resets;
    co_return;
  }
  if (r.what != got::response) {
    fail("http-attack: %s: expected a refusal, got %s %s", a.name, got_name(r.what), r.why.c_str());
    co_return;
  }
  if (std::find(a.want.begin(), a.want.end(), r.status) == a.want.end()) {
    fail("http-attack: %s: answered %d, expected %d", a.name, r.status, a.want.front());
    co_return;
  }
  if (!r.close) {
    fail("http-attack: %s: the %d answer lacks Connection: close", a.name, r.status);
    co_return;
  }
  if (co_await expect_end(*s, buf, a.name)) ++g_attack.refused[a.name];
}

// One connection sending a request head at one byte per second: the server must answer 408 and close about
// header_timeout after the first byte.
tern::task<> slowloris_one(tern::io_context& ctx, net::endpoint ep, std::chrono::milliseconds header_timeout) {
  const std::string head = "POST /ping HTTP/1.1\r\nHost: rel\r\nContent-Type: application/json\r\nX-Slow: " +
                           std::string(200, 's') + "\r\n\r\n";
  auto s = co_await connect_to(ctx, ep, "slowloris");
  if (!s) co_return;
  const auto first = steady::now();
  const auto limit = first + header_timeout + 10s;
  std::string buf;
  for (std::size_t i = 0;; ++i) {
    if (i >= head.size()) {
      fail("slowloris: the whole head went out at one byte per second (%zu bytes): no header timeout", i);
      co_return;
    }
    auto [wec, wn] = co_await tern::with_timeout(s->write_all(tern::const_buffer(head.data() + i, 1)), 10s);
    if (wec && !is_reset(wec)) {
      fail("slowloris: write: %s", ec_text(wec));
      co_return;
    }
    if (!wec) ++g_attack.slowloris_bytes;
    auto r = co_await read_response(*s, buf, wec ? limit : std::min(limit, steady::now() + 1s));
    if (r.what == got::timed_out && steady::now() < limit && !wec) continue;
    const double secs = std::chrono::duration<double>(steady::now() - first).count();
    if (r.what != got::response || r.status != 408) {
      fail("slowloris: after %.1f s expected 408, got %s %d %s", secs, got_name(r.what), r.status, r.why.c_str());
      co_return;
    }
    // The deadline runs from the first byte (or the accept, a moment before it). The upper bound leaves room for a
    // loaded machine (timers fire late, thousands of connections are accepted at once) but not for another timeout:
    // 1.5 times the header timeout, plus half a second.
    const double want = std::chrono::duration<double>(header_timeout).count();
    if (secs < want - 0.25 || secs > want * 1.5 + 0.5) {
      fail("slowloris: 408 after %.2f s, the header timeout is %.2f s", secs, want);
      co_return;
    }
    if (!co_await expect_end(*s, buf, "slowloris")) co_return;
    ++g_attack.slowloris_cut;
    g_attack.slowloris_min_s = std::min(g_attack.slowloris_min_s, secs);
    g_attack.slowloris_max_s = std::max(g_attack.slowloris_max_s, secs);
    co_return;
  }
}

// One connection carrying `count` pipelined requests written at once while their answers are read; each answer
// must be the one of its request, in order.
tern::task<> pipeline_flood(tern::io_context& ctx, net::endpoint ep, std::uint64_t count, std::uint64_t first_seq) {
  auto s = co_await connect_to(ctx, ep, "pipeline flood");
  if (!s) co_return;
  std::string all;
  for (std::uint64_t i = 0; i < count; ++i) all += ping_request(first_seq + i, i + 1 == count);
  auto writer = [&]() -> tern::task<bool> {
    co_return co_await write_fully(*s, tern::const_buffer(all.data(), all.size()), "pipeline flood");
  };
  auto reader = [&]() -> tern::task<bool> {
    std::string buf;
    for (std::uint64_t i = 0; i < count; ++i) {
      auto r = co_await read_response(*s, buf, steady::now() + 20s);
      if (r.what != got::response) {
        fail("pipeline flood: answer %" PRIu64 " of %" PRIu64 ": %s %s", i, count, got_name(r.what), r.why.c_str());
        co_return false;
      }
      if (r.status != 200 || r.body != ping_answer(first_seq + i)) {
        fail("pipeline flood: answer %" PRIu64 " is %d '%.40s', expected 200 %s", i, r.status, r.body.c_str(),
             ping_answer(first_seq + i).c_str());
        co_return false;
      }
      ++g_attack.pipelined;
    }
    // The last request asked for Connection: close.
    co_return co_await expect_end(*s, buf, "pipeline flood");
  };
  auto [w, r] = co_await tern::when_all(writer(), reader());
  if (w && r) ++g_attack.floods;
}

// One connection that pipelines requests and never reads an answer: the answers fill the server's send buffer and
// the client's receive buffer, the server's write blocks, and write_timeout must cut the connection (the server
// reads no further request meanwhile, so its memory stays bounded). The client's own write then fails.
tern::task<> flood_no_read(tern::io_context& ctx, net::endpoint ep, std::chrono::milliseconds write_timeout) {
  auto s = co_await connect_to(ctx, ep, "unread flood");
  if (!s) co_return;
  std::string block;
  for (int i = 0; i < 8192; ++i) block += ping_request(static_cast<std::uint64_t>(i));
  const auto t0 = steady::now();
  // Filling the buffers takes well under a second on loopback; then the write timeout runs.
  const auto limit = t0 + write_timeout + 10s;
  std::uint64_t sent = 0;
  for (;;) {
    auto [ec, n] = co_await tern::with_deadline(s->write_all(tern::const_buffer(block.data(), block.size())), limit);
    sent += n;
    if (is_reset(ec)) break;
    if (ec) {
      fail("unread flood: after %" PRIu64 " bytes in %.1f s: %s (the server never cut a peer that does not read)",
           sent, std::chrono::duration<double>(steady::now() - t0).count(), ec_text(ec));
      co_return;
    }
  }
  const double secs = std::chrono::duration<double>(steady::now() - t0).count();
  ++g_attack.unread_floods;
  g_attack.unread_flood_bytes = std::max(g_attack.unread_flood_bytes, sent);
  g_attack.unread_flood_max_s = std::max(g_attack.unread_flood_max_s, secs);
}

int http_attack(const args& a) {
  tern::io_context ctx;
  int fds = count_fds();
  net::endpoint ep = a.endpoint("connect");
  const auto duration = std::chrono::milliseconds(a.num("duration-ms", 10000));
  const auto header_timeout = std::chrono::milliseconds(a.num("header-timeout-ms", 2000));
  const std::uint64_t slowloris = a.num("slowloris", 200);
  const std::uint64_t flood = a.num("flood", 2000);
  const auto write_timeout = std::chrono::milliseconds(a.num("write-timeout-ms", 2000));
  const auto list = attacks(a.num("max-body", 8 << 20));
  const auto t0 = steady::now();
  const auto until = t0 + duration;
  ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
    // Each slowloris slot opens its next connection as soon as the server has cut the last, until the end. The
    // slots start spread over the first second, as independent attackers would: started together, all of them
    // would send their byte in the same instant every second and be cut in the same instant, and the check would
    // measure how long the server takes for bursts of thousands of events, not how it holds slow connections.
    for (std::uint64_t i = 0; i < slowloris; ++i) {
      g.spawn([](tern::io_context& ctx, net::endpoint ep, std::chrono::milliseconds ht, steady::time_point until,
                 std::chrono::microseconds offset) -> tern::task<> {
        live_task live;
        co_await tern::sleep_for(offset);
        while (steady::now() < until && !failed()) co_await slowloris_one(ctx, ep, ht);
      }(ctx, ep, header_timeout, until, std::chrono::microseconds(i * 1'000'000 / slowloris)));
    }
    // The malformed requests one after the other on a new connection each, two loops at once.
    for (int k = 0; k < 2; ++k) {
      g.spawn([](tern::io_context& ctx, net::endpoint ep, const std::vector<attack>& list, int k,
                 steady::time_point until) -> tern::task<> {
        live_task live;
        for (std::size_t i = static_cast<std::size_t>(k); steady::now() < until && !failed(); ++i) {
          co_await attack_one(ctx, ep, list[i % list.size()]);
          // About 50 attacks a second per loop: the defences are exercised many times over, while the attacker's
          // own CPU (two CPUs on the test machine) does not become what the good client's latency measures.
          co_await tern::sleep_for(20ms);
        }
      }(ctx, ep, list, k, until));
    }
    // Pipelining floods, one each 500 ms: enough to interleave with the good client's requests on the same worker,
    // not so many that the check measures how the machine's two CPUs are shared rather than the server's defences.
    g.spawn([](tern::io_context& ctx, net::endpoint ep, std::uint64_t flood, steady::time_point until) -> tern::task<> {
      live_task live;
      for (std::uint64_t n = 0; steady::now() < until && !failed(); ++n) {
        co_await pipeline_flood(ctx, ep, flood, n * flood);
        co_await tern::sleep_for(500ms);
      }
    }(ctx, ep, flood, until));
    // Floods that never read, one after the other.
    g.spawn([](tern::io_context& ctx, net::endpoint ep, std::chrono::milliseconds wt, steady::time_point until)
                -> tern::task<> {
      live_task live;
      while (steady::now() < until && !failed()) co_await flood_no_read(ctx, ep, wt);
    }(ctx, ep, write_timeout, until));
    co_return;
  }));
  double secs = std::chrono::duration<double>(steady::now() - t0).count();
  std::uint64_t refused = 0, kinds = 0;
  for (const auto& [name, n] : g_attack.refused) {
    refused += n;
    if (n != 0) ++kinds;
  }
  if (!failed()) {
    for (const auto& at : list) {
      if (g_attack.refused[at.name] == 0) fail("http-attack: '%s' was never seen refused with its status", at.name);
    }
    if (slowloris != 0 && g_attack.slowloris_cut < slowloris) {
      fail("http-attack: %" PRIu64 " slowloris connections cut, fewer than the %" PRIu64 " slots",
           g_attack.slowloris_cut, slowloris);
    }
    if (flood != 0 && g_attack.floods == 0) fail("http-attack: no pipelining flood was answered whole");
    if (g_attack.unread_floods == 0) fail("http-attack: no unread flood was cut by the server");
  }
  char summary[512];
  std::snprintf(summary, sizeof summary,
                "seconds=%.1f refused=%" PRIu64 " (%" PRIu64 " kinds, each with its status and a close) "
                "refused_by_reset=%" PRIu64 " slowloris_cut_408=%" PRIu64 " after_s=%.2f..%.2f slowloris_bytes=%" PRIu64
                " floods=%" PRIu64 " pipelined_verified=%" PRIu64 " unread_floods_cut=%" PRIu64 " (max %.1f s, %" PRIu64
                " bytes)",
                secs, refused, kinds, g_attack.resets, g_attack.slowloris_cut,
                g_attack.slowloris_cut ? g_attack.slowloris_min_s : 0.0, g_attack.slowloris_max_s,
                g_attack.slowloris_bytes, g_attack.floods, g_attack.pipelined, g_attack.unread_floods,
                g_attack.unread_flood_max_s, g_attack.unread_flood_bytes);
  return finish(ctx, fds, summary);
}

// ---- shutdown-client ------------------------------------------------------------------------------------------------

struct shutdown_counts {
  std::uint64_t answered = 0;        // requests answered whole and verified
  std::uint64_t close_answered = 0;  // connections whose last answer said Connection: close, then closed
  std::uint64_t closed_idle = 0;     // connections closed (FIN) with a request unanswered and no byte of its answer
  std::uint64_t reset_idle = 0;      // the same with a reset: the server closed with the request in its socket, or
                                     // the request reached a socket already closed
  std::uint64_t cut_mid_echo = 0;    // echo only: the stream ended inside an echo (its bytes checked as far as they go)
  std::uint64_t split_unanswered = 0;  // of the closes without an answer, those on connections that split requests
  std::uint64_t split_mid_request = 0; // ... with the first part of the request sent before the close
  std::uint64_t ended = 0;
  std::uint64_t connections_done_running = 0;
};
shutdown_counts g_shut;
constexpr std::size_t echo_size = 4096;

tern::task<> shutdown_http_one(net::tcp_socket& s, std::uint64_t conn) {
  std::string buf;
  // After a failure elsewhere the connections stop, so that the client ends (and says why) without the signal.
  for (std::uint64_t k = 0; !failed(); ++k) {
    const std::uint64_t seq = (conn << 32) | k;
    const std::string req = ping_request(seq);
    // Odd connections send each request in two parts, 50 to 250 ms apart, the body cut short: the server is then
    // inside a request on them nearly all the time (not idle), and the SIGTERM finds them there, to be answered with
    // Connection: close. The pauses differ from request to request, so that these connections do not fall into step
    // (in step, their answers and next requests come in bursts, and a signal in a burst finds them all between two
    // requests). Even connections send whole requests back to back.
    const std::size_t split = conn % 2 == 1 ? req.size() - 4 : req.size();
    auto [wec, wn] = co_await tern::with_timeout(s.write_all(tern::const_buffer(req.data(), split)), 20s);
    bool mid_request = false;
    if (!wec && split != req.size()) {
      co_await tern::sleep_for(std::chrono::milliseconds(50 + splitmix(seq) % 200));
      mid_request = true;
      auto [wec2, wn2] =
          co_await tern::with_timeout(s.write_all(tern::const_buffer(req.data() + split, req.size() - split)), 20s);
      wec = wec2;
    }
    if (wec && !is_reset(wec)) {
      fail("shutdown-client: connection %" PRIu64 ": write: %s", conn, ec_text(wec));
      co_return;
    }
    auto r = co_await read_response(s, buf, steady::now() + 20s);
    switch (r.what) {
      case got::response:
        if (r.status != 200 || r.body != ping_answer(seq)) {
          fail("shutdown-client: connection %" PRIu64 ": request %" PRIu64 " answered %d '%.40s'", conn, k, r.status,
               r.body.c_str());
          co_return;
        }
        ++g_shut.answered;
        if (k == 1) ++g_shut.connections_done_running;
        if (r.close) {
          if (co_await expect_end(s, buf, "shutdown-client")) ++g_shut.close_answered;
          co_return;
        }
        continue;
      case got::closed:
      case got::reset:
        ++(r.what == got::closed ? g_shut.closed_idle : g_shut.reset_idle);
        if (split != req.size()) ++g_shut.split_unanswered;
        // The second part refused: the server closed with the first part in its socket, unread (its view: idle).
        if (mid_request && is_reset(wec)) ++g_shut.split_mid_request;
        co_return;
      default:
        fail("shutdown-client: connection %" PRIu64 ": request %" PRIu64 ": %s %s (%zu bytes of an answer)", conn, k,
             got_name(r.what), r.why.c_str(), buf.size());
        co_return;
    }
  }
}

tern::task<> shutdown_echo_one(net::tcp_socket& s, std::uint64_t conn) {
  std::vector<char> out(echo_size), in(echo_size);
  for (std::uint64_t k = 0; !failed(); ++k) {
    const std::uint64_t seed = (conn << 32) | k;
    fill_pattern(seed, 0, out.data(), echo_size);
    auto [wec, wn] = co_await tern::with_timeout(s.write_all(tern::const_buffer(out.data(), echo_size)), 20s);
    if (wec && !is_reset(wec)) {
      fail("shutdown-client: connection %" PRIu64 ": write: %s", conn, ec_text(wec));
      co_return;
    }
    std::size_t have = 0;
    while (have < echo_size) {
      auto [ec, n] =
          co_await tern::with_timeout(s.read_some(tern::mutable_buffer(in.data() + have, echo_size - have)), 20s);
      if (ec == net::error::eof || is_reset(ec)) break;
      if (ec) {
        fail("shutdown-client: connection %" PRIu64 ": read: %s", conn, ec_text(ec));
        co_return;
      }
      have += n;
    }
    // Whatever arrived is checked, whole or not: a cut may shorten an echo, never change a byte of it.
    if (auto bad = check_pattern(seed, 0, in.data(), have)) {
      fail("shutdown-client: connection %" PRIu64 ": echo %" PRIu64 " byte %" PRIu64 " differs", conn, k, *bad);
      co_return;
    }
    if (have == echo_size) {
      ++g_shut.answered;
      if (k == 1) ++g_shut.connections_done_running;
      continue;
    }
    if (have == 0) ++g_shut.closed_idle;
    else ++g_shut.cut_mid_echo;
    co_return;
  }
}

tern::task<> shutdown_conn(tern::io_context& ctx, net::endpoint ep, bool http, std::uint64_t conn) {
  live_task live;
  auto s = co_await connect_to(ctx, ep, "shutdown-client");
  if (!s) co_return;
  (void)s->set_no_delay(true);
  if (http) {
    co_await shutdown_http_one(*s, conn);
  } else {
    co_await shutdown_echo_one(*s, conn);
  }
  ++g_shut.ended;
}

int shutdown_client(const args& a) {
  tern::io_context ctx;
  int fds = count_fds();
  net::endpoint ep = a.endpoint("connect");
  const std::string proto = a.get("proto", "http");
  const bool http = proto == "http";
  if (!http && proto != "echo") {
    std::fprintf(stderr, "shutdown-client: --proto is http or echo\n");
    return 2;
  }
  const std::uint64_t conns = a.num("conns", 200);
  std::uint64_t answered_at_running = 0;
  const auto t0 = steady::now();
  ctx.block_on(tern::task_group::run(ctx, [&](tern::task_group& g) -> tern::task<> {
    for (std::uint64_t c = 0; c < conns; ++c) g.spawn(shutdown_conn, std::ref(ctx), ep, http, c);
    // "running" once every connection has had two answers: the script sends SIGTERM then, into full traffic.
    while (g_shut.connections_done_running < conns && g_shut.ended == 0 && !failed()) {
      co_await tern::sleep_for(20ms);
      if (steady::now() - t0 > 60s) {
        fail("shutdown-client: only %" PRIu64 " of %" PRIu64 " connections answered twice in 60 s",
             g_shut.connections_done_running, conns);
        co_return;
      }
    }
    if (g_shut.ended != 0 && g_shut.connections_done_running < conns) {
      fail("shutdown-client: a connection ended before the traffic was running (before the signal)");
      co_return;
    }
    answered_at_running = g_shut.answered;
    std::printf("running: %" PRIu64 " connections, %" PRIu64 " answers so far\n", conns, answered_at_running);
    std::fflush(stdout);
  }));
  const std::uint64_t clean = g_shut.close_answered + g_shut.closed_idle + g_shut.reset_idle + g_shut.cut_mid_echo;
  if (!failed() && g_shut.ended != conns) {
    fail("shutdown-client: %" PRIu64 " of %" PRIu64 " connections ended", g_shut.ended, conns);
  }
  // A connection inside a request when the server stops must be answered, with Connection: close.
  if (!failed() && http && g_shut.close_answered == 0) {
    fail("shutdown-client: no connection got its request in progress answered with Connection: close");
  }
  if (!failed() && clean != conns) {
    fail("shutdown-client: %" PRIu64 " of %" PRIu64 " connections ended by a close the client recognises", clean,
         conns);
  }
  char summary[512];
  std::snprintf(summary, sizeof summary,
                "proto=%s connections=%" PRIu64 " answered_verified=%" PRIu64 " (%" PRIu64 " when the traffic ran) "
                "closed_after_close_answer=%" PRIu64 " closed_between_requests=%" PRIu64
                " reset_between_requests=%" PRIu64 " (on split-request connections %" PRIu64
                ", the second part refused in %" PRIu64 ")"
                " cut_mid_echo=%" PRIu64,
                proto.c_str(), conns, g_shut.answered, answered_at_running, g_shut.close_answered, g_shut.closed_idle,
                g_shut.reset_idle, g_shut.split_unanswered, g_shut.split_mid_request, g_shut.cut_mid_echo);
  return finish(ctx, fds, summary);
}

}  // namespace

TERN_RELIABILITY_COMMAND("http-attack", http_attack,
                         "--connect EP [--duration-ms T] [--header-timeout-ms H] [--slowloris N] [--flood K] "
                         "[--max-body B] [--write-timeout-ms W]   hostile HTTP clients, every refusal checked");
TERN_RELIABILITY_COMMAND("shutdown-client", shutdown_client,
                         "--connect EP --proto http|echo [--conns C]   verified traffic until the server shuts down");
