// Cancel requests on the loop.
//
// A cancel request is a message of 16 bytes (its length, the code 80877102, the backend's process id and its
// secret key) sent on a new connection to the server, which the server closes once it has acted. libpq 15's
// PQcancel does exactly that, but blocking: connect, send, wait for the close. tern sends it from a task on the
// connection's loop instead, with tern's own sockets (TCP or Unix), so neither the loop nor a thread is held while
// the server is reached.
//
// What the request needs is in libpq's PGcancel (PQgetCancel), whose layout libpq does not publish: the server's
// address as libpq connected to it, then the process id and the key. Rather than trust the layout blindly, it is
// read once per connection and checked against what libpq does publish: the process id against PQbackendPID, the
// address against the peer of the connection's own socket. Where either check fails (a libpq whose PGcancel is laid
// out otherwise), the request is made by PQcancel itself on a thread of its own, which blocks that thread only, and
// a task on the loop follows that thread to its end (cancel_by_thread).
#include "cancel.hpp"

#include <netinet/in.h>
#include <sys/un.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "tern/cancel.hpp"
#include "tern/net/endpoint.hpp"
#include "tern/net/tcp.hpp"
#include "tern/net/unix.hpp"
#include "tern/spawn.hpp"
#include "tern/timer.hpp"

namespace tern::pg::detail {

namespace {

using namespace std::chrono_literals;

// The head of libpq's struct pg_cancel (libpq-int.h): the remote address as libpq keeps it (SockAddr, a struct of
// its own: its size is rounded up to sockaddr_storage's alignment, so the process id does not follow salen
// directly), then the backend's process id and key. Checked before use, see above.
struct pg_sock_addr {
  sockaddr_storage addr;
  socklen_t salen;
};
struct pg_cancel_head {
  pg_sock_addr raddr;
  int be_pid;
  int be_key;
};

bool same_peer(const sockaddr_storage& a, socklen_t alen, const sockaddr_storage& b, socklen_t blen) noexcept {
  if (a.ss_family != b.ss_family) return false;
  switch (a.ss_family) {
    case AF_INET: {
      const auto& x = reinterpret_cast<const sockaddr_in&>(a);
      const auto& y = reinterpret_cast<const sockaddr_in&>(b);
      return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
    }
    case AF_INET6: {
      const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
      const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
      return x.sin6_port == y.sin6_port && std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
    }
    case AF_UNIX: {
      const std::size_t offset = offsetof(sockaddr_un, sun_path);
      if (alen <= offset || blen <= offset) return false;
      const auto& x = reinterpret_cast<const sockaddr_un&>(a);
      const auto& y = reinterpret_cast<const sockaddr_un&>(b);
      if (x.sun_path[0] == '\0' || y.sun_path[0] == '\0') {  // abstract names: compare the bytes
        return alen == blen && std::memcmp(x.sun_path, y.sun_path, alen - offset) == 0;
      }
      return std::strncmp(x.sun_path, y.sun_path, sizeof x.sun_path) == 0;
    }
    default: return false;
  }
}

// TERN_PG_CANCEL_BY_THREAD=1 as a connection is made: its cancel requests go by the fallback, PQcancel on a
// thread, as they do where libpq's PGcancel is laid out otherwise (the tests run that path on this libpq too).
bool by_thread_only() noexcept {
  const char* v = std::getenv("TERN_PG_CANCEL_BY_THREAD");
  return v != nullptr && v[0] == '1';
}

std::array<unsigned char, 16> request_packet(std::int32_t pid, std::int32_t key) noexcept {
  std::array<unsigned char, 16> p{};
  const std::uint32_t words[4] = {16, (1234u << 16) | 5678u, static_cast<std::uint32_t>(pid),
                                  static_cast<std::uint32_t>(key)};
  for (int w = 0; w < 4; ++w) {
    for (int i = 0; i < 4; ++i) p[static_cast<std::size_t>(4 * w + i)] = static_cast<unsigned char>(words[w] >> (24 - 8 * i));
  }
  return p;
}

// Sends the request on s (connected) and waits for the server to close it, each step bounded.
template <class Socket>
task<> deliver(Socket& s, std::array<unsigned char, 16> packet) {
  auto [wec, n] = co_await tern::with_timeout(s.write_all(const_buffer(packet.data(), packet.size())), 10s);
  if (wec) co_return;
  char byte;
  auto [rec, r] = co_await tern::with_timeout(s.read_some(mutable_buffer(&byte, 1)), 10s);
  (void)rec;
  (void)r;
}

// Calls the request's landed callback when its task ends, also when the frame is destroyed unfinished.
struct landing {
  void (*landed)(void*) noexcept;
  void* arg;
  landing(void (*l)(void*) noexcept, void* a) noexcept : landed(l), arg(a) {}
  landing(const landing&) = delete;
  landing& operator=(const landing&) = delete;
  ~landing() { landed(arg); }
};

task<> cancel_over_unix(io_context& ctx, cancel_target t, void (*landed)(void*) noexcept, void* arg) {
  const landing done(landed, arg);
  net::unix_stream_socket s(ctx);
  const net::unix_endpoint ep(reinterpret_cast<const sockaddr*>(&t.addr), t.addr_len);
  if (co_await tern::with_timeout(s.connect(ep), 10s)) co_return;
  co_await deliver(s, request_packet(t.pid, t.key));
}

task<> cancel_over_tcp(io_context& ctx, cancel_target t, void (*landed)(void*) noexcept, void* arg) {
  const landing done(landed, arg);
  net::tcp_socket s(ctx);
  const net::endpoint ep(reinterpret_cast<const sockaddr*>(&t.addr), t.addr_len);
  if (co_await tern::with_timeout(s.connect(ep), 10s)) co_return;
  co_await deliver(s, request_packet(t.pid, t.key));
}

// PQcancel on a thread of its own (the fallback), followed from the loop: landed is called once PQcancel has
// returned (the server has closed the request's connection, or the request failed), as for a request sent on the
// loop, so that nothing waiting for the requests on their way (a transaction's BEGIN, a connection handed back to
// its pool) goes on while this one may still reach the server. The thread holds its own reference to the PGcancel
// and shares with the task only the flag it sets, which the task looks at every few milliseconds (no wake-up
// crosses threads): a loop torn down first leaves the thread nothing of its own to touch. PQcancel bounds none of
// its steps; past give_up, the request is taken to have failed.
task<> cancel_by_thread(std::shared_ptr<PGcancel> c, void (*landed)(void*) noexcept, void* arg) {
  const landing done(landed, arg);
  auto finished = std::make_shared<std::atomic<bool>>(false);
  bool started = true;
  try {
    std::thread([c = std::move(c), finished] {
      char message[256];
      (void)PQcancel(c.get(), message, sizeof message);
      finished->store(true, std::memory_order_release);
    }).detach();
  } catch (...) {
    started = false;  // no thread: no request (the query runs to its end)
  }
  if (!started) co_return;
  constexpr auto poll = 5ms;
  constexpr auto give_up = 30s;
  for (auto waited = 0ms; waited < give_up && !finished->load(std::memory_order_acquire); waited += poll) {
    co_await tern::sleep_for(poll);
  }
}

}  // namespace

cancel_target read_cancel_target(PGconn* pg) noexcept {
  cancel_target t;
  PGcancel* c = PQgetCancel(pg);
  if (c == nullptr) return t;
  std::shared_ptr<PGcancel> owned(c, &PQfreeCancel);
  sockaddr_storage peer{};
  socklen_t peer_len = sizeof peer;
  const bool have_peer = ::getpeername(PQsocket(pg), reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0;
  pg_cancel_head head;
  std::memcpy(&head, c, sizeof head);
  const pg_sock_addr& raddr = head.raddr;
  if (have_peer && head.be_pid == PQbackendPID(pg) && raddr.salen > 0 && raddr.salen <= sizeof raddr.addr &&
      same_peer(raddr.addr, raddr.salen, peer, peer_len) && !by_thread_only()) {
    t.addr = raddr.addr;
    t.addr_len = raddr.salen;
    t.pid = head.be_pid;
    t.key = head.be_key;
    t.valid = true;
    return t;
  }
  t.fallback = std::move(owned);
  return t;
}

void send_cancel_request(io_context& ctx, const cancel_target& t, void (*landed)(void*) noexcept, void* arg) noexcept {
  if (!t.valid && !t.fallback) {
    landed(arg);  // libpq gave no PGcancel: no request
    return;
  }
  try {
    if (!t.valid) tern::spawn(ctx, cancel_by_thread(t.fallback, landed, arg)).detach();
    else if (t.addr.ss_family == AF_UNIX) tern::spawn(ctx, cancel_over_unix(ctx, t, landed, arg)).detach();
    else tern::spawn(ctx, cancel_over_tcp(ctx, t, landed, arg)).detach();
  } catch (...) {
    // Out of memory: no request. spawn never starts a task itself, so the task's guard was not made either.
    landed(arg);
  }
}

}  // namespace tern::pg::detail
