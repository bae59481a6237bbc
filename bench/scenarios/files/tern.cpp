// files/random_read and files/sequential_read for tern: one io_context, the data file opened with
// fs::file::open (O_DIRECT for the direct modes), and `tasks` spawned tasks each looping read_at into its own
// 4096-aligned buffer and checking what it got. On io_uring each read is one SQE; on epoll each goes through the
// blocking pool (that is tern's design for files there). mode=direct_registered (io_uring only) registers the file
// (register_file) and reads into a registered buffer per task (READ_FIXED).
#include "file_common.hpp"
#include "../tern_setup.hpp"
#include "../registry.hpp"

#include <vector>

namespace tern_bench::tern_impl {

using files::file_params;

namespace files_tern {  // this file's own (see bench/CMakeLists.txt)
namespace {

tern::task<void> reader(tern::fs::file& f, const file_params& p, std::size_t task, unsigned char* buf,
                        const tern::fs::registered_buffer* reg, files::read_meter& meter) {
    files::offsets next(p, task);
    do {
        std::uint64_t off = next.next();
        auto [ec, n] = reg ? co_await f.read_at(*reg, off) : co_await f.read_at(tern::mutable_buffer(buf, p.block), off);
        if (ec) throw bench_failure("read_at: " + ec.message());
        files::check_read(reg ? static_cast<const void*>(reg->data()) : buf, static_cast<long>(n), off, p.block,
                          "reader");
    } while (meter.tick());
}

tern::task<void> run_files(tern::io_context& ctx, session& s, const file_params& p) {
    // Made before the first read: a buffer's memory is never allocated inside a phase.
    tern::fs::open_options opts;
    opts.direct = p.direct();
    auto [ec, f] = co_await tern::fs::file::open(ctx, p.path, opts);
    expect_ok(ec, "open the data file");
    files::aligned_buffers bufs(p.tasks, p.block);
    tern::fs::registered_buffers regs;
    if (p.registered()) {
        expect_ok(f.register_file(), "register_file");
        auto [rec, r] = tern::fs::registered_buffers::create(ctx, p.tasks, p.block, files::direct_align);
        // Pinned pages count against RLIMIT_MEMLOCK unless the worker has CAP_IPC_LOCK (root).
        expect_ok(rec, "registered_buffers::create (tasks x block pinned bytes; RLIMIT_MEMLOCK)");
        regs = std::move(r);
        s.info("file_registered", f.is_registered() ? "yes" : "no");
    }
    files::read_meter meter(s, p.block);
    meter.start();
    std::vector<tern::fs::registered_buffer> slots(p.tasks);
    if (p.registered())
        for (std::size_t t = 0; t < p.tasks; ++t) slots[t] = regs[t];
    std::vector<tern::join_handle<void>> tasks;
    tasks.reserve(p.tasks);
    for (std::size_t t = 0; t < p.tasks; ++t)
        tasks.push_back(
            tern::spawn(ctx, reader(f, p, t, bufs[t], p.registered() ? &slots[t] : nullptr, meter)));
    for (auto& h : tasks) co_await std::move(h);
    if (!meter.done()) throw bench_failure("the readers ended before the last phase");
}

}  // namespace
}  // namespace files_tern

void files_read(session& s) {
    file_params p = files::params_of(s);
    if (p.registered() && requested_backend(s) != tern::backend_kind::io_uring)
        throw bench_failure("mode=direct_registered is an io_uring mode");
    files::ensure_data_file(s, p);
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ctx.block_on(files_tern::run_files(ctx, s, p));
}

}  // namespace tern_bench::tern_impl
