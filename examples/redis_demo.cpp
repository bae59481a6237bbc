// redis_demo: tern::redis against a Redis server: SET and GET, a pipeline of 10000 INCRs (explicit, then the same
// again from 100 concurrent tasks, which the connection pipelines by itself), and a pub/sub round trip.
//
//   redis_demo HOST:PORT        TCP (the host resolved by tern's resolver)
//   redis_demo /path/to/socket  a Unix socket
//
// Exit status 0 when every reply was the one expected, 1 otherwise (the error printed), 2 for a bad command line.
#include <tern/redis/connection.hpp>
#include <tern/tern.hpp>

#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace redis = tern::redis;
using namespace std::chrono_literals;

namespace {

bool failed(const std::error_code& ec, const char* what, const std::string& message = {}) {
  if (!ec) return false;
  std::fprintf(stderr, "redis_demo: %s: %s%s%s\n", what, ec.message().c_str(), message.empty() ? "" : ": ",
               message.c_str());
  return true;
}

// 100 INCRs of one counter, awaited one after the other: many such tasks at once share the connection's writes.
tern::task<int> incr_many(redis::connection& conn, int n) {
  int ok = 0;
  for (int i = 0; i < n; ++i) {
    auto [ec, v] = co_await conn.command<std::int64_t>("INCR", "demo:concurrent");
    if (!ec && v > 0) ++ok;
  }
  co_return ok;
}

tern::task<int> demo(redis::config cfg) {
  tern::io_context& ctx = *tern::io_context::current();
  cfg.client_name = "redis_demo";
  redis::connection conn(ctx, cfg);
  if (failed(co_await conn.connect(), "connect")) co_return 1;
  std::printf("connected: RESP%d, server %s\n", conn.protocol(), std::string(conn.server_version()).c_str());

  // SET and GET.
  if (auto r = co_await conn.command<redis::ignore_t>("SET", "demo:greeting", "hello from tern"); failed(r.ec, "SET", r.message)) {
    co_return 1;
  }
  auto [gec, greeting] = co_await conn.command<std::string>("GET", "demo:greeting");
  if (failed(gec, "GET")) co_return 1;
  std::printf("GET demo:greeting -> %s\n", greeting.c_str());

  // An explicit pipeline: 10000 INCRs in one request, their replies kept in order.
  if (auto r = co_await conn.command<redis::ignore_t>("DEL", "demo:counter", "demo:concurrent"); failed(r.ec, "DEL")) {
    co_return 1;
  }
  redis::pipeline incrs;
  for (int i = 0; i < 10000; ++i) incrs.push("INCR", "demo:counter");
  auto start = tern::clock::now();
  if (auto r = co_await conn.execute(incrs); failed(r.ec, "pipeline", r.message)) co_return 1;
  auto last = incrs.reply(9999).to<std::int64_t>();
  if (failed(last.ec, "the last INCR") || last.value != 10000) co_return 1;
  std::printf("pipeline of 10000 INCRs: %lld in %.1f ms\n", static_cast<long long>(last.value),
              std::chrono::duration<double, std::milli>(tern::clock::now() - start).count());

  // The same 10000 from 100 tasks: pipelined by the connection.
  const auto writes = conn.stats().writes;
  start = tern::clock::now();
  std::vector<tern::join_handle<int>> tasks;
  for (int t = 0; t < 100; ++t) tasks.push_back(tern::spawn(ctx, incr_many(conn, 100)));
  int ok = 0;
  for (auto& t : tasks) ok += co_await std::move(t);
  auto [cec, total] = co_await conn.command<std::int64_t>("GET", "demo:concurrent");
  if (failed(cec, "GET demo:concurrent") || ok != 10000 || total != 10000) co_return 1;
  std::printf("10000 INCRs from 100 tasks: %lld in %.1f ms, %llu writes\n", static_cast<long long>(total),
              std::chrono::duration<double, std::milli>(tern::clock::now() - start).count(),
              static_cast<unsigned long long>(conn.stats().writes - writes));

  // Pub/sub: a second connection subscribes; this one publishes; the message comes back.
  redis::connection subscriber(ctx, cfg);
  if (failed(co_await subscriber.connect(), "connect (subscriber)")) co_return 1;
  if (auto r = co_await subscriber.subscribe("demo:news"); failed(r.ec, "SUBSCRIBE", r.message)) co_return 1;
  auto [pec, receivers] = co_await conn.command<std::int64_t>("PUBLISH", "demo:news", "tern says hi");
  if (failed(pec, "PUBLISH") || receivers != 1) co_return 1;
  auto [mec, message] = co_await tern::with_timeout(subscriber.receive(), 5s);
  if (failed(mec, "receive")) co_return 1;
  std::printf("message on %s: %s\n", message->channel.c_str(), message->payload.c_str());
  subscriber.close();
  conn.close();
  co_return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: redis_demo HOST:PORT | /path/to/unix.sock\n");
    return 2;
  }
  const std::string_view where = argv[1];
  redis::config cfg;
  cfg.fail_fast = true;
  if (where.starts_with("/")) {
    cfg.unix_path = where;
  } else {
    const std::size_t colon = where.rfind(':');
    unsigned port = 0;
    if (colon == std::string_view::npos ||
        std::from_chars(where.data() + colon + 1, where.data() + where.size(), port).ec != std::errc() || port == 0 ||
        port > 65535) {
      std::fprintf(stderr, "redis_demo: not HOST:PORT: %s\n", argv[1]);
      return 2;
    }
    cfg.host = where.substr(0, colon);
    cfg.port = static_cast<std::uint16_t>(port);
  }
  tern::io_context ctx;
  return ctx.block_on(demo(std::move(cfg)));
}
