// What the Asio file readers share (io_uring configuration only: asio::random_access_file exists only there).
//
// Each task gets its own random_access_file on its own descriptor: Asio's io_uring service keeps one read in
// flight per file object (a second read on the same object waits in the object's queue until the first
// completes), so `tasks` readers on one object would measure one read at a time. The descriptors are opened with
// ::open, O_DIRECT for the direct mode (Asio's file_base flags have no O_DIRECT), and handed to the file objects.
#pragma once

#include "file_common.hpp"
#include "../asio_setup.hpp"

#if !defined(ASIO_HAS_FILE)
#error "the Asio file scenarios need Asio's io_uring configuration (ASIO_HAS_FILE)"
#endif

#include <vector>

namespace tern_bench::asio_impl {

inline std::vector<asio::random_access_file> open_task_files(asio::io_context& ctx, const files::file_params& p) {
    std::vector<asio::random_access_file> out;
    out.reserve(p.tasks);
    for (std::size_t t = 0; t < p.tasks; ++t) {
        int fd = ::open(p.path.c_str(), O_RDONLY | O_CLOEXEC | (p.direct() ? O_DIRECT : 0));
        if (fd < 0) files::fail_errno("open " + p.path, errno);
        out.emplace_back(ctx, fd);
    }
    return out;
}

}  // namespace tern_bench::asio_impl
