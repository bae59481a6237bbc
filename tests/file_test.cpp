// Files on both backends (io_uring SQEs; the blocking pool under epoll): positioned reads and writes verified byte
// by byte, read_exact_at and write_all_at, eof past the end, open errors (missing, exists, read-only descriptor,
// EMFILE), truncate/allocate/sync/stat, the path calls, direct I/O and its alignment errors, a full disk, and the
// cancellation of calls that are still pending.
#include "fs_support.hpp"
#include "net_support.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

using namespace tern_test;
namespace fs = tern::fs;

class file_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(file_test);

fs::open_options create_rw() {
  fs::open_options o;
  o.access = fs::open_options::read_write;
  o.create = true;
  o.truncate = true;
  return o;
}

TEST_P(file_test, written_data_reads_back_and_a_read_past_the_end_is_eof) {
  temp_dir dir;
  run_bounded(ctx, [](tern::io_context& ctx, std::string path) -> tern::task<void> {
    auto [ec, f] = co_await fs::file::open(ctx, path, create_rw());
    CO_ASSERT_OK(ec);
    const std::vector<char> data = make_pattern(3 * 1024 * 1024 + 17);
    auto [wec, wn] = co_await f.write_all_at(data, 0);
    CO_ASSERT_OK(wec);
    EXPECT_EQ(wn, data.size());
    auto [sec, st] = co_await f.stat();
    CO_ASSERT_OK(sec);
    EXPECT_EQ(st.size, data.size());
    EXPECT_EQ(st.type, fs::file_type::regular);

    std::vector<char> back(data.size());
    auto [rec, rn] = co_await f.read_exact_at(back, 0);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(rn, data.size());
    EXPECT_TRUE(back == data);

    // One positioned read in the middle.
    char middle[100];
    auto [mec, mn] = co_await f.read_at(middle, 1'000'000);
    CO_ASSERT_OK(mec);
    EXPECT_EQ(mn, sizeof middle);
    EXPECT_TRUE(std::equal(middle, middle + mn, data.begin() + 1'000'000));

    // At the end, and across it.
    auto [eec, en] = co_await f.read_at(middle, data.size());
    EXPECT_EC(eec, tern::error::eof);
    EXPECT_EQ(en, 0u);
    std::vector<char> across(200);
    auto [xec, xn] = co_await f.read_exact_at(across, data.size() - 50);
    EXPECT_EC(xec, tern::error::eof);
    EXPECT_EQ(xn, 50u) << "the bytes before the end are counted";
  }(ctx, dir.path("data.bin")));
}

TEST_P(file_test, open_errors_are_clear) {
  temp_dir dir;
  run_bounded(ctx, [](tern::io_context& ctx, const temp_dir& dir) -> tern::task<void> {
    auto [missing, f1] = co_await fs::file::open(ctx, dir.path("nope/none.txt"));
    EXPECT_EC(missing, std::errc::no_such_file_or_directory);
    EXPECT_FALSE(f1.is_open());

    const std::string path = dir.path("exists.txt");
    auto [cec, f2] = co_await fs::file::open(ctx, path, create_rw());
    CO_ASSERT_OK(cec);
    fs::open_options exclusive = create_rw();
    exclusive.exclusive = true;
    auto [xec, f3] = co_await fs::file::open(ctx, path, exclusive);
    EXPECT_EC(xec, std::errc::file_exists);

    // Written through a descriptor opened for reading only.
    auto [rec, read_only] = co_await fs::file::open(ctx, path);
    CO_ASSERT_OK(rec);
    auto [wec, wn] = co_await read_only.write_at(tern::const_buffer("x"), 0);
    EXPECT_EC(wec, std::errc::bad_file_descriptor);
    EXPECT_EQ(wn, 0u);

    // A closed file.
    read_only.close();
    char buf[4];
    auto [bec, bn] = co_await read_only.read_at(buf, 0);
    EXPECT_EC(bec, std::errc::bad_file_descriptor);
    (void)bn;
  }(ctx, dir));
}

TEST_P(file_test, a_full_descriptor_table_is_too_many_files_open) {
  temp_dir dir;
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  run_bounded(ctx, [](tern::io_context& ctx, const temp_dir& dir, rlimit old) -> tern::task<void> {
    const std::string path = dir.path("many.txt");
    auto [cec, first] = co_await fs::file::open(ctx, path, create_rw());
    CO_ASSERT_OK(cec);
    rlimit low = old;
    low.rlim_cur = static_cast<rlim_t>(first.native_handle() + 8);
    CO_ASSERT(::setrlimit(RLIMIT_NOFILE, &low) == 0);
    std::vector<fs::file> files;
    std::error_code ec;
    for (int i = 0; i < 64 && !ec; ++i) {
      auto [oec, f] = co_await fs::file::open(ctx, path);
      ec = oec;
      if (!oec) files.push_back(std::move(f));
    }
    ::setrlimit(RLIMIT_NOFILE, &old);
    EXPECT_EC(ec, std::errc::too_many_files_open);
    EXPECT_FALSE(files.empty());
    // The loop goes on: with room again, opening works.
    files.clear();
    auto [again, f] = co_await fs::file::open(ctx, path);
    EXPECT_OK(again);
  }(ctx, dir, old));
  ::setrlimit(RLIMIT_NOFILE, &old);
}

TEST_P(file_test, truncate_allocate_sync_and_stat) {
  temp_dir dir;
  run_bounded(ctx, [](tern::io_context& ctx, std::string path) -> tern::task<void> {
    auto [ec, f] = co_await fs::file::open(ctx, path, create_rw());
    CO_ASSERT_OK(ec);
    CO_ASSERT_OK(co_await f.allocate(0, 1 << 20));
    auto [s1ec, s1] = co_await f.stat();
    CO_ASSERT_OK(s1ec);
    EXPECT_EQ(s1.size, 1u << 20) << "fallocate with mode 0 extends the file";
    EXPECT_GE(s1.blocks * 512, 1u << 20) << "and reserves the blocks";
    CO_ASSERT_OK(co_await f.truncate(4096));
    auto [s2ec, s2] = co_await f.stat();
    CO_ASSERT_OK(s2ec);
    EXPECT_EQ(s2.size, 4096u);
    CO_ASSERT_OK((co_await f.write_all_at(tern::const_buffer("synced"), 10)).ec);
    EXPECT_OK(co_await f.sync());
    EXPECT_OK(co_await f.sync_data());
    char back[6];
    auto [rec, rn] = co_await f.read_exact_at(back, 10);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(std::string_view(back, rn), "synced");
    auto [pec, ps] = co_await fs::status(ctx, path.c_str());
    CO_ASSERT_OK(pec);
    EXPECT_EQ(ps.size, 4096u);
    EXPECT_EQ(ps.permissions, 0644u & ~static_cast<unsigned>(::umask(022)));
  }(ctx, dir.path("sized.bin")));
}

TEST_P(file_test, path_calls_rename_remove_and_make_directories) {
  temp_dir dir;
  run_bounded(ctx, [](tern::io_context& ctx, const temp_dir& dir) -> tern::task<void> {
    const std::string sub = dir.path("sub");
    CO_ASSERT_OK(co_await fs::create_directory(ctx, sub.c_str()));
    EXPECT_EC(co_await fs::create_directory(ctx, sub.c_str()), std::errc::file_exists);
    auto [sec, st] = co_await fs::status(ctx, sub.c_str());
    CO_ASSERT_OK(sec);
    EXPECT_EQ(st.type, fs::file_type::directory);

    const std::string a = dir.path("sub/a.txt"), b = dir.path("sub/b.txt");
    {
      auto [oec, f] = co_await fs::file::open(ctx, a, create_rw());
      CO_ASSERT_OK(oec);
      CO_ASSERT_OK((co_await f.write_all_at(tern::const_buffer("moved"), 0)).ec);
    }
    CO_ASSERT_OK(co_await fs::rename(ctx, a.c_str(), b.c_str()));
    auto [gone, g] = co_await fs::status(ctx, a.c_str());
    EXPECT_EC(gone, std::errc::no_such_file_or_directory);
    auto [bec, bs] = co_await fs::status(ctx, b.c_str());
    CO_ASSERT_OK(bec);
    EXPECT_EQ(bs.size, 5u);

    EXPECT_EC(co_await fs::remove(ctx, sub.c_str(), true), std::errc::directory_not_empty);
    CO_ASSERT_OK(co_await fs::remove(ctx, b.c_str()));
    EXPECT_EC(co_await fs::remove(ctx, b.c_str()), std::errc::no_such_file_or_directory);
    CO_ASSERT_OK(co_await fs::remove(ctx, sub.c_str(), true));
    (void)g;
  }(ctx, dir));
}

TEST_P(file_test, direct_io_needs_alignment_and_says_so) {
  temp_dir dir;
  run_bounded(ctx, [](tern::io_context& ctx, std::string path) -> tern::task<void> {
    fs::open_options o = create_rw();
    o.direct = true;
    auto [ec, f] = co_await fs::file::open(ctx, path, o);
    CO_ASSERT_OK(ec);
    auto [mem_align, off_align] = f.direct_alignment();
    CO_ASSERT(mem_align != 0 && off_align != 0);
    fs::aligned_buffer block(64 * 1024);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(block.data()) % 4096, 0u);
    const std::vector<char> pattern = make_pattern(block.size());
    std::memcpy(block.data(), pattern.data(), pattern.size());
    auto [wec, wn] = co_await f.write_all_at(block, 0);
    CO_ASSERT_OK(wec);
    EXPECT_EQ(wn, block.size());
    fs::aligned_buffer back(64 * 1024);
    auto [rec, rn] = co_await f.read_exact_at(back, 0);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(std::memcmp(back.data(), pattern.data(), rn), 0);

    // Misaligned memory, offset and size: refused with misaligned before any system call.
    tern::mutable_buffer shifted(reinterpret_cast<char*>(back.data()) + 1, 4096);
    auto [m1, n1] = co_await f.read_at(shifted, 0);
    EXPECT_EC(m1, tern::error::misaligned);
    auto [m2, n2] = co_await f.read_at(tern::mutable_buffer(back.data(), 4096), 100);
    EXPECT_EC(m2, tern::error::misaligned);
    auto [m3, n3] = co_await f.write_all_at(tern::const_buffer(block.data(), 1000), 0);
    EXPECT_EC(m3, tern::error::misaligned);
    EXPECT_TRUE(m3 == std::errc::invalid_argument);
    (void)n1, (void)n2, (void)n3;
  }(ctx, dir.path("direct.bin")));
}

// A tmpfs of 64 KiB, mounted in a mount namespace of this process's own (as root with CAP_SYS_ADMIN); the test
// process is its only user. Returns the mount point, or "" where that is not allowed.
std::string small_file_system(const temp_dir& dir) {
  const std::string mount_point = dir.path("small");
  if (::mkdir(mount_point.c_str(), 0755) != 0) return "";
  if (::unshare(CLONE_NEWNS) != 0) return "";
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return "";
  if (::mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=64k") != 0) return "";
  return mount_point;
}

TEST_P(file_test, a_full_disk_is_no_space_and_the_loop_goes_on) {
  temp_dir dir;
  const std::string mount_point = small_file_system(dir);
  if (mount_point.empty()) GTEST_SKIP() << "cannot mount a small tmpfs here (needs CAP_SYS_ADMIN)";
  run_bounded(ctx, [](tern::io_context& ctx, std::string path) -> tern::task<void> {
    auto [ec, f] = co_await fs::file::open(ctx, path, create_rw());
    CO_ASSERT_OK(ec);
    const std::vector<char> big = make_pattern(1 << 20);
    auto [wec, wn] = co_await f.write_all_at(big, 0);
    EXPECT_EC(wec, std::errc::no_space_on_device);
    EXPECT_LT(wn, big.size());
    EXPECT_GT(wn, 0u) << "what fitted was written, and counted";
    EXPECT_EC(co_await f.allocate(0, 1 << 20), std::errc::no_space_on_device);
    // What was written reads back.
    std::vector<char> back(wn);
    auto [rec, rn] = co_await f.read_exact_at(back, 0);
    CO_ASSERT_OK(rec);
    EXPECT_TRUE(std::equal(back.begin(), back.end(), big.begin()));
    (void)rn;
  }(ctx, mount_point + "/fill.bin"));
}

// A read of an empty FIFO (opened read-write, so it never sees eof) waits until someone writes: a call that stays
// pending as long as the test wants. On io_uring such a read is cancelled in the ring. On epoll it blocks a pool
// thread, where nothing can interrupt it; there the calls that can be cancelled are those still waiting for a
// thread, so the test first occupies every pool thread with such a read. (A read of a regular file would not do:
// under epoll one the page cache answers completes on the loop without reaching the pool.)
TEST_P(file_test, pending_calls_are_cancelled) {
  temp_dir dir;
  const std::string fifo = dir.path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  run_bounded(ctx, [](tern::io_context& ctx, const temp_dir& dir, std::string fifo) -> tern::task<void> {
    fs::open_options rw;
    rw.access = fs::open_options::read_write;
    auto [fec, pipe] = co_await fs::file::open(ctx, fifo, rw);
    CO_ASSERT_OK(fec);
    auto [qfec, queue_end] = co_await fs::file::open(ctx, fifo, rw);
    CO_ASSERT_OK(qfec);
    char buf[8];

    if (ctx.backend() == tern::backend_kind::io_uring) {
      auto pending = tern::spawn(ctx, pipe.read_some(buf));
      co_await tern::sleep_for(5ms);
      pipe.cancel();
      auto [cec, cn] = co_await std::move(pending);
      EXPECT_EC(cec, tern::error::operation_canceled);
      auto [tec, tn] = co_await tern::with_timeout(pipe.read_some(buf), 5ms);
      EXPECT_EC(tec, tern::error::timed_out);
      (void)cn, (void)tn;
      co_return;
    }

    const unsigned threads = tern::detail::blocking_pool::max_threads();
    std::vector<char> bytes(threads);
    std::vector<tern::join_handle<tern::io_result<std::size_t>>> blocked;
    for (unsigned i = 0; i < threads; ++i) {
      blocked.push_back(tern::spawn(ctx, pipe.read_some(tern::mutable_buffer(&bytes[i], 1))));
    }
    co_await tern::sleep_for(20ms);  // every pool thread is now inside read() on the FIFO
    auto queued = tern::spawn(ctx, queue_end.read_some(buf));
    co_await tern::sleep_for(5ms);
    queue_end.cancel();
    auto [qec, qn] = co_await std::move(queued);
    EXPECT_EC(qec, tern::error::operation_canceled) << "a read waiting for a pool thread is taken back";
    auto [tec, tn] = co_await tern::with_timeout(queue_end.read_some(buf), 5ms);
    EXPECT_EC(tec, tern::error::timed_out);

    // Writing to the FIFO releases the blocked reads: each gets its byte.
    const std::string data(threads, 'x');
    CO_ASSERT(::write(pipe.native_handle(), data.data(), data.size()) == static_cast<ssize_t>(data.size()));
    for (auto& h : blocked) {
      auto [bec, bn] = co_await std::move(h);
      EXPECT_OK(bec);
      EXPECT_EQ(bn, 1u);
    }
    (void)qn, (void)tn;
  }(ctx, dir, fifo));
}

// A read the page cache can answer does not wait for a thread: with every pool thread blocked in a FIFO read
// (epoll), a read of a file just written still completes, with its bytes. Under io_uring there is no pool, and the
// same read completes as well.
TEST_P(file_test, cached_reads_do_not_wait_for_blocked_pool_threads) {
  temp_dir dir;
  const std::string fifo = dir.path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  run_bounded(ctx, [](tern::io_context& ctx, const temp_dir& dir, std::string fifo) -> tern::task<void> {
    fs::open_options rw;
    rw.access = fs::open_options::read_write;
    auto [fec, pipe] = co_await fs::file::open(ctx, fifo, rw);
    CO_ASSERT_OK(fec);
    auto [dec, data_file] = co_await fs::file::open(ctx, dir.path("cached.bin"), create_rw());
    CO_ASSERT_OK(dec);
    const std::vector<char> data = make_pattern(64 * 1024);
    auto [wec, wn] = co_await data_file.write_all_at(data, 0);
    CO_ASSERT_OK(wec);

    const unsigned threads = ctx.backend() == tern::backend_kind::epoll ? tern::detail::blocking_pool::max_threads() : 0;
    std::vector<char> bytes(threads);
    std::vector<tern::join_handle<tern::io_result<std::size_t>>> blocked;
    for (unsigned i = 0; i < threads; ++i) {
      blocked.push_back(tern::spawn(ctx, pipe.read_some(tern::mutable_buffer(&bytes[i], 1))));
    }
    co_await tern::sleep_for(20ms);

    std::vector<char> back(data.size());
    auto [rec, rn] = co_await tern::with_timeout(data_file.read_at(back, 0), 5s);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(rn, data.size());
    EXPECT_TRUE(back == data);

    const std::string release(threads, 'x');
    CO_ASSERT(::write(pipe.native_handle(), release.data(), release.size()) == static_cast<ssize_t>(release.size()));
    for (auto& h : blocked) {
      auto [bec, bn] = co_await std::move(h);
      EXPECT_OK(bec);
      EXPECT_EQ(bn, 1u);
    }
  }(ctx, dir, fifo));
}

// A range whose first half is in the page cache and whose second half is not (dropped with POSIX_FADV_DONTNEED
// after a sync) reads whole and right: under epoll the cached part is copied on the loop and the pool reads the
// rest; both sequential reads (read_some at the file's position) and positioned ones.
TEST_P(file_test, partly_cached_reads_are_whole) {
  temp_dir dir;
  run_bounded(ctx, [](tern::io_context& ctx, std::string path) -> tern::task<void> {
    auto [ec, f] = co_await fs::file::open(ctx, path, create_rw());
    CO_ASSERT_OK(ec);
    constexpr std::size_t size = 1024 * 1024;
    const std::vector<char> data = make_pattern(size);
    auto [wec, wn] = co_await f.write_all_at(data, 0);
    CO_ASSERT_OK(wec);
    CO_ASSERT_OK(co_await f.sync());

    for (int round = 0; round < 2; ++round) {
      CO_ASSERT(::posix_fadvise(f.native_handle(), 0, 0, POSIX_FADV_DONTNEED) == 0);
      std::vector<char> first(size / 2);
      auto [pec, pn] = co_await f.read_exact_at(first, 0);  // brings the first half back into the cache
      CO_ASSERT_OK(pec);
      // and drops the second again, which the read-ahead of the first brought in
      CO_ASSERT(::posix_fadvise(f.native_handle(), size / 2, size / 2, POSIX_FADV_DONTNEED) == 0);
      std::vector<char> back(size);
      std::size_t n = 0;
      if (round == 0) {
        auto [rec, rn] = co_await f.read_at(back, 0);
        CO_ASSERT_OK(rec);
        n = rn;
      } else {
        CO_ASSERT(::lseek(f.native_handle(), 0, SEEK_SET) == 0);
        auto [rec, rn] = co_await f.read_some(back);
        CO_ASSERT_OK(rec);
        n = rn;
        EXPECT_EQ(::lseek(f.native_handle(), 0, SEEK_CUR), static_cast<off_t>(rn)) << "the position moved by n";
      }
      EXPECT_EQ(n, size) << "round " << round;
      EXPECT_TRUE(std::equal(back.begin(), back.begin() + static_cast<std::ptrdiff_t>(n), data.begin()));
    }
  }(ctx, dir.path("half.bin")));
}

}  // namespace
