// sockets/io_event for raw/epoll: the floor of readiness dispatch, libev's loop without libev. Every read end is
// registered once (level-triggered EPOLLIN); each turn makes one epoll_wait for up to 1024 events and, for each,
// one recv of 1 byte and the chain's step (io_event_chain.hpp), exactly what libev's callback does.
#include "io_event_chain.hpp"
#include "raw_common.hpp"
#include "../../harness/traffic.hpp"
#include "../registry.hpp"

#include <sys/epoll.h>

#include <vector>

namespace tern_bench::raw_impl {

void sockets_io_event_epoll(session& s) {
    auto pairs = static_cast<std::size_t>(s.param_int("pairs"));
    io_event::chain chain(pairs);
    fd_owner ep(::epoll_create1(EPOLL_CLOEXEC));
    if (ep.fd < 0) fail_errno("epoll_create1", errno);
    std::vector<fd_owner> readers;
    readers.reserve(pairs);
    for (std::size_t i = 0; i < pairs; ++i) {
        readers.emplace_back(chain.take_read_end(i, true));
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = i;
        if (::epoll_ctl(ep.fd, EPOLL_CTL_ADD, readers.back().fd, &ev) != 0) fail_errno("epoll_ctl", errno);
    }
    iteration_meter meter(s, "us_per_iter");
    meter.start();
    chain.start_iteration();
    std::size_t open = pairs;
    std::vector<epoll_event> events(1024);
    while (open > 0) {
        int n = ::epoll_wait(ep.fd, events.data(), static_cast<int>(events.size()), -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail_errno("epoll_wait", errno);
        }
        for (int k = 0; k < n; ++k) {
            auto i = static_cast<std::size_t>(events[k].data.u64);
            unsigned char b;
            ssize_t r = ::recv(readers[i].fd, &b, 1, 0);
            if (r < 0) {
                if (errno == EAGAIN) continue;
                fail_errno("recv", errno);
            }
            if (r == 0) {  // the run is over and the write end is closed
                if (::epoll_ctl(ep.fd, EPOLL_CTL_DEL, readers[i].fd, nullptr) != 0) fail_errno("epoll_ctl", errno);
                --open;
                continue;
            }
            if (chain.on_read(i, b)) {
                if (meter.finished_one())
                    chain.start_iteration();
                else
                    chain.close_write_ends();
            }
        }
    }
    if (!meter.done()) throw bench_failure("the loop ended before the last phase");
}

}  // namespace tern_bench::raw_impl
