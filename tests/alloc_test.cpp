// Steady-state allocation checks. This executable replaces the global operator new/delete with counting versions;
// after a warm-up (which fills the per-thread frame pool and any lazily grown structure), the hot paths of the
// runtime must not allocate at all: an echo loop over TCP, posted handlers, timer schedule/cancel, timeouts, and
// spawn/join.
#include "counting_new.hpp"
#include "net_support.hpp"

#include <tern/detail/line_pool.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>
#include <vector>
#include <thread>
#include <optional>


namespace {

using namespace tern_test;

constexpr int warmup = 1000;
constexpr int measured = 10'000;

class alloc_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(alloc_test);

// The counter itself works: otherwise every "zero allocations" result below would be meaningless.
TEST(alloc_counter, counts_allocations) {
  start_counting();
  // A direct operator new call, through a volatile pointer: a new-expression whose result is unused may be
  // elided entirely by the optimiser, which would make this check meaningless rather than wrong.
  void* (*volatile allocate)(std::size_t) = &::operator new;
  void* p = allocate(sizeof(int));
  std::size_t n = stop_counting();
  ::operator delete(p);
  EXPECT_EQ(n, 1u);
}

// --- The line pool of cross-thread posts (no I/O: the pool is the same under both backends) ---

using tern::detail::line_pool;

// Runs f on a new thread (whose pool list starts empty) and waits for it.
template <class F>
void on_fresh_thread(F f) {
  std::thread t(f);
  t.join();
}

// Allocates n blocks on a fresh thread, counting operator new calls meanwhile, then frees them; returns the count.
std::size_t allocations_for_blocks_on_fresh_thread(int n) {
  std::size_t allocs = 0;
  on_fresh_thread([&] {
    std::vector<void*> blocks;
    blocks.reserve(static_cast<std::size_t>(n));
    start_counting();
    for (int i = 0; i < n; ++i) blocks.push_back(line_pool::allocate());
    allocs = stop_counting();
    for (void* b : blocks) line_pool::deallocate(b);
  });
  return allocs;
}

// Blocks are carved from slabs: a thousand cost a handful of allocations, and each has a cache line of its own.
TEST(line_pool, blocks_come_many_to_an_allocation_each_on_its_own_line) {
  constexpr int n = 1000;
  std::vector<void*> blocks;
  std::size_t allocs = 0;
  on_fresh_thread([&] {
    blocks.reserve(n);
    start_counting();
    for (int i = 0; i < n; ++i) blocks.push_back(line_pool::allocate());
    allocs = stop_counting();
  });
  EXPECT_LE(allocs, n / line_pool::blocks_per_slab + 1) << "one slab holds " << line_pool::blocks_per_slab << " blocks";
  std::vector<std::uintptr_t> addresses;
  for (void* b : blocks) addresses.push_back(reinterpret_cast<std::uintptr_t>(b));
  std::sort(addresses.begin(), addresses.end());
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    EXPECT_EQ(addresses[i] % 64, 0u) << "block " << i << " is not aligned to a cache line";
    if (i > 0) {
      EXPECT_GE(addresses[i] - addresses[i - 1], 64u) << "blocks " << i - 1 << " and " << i << " overlap";
    }
  }
  on_fresh_thread([&] {
    for (void* b : blocks) line_pool::deallocate(b);
  });
}

// The blocks a thread held when it exits are not lost with it: another thread allocates as many again without a
// new slab (it would need about twenty).
TEST(line_pool, a_thread_that_exits_leaves_its_blocks_to_the_others) {
  constexpr int n = 5000;
  on_fresh_thread([] {
    std::vector<void*> blocks;
    for (int i = 0; i < n; ++i) blocks.push_back(line_pool::allocate());
    for (void* b : blocks) line_pool::deallocate(b);
  });
  EXPECT_GE(line_pool::depot_size(), static_cast<std::size_t>(n));
  std::size_t allocs = allocations_for_blocks_on_fresh_thread(n);
  EXPECT_EQ(allocs, 0u) << "allocations for " << n << " blocks another thread had left";
}

// A thread that frees what others allocated keeps at most max_cached blocks; the rest goes to the depot (never to
// operator delete, which a block inside a slab cannot take), where a third thread finds it while the second
// still runs.
TEST(line_pool, a_thread_past_its_cap_passes_the_rest_on_while_it_runs) {
  constexpr std::uint32_t cap = line_pool::max_cached;
  constexpr int extra = 50'000;
  const int n = static_cast<int>(cap) + extra;
  std::vector<void*> blocks;
  on_fresh_thread([&] {
    blocks.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) blocks.push_back(line_pool::allocate());
  });
  const std::size_t depot_before = line_pool::depot_size();
  std::atomic<bool> freed{false};
  std::atomic<bool> done{false};
  std::uint32_t kept = 0;
  std::size_t depot_after = 0;
  std::thread freeing([&] {
    for (void* b : blocks) line_pool::deallocate(b);
    kept = line_pool::cached();
    depot_after = line_pool::depot_size();
    freed.store(true);
    while (!done.load()) std::this_thread::yield();
  });
  while (!freed.load()) std::this_thread::yield();
  std::size_t allocs = allocations_for_blocks_on_fresh_thread(extra);
  done.store(true);
  freeing.join();
  EXPECT_LE(kept, cap) << "the freeing thread kept more than its cap";
  EXPECT_GE(depot_after, depot_before + extra) << "the blocks past the cap did not reach the depot";
  EXPECT_EQ(allocs, 0u) << "allocations for blocks the freeing thread passed on";
}

struct loop_result {
  std::size_t allocations = 0;
  int mismatches = 0;
  int errors = 0;
  bool measured = false;
};

// The echo tests' messages: 64 bytes.
constexpr std::size_t echo_size = 64;

tern::task<void> echo_server(tern::net::tcp_socket& s, int messages, loop_result& r) {
  std::array<char, echo_size> buf;
  for (int i = 0; i < messages; ++i) {
    auto [rec, rn] = co_await s.read_exact(tern::mutable_buffer(buf));
    if (rec || rn != buf.size()) {
      ++r.errors;
      co_return;
    }
    auto [wec, wn] = co_await s.write_all(tern::const_buffer(buf));
    if (wec || wn != buf.size()) {
      ++r.errors;
      co_return;
    }
  }
}

// The client of the echo tests: a message different each time (so an echo of the wrong bytes is a mismatch),
// written and read back; warmup round trips, then measured ones counted. With Timeouts, every write_all and
// read_exact is wrapped in a one-hour timeout that never fires.
template <bool Timeouts = false>
tern::task<void> echo_client(tern::net::tcp_socket& client, loop_result& r) {
  std::array<char, echo_size> msg{};
  std::array<char, echo_size> back{};
  for (int i = 0; i < warmup + measured; ++i) {
    if (i == warmup) {
      start_counting();
      r.measured = true;
    }
    for (std::size_t k = 0; k < msg.size(); ++k) msg[k] = static_cast<char>(i + k);
    tern::io_result<std::size_t> written;
    tern::io_result<std::size_t> read;
    if constexpr (Timeouts) {
      written = co_await tern::with_timeout(client.write_all(tern::const_buffer(msg)), 1h);
      read = co_await tern::with_timeout(client.read_exact(tern::mutable_buffer(back)), 1h);
    } else {
      written = co_await client.write_all(tern::const_buffer(msg));
      read = co_await client.read_exact(tern::mutable_buffer(back));
    }
    if (written.ec || read.ec || written.value != msg.size() || read.value != back.size()) {
      ++r.errors;
      break;
    }
    if (back != msg) ++r.mismatches;
  }
  r.allocations = stop_counting();
}

// Client and server on one loop, 64-byte messages: 1000 warm-up round trips, then 10000 counted ones.
TEST_P(alloc_test, echo_steady_state_allocates_nothing) {
  loop_result r;
  run_bounded(ctx, [](tern::io_context& ctx, loop_result& r) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    EXPECT_OK(client.set_no_delay(true));
    EXPECT_OK(server.set_no_delay(true));
    auto srv = tern::spawn(ctx, echo_server(server, warmup + measured, r));
    co_await echo_client(client, r);
    co_await std::move(srv);
  }(ctx, r));
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << measured << " echoed messages";
}

// Same loop, every write_all and read_exact wrapped in a one-hour timeout that never fires (no task, no stop
// source: with_timeout on an operation adds only a timer node in the awaiting frame).
TEST_P(alloc_test, echo_with_timeouts_allocates_nothing) {
  loop_result r;
  run_bounded(ctx, [](tern::io_context& ctx, loop_result& r) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    auto srv = tern::spawn(ctx, echo_server(server, warmup + measured, r));
    co_await echo_client<true>(client, r);
    co_await std::move(srv);
  }(ctx, r));
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << measured << " echoed messages with timeouts";
}

// The server reads with receive() (leased pool buffers: a provided-buffer ring and a multishot receive under
// io_uring) and writes each lease back: the pool is made during the warm-up, and after that a receive allocates
// nothing, whether its buffer was queued by the multishot or the receive waited for it.
tern::task<void> receive_echo_server(tern::net::tcp_socket& s, std::size_t bytes, loop_result& r) {
  std::size_t echoed = 0;
  while (echoed < bytes) {
    auto [rec, lease] = co_await s.receive();
    if (rec) {
      ++r.errors;
      co_return;
    }
    auto [wec, wn] = co_await s.write_all(lease.buffer());
    if (wec || wn != lease.size()) {
      ++r.errors;
      co_return;
    }
    echoed += wn;
  }
}

// Then the same with both sockets registered (register_descriptor: under io_uring every operation names a slot).
TEST_P(alloc_test, receive_echo_allocates_nothing) {
  for (bool registered : {false, true}) {
    loop_result r;
    run_bounded(ctx, [](tern::io_context& ctx, loop_result& r, bool registered) -> tern::task<void> {
      auto [client, server] = co_await connected_pair(ctx);
      CO_ASSERT(client.is_open() && server.is_open());
      EXPECT_OK(client.set_no_delay(true));
      EXPECT_OK(server.set_no_delay(true));
      if (registered) {
        CO_ASSERT_OK(client.register_descriptor());
        CO_ASSERT_OK(server.register_descriptor());
      }
      auto srv = tern::spawn(ctx, receive_echo_server(server, std::size_t{warmup + measured} * echo_size, r));
      co_await echo_client(client, r);
      co_await std::move(srv);
    }(ctx, r, registered));
    EXPECT_TRUE(r.measured);
    EXPECT_EQ(r.errors, 0);
    EXPECT_EQ(r.mismatches, 0);
    EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << measured << " messages echoed through receive()"
                                 << (registered ? " on registered sockets" : "");
  }
}

// A one-way stream of 64 KiB writes read with receive(), so that under io_uring (6.10+) most completions are
// bundles of several pool buffers: handing a bundle's buffers out one lease at a time allocates nothing either.
TEST_P(alloc_test, bundled_receives_allocate_nothing) {
  constexpr std::size_t chunk = 64 * 1024;
  constexpr int b_warmup = 100;
  constexpr int b_measured = 1000;
  loop_result r;
  run_bounded(ctx, [](tern::io_context& ctx, loop_result& r) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    auto reader = tern::spawn(ctx, [](tern::net::tcp_socket& s, loop_result& r) -> tern::task<void> {
      std::size_t at = 0;  // bytes of the stream received so far; byte k of the stream is chunk number k / chunk
      while (at < chunk * (b_warmup + b_measured)) {
        auto [ec, lease] = co_await s.receive();
        if (ec) {
          ++r.errors;
          co_return;
        }
        for (std::size_t k = 0; k < lease.size(); ++k) {
          if (lease.data()[k] != static_cast<char>((at + k) / chunk)) {
            ++r.mismatches;
            break;
          }
        }
        at += lease.size();
      }
    }(server, r));
    std::vector<char> out(chunk);
    for (int i = 0; i < b_warmup + b_measured; ++i) {
      if (i == b_warmup) {
        start_counting();
        r.measured = true;
      }
      std::fill(out.begin(), out.end(), static_cast<char>(i));
      auto [ec, n] = co_await client.write_all(tern::const_buffer(out.data(), out.size()));
      if (ec || n != chunk) {
        ++r.errors;
        break;
      }
    }
    co_await std::move(reader);
    r.allocations = stop_counting();
  }(ctx, r));
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << b_measured << " 64 KiB writes read with receive()";
  if (GetParam() == tern::backend_kind::io_uring && kernel_at_least(6, 10)) {
    EXPECT_GT(ctx.metrics().receive_bundles, 0u) << "no completion filled more than one buffer";
  }
}

// Zero-copy sends (io_context_options::zero_copy_send_threshold, io_uring; epoll ignores it and runs the same
// stream plainly): a one-way stream of 64 KiB write_all calls, every piece a SEND_ZC whose completion waits for
// its notification. The state of a zero-copy send lives in its op, so the steady state allocates nothing.
TEST_P(alloc_test, zero_copy_sends_allocate_nothing) {
  constexpr std::size_t chunk = 64 * 1024;
  constexpr int zc_warmup = 100;
  constexpr int zc_measured = 1000;
  tern::io_context_options o = options();
  o.zero_copy_send_threshold = 16 * 1024;
  tern::io_context zc(o);
  loop_result r;
  run_bounded(zc, [](tern::io_context& ctx, loop_result& r) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    auto reader = tern::spawn(ctx, [](tern::net::tcp_socket& s, loop_result& r) -> tern::task<void> {
      std::vector<char> in(chunk);
      for (int i = 0; i < zc_warmup + zc_measured; ++i) {
        auto [ec, n] = co_await s.read_exact(tern::mutable_buffer(in.data(), in.size()));
        if (ec) {
          ++r.errors;
          co_return;
        }
        if (in[0] != static_cast<char>(i) || in[chunk - 1] != static_cast<char>(i)) ++r.mismatches;
      }
    }(server, r));
    std::vector<char> out(chunk);
    for (int i = 0; i < zc_warmup + zc_measured; ++i) {
      if (i == zc_warmup) {
        start_counting();
        r.measured = true;
      }
      std::fill(out.begin(), out.end(), static_cast<char>(i));  // safe: the previous send let go of the buffer
      auto [ec, n] = co_await client.write_all(tern::const_buffer(out.data(), out.size()));
      if (ec || n != chunk) {
        ++r.errors;
        break;
      }
    }
    r.allocations = stop_counting();
    co_await std::move(reader);
  }(zc, r));
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << zc_measured << " 64 KiB zero-copy writes";
  const tern::metrics::loop_snapshot snap = zc.metrics();
  const auto& zc_ops = snap.ops[static_cast<std::size_t>(tern::detail::op_code::send_zc)];
  if (GetParam() == tern::backend_kind::io_uring) {
    EXPECT_GE(zc_ops.started, static_cast<std::uint64_t>(zc_warmup + zc_measured)) << "the sends were not zero-copy";
  } else {
    EXPECT_EQ(zc_ops.started, 0u);
  }
}

// A line protocol through buffered readers and writers on both sides: every line read with read_line and every
// answer written with write + flush. The buffers are allocated with the reader and the writer; their operations'
// frames come from the pool, so the steady state allocates nothing.
tern::task<void> line_echo_server(tern::net::tcp_socket& s, int lines, loop_result& r) {
  tern::buffered_reader reader(s, 4096);
  tern::buffered_writer writer(s, 4096);
  for (int i = 0; i < lines; ++i) {
    auto [ec, line] = co_await reader.read_line(100);
    if (ec) {
      ++r.errors;
      co_return;
    }
    const bool failed = (co_await writer.write(line)).ec || (co_await writer.write(tern::const_buffer("\n"))).ec ||
                        co_await writer.flush();
    if (failed) {
      ++r.errors;
      co_return;
    }
  }
}

TEST_P(alloc_test, buffered_line_echo_allocates_nothing) {
  loop_result r;
  run_bounded(ctx, [](tern::io_context& ctx, loop_result& r) -> tern::task<void> {
    auto [client, server] = co_await connected_pair(ctx);
    CO_ASSERT(client.is_open() && server.is_open());
    auto srv = tern::spawn(ctx, line_echo_server(server, warmup + measured, r));
    tern::buffered_reader reader(client, 4096);
    tern::buffered_writer writer(client, 4096);
    char text[32];
    for (int i = 0; i < warmup + measured; ++i) {
      if (i == warmup) {
        start_counting();
        r.measured = true;
      }
      const int n = std::snprintf(text, sizeof text, "line %d", i);
      const bool failed = (co_await writer.write(tern::const_buffer(text, static_cast<std::size_t>(n)))).ec ||
                          (co_await writer.write(tern::const_buffer("\n"))).ec || co_await writer.flush();
      auto [ec, line] = co_await tern::with_timeout(reader.read_line(100), 1h);
      if (failed || ec) {
        ++r.errors;
        break;
      }
      if (line != std::string_view(text, static_cast<std::size_t>(n))) ++r.mismatches;
    }
    r.allocations = stop_counting();
    co_await std::move(srv);
  }(ctx, r));
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << measured << " lines";
}

// Positioned file reads and writes: an io_uring SQE each, or a blocking-pool job under epoll, both held in the
// awaiter, so a steady stream of them allocates nothing.
TEST_P(alloc_test, file_reads_and_writes_allocate_nothing) {
  char pattern[] = "/tmp/tern-alloc-XXXXXX";
  const int tmp = ::mkstemp(pattern);
  ASSERT_GE(tmp, 0);
  ::close(tmp);
  loop_result r;
  run_bounded(ctx, [](tern::io_context& ctx, std::string path, loop_result& r) -> tern::task<void> {
    tern::fs::open_options o;
    o.access = tern::fs::open_options::read_write;
    auto [ec, f] = co_await tern::fs::file::open(ctx, path, o);
    CO_ASSERT_OK(ec);
    std::array<char, 4096> block{};
    for (int i = 0; i < 64; ++i) {
      block[0] = static_cast<char>(i);
      CO_ASSERT_OK((co_await f.write_all_at(block, static_cast<std::uint64_t>(i) * block.size())).ec);
    }
    std::array<char, 4096> back{};
    for (int i = 0; i < warmup + measured; ++i) {
      if (i == warmup) {
        start_counting();
        r.measured = true;
      }
      const auto offset = static_cast<std::uint64_t>(i % 64) * block.size();
      auto [rec, n] = co_await tern::with_timeout(f.read_exact_at(back, offset), 1h);
      if (rec || n != back.size()) {
        ++r.errors;
        break;
      }
      if (back[0] != static_cast<char>(i % 64)) ++r.mismatches;
      if (i % 16 == 0 && (co_await f.write_at(tern::const_buffer(back.data(), 512), offset)).ec) ++r.errors;
    }
    r.allocations = stop_counting();
  }(ctx, std::string(pattern), r));
  ::unlink(pattern);
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << measured << " file reads";
}

// Reads into registered buffers from a registered file: READ_FIXED with IOSQE_FIXED_FILE on io_uring, plain pread
// on the blocking pool under epoll; the slots are taken once, so the reads themselves allocate nothing.
TEST_P(alloc_test, registered_file_reads_allocate_nothing) {
  char pattern[] = "/tmp/tern-alloc-XXXXXX";
  const int tmp = ::mkstemp(pattern);
  ASSERT_GE(tmp, 0);
  ::close(tmp);
  loop_result r;
  run_bounded(ctx, [](tern::io_context& ctx, std::string path, loop_result& r) -> tern::task<void> {
    tern::fs::open_options o;
    o.access = tern::fs::open_options::read_write;
    auto [ec, f] = co_await tern::fs::file::open(ctx, path, o);
    CO_ASSERT_OK(ec);
    CO_ASSERT_OK(f.register_file());
    auto [bec, bufs] = tern::fs::registered_buffers::create(ctx, 2, 4096);
    CO_ASSERT_OK(bec);
    for (int i = 0; i < 64; ++i) {
      bufs[0].data()[0] = static_cast<std::byte>(i);
      CO_ASSERT_OK((co_await f.write_all_at(bufs[0], static_cast<std::uint64_t>(i) * 4096)).ec);
    }
    for (int i = 0; i < warmup + measured; ++i) {
      if (i == warmup) {
        start_counting();
        r.measured = true;
      }
      const auto offset = static_cast<std::uint64_t>(i % 64) * 4096;
      auto [rec, n] = co_await f.read_at(bufs[1], offset);
      if (rec || n != 4096) {
        ++r.errors;
        break;
      }
      if (bufs[1].data()[0] != static_cast<std::byte>(i % 64)) ++r.mismatches;
      if (i % 16 == 0 && (co_await f.write_all_at(bufs[1].first(512), offset)).ec) ++r.errors;
    }
    r.allocations = stop_counting();
  }(ctx, std::string(pattern), r));
  ::unlink(pattern);
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << measured << " registered reads";
}

// UDP batches: the batch's headers and buffers are made once, and each send_batch/receive_batch is one awaiter.
TEST_P(alloc_test, udp_batches_allocate_nothing) {
  loop_result r;
  run_bounded(ctx, [](tern::io_context& ctx, loop_result& r) -> tern::task<void> {
    tern::net::udp_socket a(ctx), b(ctx);
    CO_ASSERT_OK(a.bind(tern::net::endpoint::loopback_v4(0)));
    CO_ASSERT_OK(b.bind(tern::net::endpoint::loopback_v4(0)));
    auto [lec, b_ep] = b.local_endpoint();
    CO_ASSERT_OK(lec);
    tern::net::datagram_batch out(8, 64), in(8, 64);
    for (int i = 0; i < warmup + measured; ++i) {
      if (i == warmup) {
        start_counting();
        r.measured = true;
      }
      for (std::size_t k = 0; k < 4; ++k) {
        out.buffer(k)[0] = static_cast<std::byte>(i + static_cast<int>(k));
        out.set(k, 64, b_ep);
      }
      auto [sec, sent] = co_await a.send_batch(out, 4);
      if (sec || sent != 4) {
        ++r.errors;
        break;
      }
      std::size_t got = 0;
      while (got < 4) {
        auto [rec, n] = co_await b.receive_batch(in);
        if (rec) {
          ++r.errors;
          co_return;
        }
        for (std::size_t k = 0; k < n; ++k) {
          if (in.data(k)[0] != static_cast<std::byte>(i + static_cast<int>(got + k))) ++r.mismatches;
        }
        got += n;
      }
    }
    r.allocations = stop_counting();
  }(ctx, r));
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << measured << " batches";
}

TEST_P(alloc_test, post_run_cycles_allocate_nothing) {
  loop_result r;
  run_bounded(ctx, [](tern::io_context& ctx, loop_result& r) -> tern::task<void> {
    int ran = 0;
    for (int i = 0; i < warmup + measured; ++i) {
      if (i == warmup) {
        start_counting();
        r.measured = true;
      }
      ctx.post([&ran] { ++ran; });
      co_await tern::yield();
      if (ran != i + 1) ++r.mismatches;
    }
    r.allocations = stop_counting();
  }(ctx, r));
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.mismatches, 0) << "posted handlers did not run in step";
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << measured << " post/run cycles";
}

// A waiter arms a timer an hour away and waits; a controller cancels it; repeat.
TEST_P(alloc_test, timer_schedule_cancel_cycles_allocate_nothing) {
  loop_result r;
  run_bounded(ctx, [](tern::io_context& ctx, loop_result& r) -> tern::task<void> {
    tern::timer t(ctx);
    bool waiting = false;
    auto waiter = tern::spawn(ctx, [](tern::timer& t, bool& waiting, loop_result& r) -> tern::task<void> {
      for (int i = 0; i < warmup + measured; ++i) {
        t.expires_after(1h);
        waiting = true;
        std::error_code ec = co_await t.wait();
        if (ec != std::errc::operation_canceled) ++r.errors;
      }
    }(t, waiting, r));
    for (int i = 0; i < warmup + measured; ++i) {
      if (i == warmup) {
        start_counting();
        r.measured = true;
      }
      while (!waiting) co_await tern::yield();
      waiting = false;
      if (t.cancel() != 1) ++r.mismatches;
    }
    r.allocations = stop_counting();
    co_await std::move(waiter);
  }(ctx, r));
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << measured << " timer schedule/cancel cycles";
}

// Short sleeps that really expire: arm, fire, resume.
TEST_P(alloc_test, timer_expiry_cycles_allocate_nothing) {
  constexpr int cycles = 2000;
  loop_result r;
  run_bounded(ctx, [](loop_result& r) -> tern::task<void> {
    for (int i = 0; i < 200 + cycles; ++i) {
      if (i == 200) {
        start_counting();
        r.measured = true;
      }
      std::error_code ec = co_await tern::sleep_for(std::chrono::microseconds(50));
      if (ec) ++r.errors;
    }
    r.allocations = stop_counting();
  }(r));
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << cycles << " sleeps";
}

TEST_P(alloc_test, spawn_join_cycles_allocate_nothing) {
  loop_result r;
  run_bounded(ctx, [](tern::io_context& ctx, loop_result& r) -> tern::task<void> {
    auto child = [](int v) -> tern::task<int> {
      co_await tern::yield();
      co_return v * 2;
    };
    for (int i = 0; i < warmup + measured; ++i) {
      if (i == warmup) {
        start_counting();
        r.measured = true;
      }
      int v = co_await tern::spawn(ctx, child(i));
      if (v != i * 2) ++r.mismatches;
    }
    r.allocations = stop_counting();
  }(ctx, r));
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << measured << " spawn/join cycles";
}

// A burst of spawned tasks whose frames together exceed the pool's fixed per-class cache (32 MiB): the pool
// keeps what the thread itself needed at once, so the same burst a second time allocates nothing.
TEST_P(alloc_test, repeated_burst_beyond_the_fixed_cache_allocates_nothing_the_second_time) {
  constexpr int burst = 300'000;  // at 128 bytes or more per frame, past 32 MiB
  loop_result r;
  run_bounded(ctx, [](tern::io_context& ctx, loop_result& r) -> tern::task<void> {
    auto child = [](int v) -> tern::task<int> { co_return v + 1; };
    std::vector<tern::join_handle<int>> handles;
    handles.reserve(burst);
    for (int round = 0; round < 2; ++round) {
      if (round == 1) {
        start_counting();
        r.measured = true;
      }
      for (int i = 0; i < burst; ++i) handles.push_back(tern::spawn(ctx, child(i)));
      for (int i = 0; i < burst; ++i) {
        if (co_await std::move(handles[i]) != i + 1) ++r.mismatches;
      }
      handles.clear();
    }
    r.allocations = stop_counting();
  }(ctx, r), 120s);
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.allocations, 0u) << "heap allocations in the second burst of " << burst << " tasks";
}

// Handlers posted from another thread, in waves: their blocks come back from the loop to the poster, so once the
// blocks in circulation cover a wave, posting allocates nothing (on either thread).
TEST_P(alloc_test, posts_from_another_thread_reuse_their_blocks) {
  constexpr int wave = 100;
  constexpr int warm_waves = 50;
  constexpr int measured_waves = 200;
  std::optional<tern::io_context::work_guard> guard(ctx.make_work_guard());
  std::atomic<int> ran{0};
  std::thread loop([&] { ctx.run(); });
  int posted = 0;
  std::size_t allocs = 0;
  // The warm-up's first burst arrives while the loop is held in a handler, two waves at once: the run queue, which
  // grows when a push finds it three quarters full, has then grown for any wave, wherever in the ring a wave
  // begins (a burst of 100 in 128 slots crosses three quarters at a wrap only when it starts early in the ring,
  // so waves alone would grow it at an unforeseeable one of them).
  {
    std::atomic<bool> held{false}, release{false};
    ctx.post([&held, &release] {
      held.store(true, std::memory_order_release);
      while (!release.load(std::memory_order_acquire)) std::this_thread::yield();
    });
    while (!held.load(std::memory_order_acquire)) std::this_thread::yield();
    for (int i = 0; i < 2 * wave; ++i) ctx.post([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
    posted += 2 * wave;
    release.store(true, std::memory_order_release);
    const auto deadline = clock_type::now() + 10s;
    while (ran.load() < posted && clock_type::now() < deadline) std::this_thread::yield();
    EXPECT_EQ(ran.load(), posted) << "the held burst did not run";
  }
  for (int w = 0; w < warm_waves + measured_waves; ++w) {
    if (w == warm_waves) start_counting();
    for (int i = 0; i < wave; ++i) ctx.post([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
    posted += wave;
    const auto deadline = clock_type::now() + 10s;
    while (ran.load() < posted && clock_type::now() < deadline) std::this_thread::yield();
    if (ran.load() != posted) {
      ADD_FAILURE() << "wave " << w << " did not run";
      break;
    }
  }
  allocs = stop_counting();
  ctx.post([&guard] { guard.reset(); });
  loop.join();
  EXPECT_EQ(allocs, 0u) << "heap allocations over " << measured_waves << " waves of " << wave << " cross-thread posts";
}

}  // namespace

#include <tern/sync.hpp>

namespace {

// A bounded-channel ping-pong between two coroutines: every receive waits and every send hands its value straight
// to the waiting receiver, so each round trip links, wakes and resumes two waiters. Every other receive also runs
// under an hour-long timeout that never fires.
TEST_P(alloc_test, sync_channel_ping_pong_allocates_nothing) {
  loop_result r;
  run_bounded(ctx, [](tern::io_context& ctx, loop_result& r) -> tern::task<void> {
    tern::sync::channel<int> ping(1);
    tern::sync::channel<int> pong(1);
    auto echo = tern::spawn(ctx, [](tern::sync::channel<int>& ping, tern::sync::channel<int>& pong,
                                    loop_result& r) -> tern::task<void> {
      for (;;) {
        auto [ec, v] = co_await ping.receive();
        if (ec) co_return;
        if (co_await pong.send(*v)) ++r.errors;
      }
    }(ping, pong, r));
    for (int i = 0; i < warmup + measured; ++i) {
      if (i == warmup) {
        start_counting();
        r.measured = true;
      }
      if (co_await ping.send(i)) ++r.errors;
      auto [ec, v] = i % 2 == 0 ? co_await pong.receive() : co_await tern::with_timeout(pong.receive(), 1h);
      if (ec) {
        ++r.errors;
        break;
      }
      if (*v != i) ++r.mismatches;
    }
    r.allocations = stop_counting();
    ping.close();
    co_await std::move(echo);
  }(ctx, r));
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << measured << " channel round trips";
}

// Mutex hand-off, semaphore release to a waiter and auto-reset event wake-ups, in a two-coroutine cycle.
TEST_P(alloc_test, sync_primitive_hand_offs_allocate_nothing) {
  loop_result r;
  run_bounded(ctx, [](tern::io_context& ctx, loop_result& r) -> tern::task<void> {
    tern::sync::mutex m;
    tern::sync::semaphore s(0);
    tern::sync::auto_reset_event e;
    bool stop = false;
    auto partner = tern::spawn(ctx, [](tern::sync::mutex& m, tern::sync::semaphore& s, tern::sync::auto_reset_event& e,
                                       bool& stop, loop_result& r) -> tern::task<void> {
      for (;;) {
        if (co_await e.wait()) ++r.errors;
        if (stop) co_return;
        if (co_await m.lock()) ++r.errors;  // waits: the main coroutine holds it
        m.unlock();
        s.release();  // hands the permit to the waiting main coroutine
      }
    }(m, s, e, stop, r));
    for (int i = 0; i < warmup + measured; ++i) {
      if (i == warmup) {
        start_counting();
        r.measured = true;
      }
      if (!m.try_lock()) ++r.mismatches;
      e.set();
      co_await tern::yield();  // the partner takes the signal and waits for the mutex
      m.unlock();              // hand-off
      if (co_await tern::with_timeout(s.acquire(), 1h)) ++r.errors;
    }
    r.allocations = stop_counting();
    stop = true;
    e.set();
    co_await std::move(partner);
  }(ctx, r));
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over " << measured << " hand-off cycles";
}

// Connection churn: connect, accept (under io_uring from the listener's multishot accept, whose queue is made once),
// close both ends. Sockets come from the loop's descriptor pool; 200 warm-up connections, then 2000 counted.
TEST_P(alloc_test, accept_churn_allocates_nothing) {
  constexpr int churn_warmup = 200;
  constexpr int churn_measured = 2000;
  loop_result r;
  run_bounded(ctx, [](tern::io_context& ctx, loop_result& r) -> tern::task<void> {
    tern::net::tcp_acceptor acceptor(ctx);
    const tern::net::endpoint ep = listen_loopback(acceptor);
    for (int i = 0; i < churn_warmup + churn_measured; ++i) {
      if (i == churn_warmup) {
        start_counting();
        r.measured = true;
      }
      tern::net::tcp_socket client(ctx);
      std::error_code cec = co_await client.connect(ep);
      auto [aec, server] = co_await acceptor.accept();
      if (cec || aec || !server.is_open()) {
        ++r.errors;
        break;
      }
    }
    r.allocations = stop_counting();
  }(ctx, r));
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.allocations, 0u) << "heap allocations over 2000 accepted connections";
}

}  // namespace
