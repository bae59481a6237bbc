// files/random_read and files/sequential_read for asio/callbacks (io_uring configuration): `tasks` readers, each
// with its own random_access_file and buffer; each completion handler checks the read and starts the next
// async_read_some_at.
#include "asio_common.hpp"
#include "../registry.hpp"

namespace tern_bench::asio_impl {

namespace files_asio_callbacks {  // this file's own (see bench/CMakeLists.txt)
namespace {

struct reader {
    asio::random_access_file& file;
    const files::file_params& p;
    files::offsets next;
    unsigned char* buf;
    files::read_meter& meter;
    std::uint64_t at = 0;

    void start() {
        at = next.next();
        file.async_read_some_at(at, asio::buffer(buf, p.block), [this](const asio::error_code& ec, std::size_t n) {
            expect_ok(ec, "async_read_some_at");
            files::check_read(buf, static_cast<long>(n), at, p.block, "asio/callbacks");
            if (meter.tick()) start();
        });
    }
};

}  // namespace
}  // namespace files_asio_callbacks

void files_read_callbacks(session& s) {
    announce(s);
    files::file_params p = files::params_of(s);
    if (p.mode != "buffered" && p.mode != "direct") throw bench_failure("asio reads in buffered or direct mode");
    files::ensure_data_file(s, p);
    asio::io_context ctx(concurrency_hint);
    auto task_files = open_task_files(ctx, p);
    files::aligned_buffers bufs(p.tasks, p.block);
    files::read_meter meter(s, p.block);
    std::vector<files_asio_callbacks::reader> readers;
    readers.reserve(p.tasks);
    for (std::size_t t = 0; t < p.tasks; ++t) readers.push_back({task_files[t], p, files::offsets(p, t), bufs[t], meter});
    meter.start();
    for (auto& r : readers) r.start();
    ctx.run();
    if (!meter.done()) throw bench_failure("the readers ended before the last phase");
}

}  // namespace tern_bench::asio_impl
