// files/random_read and files/sequential_read for asio/coroutines (io_uring configuration): `tasks` coroutines
// (co_spawn), each with its own random_access_file and buffer, looping co_await async_read_some_at(use_awaitable).
#include "asio_common.hpp"
#include "../registry.hpp"

namespace tern_bench::asio_impl {

namespace files_asio_coroutines {  // this file's own (see bench/CMakeLists.txt)
namespace {

asio::awaitable<void> reader(asio::random_access_file& file, const files::file_params& p, std::size_t task,
                             unsigned char* buf, files::read_meter& meter) {
    files::offsets next(p, task);
    do {
        std::uint64_t at = next.next();
        std::size_t n = co_await file.async_read_some_at(at, asio::buffer(buf, p.block), asio::use_awaitable);
        files::check_read(buf, static_cast<long>(n), at, p.block, "asio/coroutines");
    } while (meter.tick());
}

}  // namespace
}  // namespace files_asio_coroutines

void files_read_coroutines(session& s) {
    announce(s);
    files::file_params p = files::params_of(s);
    if (p.mode != "buffered" && p.mode != "direct") throw bench_failure("asio reads in buffered or direct mode");
    files::ensure_data_file(s, p);
    asio::io_context ctx(concurrency_hint);
    auto task_files = open_task_files(ctx, p);
    files::aligned_buffers bufs(p.tasks, p.block);
    files::read_meter meter(s, p.block);
    meter.start();
    for (std::size_t t = 0; t < p.tasks; ++t)
        asio::co_spawn(ctx, files_asio_coroutines::reader(task_files[t], p, t, bufs[t], meter), rethrow{});
    ctx.run();
    if (!meter.done()) throw bench_failure("the readers ended before the last phase");
}

}  // namespace tern_bench::asio_impl
