// files/random_read and files/sequential_read for the raw baselines:
//   raw/liburing: one ring (SINGLE_ISSUER|DEFER_TASKRUN), `tasks` reads kept in flight; each turn reaps every
//                 completion, checks it, queues that slot's next read, and one io_uring_submit_and_wait submits
//                 the batch. mode=direct_registered: the file in the ring's file table and one registered buffer
//                 per slot (READ_FIXED on a fixed file).
//   raw/pread:    `tasks` threads each in a synchronous pread loop (unpinned, like everything in these scenarios).
//   raw/libaio:   O_DIRECT only; `tasks` iocbs in flight, io_getevents for at least one, io_submit of the
//                 refilled ones in one call.
#include "file_common.hpp"
#include "../registry.hpp"

#include <libaio.h>
#include <liburing.h>
#include <sys/uio.h>

#include <thread>
#include <vector>

namespace tern_bench::raw_impl {

using files::file_params;

namespace files_raw {  // this file's own (see bench/CMakeLists.txt)
namespace {

struct file_fd {
    int fd = -1;
    explicit file_fd(const file_params& p) {
        fd = ::open(p.path.c_str(), O_RDONLY | O_CLOEXEC | (p.direct() ? O_DIRECT : 0));
        if (fd < 0) files::fail_errno("open " + p.path, errno);
    }
    ~file_fd() { ::close(fd); }
};

void uring_read(session& s, const file_params& p) {
    file_fd f(p);
    io_uring ring;
    io_uring_params params{};
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    unsigned entries = 1;
    while (entries < p.tasks) entries <<= 1;
    int rc = io_uring_queue_init_params(entries, &ring, &params);
    if (rc < 0) files::fail_errno("io_uring_queue_init_params", -rc);
    struct ring_exit {
        io_uring* r;
        ~ring_exit() { io_uring_queue_exit(r); }
    } exit_guard{&ring};

    files::aligned_buffers bufs(p.tasks, p.block);
    bool fixed = p.registered();
    if (fixed) {
        rc = io_uring_register_files(&ring, &f.fd, 1);
        if (rc < 0) files::fail_errno("io_uring_register_files", -rc);
        std::vector<iovec> iov(p.tasks);
        for (std::size_t t = 0; t < p.tasks; ++t) iov[t] = {bufs[t], p.block};
        rc = io_uring_register_buffers(&ring, iov.data(), static_cast<unsigned>(iov.size()));
        if (rc < 0) files::fail_errno("io_uring_register_buffers (tasks x block pinned bytes; RLIMIT_MEMLOCK)", -rc);
    }
    std::vector<files::offsets> next;
    std::vector<std::uint64_t> at(p.tasks);
    for (std::size_t t = 0; t < p.tasks; ++t) next.emplace_back(p, t);
    auto queue = [&](std::size_t t) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        if (!sqe) throw bench_failure("submission queue full");
        at[t] = next[t].next();
        if (fixed) {
            io_uring_prep_read_fixed(sqe, 0, bufs[t], static_cast<unsigned>(p.block), at[t], static_cast<int>(t));
            sqe->flags |= IOSQE_FIXED_FILE;
        } else {
            io_uring_prep_read(sqe, f.fd, bufs[t], static_cast<unsigned>(p.block), at[t]);
        }
        io_uring_sqe_set_data64(sqe, t);
    };

    files::read_meter meter(s, p.block);
    meter.start();
    for (std::size_t t = 0; t < p.tasks; ++t) queue(t);
    std::size_t in_flight = p.tasks;
    bool stop = false;
    while (in_flight > 0) {
        rc = io_uring_submit_and_wait(&ring, 1);
        if (rc < 0 && rc != -EINTR) files::fail_errno("io_uring_submit_and_wait", -rc);
        io_uring_cqe* cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            ++seen;
            auto t = static_cast<std::size_t>(cqe->user_data);
            files::check_read(bufs[t], cqe->res, at[t], p.block, "raw/liburing");
            --in_flight;
            if (!stop && !meter.tick()) stop = true;
            if (!stop) {
                queue(t);
                ++in_flight;
            }
        }
        io_uring_cq_advance(&ring, seen);
    }
    if (!meter.done()) throw bench_failure("the reads ended before the last phase");
}

void pread_read(session& s, const file_params& p) {
    file_fd f(p);
    files::aligned_buffers bufs(p.tasks, p.block);
    files::threaded_read_meter meter(s, p.block);
    std::vector<std::exception_ptr> errors(p.tasks);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < p.tasks; ++t)
        threads.emplace_back([&, t] {
            try {
                files::offsets next(p, t);
                while (!meter.stopped()) {
                    std::uint64_t off = next.next();
                    ssize_t n = ::pread(f.fd, bufs[t], p.block, static_cast<off_t>(off));
                    files::check_read(bufs[t], n < 0 ? -errno : n, off, p.block, "raw/pread");
                    meter.count();
                }
            } catch (...) {
                errors[t] = std::current_exception();
            }
        });
    std::exception_ptr phases_error;
    try {
        meter.run_phases();
    } catch (...) {
        phases_error = std::current_exception();
    }
    meter.stop();
    for (auto& th : threads) th.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
    if (phases_error) std::rethrow_exception(phases_error);
}

void libaio_read(session& s, const file_params& p) {
    if (p.mode != "direct") throw bench_failure("raw/libaio reads O_DIRECT files only (mode=direct)");
    file_fd f(p);
    io_context_t aio{};
    int rc = io_setup(static_cast<int>(p.tasks), &aio);
    if (rc < 0) files::fail_errno("io_setup", -rc);
    struct aio_exit {
        io_context_t c;
        ~aio_exit() { io_destroy(c); }
    } exit_guard{aio};

    files::aligned_buffers bufs(p.tasks, p.block);
    std::vector<iocb> cbs(p.tasks);
    std::vector<iocb*> to_submit;
    to_submit.reserve(p.tasks);
    std::vector<::io_event> events(p.tasks);  // libaio's, not tern_bench::io_event (a unity batch may hold it)
    std::vector<files::offsets> next;
    for (std::size_t t = 0; t < p.tasks; ++t) next.emplace_back(p, t);
    auto queue = [&](std::size_t t) {
        io_prep_pread(&cbs[t], f.fd, bufs[t], p.block, static_cast<long long>(next[t].next()));
        cbs[t].data = reinterpret_cast<void*>(t);
        to_submit.push_back(&cbs[t]);
    };
    auto submit = [&] {
        std::size_t done = 0;
        while (done < to_submit.size()) {
            int n = io_submit(aio, static_cast<long>(to_submit.size() - done), to_submit.data() + done);
            if (n == -EINTR || n == -EAGAIN) continue;
            if (n <= 0) files::fail_errno("io_submit", -n);
            done += static_cast<std::size_t>(n);
        }
        to_submit.clear();
    };

    files::read_meter meter(s, p.block);
    meter.start();
    for (std::size_t t = 0; t < p.tasks; ++t) queue(t);
    submit();
    std::size_t in_flight = p.tasks;
    bool stop = false;
    while (in_flight > 0) {
        int n = io_getevents(aio, 1, static_cast<long>(events.size()), events.data(), nullptr);
        if (n == -EINTR) continue;
        if (n < 0) files::fail_errno("io_getevents", -n);
        for (int i = 0; i < n; ++i) {
            auto t = reinterpret_cast<std::size_t>(events[static_cast<std::size_t>(i)].data);
            auto res = static_cast<long>(events[static_cast<std::size_t>(i)].res);
            files::check_read(bufs[t], res, static_cast<std::uint64_t>(cbs[t].u.c.offset), p.block, "raw/libaio");
            --in_flight;
            if (!stop && !meter.tick()) stop = true;
            if (!stop) {
                queue(t);
                ++in_flight;
            }
        }
        if (!to_submit.empty()) submit();
    }
    if (!meter.done()) throw bench_failure("the reads ended before the last phase");
}

}  // namespace
}  // namespace files_raw

void files_read_liburing(session& s) {
    file_params p = files::params_of(s);
    files::ensure_data_file(s, p);
    files_raw::uring_read(s, p);
}

void files_read_pread(session& s) {
    file_params p = files::params_of(s);
    files::ensure_data_file(s, p);
    files_raw::pread_read(s, p);
}

void files_read_libaio(session& s) {
    file_params p = files::params_of(s);
    files::ensure_data_file(s, p);
    files_raw::libaio_read(s, p);
}

}  // namespace tern_bench::raw_impl
