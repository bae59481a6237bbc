// The work of sockets/io_event (libev's benchmark, as evpp ran it against Asio), shared by every implementation
// so that only the event delivery differs: the socketpairs, the writes, the count and the checks live here; an
// implementation keeps a 1-byte read pending on every read end and calls on_read() for each byte it gets.
//
// `pairs` AF_UNIX stream socketpairs, 100 of them active (libev's num_active). An iteration:
//   start_iteration(): one byte to each of 100 evenly spaced pairs;
//   on_read(i, b):     checks that b is pair i's tag, counts it, and while writes remain (`pairs` of them per
//                      iteration, libev's num_writes = num_pipes) sends one byte to pair i+1;
//   the iteration is over when every byte sent has been read (on_read returns true for that last read).
// The writes are plain send(2) calls on the write ends, as libev's callback makes them; the read ends belong to the
// implementation's loop. libev's "whole iteration" time also re-adds all n watchers each time; a coroutine reader
// keeps its read pending from one iteration to the next, so what is timed here is libev's loop time.
#pragma once

#include "../../harness/worker.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace tern_bench::io_event {

inline constexpr std::size_t num_active = 100;

class chain {
public:
    explicit chain(std::size_t pairs) : read_(pairs, -1), write_(pairs, -1) {
        if (pairs == 0) throw bench_failure("io_event needs at least one pair");
        for (std::size_t i = 0; i < pairs; ++i) {
            int fds[2];
            if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
                throw bench_failure(std::string("socketpair: ") + std::strerror(errno));
            read_[i] = fds[0];
            write_[i] = fds[1];
        }
    }
    chain(const chain&) = delete;
    chain& operator=(const chain&) = delete;
    ~chain() {
        for (int fd : read_)
            if (fd >= 0) ::close(fd);
        close_write_ends();
    }

    std::size_t size() const { return read_.size(); }

    // Hands pair i's read end to the caller, which closes it from then on; made non-blocking if asked.
    int take_read_end(std::size_t i, bool nonblocking) {
        int fd = read_[i];
        read_[i] = -1;
        if (nonblocking && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
            throw bench_failure(std::string("fcntl(O_NONBLOCK): ") + std::strerror(errno));
        return fd;
    }

    void start_iteration() {
        count_ = 0;
        fired_ = 0;
        writes_ = size();
        std::size_t active = size() < num_active ? size() : num_active;
        std::size_t space = size() / active;
        for (std::size_t i = 0; i < active; ++i, ++fired_) send_to(i * space);
    }

    // Pair i read byte b. Returns true when it was the last byte of the iteration.
    bool on_read(std::size_t i, unsigned char b) {
        if (b != tag(i)) throw bench_failure("pair " + std::to_string(i) + " read a byte meant for another pair");
        ++count_;
        if (writes_ > 0) {
            send_to(i + 1 == size() ? 0 : i + 1);
            --writes_;
            ++fired_;
        }
        if (count_ > fired_) throw bench_failure("more bytes read than sent");
        return count_ == fired_;
    }

    // Ends the run: every read end then reads end of stream.
    void close_write_ends() {
        for (int& fd : write_)
            if (fd >= 0) ::close(std::exchange(fd, -1));
    }

private:
    static unsigned char tag(std::size_t i) { return static_cast<unsigned char>(i * 131 + 7); }

    void send_to(std::size_t i) {
        unsigned char b = tag(i);
        if (::send(write_[i], &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1)
            throw bench_failure(std::string("send: ") + std::strerror(errno));
    }

    std::vector<int> read_;
    std::vector<int> write_;
    std::size_t count_ = 0;
    std::size_t fired_ = 0;
    std::size_t writes_ = 0;
};

}  // namespace tern_bench::io_event
