// services: a small service graph on tern::services, with an HTTP endpoint on tern::http.
//
//   services ADDRESS:PORT [TICK_MS]
//
//   config    provides config_iface (the address, the tick interval)
//   producer  requires config_iface; publishes a tick_event every TICK_MS (default 100) on the event bus
//   consumer  requires config_iface; subscribes to tick_event and counts; provides counter_iface
//   http      requires config_iface and counter_iface; serves GET /status: {"events_seen":N,"last_sequence":M}
//
// The registry starts them in dependency order (producer and consumer side by side, once config runs; http once
// consumer runs) and, on SIGINT or SIGTERM, stops them in reverse. Each prints "started NAME" and "stopped NAME";
// http prints "listening on ADDRESS:PORT" once it serves. If a service cannot start, the registry's report says
// why and the program exits with 1.
#include <tern/http/server.hpp>
#include <tern/services/services.hpp>
#include <tern/tern.hpp>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace http = tern::http;
namespace net = tern::net;
namespace svc = tern::services;

namespace {

void say(const char* what, const char* name) {
  std::printf("%s %s\n", what, name);
  std::fflush(stdout);
}

struct tick_event {
  std::uint64_t sequence = 0;
};

struct config_iface {
  virtual ~config_iface() = default;
  virtual net::endpoint endpoint() const = 0;
  virtual std::chrono::milliseconds tick_interval() const = 0;
};

struct counter_iface {
  virtual ~counter_iface() = default;
  virtual std::uint64_t seen() const = 0;
  virtual std::uint64_t last_sequence() const = 0;
};

class config_service final : public config_iface {
 public:
  using interfaces = svc::provides<config_iface>;

  config_service(net::endpoint where, std::chrono::milliseconds tick) : where_(where), tick_(tick) {}
  tern::task<> start() {
    say("started", "config");
    co_return;
  }
  tern::task<> stop() {
    say("stopped", "config");
    co_return;
  }
  net::endpoint endpoint() const override { return where_; }
  std::chrono::milliseconds tick_interval() const override { return tick_; }

 private:
  net::endpoint where_;
  std::chrono::milliseconds tick_;
};

class producer {
 public:
  using dependencies = svc::depends<svc::required<config_iface>>;

  producer(config_iface& config, tern::io_context& ctx, svc::event_bus* bus)
      : config_(config), ctx_(ctx), bus_(*bus) {}
  tern::task<> start() {
    // The ticking task watches stop_'s token: stop() cancels its sleep.
    ticking_ = tern::spawn(ctx_, tick(), stop_.get_token());
    say("started", "producer");
    co_return;
  }
  tern::task<> stop() {
    stop_.request_stop();
    co_await std::move(ticking_);
    say("stopped", "producer");
  }

 private:
  tern::task<> tick() {
    for (std::uint64_t n = 1;; ++n) {
      if (co_await tern::sleep_for(config_.tick_interval())) co_return;  // cancelled: stopping
      bus_.publish(tick_event{n});
    }
  }

  config_iface& config_;
  tern::io_context& ctx_;
  svc::event_bus& bus_;
  std::stop_source stop_;
  tern::join_handle<void> ticking_;
};

class consumer final : public counter_iface {
 public:
  using dependencies = svc::depends<svc::required<config_iface>>;
  using interfaces = svc::provides<counter_iface>;

  consumer(config_iface&, svc::event_bus* bus) : bus_(*bus) {}
  tern::task<> start() {
    subscription_ = bus_.subscribe<tick_event>([this](const tick_event& e) {
      ++seen_;
      last_ = e.sequence;
    });
    say("started", "consumer");
    co_return;
  }
  tern::task<> stop() {
    subscription_.reset();
    say("stopped", "consumer");
    co_return;
  }
  std::uint64_t seen() const override { return seen_; }
  std::uint64_t last_sequence() const override { return last_; }

 private:
  svc::event_bus& bus_;
  svc::subscription subscription_;
  std::uint64_t seen_ = 0;
  std::uint64_t last_ = 0;
};

class http_status {
 public:
  using dependencies = svc::depends<svc::required<config_iface>, svc::required<counter_iface>>;

  http_status(config_iface& config, counter_iface& counter, tern::io_context& ctx)
      : config_(config), server_(ctx, routes(counter)), ctx_(ctx) {}
  tern::task<std::error_code> start() {
    if (auto ec = server_.listen(config_.endpoint())) co_return ec;  // reported by the registry
    std::printf("listening on %s\n", server_.local_endpoint().value.to_string().c_str());
    running_ = tern::spawn(ctx_, server_.run());
    say("started", "http");
    co_return std::error_code{};
  }
  tern::task<> stop() {
    co_await server_.shutdown(std::chrono::seconds(1));
    const std::error_code ec = co_await std::move(running_);
    if (ec) std::fprintf(stderr, "http: %s\n", ec.message().c_str());
    say("stopped", "http");
  }

 private:
  static http::router routes(counter_iface& counter) {
    http::router r;
    r.get("/status", [&counter](http::request&) -> tern::task<http::response> {
      const std::string body = "{\"events_seen\":" + std::to_string(counter.seen()) +
                               ",\"last_sequence\":" + std::to_string(counter.last_sequence()) + "}\n";
      co_return http::response(200, body, "application/json");
    });
    return r;
  }

  config_iface& config_;
  http::server server_;
  tern::io_context& ctx_;
  tern::join_handle<std::error_code> running_;  // the server's run(): an error if its listener broke
};

tern::task<int> run(tern::io_context& ctx, svc::event_bus& bus, tern::signal_set& signals, net::endpoint where,
                    std::chrono::milliseconds tick) {
  svc::registry reg(ctx);
  reg.add<config_service>(svc::named{"config"}, where, tick);
  reg.add<producer>(svc::named{"producer"}, std::ref(ctx), &bus);
  reg.add<consumer>(svc::named{"consumer"}, &bus);
  reg.add<http_status>(svc::named{"http"}, std::ref(ctx));
  const svc::registry_report report = co_await reg.start();
  if (!report.all_running()) {
    std::fprintf(stderr, "services: not every service started:\n%s", report.to_string().c_str());
    co_await reg.stop();
    co_return 1;
  }
  auto [ec, signo] = co_await signals.wait();
  if (!ec) std::printf("signal %d: stopping\n", signo);
  co_await reg.stop();
  co_return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: services ADDRESS:PORT [TICK_MS]\n");
    return 1;
  }
  const auto where = net::endpoint::parse(argv[1]);
  const int tick_ms = argc == 3 ? std::atoi(argv[2]) : 100;
  if (!where || tick_ms < 1) {
    std::fprintf(stderr, "services: bad address or tick interval\n");
    return 1;
  }
  svc::event_bus bus;  // before the loop, so that it outlives the loop's deliveries
  tern::io_context ctx;
  tern::signal_set signals(ctx, {SIGINT, SIGTERM});
  return ctx.block_on(run(ctx, bus, signals, *where, std::chrono::milliseconds(tick_ms)));
}
