// What every implementation of files/random_read and files/sequential_read shares: the data file, the offsets
// each task reads, the check of every read, the aligned buffers, and the meters.
//
// The data file (file_mib MiB, at $TERN_BENCH_FILE or /var/tmp/tern-bench/data-<size>) is made once and reused: a
// worker that finds it missing or of another size writes it with large sequential writes before its phases, so
// creation is never measured. Each 4 KiB block starts with its own block number (8 bytes, native order), and every
// read checks its size and the number at the start of what it got: a read that returned the wrong part of the
// file, or a short one, fails the run.
//
// Offsets: random_read draws a block-aligned offset from a per-task xorshift64 (seeded from the task's number, so
// runs are repeatable); sequential_read gives task i the i-th of `tasks` equal contiguous regions and walks it
// `block` bytes at a time, wrapping to the region's start.
#pragma once

#include "../../harness/traffic.hpp"
#include "../../harness/worker.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace tern_bench::files {

constexpr std::size_t header_block = 4096;  // every 4 KiB block starts with its number
constexpr std::size_t direct_align = 4096;  // buffer alignment for every mode (O_DIRECT needs it)

[[noreturn]] inline void fail_errno(const std::string& what, int err) {
    throw bench_failure(what + ": " + std::strerror(err));
}

struct file_params {
    std::string mode;        // buffered, direct, direct_registered
    std::size_t block = 0;   // bytes per read
    std::size_t tasks = 0;   // reads in flight (tasks, threads or iocbs)
    std::uint64_t size = 0;  // bytes in the data file
    bool sequential = false;
    std::string path;

    bool direct() const { return mode != "buffered"; }
    bool registered() const { return mode == "direct_registered"; }
    std::uint64_t blocks() const { return size / block; }
};

inline file_params params_of(const session& s) {
    file_params p;
    p.mode = s.request().params.at("mode");
    if (p.mode != "buffered" && p.mode != "direct" && p.mode != "direct_registered")
        throw bench_failure("mode is buffered, direct or direct_registered, got " + p.mode);
    p.block = static_cast<std::size_t>(s.param_int("block"));
    p.tasks = static_cast<std::size_t>(s.param_int("tasks"));
    p.size = static_cast<std::uint64_t>(s.param_int("file_mib")) << 20;
    p.sequential = s.request().scenario == "files/sequential_read";
    if (p.block == 0 || p.block % header_block != 0) throw bench_failure("block must be a multiple of 4096");
    if (p.tasks == 0 || p.size < p.block * p.tasks) throw bench_failure("the file is too small for the tasks");
    const char* env = std::getenv("TERN_BENCH_FILE");
    p.path = env && *env ? env : "/var/tmp/tern-bench/data-" + std::to_string(p.size >> 20) + "M";
    return p;
}

// The share of the file's pages in the page cache (mincore over a read-only mapping), in whole percent.
inline int resident_percent(const file_params& p) {
    int fd = ::open(p.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    void* map = ::mmap(nullptr, p.size, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) return -1;
    std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> vec((p.size + page - 1) / page);
    int pct = -1;
    if (::mincore(map, p.size, vec.data()) == 0) {
        std::size_t in = 0;
        for (unsigned char v : vec) in += v & 1;
        pct = static_cast<int>(in * 100 / vec.size());
    }
    ::munmap(map, p.size);
    return pct;
}

// Makes the data file unless it is there with the right size (its content is trusted then; every read checks it).
// Reports whether it was made, and how much of it the page cache held when the worker started; a buffered point
// then reads all of it once, so that its phases find it in the cache.
inline void ensure_data_file(session& s, const file_params& p) {
    struct stat st{};
    if (::stat(p.path.c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) == p.size) {
        s.info("file_created", "no");
    } else {
        auto slash = p.path.rfind('/');
        if (slash != std::string::npos && slash > 0) {
            std::string dir = p.path.substr(0, slash);
            if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) fail_errno("mkdir " + dir, errno);
        }
        std::string tmp = p.path + ".tmp";
        int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) fail_errno("open " + tmp, errno);
        constexpr std::size_t chunk = 8 << 20;
        std::unique_ptr<unsigned char[]> buf(new unsigned char[chunk]);
        for (std::size_t i = 0; i < chunk; ++i) buf[i] = static_cast<unsigned char>(i * 131 + 7);
        for (std::uint64_t off = 0; off < p.size; off += chunk) {
            std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, p.size - off));
            for (std::size_t b = 0; b < n; b += header_block) {
                std::uint64_t number = (off + b) / header_block;
                std::memcpy(buf.get() + b, &number, sizeof number);
            }
            for (std::size_t done = 0; done < n;) {
                ssize_t w = ::pwrite(fd, buf.get() + done, n - done, static_cast<off_t>(off + done));
                if (w < 0 && errno == EINTR) continue;
                if (w <= 0) fail_errno("write " + tmp, errno);
                done += static_cast<std::size_t>(w);
            }
        }
        if (::fsync(fd) != 0) fail_errno("fsync " + tmp, errno);
        ::close(fd);
        if (::rename(tmp.c_str(), p.path.c_str()) != 0) fail_errno("rename " + tmp, errno);
        s.info("file_created", "yes");
    }
    s.info("file", p.path);
    s.info("file_resident_pct", std::to_string(resident_percent(p)));
    // A buffered point measures the page cache: read the whole file once before the phases, so that what other
    // work on the machine evicted since the last run is back (a short warm-up would leave part of a 2 GiB file on
    // the disk, and the first repetitions would measure the disk).
    if (!p.direct()) {
        int fd = ::open(p.path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) fail_errno("open " + p.path, errno);
        constexpr std::size_t chunk = 256 << 10;  // small: the worker's peak RSS is part of the report
        std::unique_ptr<unsigned char[]> buf(new unsigned char[chunk]);
        for (std::uint64_t off = 0; off < p.size;) {
            ssize_t n = ::pread(fd, buf.get(), chunk, static_cast<off_t>(off));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) fail_errno("warm " + p.path, n < 0 ? errno : EIO);
            off += static_cast<std::uint64_t>(n);
        }
        ::close(fd);
        s.info("file_resident_pct_warmed", std::to_string(resident_percent(p)));
    }
    // The cache is never dropped: buffered points measure the page cache once the file is warm (their warm-up
    // reads it), direct points bypass it.
    s.info("page_cache_dropped", "no");
}

// Checks one completed read: all `block` bytes, and the number at its start is the block it asked for.
inline void check_read(const void* buf, long got, std::uint64_t offset, std::size_t block, const char* who) {
    if (got < 0) fail_errno(std::string(who) + ": read", static_cast<int>(-got));
    if (static_cast<std::size_t>(got) != block)
        throw bench_failure(std::string(who) + ": short read of " + std::to_string(got) + " bytes at " +
                            std::to_string(offset));
    std::uint64_t number;
    std::memcpy(&number, buf, sizeof number);
    if (number != offset / header_block)
        throw bench_failure(std::string(who) + ": block " + std::to_string(offset / header_block) + " holds " +
                            std::to_string(number));
}

// The offsets one task reads.
class offsets {
public:
    offsets(const file_params& p, std::size_t task) : block_(p.block), blocks_(p.blocks()), random_(!p.sequential) {
        state_ = 0x9e3779b97f4a7c15ull * (task + 1) | 1;
        std::uint64_t per_task = blocks_ / p.tasks;
        first_ = task * per_task;
        count_ = per_task;
        next_ = 0;
    }

    std::uint64_t next() {
        if (random_) {
            state_ ^= state_ << 13;
            state_ ^= state_ >> 7;
            state_ ^= state_ << 17;
            return (state_ % blocks_) * block_;
        }
        std::uint64_t b = first_ + next_;
        if (++next_ == count_) next_ = 0;
        return b * block_;
    }

private:
    std::size_t block_;
    std::uint64_t blocks_;
    bool random_;
    std::uint64_t state_ = 0;
    std::uint64_t first_ = 0, count_ = 0, next_ = 0;
};

// `count` buffers of `size` bytes, each 4096-aligned.
class aligned_buffers {
public:
    aligned_buffers(std::size_t count, std::size_t size) : size_(size) {
        void* p = nullptr;
        if (::posix_memalign(&p, direct_align, count * size) != 0) throw bench_failure("posix_memalign failed");
        base_ = static_cast<unsigned char*>(p);
        std::memset(base_, 0, count * size);
    }
    ~aligned_buffers() { std::free(base_); }
    aligned_buffers(const aligned_buffers&) = delete;
    aligned_buffers& operator=(const aligned_buffers&) = delete;
    unsigned char* operator[](std::size_t i) const { return base_ + i * size_; }
    unsigned char* data() const { return base_; }

private:
    std::size_t size_;
    unsigned char* base_ = nullptr;
};

// Completed reads through the phases, from one thread (an event loop): iops, and mb_per_s = iops * block / 10^6.
// The clock is read every 8 reads; the overrun is counted and timed with the phase, so the rates are exact.
class read_meter {
public:
    read_meter(session& s, std::size_t block) : clock_(s), block_(block) {}

    void start() { clock_.start(); }
    bool done() const { return clock_.done(); }

    bool tick() {
        if (clock_.done()) return false;
        if ((++ops_ & 7) != 0) return true;
        auto now = bench_clock::now();
        if (!clock_.over(now)) return true;
        double iops = static_cast<double>(ops_) / clock_.seconds(now);
        bool more = clock_.next(now, {{"mb_per_s", iops * static_cast<double>(block_) / 1e6}, {"iops", iops}}, ops_);
        ops_ = 0;
        return more;
    }

private:
    phase_clock clock_;
    std::size_t block_;
    std::uint64_t ops_ = 0;
};

// The same for reader threads: each thread counts its reads in a relaxed atomic, and the caller's thread sleeps
// through each phase and reads the counters at its ends. stop() is set once the last phase is over.
class threaded_read_meter {
public:
    threaded_read_meter(session& s, std::size_t block) : s_(s), block_(block) {}

    void count() { ops_.fetch_add(1, std::memory_order_relaxed); }
    bool stopped() const { return stop_.load(std::memory_order_relaxed); }
    void stop() { stop_.store(true, std::memory_order_relaxed); }

    // Runs every phase on the calling thread, then stops the readers.
    void run_phases() {
        for (const phase& p : s_.phases()) {
            auto t0 = bench_clock::now();
            std::uint64_t n0 = ops_.load(std::memory_order_relaxed);
            std::this_thread::sleep_for(to_duration(p.seconds));
            auto t1 = bench_clock::now();
            std::uint64_t n = ops_.load(std::memory_order_relaxed) - n0;
            double iops = static_cast<double>(n) / std::chrono::duration<double>(t1 - t0).count();
            s_.report(p, {{"mb_per_s", iops * static_cast<double>(block_) / 1e6}, {"iops", iops}});
        }
        stop();
    }

private:
    session& s_;
    std::size_t block_;
    std::atomic<std::uint64_t> ops_{0};
    std::atomic<bool> stop_{false};
};

}  // namespace tern_bench::files
