// Steady state of tls::stream: once a connection is warm, reads and writes cost no heap allocation in tern's code
// (counted through operator new, as tests/http/alloc_test.cpp does), on both backends. OpenSSL allocates through
// its own malloc hooks, which this executable replaces too (CRYPTO_set_mem_functions, before OpenSSL's first
// allocation), so its allocations are measured and reported beside tern's. OpenSSL 3.0 makes two small ones (40
// bytes: the frames of the WPACKET it builds each record's header or additional data with, crypto/packet.c) for
// every record it encrypts and every record it decrypts; the test holds it to that, and tern to none.
#include "counting_new.hpp"
#include "tls_support.hpp"

#include <openssl/crypto.h>

#include <atomic>
#include <cstdlib>
#include <vector>

namespace {

using namespace tern_test;

std::atomic<bool> counting_openssl{false};
std::atomic<std::size_t> openssl_allocations{0};

void* openssl_malloc(std::size_t n, const char*, int) {
  if (counting_openssl.load(std::memory_order_relaxed)) openssl_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n);
}
void* openssl_realloc(void* p, std::size_t n, const char*, int) {
  if (counting_openssl.load(std::memory_order_relaxed)) openssl_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::realloc(p, n);
}
void openssl_free(void* p, const char*, int) { std::free(p); }

// Before main, so before OpenSSL's first allocation (the replacement is refused after it).
const bool hooks_installed = CRYPTO_set_mem_functions(openssl_malloc, openssl_realloc, openssl_free) == 1;

struct counts {
  std::size_t tern = ~std::size_t{0};
  std::size_t openssl = ~std::size_t{0};
};

void start() {
  openssl_allocations.store(0);
  counting_openssl.store(true);
  start_counting();
}
counts stop() {
  counts c;
  c.tern = stop_counting();
  counting_openssl.store(false);
  c.openssl = openssl_allocations.load();
  return c;
}

class tls_alloc_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(tls_alloc_test);

constexpr int warmup = 200;
constexpr int measured = 5000;

// A request of 1 KiB from the client, an answer of 4 KiB from the server.
tern::task<std::error_code> round_trip(tls_pair& p, std::vector<char>& request, std::vector<char>& answer) {
  if (auto [ec, n] = co_await p.client.write_all(request); ec) co_return ec;
  if (auto [ec, n] = co_await p.server.read_exact(request); ec) co_return ec;
  if (auto [ec, n] = co_await p.server.write_all(answer); ec) co_return ec;
  if (auto [ec, n] = co_await p.client.read_exact(answer); ec) co_return ec;
  co_return std::error_code{};
}

TEST_P(tls_alloc_test, a_warm_stream_allocates_nothing_per_record) {
  ASSERT_TRUE(hooks_installed) << "OpenSSL allocated before the test could count its allocations";
  counts round_trips, bulk;
  run_bounded(ctx, [](tern::io_context& ctx, counts& round_trips, counts& bulk) -> tern::task<void> {
    std::optional<tls_pair> shaken = co_await shaken_pair(ctx);
    CO_ASSERT(shaken);
    tls_pair& p = *shaken;
    std::vector<char> request(1024, 'q');
    std::vector<char> answer(4096, 'a');
    for (int i = 0; i < warmup; ++i) CO_ASSERT_OK(co_await round_trip(p, request, answer));
    start();
    for (int i = 0; i < measured; ++i) {
      if (co_await round_trip(p, request, answer)) break;
    }
    round_trips = stop();

    // Bulk: 16 MiB one way in 256 KiB writes (full records), a reader task beside the writer.
    std::vector<char> chunk(256 * 1024, 'b');
    std::vector<char> sink(256 * 1024);
    auto writer = [](tls_tcp& s, std::vector<char>& chunk, int count) -> tern::task<std::error_code> {
      for (int i = 0; i < count; ++i) {
        if (auto [ec, n] = co_await s.write_all(chunk); ec) co_return ec;
      }
      co_return std::error_code{};
    };
    auto reader = [](tls_tcp& s, std::vector<char>& sink, int count) -> tern::task<std::error_code> {
      for (int i = 0; i < count; ++i) {
        if (auto [ec, n] = co_await s.read_exact(sink); ec) co_return ec;
      }
      co_return std::error_code{};
    };
    for (int pass = 0; pass < 2; ++pass) {  // a warm-up, then the same measured
      if (pass == 1) start();
      auto reading = tern::spawn(ctx, reader(p.server, sink, 64));
      const std::error_code w = co_await writer(p.client, chunk, 64);
      const std::error_code r = co_await std::move(reading);
      if (pass == 1) bulk = stop();
      CO_ASSERT_OK(w);
      CO_ASSERT_OK(r);
    }
  }(ctx, round_trips, bulk));
  RecordProperty("openssl_allocations_round_trips", std::to_string(round_trips.openssl));
  RecordProperty("openssl_allocations_bulk", std::to_string(bulk.openssl));
  std::printf("round trips: %d (each 1 KiB + 4 KiB): tern %zu allocations, OpenSSL %zu\n", measured,
              round_trips.tern, round_trips.openssl);
  std::printf("bulk: 16 MiB in 256 KiB writes: tern %zu allocations, OpenSSL %zu\n", bulk.tern, bulk.openssl);
  EXPECT_EQ(round_trips.tern, 0u) << "tern's heap allocations over " << measured << " round trips";
  EXPECT_EQ(bulk.tern, 0u) << "tern's heap allocations over 16 MiB";
  // Per round trip: two records encrypted, two decrypted. Bulk: 1024 full records each way.
  EXPECT_LE(round_trips.openssl, 2u * 4 * measured) << "OpenSSL's allocations over " << measured << " round trips";
  EXPECT_LE(bulk.openssl, 2u * 2 * 1024) << "OpenSSL's allocations over 16 MiB";
}

}  // namespace
