// file_copy: copies a file with several reads and writes in flight, optionally with direct I/O.
//
//   file_copy SOURCE DESTINATION [--direct] [--block BYTES] [--in-flight N]
//
// N tasks (default 8) take the next block of the file (default 1 MiB) in turn, read it at its offset and write it
// at the same offset; progress goes to stderr. With --direct both files are opened with O_DIRECT and the buffers
// come from fs::aligned_buffer; the destination is then trimmed to the source's size, since direct writes are
// whole blocks. On io_uring every read and write is an SQE of one ring; on epoll they run on the blocking pool.
#include <tern/tern.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace fs = tern::fs;
using namespace std::chrono_literals;

namespace {

struct copy_job {
  fs::file& source;
  fs::file& destination;
  std::uint64_t size;
  std::size_t block;
  bool direct;
  std::uint64_t next = 0;    // the next offset to take
  std::uint64_t copied = 0;  // bytes written so far
};

tern::task<std::error_code> copier(copy_job& job) {
  fs::aligned_buffer buffer(job.block);
  while (job.next < job.size) {
    const std::uint64_t offset = job.next;
    job.next += job.block;
    const std::uint64_t left = job.size - offset;
    // Direct I/O moves whole blocks: the last one is read whole (the file ends inside it), and written whole.
    const std::size_t want = left < job.block && !job.direct ? static_cast<std::size_t>(left) : job.block;
    auto [rec, n] = co_await job.source.read_exact_at(tern::mutable_buffer(buffer.data(), want), offset);
    if (rec && !(rec == tern::error::eof && n == left)) co_return rec;
    const std::size_t out = job.direct ? (n + 4095) / 4096 * 4096 : n;
    auto [wec, w] = co_await job.destination.write_all_at(tern::const_buffer(buffer.data(), out), offset);
    if (wec) co_return wec;
    job.copied += n;
    (void)w;
  }
  co_return std::error_code{};
}

tern::task<int> copy(std::string from, std::string to, bool direct, std::size_t block, int in_flight) {
  tern::io_context& ctx = *tern::io_context::current();
  fs::open_options in;
  in.direct = direct;
  auto [sec, source] = co_await fs::file::open(ctx, from, in);
  if (sec) {
    std::fprintf(stderr, "%s: %s\n", from.c_str(), sec.message().c_str());
    co_return 1;
  }
  auto [stec, status] = co_await source.stat();
  if (stec) {
    std::fprintf(stderr, "%s: %s\n", from.c_str(), stec.message().c_str());
    co_return 1;
  }
  fs::open_options out;
  out.access = fs::open_options::write_only;
  out.create = out.truncate = true;
  out.direct = direct;
  auto [dec, destination] = co_await fs::file::open(ctx, to, out);
  if (dec) {
    std::fprintf(stderr, "%s: %s\n", to.c_str(), dec.message().c_str());
    co_return 1;
  }

  copy_job job{source, destination, status.size, block, direct};
  std::error_code failure;
  co_await tern::task_group::run([&](tern::task_group& g) -> tern::task<> {
    for (int i = 0; i < in_flight; ++i) {
      g.spawn([&job, &failure]() -> tern::task<> {
        if (std::error_code ec = co_await copier(job); ec && !failure) failure = ec;
      });
    }
    while (job.copied < job.size && !failure && g.size() != 0) {
      std::fprintf(stderr, "\r%llu / %llu bytes", static_cast<unsigned long long>(job.copied),
                   static_cast<unsigned long long>(job.size));
      (void)co_await tern::sleep_for(100ms);
    }
  });
  std::fprintf(stderr, "\r%llu / %llu bytes\n", static_cast<unsigned long long>(job.copied),
               static_cast<unsigned long long>(job.size));
  if (failure) {
    std::fprintf(stderr, "copy: %s\n", failure.message().c_str());
    co_return 1;
  }
  if (direct) {
    if (std::error_code ec = co_await destination.truncate(status.size)) {
      std::fprintf(stderr, "%s: %s\n", to.c_str(), ec.message().c_str());
      co_return 1;
    }
  }
  if (std::error_code ec = co_await destination.sync_data()) {
    std::fprintf(stderr, "%s: %s\n", to.c_str(), ec.message().c_str());
    co_return 1;
  }
  co_return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SOURCE DESTINATION [--direct] [--block BYTES] [--in-flight N]\n", argv[0]);
    return 2;
  }
  bool direct = false;
  std::size_t block = 1 << 20;
  int in_flight = 8;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--direct") == 0) {
      direct = true;
    } else if (std::strcmp(argv[i], "--block") == 0 && i + 1 < argc) {
      block = static_cast<std::size_t>(std::strtoull(argv[++i], nullptr, 10));
    } else if (std::strcmp(argv[i], "--in-flight") == 0 && i + 1 < argc) {
      in_flight = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (block == 0 || block % 4096 != 0 || in_flight < 1) {
    std::fprintf(stderr, "--block must be a positive multiple of 4096, --in-flight at least 1\n");
    return 2;
  }
  return tern::run(copy(argv[1], argv[2], direct, block, in_flight));
}
