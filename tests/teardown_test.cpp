// Destroying a loop: what the kernel may still do with memory the loop's tasks gave it, what becomes of the
// handlers queued or posted while the loop dies, and of sockets that outlive their loop.
//
// The kernel side is checked with canaries rather than with the sanitizers (a kernel write is invisible to them):
// each receiving task reads into a region owned by the test, and a guard in the task's frame, destroyed with the
// frame, fills the region with a pattern. Bytes the kernel writes there after that, while a peer thread keeps
// sending, would change the pattern. The io_uring rings are tried as they are made by default (DEFER_TASKRUN:
// completions run only inside the loop's own wait), without DEFER_TASKRUN (COOP_TASKRUN: at any system call of
// the loop's thread) and with SQPOLL (the kernel's poller thread issues them whenever it likes).
#include "net_support.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace tern_test;
using namespace std::chrono_literals;

// One configuration of a loop under test.
struct loop_config {
  tern::backend_kind backend;
  const char* name;
  bool sqpoll = false;
  bool defer_taskrun = true;

  tern::io_context_options options() const {
    tern::io_context_options o = options_for(backend);
    o.sqpoll = sqpoll;
    o.sqpoll_idle = 50ms;
    o.defer_taskrun = defer_taskrun;
    return o;
  }
};

struct config_name {
  std::string operator()(const ::testing::TestParamInfo<loop_config>& info) const { return info.param.name; }
};

void PrintTo(const loop_config& c, std::ostream* os) { *os << c.name; }

class teardown_test : public ::testing::TestWithParam<loop_config> {};

INSTANTIATE_TEST_SUITE_P(configs, teardown_test,
                         ::testing::Values(loop_config{tern::backend_kind::io_uring, "io_uring"},
                                           loop_config{tern::backend_kind::io_uring, "io_uring_sqpoll", true},
                                           loop_config{tern::backend_kind::io_uring, "io_uring_coop_taskrun", false,
                                                       false},
                                           loop_config{tern::backend_kind::epoll, "epoll"}),
                         config_name{});

constexpr unsigned char destroyed_pattern = 0xAB;
constexpr char sent_byte = 0x11;

// Lives in a receiving task's frame, declared before everything else there, so it is destroyed last, after the
// task's socket and its pending operation: from then on the task's region must not change.
struct canary_guard {
  std::span<unsigned char> region;
  std::atomic<int>* destroyed;
  canary_guard(std::span<unsigned char> r, std::atomic<int>& d) : region(r), destroyed(&d) {}
  canary_guard(canary_guard&& o) noexcept : region(o.region), destroyed(std::exchange(o.destroyed, nullptr)) {}
  ~canary_guard() {
    if (destroyed == nullptr) return;
    std::memset(region.data(), destroyed_pattern, region.size());
    destroyed->fetch_add(1);
  }
};

// A peer thread that keeps writing into the raw ends of socket pairs until told to stop: a few bytes into each
// every 100 us, so that most receives wait in the kernel at any moment and data keeps arriving for them.
class sender {
 public:
  explicit sender(std::vector<int> fds) : fds_(std::move(fds)), thread_([this] { body(); }) {}
  sender(const sender&) = delete;
  sender& operator=(const sender&) = delete;
  ~sender() { stop(); }
  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  std::size_t sent() const { return sent_.load(); }

 private:
  void body() {
    std::array<char, 64> chunk;
    chunk.fill(sent_byte);
    while (!stop_.load()) {
      for (int fd : fds_) {
        const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) sent_.fetch_add(static_cast<std::size_t>(n));
      }
      std::this_thread::yield();
    }
  }

  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> sent_{0};
  std::thread thread_;
};

// A socket pair: the tern end (adopted by the loop) and the raw peer end, closed by the test.
struct raw_pair {
  int local = -1;
  int peer = -1;
};

raw_pair make_pair_fds() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  return {fds[0], fds[1]};
}

tern::task<void> read_into(tern::net::unix_stream_socket socket, std::span<unsigned char> region,
                           std::atomic<int>& destroyed, std::atomic<std::size_t>& received) {
  canary_guard guard(region, destroyed);
  for (;;) {
    auto [ec, n] = co_await socket.read_some(tern::mutable_buffer(region.data(), region.size()));
    if (ec) co_return;
    received.fetch_add(n);
  }
}

tern::task<void> receive_all(tern::net::unix_stream_socket socket, std::atomic<int>& destroyed,
                             std::atomic<std::size_t>& received) {
  unsigned char unused[1];
  canary_guard guard(std::span<unsigned char>(unused, 0), destroyed);
  for (;;) {
    auto [ec, lease] = co_await socket.receive();
    if (ec) co_return;
    received.fetch_add(lease.size());
  }
}

// A task whose frame holds an object with a slow destructor (one that flushes a log, say): the loop's teardown
// destroys it last (it is the first task started), so the receiving tasks' frames are gone while it waits, the
// peer sends meanwhile, and the thread then makes system calls, at which a ring without DEFER_TASKRUN runs the
// completions that arrived.
struct slow_to_destroy {
  bool armed = true;
  slow_to_destroy() = default;
  slow_to_destroy(slow_to_destroy&& o) noexcept : armed(std::exchange(o.armed, false)) {}
  ~slow_to_destroy() {
    if (armed) std::this_thread::sleep_for(50ms);
  }
};

tern::task<void> hold_until_teardown(slow_to_destroy) {
  (void)co_await tern::sleep_for(1h);
}

// Stops ctx after a while, once the receivers have seen data.
tern::task<void> stop_after_traffic(tern::io_context& ctx, std::atomic<std::size_t>& received) {
  for (int i = 0; i < 2000 && received.load() < 16 * 1024; ++i) (void)co_await tern::sleep_for(1ms);
  (void)co_await tern::sleep_for(20ms);
  ctx.stop();
}

// Many plain receives pending, each into a region of the test's, while a peer keeps sending; then the loop is
// stopped and destroyed with the peer still sending. No region may change once its task's frame is gone.
TEST_P(teardown_test, no_receive_writes_into_a_frame_the_loop_has_destroyed) {
  constexpr int sockets = 48;
  constexpr std::size_t region_size = 4096;
  std::vector<unsigned char> regions(sockets * region_size, 0);
  std::atomic<int> destroyed{0};
  std::atomic<std::size_t> received{0};
  std::vector<int> peers;
  std::optional<sender> peer;
  {
    tern::io_context ctx(GetParam().options());
    tern::spawn(ctx, hold_until_teardown, slow_to_destroy{}).detach();
    for (int i = 0; i < sockets; ++i) {
      raw_pair p = make_pair_fds();
      peers.push_back(p.peer);
      auto [ec, socket] = tern::net::unix_stream_socket::adopt(ctx, tern::unique_fd(p.local));
      ASSERT_TRUE(ec_ok(ec));
      tern::spawn(ctx, read_into, std::move(socket),
                  std::span<unsigned char>(regions.data() + i * region_size, region_size), std::ref(destroyed),
                  std::ref(received))
          .detach();
    }
    tern::spawn(ctx, stop_after_traffic, std::ref(ctx), std::ref(received)).detach();
    peer.emplace(peers);
    EXPECT_TRUE(run_context_bounded(ctx, 20s));
    EXPECT_GT(received.load(), 0u);
    EXPECT_EQ(destroyed.load(), 0);
  }  // destroyed while the peer sends
  EXPECT_EQ(destroyed.load(), sockets) << "every receiving task's frame goes with its loop";
  const std::size_t sent_at_teardown = peer->sent();
  const auto until = clock_type::now() + 200ms;
  while (clock_type::now() < until && peer->sent() < sent_at_teardown + 256 * 1024) std::this_thread::sleep_for(1ms);
  peer->stop();
  std::size_t changed = 0;
  for (unsigned char c : regions) changed += c != destroyed_pattern ? 1 : 0;
  EXPECT_EQ(changed, 0u) << "the kernel wrote into receive buffers after their frames were destroyed";
  for (int fd : peers) ::close(fd);
}

// The same with receive() (a multishot receive into the loop's pool of provided buffers) and a small pool that
// the traffic makes grow: the loop's teardown must reap the multishots before the pool and its buffer ring are
// unmapped. ASan checks the loop's own side; the kernel side by mapping fresh pages over the range just freed
// (mmap reuses it) and watching them while the peer goes on sending.
TEST_P(teardown_test, no_receive_writes_into_the_pool_of_a_destroyed_loop) {
  constexpr int sockets = 48;
  std::atomic<int> destroyed{0};
  std::atomic<std::size_t> received{0};
  std::vector<int> peers;
  std::optional<sender> peer;
  tern::io_context_options o = GetParam().options();
  o.receive_buffer_size = 4096;
  o.receive_buffers = 16;
  o.receive_buffers_max = 64;
  {
    tern::io_context ctx(o);
    tern::spawn(ctx, hold_until_teardown, slow_to_destroy{}).detach();
    for (int i = 0; i < sockets; ++i) {
      raw_pair p = make_pair_fds();
      peers.push_back(p.peer);
      auto [ec, socket] = tern::net::unix_stream_socket::adopt(ctx, tern::unique_fd(p.local));
      ASSERT_TRUE(ec_ok(ec));
      tern::spawn(ctx, receive_all, std::move(socket), std::ref(destroyed), std::ref(received)).detach();
    }
    tern::spawn(ctx, stop_after_traffic, std::ref(ctx), std::ref(received)).detach();
    peer.emplace(peers);
    EXPECT_TRUE(run_context_bounded(ctx, 20s));
    EXPECT_GT(received.load(), 0u);
  }
  EXPECT_EQ(destroyed.load(), sockets);
  constexpr std::size_t probe_bytes = 1 << 20;
  std::vector<void*> probes;
  for (int i = 0; i < 8; ++i) {
    void* m = ::mmap(nullptr, probe_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    std::memset(m, destroyed_pattern, probe_bytes);
    probes.push_back(m);
  }
  const std::size_t sent_at_teardown = peer->sent();
  const auto until = clock_type::now() + 200ms;
  while (clock_type::now() < until && peer->sent() < sent_at_teardown + 256 * 1024) std::this_thread::sleep_for(1ms);
  peer->stop();
  std::size_t changed = 0;
  for (void* m : probes) {
    const auto* bytes = static_cast<const unsigned char*>(m);
    changed += static_cast<std::size_t>(std::count_if(bytes, bytes + probe_bytes,
                                                      [](unsigned char c) { return c != destroyed_pattern; }));
    ::munmap(m, probe_bytes);
  }
  EXPECT_EQ(changed, 0u) << "the kernel wrote into memory a destroyed loop had unmapped";
  for (int fd : peers) ::close(fd);
}

// ---- Handlers queued or posted while a loop dies ----

// Counts the live copies of a handler's state across threads: every probe made is destroyed exactly once, and
// `ran` says whether a handler that must not run did.
struct probe_counts {
  std::atomic<int> live{0};
  std::atomic<int> made{0};
  std::atomic<int> ran_after_stop{0};
};

struct probe {
  probe_counts* counts;
  explicit probe(probe_counts& c) : counts(&c) {
    c.live.fetch_add(1);
    c.made.fetch_add(1);
  }
  probe(probe&& o) noexcept : counts(std::exchange(o.counts, nullptr)) {}
  probe(const probe& o) : counts(o.counts) {
    if (counts != nullptr) counts->live.fetch_add(1);
  }
  probe& operator=(const probe&) = delete;
  ~probe() {
    if (counts != nullptr) counts->live.fetch_sub(1);
  }
};

// A handler that must never run: it is queued after the loop was stopped.
struct late_handler {
  probe p;
  void operator()() const { p.counts->ran_after_stop.fetch_add(1); }
};

// Whose destructor posts: what a frame or a handler's capture destroyed during teardown may do. Posts a plain
// handler, a shareable one and, the first time, another poster (a handler whose own discard posts again).
struct posts_when_destroyed {
  tern::io_context* ctx;
  probe_counts* counts;
  int depth;
  posts_when_destroyed(tern::io_context& c, probe_counts& n, int d) : ctx(&c), counts(&n), depth(d) {}
  posts_when_destroyed(posts_when_destroyed&& o) noexcept
      : ctx(std::exchange(o.ctx, nullptr)), counts(o.counts), depth(o.depth) {}
  posts_when_destroyed& operator=(posts_when_destroyed&&) = delete;
  ~posts_when_destroyed() {
    if (ctx == nullptr) return;
    ctx->post(late_handler{probe(*counts)});
    ctx->post_shared(late_handler{probe(*counts)});
    if (depth > 0) {
      ctx->post([inner = std::make_shared<posts_when_destroyed>(*ctx, *counts, depth - 1), p = probe(*counts)] {
        p.counts->ran_after_stop.fetch_add(1);
      });
    }
    // A task spawned from a destructor: its frame (holding a probe) must go too.
    tern::spawn(*ctx, [](probe) -> tern::task<void> { co_return; }, probe(*counts)).detach();
  }
};

tern::task<void> wait_forever_holding(posts_when_destroyed, probe) { (void)co_await tern::sleep_for(1h); }

class teardown_backend_test : public ::testing::TestWithParam<tern::backend_kind> {};
TERN_INSTANTIATE_BACKENDS(teardown_backend_test);

// Handlers queued when the loop stops (posted on its thread, shareable ones, ones from other threads), and the
// handlers, shareable handlers and tasks that destructors post while the loop destroys its suspended tasks and
// discards its queue: each is destroyed exactly once, and none runs.
TEST_P(teardown_backend_test, every_posted_handler_is_destroyed_exactly_once) {
  probe_counts counts;
  {
    tern::io_context ctx(options_for(GetParam()));
    for (int i = 0; i < 3; ++i) {
      tern::spawn(ctx, wait_forever_holding, posts_when_destroyed(ctx, counts, 2), probe(counts)).detach();
    }
    tern::spawn(ctx, [](tern::io_context& ctx, probe_counts& counts) -> tern::task<void> {
      (void)co_await tern::sleep_for(5ms);
      // Queued behind the stop: never run.
      ctx.stop();
      for (int i = 0; i < 200; ++i) ctx.post(late_handler{probe(counts)});
      for (int i = 0; i < 200; ++i) ctx.post_shared(late_handler{probe(counts)});
      for (int i = 0; i < 5; ++i) {
        ctx.post([d = std::make_shared<posts_when_destroyed>(ctx, counts, 1), p = probe(counts)] {
          p.counts->ran_after_stop.fetch_add(1);
        });
      }
    }, std::ref(ctx), std::ref(counts)).detach();
    EXPECT_TRUE(run_context_bounded(ctx, 20s));
    // From other threads, into the stopped loop's inbox.
    std::vector<std::thread> posters;
    for (int t = 0; t < 3; ++t) {
      posters.emplace_back([&ctx, &counts] {
        for (int i = 0; i < 300; ++i) ctx.post(late_handler{probe(counts)});
        ctx.post([d = std::make_shared<posts_when_destroyed>(ctx, counts, 1), p = probe(counts)] {
          p.counts->ran_after_stop.fetch_add(1);
        });
      });
    }
    for (auto& t : posters) t.join();
    EXPECT_GT(counts.live.load(), 0);
  }
  EXPECT_GT(counts.made.load(), 1000);
  EXPECT_EQ(counts.ran_after_stop.load(), 0) << "a handler queued after stop() ran during teardown";
  EXPECT_EQ(counts.live.load(), 0) << "handlers (or their captures) not destroyed with the loop";
}

// The same in a runtime: its teardown discards what every worker queued, then destroys the loops.
TEST_P(teardown_backend_test, every_handler_of_a_runtime_is_destroyed_exactly_once) {
  probe_counts counts;
  {
    tern::runtime rt(runtime_options_for(GetParam(), 2));
    for (std::size_t w = 0; w < rt.size(); ++w) {
      tern::io_context& ctx = rt.worker(w);
      rt.spawn_on(w, wait_forever_holding, posts_when_destroyed(ctx, counts, 2), probe(counts)).detach();
    }
    std::atomic<int> started{0};
    for (std::size_t w = 0; w < rt.size(); ++w) rt.post_to(w, [&started] { started.fetch_add(1); });
    while (started.load() != static_cast<int>(rt.size())) std::this_thread::yield();
    rt.stop();
    for (std::size_t w = 0; w < rt.size(); ++w) {
      for (int i = 0; i < 100; ++i) rt.post_to(w, late_handler{probe(counts)});
      rt.post(late_handler{probe(counts)});
    }
  }
  EXPECT_EQ(counts.ran_after_stop.load(), 0);
  EXPECT_EQ(counts.live.load(), 0) << "handlers (or their captures) not destroyed with the runtime";
}

// ---- What the kernel still holds when a loop stops being run ----

tern::task<void> accept_once(tern::net::tcp_acceptor& listener) { (void)co_await listener.accept(); }
tern::task<void> receive_once(tern::net::unix_stream_socket& socket) { (void)co_await socket.receive(); }

// A listener and a socket closed under their waiting accept and receive: under io_uring their multishot requests
// end with a completion the loop reaps a moment later, after the waiting tasks have already ended. A task that
// awaits closes_settled() before it returns leaves nothing in the kernel for block_on's caller, who may then
// destroy the loop on another thread, where it could no longer reap them.
TEST_P(teardown_backend_test, closes_settled_waits_for_the_kernel_to_end_what_was_closed) {
  tern::io_context ctx(options_for(GetParam()));
  std::string left;
  std::thread runner([&ctx, &left] {
    ctx.block_on([](tern::io_context& ctx) -> tern::task<void> {
      tern::net::tcp_acceptor listener(ctx);
      CO_ASSERT_OK(listener.listen(tern::net::endpoint::loopback_v4(0)));
      raw_pair p = make_pair_fds();
      auto [ec, socket] = tern::net::unix_stream_socket::adopt(ctx, tern::unique_fd(p.local));
      CO_ASSERT_OK(ec);
      auto accepting = tern::spawn(ctx, accept_once(listener));
      auto receiving = tern::spawn(ctx, receive_once(socket));
      (void)co_await tern::sleep_for(5ms);  // both wait in the kernel
      listener.close();
      socket.close();
      co_await std::move(accepting);
      co_await std::move(receiving);
      co_await tern::closes_settled(ctx);
      ::close(p.peer);
    }(ctx));
    left = operations_outstanding(tern::metrics::snapshot(ctx));
  });
  runner.join();
  EXPECT_EQ(left, "") << "operations started and not completed when block_on returned";
}

// ---- Objects that outlive their loop ----

// A socket declared before its loop is destroyed after it, as a new user writes it: the loop's teardown leaves it
// closable, and its destruction then closes the fd and frees its record (LeakSanitizer checks the record in the
// asan build).
TEST_P(teardown_backend_test, a_socket_declared_before_its_loop_is_closed_and_freed) {
  raw_pair p = make_pair_fds();
  {
    std::optional<tern::net::unix_stream_socket> socket;
    tern::io_context ctx(options_for(GetParam()));
    auto [ec, s] = tern::net::unix_stream_socket::adopt(ctx, tern::unique_fd(p.local));
    ASSERT_TRUE(ec_ok(ec));
    socket.emplace(std::move(s));
  }
  char c;
  EXPECT_EQ(::recv(p.peer, &c, 1, MSG_DONTWAIT), 0) << "the socket's fd was not closed";
  EXPECT_EQ(::fcntl(p.local, F_GETFD), -1);
  ::close(p.peer);
}

// Sockets whose loop was destroyed first: close(), release() and the destructor still work (the fd is closed, or
// handed over), also for one with bytes that receive() had queued (under io_uring, with its multishot armed).
TEST_P(teardown_backend_test, sockets_that_outlive_their_loop_can_be_closed_released_or_destroyed) {
  int peers[3] = {-1, -1, -1};
  int fds[3] = {-1, -1, -1};
  {
    std::optional<tern::net::unix_stream_socket> destroyed_later;
    std::optional<tern::net::unix_stream_socket> closed_later;
    std::optional<tern::net::unix_stream_socket> released_later;
    auto ctx = std::make_unique<tern::io_context>(options_for(GetParam()));
    for (int i = 0; i < 3; ++i) {
      raw_pair p = make_pair_fds();
      peers[i] = p.peer;
      fds[i] = p.local;
      auto [ec, s] = tern::net::unix_stream_socket::adopt(*ctx, tern::unique_fd(p.local));
      ASSERT_TRUE(ec_ok(ec));
      (i == 0 ? destroyed_later : i == 1 ? closed_later : released_later).emplace(std::move(s));
    }
    ASSERT_EQ(::send(peers[0], "abc", 3, MSG_NOSIGNAL), 3);
    ctx->block_on([](tern::net::unix_stream_socket& s, int peer) -> tern::task<void> {
      auto [ec, lease] = co_await s.receive();
      EXPECT_OK(ec);
      EXPECT_EQ(::send(peer, "defg", 4, MSG_NOSIGNAL), 4);
      (void)co_await tern::sleep_for(5ms);  // the next bytes are queued for a receive() that never comes
    }(*destroyed_later, peers[0]));
    ctx.reset();  // the loop goes first
    closed_later->close();
    EXPECT_FALSE(closed_later->is_open());
    auto [rec, fd] = released_later->release();
    EXPECT_OK(rec);
    EXPECT_EQ(fd.get(), fds[2]) << "release() of a socket whose loop is gone hands its fd over";
    EXPECT_FALSE(released_later->is_open());
  }
  for (int i = 0; i < 2; ++i) {
    // The end of the stream, or a reset where bytes were left unread in the closed socket (epoll's receive()
    // reads only what is asked for).
    char c;
    const ssize_t r = ::recv(peers[i], &c, 1, MSG_DONTWAIT);
    EXPECT_TRUE(r == 0 || (r < 0 && errno == ECONNRESET)) << "socket " << i << ": its fd was not closed";
    EXPECT_EQ(::fcntl(fds[i], F_GETFD), -1);
  }
  EXPECT_EQ(::fcntl(fds[2], F_GETFD), -1) << "the released fd was closed by its new owner, the unique_fd";
  for (int fd : peers) ::close(fd);
}

}  // namespace
