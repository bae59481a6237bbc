// Registered files and buffers on both backends (io_uring: the ring's tables, READ_FIXED/WRITE_FIXED and
// IOSQE_FIXED_FILE; epoll: accepted and plain): data through them verified byte by byte, direct I/O, parts of a
// buffer, many files and several buffer sets on one loop, full tables (and the plain path beside them), buffers of
// another loop, and slots given back by close() and by destroyed sets.
#include "fs_support.hpp"
#include "net_support.hpp"

#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

// A named namespace, not an anonymous one: the test sources are compiled in unity batches (tests/CMakeLists.txt),
// where this file's helpers would meet file_test.cpp's of the same names.
namespace registered_io_tests {

using namespace tern_test;
namespace fs = tern::fs;

class registered_io_test : public backend_test {
 protected:
  bool uring() const { return GetParam() == tern::backend_kind::io_uring; }
  // A loop with small tables, to fill them.
  tern::io_context_options small_tables(unsigned files, unsigned buffers) const {
    tern::io_context_options o = options();
    o.registered_file_slots = files;
    o.registered_buffer_slots = buffers;
    return o;
  }
};
TERN_INSTANTIATE_BACKENDS(registered_io_test);

fs::open_options create_rw() {
  fs::open_options o;
  o.access = fs::open_options::read_write;
  o.create = true;
  o.truncate = true;
  return o;
}

void fill(fs::registered_buffer b, const std::vector<char>& data) { std::memcpy(b.data(), data.data(), b.size()); }
bool holds(fs::registered_buffer b, const char* data) { return std::memcmp(b.data(), data, b.size()) == 0; }

TEST_P(registered_io_test, data_goes_through_registered_files_and_buffers) {
  temp_dir dir;
  // Made before the loop first runs (an io_uring ring that is not enabled yet takes registrations too).
  auto [bec, bufs] = fs::registered_buffers::create(ctx, 4, 64 * 1024);
  ASSERT_TRUE(ec_ok(bec));
  EXPECT_EQ(bufs.count(), 4u);
  EXPECT_EQ(bufs.buffer_size(), 64u * 1024);
  EXPECT_EQ(bufs.registered(), uring());
  for (std::size_t i = 0; i < bufs.count(); ++i) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(bufs[i].data()) % 4096, 0u);
    EXPECT_EQ(bufs[i].size(), 64u * 1024);
  }
  EXPECT_GE(bufs[1].data(), bufs[0].data() + bufs[0].size()) << "buffers do not overlap";
  run_bounded(ctx, [](tern::io_context& ctx, std::string path, fs::registered_buffers& bufs,
                      bool uring) -> tern::task<void> {
    auto [ec, f] = co_await fs::file::open(ctx, path, create_rw());
    CO_ASSERT_OK(ec);
    EXPECT_FALSE(f.is_registered());
    CO_ASSERT_OK(f.register_file());
    EXPECT_EQ(f.is_registered(), uring);
    CO_ASSERT_OK(f.register_file());  // idempotent

    const std::vector<char> data = make_pattern(4 * 64 * 1024, 7);
    for (std::size_t i = 0; i < bufs.count(); ++i) {
      fill(bufs[i], std::vector<char>(data.begin() + static_cast<long>(i * 65536), data.end()));
      auto [wec, wn] = co_await f.write_all_at(bufs[i], i * 65536);
      CO_ASSERT_OK(wec);
      EXPECT_EQ(wn, 65536u);
    }
    CO_ASSERT_OK(co_await f.sync_data());
    // Plain memory on a registered file, and statx (which takes the descriptor, not the slot).
    std::vector<char> plain(data.size());
    auto [pec, pn] = co_await f.read_exact_at(plain, 0);
    CO_ASSERT_OK(pec);
    EXPECT_TRUE(plain == data);
    auto [sec, st] = co_await f.stat();
    CO_ASSERT_OK(sec);
    EXPECT_EQ(st.size, data.size());

    // Back through the buffers, in another order; one single read_at.
    for (std::size_t i = 0; i < bufs.count(); ++i) std::memset(bufs[i].data(), 0, bufs[i].size());
    auto [rec, rn] = co_await f.read_at(bufs[0], 3 * 65536);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(rn, 65536u);
    EXPECT_TRUE(holds(bufs[0], data.data() + 3 * 65536));
    auto [xec, xn] = co_await f.read_exact_at(bufs[3], 0);
    CO_ASSERT_OK(xec);
    EXPECT_TRUE(holds(bufs[3], data.data()));
    // Past the end: eof, as with plain memory.
    auto [eec, en] = co_await f.read_at(bufs[1], data.size());
    EXPECT_EC(eec, tern::error::eof);
    auto [e2, e2n] = co_await f.read_exact_at(bufs[2], data.size() - 100);
    EXPECT_EC(e2, tern::error::eof);
    EXPECT_EQ(e2n, 100u);
    (void)pn, (void)en;
  }(ctx, dir.path("data.bin"), bufs, uring()));
}

TEST_P(registered_io_test, parts_of_a_buffer_are_registered_too) {
  temp_dir dir;
  run_bounded(ctx, [](tern::io_context& ctx, std::string path) -> tern::task<void> {
    auto [bec, bufs] = fs::registered_buffers::create(ctx, 2, 8192);
    CO_ASSERT_OK(bec);
    auto [ec, f] = co_await fs::file::open(ctx, path, create_rw());
    CO_ASSERT_OK(ec);
    CO_ASSERT_OK(f.register_file());
    const std::vector<char> data = make_pattern(8192, 3);
    fill(bufs[0], data);
    // Write the middle 1000 bytes only, at offset 50.
    fs::registered_buffer middle = bufs[0].subspan(100, 1000);
    EXPECT_EQ(middle.size(), 1000u);
    EXPECT_EQ(middle.data(), bufs[0].data() + 100);
    EXPECT_EQ(middle.index(), bufs[0].index());
    auto [wec, wn] = co_await f.write_all_at(middle, 50);
    CO_ASSERT_OK(wec);
    EXPECT_EQ(wn, 1000u);
    // Read it back into the first 1000 bytes of the other buffer, then 10 bytes into its tail.
    auto [rec, rn] = co_await f.read_exact_at(bufs[1].first(1000), 50);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(rn, 1000u);
    EXPECT_EQ(std::memcmp(bufs[1].data(), data.data() + 100, 1000), 0);
    auto [tec, tn] = co_await f.read_at(bufs[1].subspan(8182), 60);
    CO_ASSERT_OK(tec);
    EXPECT_EQ(tn, 10u) << "a part at the end of the buffer is clamped to it";
    EXPECT_EQ(std::memcmp(bufs[1].data() + 8182, data.data() + 110, 10), 0);
    EXPECT_EQ(bufs[1].subspan(9000).size(), 0u);
    EXPECT_EQ(bufs[1].first(1 << 20).size(), 8192u);
  }(ctx, dir.path("parts.bin")));
}

TEST_P(registered_io_test, direct_io_with_registered_buffers) {
  temp_dir dir;
  run_bounded(ctx, [](tern::io_context& ctx, std::string path) -> tern::task<void> {
    auto [bec, bufs] = fs::registered_buffers::create(ctx, 2, 64 * 1024);
    CO_ASSERT_OK(bec);
    fs::open_options o = create_rw();
    o.direct = true;
    auto [ec, f] = co_await fs::file::open(ctx, path, o);
    CO_ASSERT_OK(ec);
    CO_ASSERT_OK(f.register_file());
    const std::vector<char> data = make_pattern(64 * 1024, 11);
    fill(bufs[0], data);
    for (std::uint64_t i = 0; i < 8; ++i) {
      auto [wec, wn] = co_await f.write_all_at(bufs[0], i * 65536);
      CO_ASSERT_OK(wec);
      EXPECT_EQ(wn, 65536u);
    }
    for (std::uint64_t i = 8; i-- > 0;) {
      std::memset(bufs[1].data(), 0, bufs[1].size());
      auto [rec, rn] = co_await f.read_exact_at(bufs[1], i * 65536);
      CO_ASSERT_OK(rec);
      EXPECT_TRUE(holds(bufs[1], data.data()));
    }
    // Aligned parts are fine; a misaligned part is refused before the kernel.
    auto [aec, an] = co_await f.read_at(bufs[1].subspan(4096, 4096), 8192);
    CO_ASSERT_OK(aec);
    EXPECT_EQ(an, 4096u);
    auto [mec, mn] = co_await f.read_at(bufs[1].subspan(1, 4096), 0);
    EXPECT_EC(mec, tern::error::misaligned);
    auto [m2, m2n] = co_await f.write_all_at(bufs[0].first(1000), 0);
    EXPECT_EC(m2, tern::error::misaligned);
    (void)mn, (void)m2n;
  }(ctx, dir.path("direct.bin")));
}

TEST_P(registered_io_test, many_files_and_several_buffer_sets_share_a_loop) {
  temp_dir dir;
  run_bounded(ctx, [](tern::io_context& ctx, const temp_dir& dir, bool uring) -> tern::task<void> {
    std::vector<fs::registered_buffers> sets;
    for (int i = 0; i < 5; ++i) {
      auto [bec, bufs] = fs::registered_buffers::create(ctx, 3 + static_cast<std::size_t>(i), 4096);
      CO_ASSERT_OK(bec);
      sets.push_back(std::move(bufs));
    }
    if (uring) {
      std::set<std::uint32_t> slots;
      std::size_t total = 0;
      for (auto& s : sets) {
        for (std::size_t i = 0; i < s.count(); ++i) slots.insert(s[i].index());
        total += s.count();
      }
      EXPECT_EQ(slots.size(), total) << "every buffer has a slot of its own";
    }
    constexpr int files = 200;
    std::vector<fs::file> open_files;
    for (int i = 0; i < files; ++i) {
      auto [ec, f] = co_await fs::file::open(ctx, dir.path("f" + std::to_string(i)), create_rw());
      CO_ASSERT_OK(ec);
      CO_ASSERT_OK(f.register_file());
      EXPECT_EQ(f.is_registered(), uring);
      open_files.push_back(std::move(f));
    }
    // Each file gets its own number through a buffer of some set; then every file is read back.
    for (int i = 0; i < files; ++i) {
      fs::registered_buffers& s = sets[static_cast<std::size_t>(i) % sets.size()];
      fs::registered_buffer b = s[static_cast<std::size_t>(i) % s.count()].first(sizeof(int));
      std::memcpy(b.data(), &i, sizeof i);
      auto [wec, wn] = co_await open_files[static_cast<std::size_t>(i)].write_all_at(b, 0);
      CO_ASSERT_OK(wec);
    }
    for (int i = files; i-- > 0;) {
      fs::registered_buffer b = sets[0][0].first(sizeof(int));
      auto [rec, rn] = co_await open_files[static_cast<std::size_t>(i)].read_exact_at(b, 0);
      CO_ASSERT_OK(rec);
      int back = -1;
      std::memcpy(&back, b.data(), sizeof back);
      EXPECT_EQ(back, i);
    }
  }(ctx, dir, uring()));
}

TEST_P(registered_io_test, full_tables_are_table_full_and_the_plain_path_goes_on) {
  temp_dir dir;
  tern::io_context small(small_tables(4, 8));
  run_bounded(small, [](tern::io_context& ctx, const temp_dir& dir, bool uring) -> tern::task<void> {
    std::vector<fs::file> files;
    for (int i = 0; i < 5; ++i) {
      auto [ec, f] = co_await fs::file::open(ctx, dir.path("t" + std::to_string(i)), create_rw());
      CO_ASSERT_OK(ec);
      files.push_back(std::move(f));
    }
    for (int i = 0; i < 4; ++i) CO_ASSERT_OK(files[static_cast<std::size_t>(i)].register_file());
    if (uring) {
      EXPECT_EC(files[4].register_file(), tern::error::table_full);
      EXPECT_FALSE(files[4].is_registered());
    } else {
      EXPECT_OK(files[4].register_file()) << "epoll has no table to fill";
    }

    auto [b1, six] = fs::registered_buffers::create(ctx, 6, 4096);
    CO_ASSERT_OK(b1);
    auto [b2, three] = fs::registered_buffers::create(ctx, 3, 4096);
    if (uring) {
      EXPECT_EC(b2, tern::error::table_full);
      EXPECT_EQ(three.count(), 0u);
    } else {
      EXPECT_OK(b2);
    }
    auto [b3, two] = fs::registered_buffers::create(ctx, 2, 4096);
    CO_ASSERT_OK(b3);

    // The unregistered file, with buffers of either kind, works as before.
    fill(two[0], make_pattern(4096, 5));
    auto [wec, wn] = co_await files[4].write_all_at(two[0], 0);
    CO_ASSERT_OK(wec);
    std::vector<char> plain(4096);
    auto [rec, rn] = co_await files[4].read_exact_at(plain, 0);
    CO_ASSERT_OK(rec);
    EXPECT_TRUE(holds(two[0], plain.data()));

    // A destroyed set gives its slots back: six slots are free again, not seven.
    six = fs::registered_buffers();
    auto [b4, again] = fs::registered_buffers::create(ctx, 6, 4096);
    EXPECT_OK(b4);
    auto [b5, more] = fs::registered_buffers::create(ctx, 1, 4096);
    if (uring) {
      EXPECT_EC(b5, tern::error::table_full);
    }
    // Freed slots hold new memory: a write through the new set carries its bytes.
    fill(again[5], make_pattern(4096, 9));
    CO_ASSERT_OK((co_await files[0].write_all_at(again[5], 0)).ec);
    auto [r2, r2n] = co_await files[0].read_exact_at(plain, 0);
    CO_ASSERT_OK(r2);
    EXPECT_TRUE(holds(again[5], plain.data()));
    (void)wn, (void)rn, (void)r2n;
  }(small, dir, uring()));
}

TEST_P(registered_io_test, close_gives_the_slot_back) {
  temp_dir dir;
  tern::io_context small(small_tables(2, 4));
  run_bounded(small, [](tern::io_context& ctx, std::string path, bool uring) -> tern::task<void> {
    auto [bec, bufs] = fs::registered_buffers::create(ctx, 1, 4096);
    CO_ASSERT_OK(bec);
    auto [kec, kept] = co_await fs::file::open(ctx, path, create_rw());
    CO_ASSERT_OK(kec);
    CO_ASSERT_OK(kept.register_file());  // holds one of the two slots throughout
    for (int i = 0; i < 100; ++i) {
      auto [ec, f] = co_await fs::file::open(ctx, path);
      CO_ASSERT_OK(ec);
      CO_ASSERT_OK(f.register_file());
      EXPECT_EQ(f.is_registered(), uring);
      bufs[0].data()[0] = std::byte{static_cast<unsigned char>(i)};
      CO_ASSERT_OK((co_await kept.write_all_at(bufs[0].first(1), 0)).ec);
      bufs[0].data()[0] = std::byte{0xff};
      auto [rec, rn] = co_await f.read_exact_at(bufs[0].first(1), 0);
      CO_ASSERT_OK(rec);
      EXPECT_EQ(bufs[0].data()[0], std::byte{static_cast<unsigned char>(i)});
      if (i % 2 == 0) {
        f.close();
        EXPECT_FALSE(f.is_registered());
      }  // odd rounds: the destructor closes it
      (void)rn;
    }
    // Handing the descriptor out gives the slot back too.
    auto [oec, f] = co_await fs::file::open(ctx, path);
    CO_ASSERT_OK(oec);
    CO_ASSERT_OK(f.register_file());
    auto [rel, fd] = f.release();
    CO_ASSERT_OK(rel);
    auto [o2, g] = co_await fs::file::open(ctx, path);
    CO_ASSERT_OK(o2);
    EXPECT_OK(g.register_file());
  }(small, dir.path("slot.bin"), uring()));
}

TEST_P(registered_io_test, a_buffer_of_another_loop_is_wrong_loop) {
  temp_dir dir;
  tern::io_context other(options());
  auto [bec, foreign] = fs::registered_buffers::create(other, 1, 4096);
  ASSERT_TRUE(ec_ok(bec));
  run_bounded(ctx, [](tern::io_context& ctx, std::string path, fs::registered_buffers& foreign) -> tern::task<void> {
    auto [ec, f] = co_await fs::file::open(ctx, path, create_rw());
    CO_ASSERT_OK(ec);
    CO_ASSERT_OK(f.register_file());
    CO_ASSERT_OK((co_await f.write_all_at(tern::const_buffer("0123456789"), 0)).ec);
    auto [r1, n1] = co_await f.read_at(foreign[0], 0);
    EXPECT_EC(r1, tern::error::wrong_loop);
    auto [r2, n2] = co_await f.write_at(foreign[0].first(4), 0);
    EXPECT_EC(r2, tern::error::wrong_loop);
    auto [r3, n3] = co_await f.read_exact_at(foreign[0].first(4), 0);
    EXPECT_EC(r3, tern::error::wrong_loop);
    auto [r4, n4] = co_await f.write_all_at(foreign[0], 0);
    EXPECT_EC(r4, tern::error::wrong_loop);
    EXPECT_EQ(n3 + n4, 0u);
    // Nothing reached the file.
    char back[10];
    auto [rec, rn] = co_await f.read_exact_at(back, 0);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(std::string_view(back, rn), "0123456789");

    // Registering from a thread that does not run the loop, while this one does.
    std::error_code from_thread;
    std::thread([&] { from_thread = f.register_file(); }).join();
    EXPECT_EC(from_thread, tern::error::wrong_loop);
    std::error_code set_from_thread;
    std::thread([&] { set_from_thread = fs::registered_buffers::create(ctx, 1, 4096).ec; }).join();
    EXPECT_EC(set_from_thread, tern::error::wrong_loop);
    (void)n1, (void)n2;
  }(ctx, dir.path("wrong.bin"), foreign));
}

TEST_P(registered_io_test, bad_arguments_are_invalid_argument) {
  EXPECT_EC(fs::registered_buffers::create(ctx, 0, 4096).ec, std::errc::invalid_argument);
  EXPECT_EC(fs::registered_buffers::create(ctx, 1, 0).ec, std::errc::invalid_argument);
  EXPECT_EC(fs::registered_buffers::create(ctx, 1, 4096, 3000).ec, std::errc::invalid_argument);
  EXPECT_EC(fs::registered_buffers::create(ctx, 1, (std::size_t{1} << 30) + 1).ec, std::errc::invalid_argument);
  fs::file closed(ctx);
  EXPECT_EC(closed.register_file(), std::errc::bad_file_descriptor);
  // A set with an odd size and alignment: each buffer starts on the alignment.
  auto [ec, bufs] = fs::registered_buffers::create(ctx, 3, 100, 64);
  ASSERT_TRUE(ec_ok(ec));
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(bufs[i].data()) % 64, 0u);
  EXPECT_EQ(bufs[2].size(), 100u);
}

}  // namespace
