// net::connect (see tern/net/connect.hpp): Happy Eyeballs over tern's own pieces. The attempts are children of a
// task_group, so however the race ends (a winner, every attempt failed, the caller's stop or deadline) every
// attempt has finished, and its socket is closed unless it won, before connect returns. One event wakes the
// driver when an attempt ends; the attempt delay is a with_timeout on that wait.
#include "tern/net/connect.hpp"

#include <algorithm>
#include <optional>

#include "tern/cancel.hpp"
#include "tern/error.hpp"
#include "tern/sync/event.hpp"
#include "tern/task_group.hpp"

namespace tern::net {

namespace {

using connect_result = io_result<tcp_socket>;

struct race_state {
  std::optional<tcp_socket> winner;
  std::error_code last_error;  // the last attempt's failure (a cancellation only when nothing else failed)
  std::size_t finished = 0;
  sync::auto_reset_event changed;
};

task<void> attempt(io_context& ctx, endpoint ep, race_state& race) {
  tcp_socket s(ctx);
  const std::error_code ec = co_await s.connect(ep);
  if (!ec) {
    if (!race.winner) race.winner.emplace(std::move(s));  // a later success is closed with s
  } else if (ec != error::operation_canceled || !race.last_error) {
    race.last_error = ec;
  }
  ++race.finished;
  race.changed.set();
}

}  // namespace

std::vector<endpoint> happy_eyeballs_order(std::vector<endpoint> endpoints) {
  if (endpoints.size() < 2) return endpoints;
  const int first_family = endpoints.front().family();
  std::vector<endpoint> first, second, out;
  for (const endpoint& ep : endpoints) (ep.family() == first_family ? first : second).push_back(ep);
  out.reserve(endpoints.size());
  for (std::size_t i = 0; i < std::max(first.size(), second.size()); ++i) {
    if (i < first.size()) out.push_back(first[i]);
    if (i < second.size()) out.push_back(second[i]);
  }
  return out;
}

task<io_result<tcp_socket>> connect(io_context& ctx, std::vector<endpoint> endpoints, connect_options options) {
  if (endpoints.empty()) co_return connect_result{std::make_error_code(std::errc::invalid_argument), tcp_socket(ctx)};
  if (endpoints.size() == 1) {
    tcp_socket s(ctx);
    const std::error_code ec = co_await s.connect(endpoints.front());
    co_return connect_result{ec, std::move(s)};
  }
  const clock::duration delay = std::max<clock::duration>(options.attempt_delay, std::chrono::milliseconds(10));
  race_state race;
  bool stopped = false;
  co_await task_group::run(ctx, [&](task_group& g) -> task<void> {
    std::size_t started = 0;
    for (const endpoint& ep : endpoints) {
      g.spawn(attempt(ctx, ep, race));
      if (++started == endpoints.size()) break;
      // The next attempt starts when the delay has passed or an attempt has ended, whichever comes first.
      const std::error_code ec = co_await with_timeout(race.changed.wait(), delay);
      if (race.winner) break;
      if (ec && ec != std::errc::timed_out) {
        stopped = true;  // the caller's stop or deadline
        break;
      }
    }
    while (!stopped && !race.winner && race.finished < started) {
      if (co_await race.changed.wait()) stopped = true;
    }
    g.cancel();  // the attempts still running lost
  });
  if (race.winner) co_return connect_result{{}, std::move(*race.winner)};
  co_return connect_result{stopped ? make_error_code(error::operation_canceled) : race.last_error, tcp_socket(ctx)};
}

task<io_result<tcp_socket>> connect(resolver& r, std::string host, std::string service, connect_options options) {
  auto [ec, found] = co_await r.resolve(std::move(host), std::move(service), options.family);
  if (ec) co_return connect_result{ec, tcp_socket(r.context())};
  co_return co_await connect(r.context(), happy_eyeballs_order(std::move(found.endpoints)), options);
}

task<io_result<tcp_socket>> connect(io_context& ctx, std::string host, std::string service, connect_options options) {
  resolver r(ctx);
  co_return co_await connect(r, std::move(host), std::move(service), options);
}

}  // namespace tern::net
