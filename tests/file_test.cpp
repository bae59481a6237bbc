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

#include <array>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
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

fs::open_options read_write() {
  fs::open_options o;
  o.access = fs::open_options::read_write;
  return o;
}

// Calls release() unless dismissed within limit: it ends a blocking call that nothing else could end (by writing to
// the FIFO or terminal it reads), so that a test whose call should have been bounded by tern fails (rescued()) instead
// of hanging.
class rescuer {
 public:
  rescuer(std::function<void()> release, std::chrono::milliseconds limit)
      : release_(std::move(release)), thread_([this, limit] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (cv_.wait_for(lock, limit, [this] { return dismissed_; })) return;
          rescued_ = true;
          release_();
        }) {}
  rescuer(const rescuer&) = delete;
  rescuer& operator=(const rescuer&) = delete;
  ~rescuer() { dismiss(); }
  void dismiss() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      dismissed_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  bool rescued() const { return rescued_.load(); }

 private:
  std::function<void()> release_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool dismissed_ = false;
  std::atomic<bool> rescued_{false};
  std::thread thread_;
};

// Writes n bytes into the FIFO at path (whose reader is open), without blocking.
void feed_fifo(const std::string& path, std::size_t n) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;
  const std::string bytes(n, 'r');
  (void)!::write(fd, bytes.data(), bytes.size());
  ::close(fd);
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

// read_exact and write_all at the file's own position: each call goes on where the last one ended, in as many
// kernel calls as it takes (a write into a FIFO takes several: the pipe holds 64 KiB).
TEST_P(file_test, sequential_write_all_and_read_exact_go_on_from_the_files_position) {
  temp_dir dir;
  run_bounded(ctx, [](tern::io_context& ctx, std::string path) -> tern::task<void> {
    auto [ec, f] = co_await fs::file::open(ctx, path, create_rw());
    CO_ASSERT_OK(ec);
    const std::vector<char> data = make_pattern(3 * 1024 * 1024 + 17);
    const std::size_t half = data.size() / 2;
    auto [w1, n1] = co_await f.write_all(tern::const_buffer(data.data(), half));
    CO_ASSERT_OK(w1);
    auto [w2, n2] = co_await f.write_all(tern::const_buffer(data.data() + half, data.size() - half));
    CO_ASSERT_OK(w2);
    EXPECT_EQ(n1 + n2, data.size());
    EXPECT_EQ(::lseek(f.native_handle(), 0, SEEK_CUR), static_cast<off_t>(data.size()));
    CO_ASSERT(::lseek(f.native_handle(), 0, SEEK_SET) == 0);
    std::vector<char> back(data.size());
    auto [r1, m1] = co_await f.read_exact(tern::mutable_buffer(back.data(), 1000));
    CO_ASSERT_OK(r1);
    auto [r2, m2] = co_await f.read_exact(tern::mutable_buffer(back.data() + 1000, back.size() - 1000));
    CO_ASSERT_OK(r2);
    EXPECT_EQ(m1 + m2, data.size());
    EXPECT_TRUE(back == data);
    char more[10];
    auto [eec, en] = co_await f.read_exact(more);
    EXPECT_EC(eec, tern::error::eof);
    EXPECT_EQ(en, 0u);

    fs::open_options append;
    append.access = fs::open_options::write_only;
    append.append = true;
    auto [aec, tail] = co_await fs::file::open(ctx, path, append);
    CO_ASSERT_OK(aec);
    CO_ASSERT_OK((co_await tail.write_all(tern::const_buffer("tail"))).ec);
    auto [sec, st] = co_await f.stat();
    CO_ASSERT_OK(sec);
    EXPECT_EQ(st.size, data.size() + 4);
  }(ctx, dir.path("sequential.bin")));
}

TEST_P(file_test, a_fifo_carries_a_large_write_all_to_a_read_exact) {
  temp_dir dir;
  const std::string fifo = dir.path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  run_bounded(ctx, [](tern::io_context& ctx, std::string fifo) -> tern::task<void> {
    auto [rec, reader] = co_await fs::file::open(ctx, fifo, read_write());
    CO_ASSERT_OK(rec);
    fs::open_options wo;
    wo.access = fs::open_options::write_only;
    auto [wec, writer] = co_await fs::file::open(ctx, fifo, wo);  // a reader is open: no wait
    CO_ASSERT_OK(wec);
    const std::vector<char> data = make_pattern(1024 * 1024 + 3);
    auto sending = tern::spawn(ctx, writer.write_all(data));
    std::vector<char> back(data.size());
    auto [xec, xn] = co_await tern::with_timeout(reader.read_exact(back), 10s);
    CO_ASSERT_OK(xec);
    EXPECT_EQ(xn, data.size());
    EXPECT_TRUE(back == data);
    auto [sec, sn] = co_await std::move(sending);
    EXPECT_OK(sec);
    EXPECT_EQ(sn, data.size());
  }(ctx, fifo));
}

// An operation copies its paths: one made from a string that is gone before it is awaited (or spawned, and awaited
// later) still names the file, though the string's memory has been written over. Both a short path and one longer
// than the copy kept in place.
TEST_P(file_test, paths_are_copied_so_an_operation_may_outlive_the_string_it_was_given) {
  temp_dir dir;
  run_bounded(ctx, [](tern::io_context& ctx, const temp_dir& dir) -> tern::task<void> {
    const std::array<std::string, 2> names{std::string("short"), std::string(150, 'l')};
    for (const std::string& name : names) {
      auto path = [&dir, &name](const char* suffix) { return dir.path(name + suffix); };
      auto made = [&] { return fs::create_directory(ctx, path(".d").c_str()); }();  // the string died here
      scribble(path(".d").size());
      EXPECT_OK(co_await made);
      auto opening = [&] { return fs::file::open(ctx, path(".d/f"), create_rw()); }();
      scribble(path(".d/f").size());
      auto [oec, f] = co_await opening;
      CO_ASSERT_OK(oec);
      CO_ASSERT_OK((co_await f.write_all(tern::const_buffer("abc"))).ec);
      auto stat = tern::spawn(ctx, fs::status(ctx, path(".d/f").c_str()));
      auto renaming = [&] { return fs::rename(ctx, path(".d/f").c_str(), path(".d/g").c_str()); }();
      scribble(path(".d/f").size());
      auto [sec, st] = co_await std::move(stat);
      CO_ASSERT_OK(sec);
      EXPECT_EQ(st.size, 3u);
      EXPECT_OK(co_await renaming);
      auto removing = [&] { return fs::remove(ctx, path(".d/g").c_str()); }();
      scribble(path(".d/g").size());
      EXPECT_OK(co_await removing);
      auto removing_dir = [&] { return fs::remove(ctx, path(".d").c_str(), true); }();
      EXPECT_OK(co_await removing_dir);
    }
  }(ctx, dir));
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

// The number of threads of this process (the entries of /proc/self/task).
std::size_t thread_count() {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    ++n;
  }
  return n;
}

// A tmpfs of 64 KiB, mounted in a mount namespace of this process's own (as root with CAP_SYS_ADMIN); the test
// process is its only user. Returns the mount point, or "" where that is not allowed. unshare(CLONE_NEWNS) moves
// only the calling thread to the new namespace: threads that already exist (a blocking pool's, io_uring's workers,
// left by earlier tests of the same process) would still write to the disk below. So only a process with one
// thread mounts it (ctest runs each test in a process of its own); threads made later inherit the namespace.
std::string small_file_system(const temp_dir& dir) {
  const std::string mount_point = dir.path("small");
  if (thread_count() != 1) return "";
  if (::mkdir(mount_point.c_str(), 0755) != 0) return "";
  if (::unshare(CLONE_NEWNS) != 0) return "";
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return "";
  if (::mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=64k") != 0) return "";
  return mount_point;
}

TEST_P(file_test, a_full_disk_is_no_space_and_the_loop_goes_on) {
  temp_dir dir;
  const std::string mount_point = small_file_system(dir);
  if (mount_point.empty()) {
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs CAP_SYS_ADMIN, and a process with one thread)";
  }
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

// A read lease on a file, held through a descriptor of this process: an open of the file for writing waits inside
// open(2) until release() (the kernel breaks the lease; the SIGIO it sends to the holder is ignored here). Under
// epoll such an open holds a pool thread for as long as the test wants.
class lease_holder {
 public:
  explicit lease_holder(const std::string& path) {
    std::signal(SIGIO, SIG_IGN);
    const int w = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (w >= 0) ::close(w);
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    held_ = fd_ >= 0 && ::fcntl(fd_, F_SETLEASE, F_RDLCK) == 0;
  }
  lease_holder(const lease_holder&) = delete;
  lease_holder& operator=(const lease_holder&) = delete;
  ~lease_holder() {
    release();
    if (fd_ >= 0) ::close(fd_);
  }
  bool held() const { return held_; }
  void release() {
    if (held_) ::fcntl(fd_, F_SETLEASE, F_UNLCK);
    held_ = false;
  }

 private:
  int fd_ = -1;
  bool held_ = false;
};

fs::open_options write_only() {
  fs::open_options o;
  o.access = fs::open_options::write_only;
  return o;
}

// A call that stays pending as long as the test wants: on io_uring a read of an empty FIFO (opened read-write, so
// it never sees eof), cancelled in the ring. On epoll, the calls that can be cancelled are those still waiting for a
// pool thread (one that runs cannot be interrupted), so the test first occupies every pool thread with an open that
// waits for a lease to be broken. (A read of a regular file would not do: under epoll one the page cache answers
// completes on the loop without reaching the pool; nor would a FIFO's, which waits for readiness on the loop.)
TEST_P(file_test, pending_calls_are_cancelled) {
  temp_dir dir;
  const std::string fifo = dir.path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  lease_holder lease(dir.path("leased.bin"));
  if (GetParam() == tern::backend_kind::epoll && !lease.held()) GTEST_SKIP() << "no file lease here";
  run_bounded(ctx, [](tern::io_context& ctx, const temp_dir& dir, std::string fifo, lease_holder& lease)
                  -> tern::task<void> {
    if (ctx.backend() == tern::backend_kind::io_uring) {
      auto [fec, pipe] = co_await fs::file::open(ctx, fifo, read_write());
      CO_ASSERT_OK(fec);
      char buf[8];
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

    auto [dec, data] = co_await fs::file::open(ctx, dir.path("data.bin"), create_rw());
    CO_ASSERT_OK(dec);
    const std::string leased = dir.path("leased.bin");
    const unsigned threads = tern::detail::blocking_pool::max_threads();
    std::vector<tern::join_handle<tern::io_result<fs::file>>> blocked;
    for (unsigned i = 0; i < threads; ++i) blocked.push_back(tern::spawn(ctx, fs::file::open(ctx, leased, write_only())));
    // Once every pool thread is inside open(), waiting for the lease, a call waits for a thread. Until then (a
    // loaded machine may take a while to get them there) one may still find a thread and finish: try again. A
    // cancelled call alone does not show that they are all there: each open first tries without blocking (EAGAIN
    // on the lease) and is queued again behind the calls made meanwhile, so for a moment a thread may be free for
    // the next call. Only a call that also waits out its timeout does.
    std::error_code queued_ec;
    std::error_code timed_ec;
    for (int attempt = 0; attempt < 100; ++attempt) {
      co_await tern::sleep_for(20ms);
      auto queued = tern::spawn(ctx, data.sync());
      co_await tern::sleep_for(5ms);
      data.cancel();
      queued_ec = co_await std::move(queued);
      if (!queued_ec) continue;
      timed_ec = co_await tern::with_timeout(data.sync(), 5ms);
      if (timed_ec) break;
    }
    EXPECT_EC(queued_ec, tern::error::operation_canceled) << "a call waiting for a thread is taken back";
    EXPECT_EC(timed_ec, tern::error::timed_out) << "a call waiting for a thread times out";

    lease.release();  // the blocked opens go on: each gets its file
    for (auto& h : blocked) {
      auto [oec, opened] = co_await std::move(h);
      EXPECT_OK(oec);
    }
  }(ctx, dir, fifo, lease));
}

// A read the page cache can answer does not wait for a thread: with every pool thread blocked (epoll; see above), a
// read of a file just written still completes, with its bytes. Under io_uring there is no pool, and the same read
// completes as well.
TEST_P(file_test, cached_reads_do_not_wait_for_blocked_pool_threads) {
  temp_dir dir;
  lease_holder lease(dir.path("leased.bin"));
  if (GetParam() == tern::backend_kind::epoll && !lease.held()) GTEST_SKIP() << "no file lease here";
  run_bounded(ctx, [](tern::io_context& ctx, const temp_dir& dir, lease_holder& lease) -> tern::task<void> {
    auto [dec, data_file] = co_await fs::file::open(ctx, dir.path("cached.bin"), create_rw());
    CO_ASSERT_OK(dec);
    const std::vector<char> data = make_pattern(64 * 1024);
    auto [wec, wn] = co_await data_file.write_all_at(data, 0);
    CO_ASSERT_OK(wec);

    const std::string leased = dir.path("leased.bin");
    const unsigned threads = ctx.backend() == tern::backend_kind::epoll ? tern::detail::blocking_pool::max_threads() : 0;
    std::vector<tern::join_handle<tern::io_result<fs::file>>> blocked;
    for (unsigned i = 0; i < threads; ++i) blocked.push_back(tern::spawn(ctx, fs::file::open(ctx, leased, write_only())));
    co_await tern::sleep_for(20ms);

    std::vector<char> back(data.size());
    auto [rec, rn] = co_await tern::with_timeout(data_file.read_at(back, 0), 5s);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(rn, data.size());
    EXPECT_TRUE(back == data);

    lease.release();
    for (auto& h : blocked) {
      auto [oec, opened] = co_await std::move(h);
      EXPECT_OK(oec);
    }
  }(ctx, dir, lease));
}

// Opening a FIFO waits for nobody, on either backend (as with O_NONBLOCK): a reader opens at once, a writer without
// a reader is refused with ENXIO. (What a reader's read does before any writer came differs: eof under epoll, a wait
// under io_uring; a reader that should wait for writers opens the FIFO read-write.)
TEST_P(file_test, opening_a_fifo_never_waits_for_its_other_end) {
  temp_dir dir;
  const std::string fifo = dir.path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  rescuer rescue([fifo] {
    const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // releases an open that waits
    if (w >= 0) ::close(w);
  }, 10s);
  run_bounded(ctx, [](tern::io_context& ctx, std::string fifo) -> tern::task<void> {
    auto [nec, nobody] = co_await tern::with_timeout(fs::file::open(ctx, fifo, write_only()), 5s);
    EXPECT_EC(nec, std::errc::no_such_device_or_address);
    auto [ec, reader] = co_await tern::with_timeout(fs::file::open(ctx, fifo), 5s);
    CO_ASSERT_OK(ec);
    auto [wec, writer] = co_await tern::with_timeout(fs::file::open(ctx, fifo, write_only()), 5s);
    CO_ASSERT_OK(wec);
    CO_ASSERT_OK((co_await writer.write_all(tern::const_buffer("hi"))).ec);
    char back[2];
    auto [rec, n] = co_await tern::with_timeout(reader.read_exact(back), 5s);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(std::string(back, n), "hi");
    writer.close();
    auto [eec, en] = co_await tern::with_timeout(reader.read_exact(back), 5s);
    EXPECT_EC(eec, tern::error::eof) << "once the writer that came has gone";
    (void)en;
  }(ctx, fifo));
  EXPECT_FALSE(rescue.rescued()) << "the open waited for a writer";
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

// fs::file is advertised for FIFOs and character devices. A read of one waits for a writer for as long as it takes,
// so it must wait like a pipe's (readiness under epoll, the ring under io_uring), where a timeout or a stop ends it,
// never inside a blocking call on a pool thread, where nothing can.
TEST_P(file_test, a_fifo_read_that_nobody_answers_ends_at_its_timeout) {
  temp_dir dir;
  const std::string fifo = dir.path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  rescuer rescue([fifo] { feed_fifo(fifo, 2); }, 10s);
  run_bounded(ctx, [](tern::io_context& ctx, std::string fifo) -> tern::task<void> {
    auto [ec, f] = co_await fs::file::open(ctx, fifo, read_write());  // read-write: the open waits for nobody
    CO_ASSERT_OK(ec);
    char byte = 0;
    auto [rec, n] = co_await tern::with_timeout(f.read_some(tern::mutable_buffer(&byte, 1)), 50ms);
    EXPECT_EC(rec, tern::error::timed_out);
    std::stop_source stop;
    auto stopped = tern::spawn(ctx, tern::with_stop(f.read_some(tern::mutable_buffer(&byte, 1)), stop.get_token()));
    co_await tern::sleep_for(5ms);
    stop.request_stop();
    auto [sec, sn] = co_await std::move(stopped);
    EXPECT_EC(sec, tern::error::operation_canceled);
    (void)n, (void)sn;
  }(ctx, fifo));
  EXPECT_FALSE(rescue.rescued()) << "the read ended only when the FIFO got a byte";
}

TEST_P(file_test, a_terminal_read_that_nobody_answers_ends_at_its_timeout) {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  const int terminal = ::open(::ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(terminal, 0);
  rescuer rescue([master] { (void)!::write(master, "r\n", 2); }, 10s);
  run_bounded(ctx, [](tern::io_context& ctx, int terminal) -> tern::task<void> {
    auto [aec, f] = fs::file::adopt(ctx, tern::unique_fd(terminal));
    CO_ASSERT_OK(aec);
    auto [sec, st] = co_await f.stat();
    CO_ASSERT_OK(sec);
    EXPECT_EQ(st.type, fs::file_type::character_device);
    char buf[16];
    auto [rec, n] = co_await tern::with_timeout(f.read_some(buf), 50ms);
    EXPECT_EC(rec, tern::error::timed_out);
    (void)n;
  }(ctx, terminal));
  EXPECT_FALSE(rescue.rescued()) << "the read ended only when the terminal got a line";
  ::close(master);
}

// A character device that epoll cannot watch (/dev/null: its calls never wait) is a file like any other.
TEST_P(file_test, a_device_that_cannot_be_polled_still_reads_and_writes) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [ec, f] = co_await fs::file::open(ctx, "/dev/null", read_write());
    CO_ASSERT_OK(ec);
    auto [wec, wn] = co_await f.write_all(tern::const_buffer("into nothing"));
    EXPECT_OK(wec);
    EXPECT_EQ(wn, 12u);
    char buf[8];
    auto [rec, rn] = co_await f.read_some(buf);
    EXPECT_EC(rec, tern::error::eof);
    (void)rn;
  }(ctx));
}

TEST_P(file_test, a_loop_torn_down_with_a_fifo_read_pending_does_not_wait_for_it) {
  temp_dir dir;
  const std::string fifo = dir.path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  rescuer rescue([fifo] { feed_fifo(fifo, 1); }, 10s);
  {
    tern::io_context loop(options());
    bool reading = false;
    tern::spawn(loop, [](tern::io_context& ctx, std::string fifo, bool& reading) -> tern::task<void> {
      auto [ec, f] = co_await fs::file::open(ctx, fifo, read_write());
      CO_ASSERT_OK(ec);
      char byte = 0;
      reading = true;
      (void)co_await f.read_some(tern::mutable_buffer(&byte, 1));
      ADD_FAILURE() << "the read completed, though nobody wrote";
    }, std::ref(loop), fifo, std::ref(reading)).detach();
    for (int i = 0; i < 10000 && !reading; ++i) {
      loop.poll();
      if (!reading) std::this_thread::sleep_for(1ms);
    }
    ASSERT_TRUE(reading);
    loop.poll();
    std::this_thread::sleep_for(20ms);  // under epoll, long enough for a pool thread to be inside read()
  }  // the loop's destructor destroys the suspended task, and its pending read with it
  EXPECT_FALSE(rescue.rescued()) << "the loop's teardown waited until the FIFO got a byte";
}

TEST_P(file_test, a_hundred_pending_fifo_reads_leave_the_blocking_pool_to_files) {
  temp_dir dir;
  const std::string fifo = dir.path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  constexpr std::size_t readers = 100;
  rescuer rescue([fifo] { feed_fifo(fifo, readers); }, 20s);
  run_bounded(ctx, [](tern::io_context& ctx, const temp_dir& dir, std::string fifo) -> tern::task<void> {
    auto [ec, f] = co_await fs::file::open(ctx, fifo, read_write());
    CO_ASSERT_OK(ec);
    std::vector<char> bytes(readers);
    std::vector<tern::join_handle<tern::io_result<std::size_t>>> pending;
    for (std::size_t i = 0; i < readers; ++i) {
      pending.push_back(tern::spawn(ctx, f.read_some(tern::mutable_buffer(&bytes[i], 1))));
    }
    co_await tern::sleep_for(20ms);
    // File calls (under epoll, the pool's) still run: a file made, written, synced, stat'ed.
    auto [dec, data] = co_await tern::with_timeout(fs::file::open(ctx, dir.path("data.bin"), create_rw()), 5s);
    CO_ASSERT_OK(dec);
    auto [wec, wn] = co_await tern::with_timeout(data.write_all_at(tern::const_buffer("some bytes"), 0), 5s);
    EXPECT_OK(wec);
    EXPECT_OK(co_await tern::with_timeout(data.sync(), 5s));
    auto [sec, st] = co_await tern::with_timeout(fs::status(ctx, dir.path("data.bin").c_str()), 5s);
    EXPECT_OK(sec);
    EXPECT_EQ(st.size, 10u);
    // The readers are all still waiting, and each takes its byte once they come.
    for (auto& h : pending) EXPECT_FALSE(h.done());
    const std::string release(readers, 'x');
    CO_ASSERT(::write(f.native_handle(), release.data(), release.size()) == static_cast<ssize_t>(release.size()));
    for (auto& h : pending) {
      auto [rec, n] = co_await std::move(h);
      EXPECT_OK(rec);
      EXPECT_EQ(n, 1u);
    }
    (void)wn;
  }(ctx, dir, fifo));
  EXPECT_FALSE(rescue.rescued()) << "the file calls waited behind the FIFO reads";
}

}  // namespace
