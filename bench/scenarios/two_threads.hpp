// The two-thread shape of the socket scenarios whose client and server run on separate loops: the client's thread
// pinned to CPU 0, the server's to CPU 1, for every implementation. The orchestrator does not pin these workers
// (catalogue: single_thread = false); each thread pins itself here before it runs its loop.
//
// A failure on one side (a corrupted byte, an I/O error) must not leave the other side waiting forever for a peer
// that is gone: run_pinned_pair then calls stop_both(), which stops both loops (stop() is callable from any
// thread in tern and in Asio), joins both threads, and rethrows the first failure.
#pragma once

#include "../harness/worker.hpp"

#include <exception>
#include <mutex>
#include <thread>

namespace tern_bench {

inline constexpr int client_cpu = 0;
inline constexpr int server_cpu = 1;

// Pins the calling thread for a one-thread run of a scenario that the orchestrator leaves unpinned.
inline void pin_single_thread(session& s) {
    pin_to_cpu(client_cpu);
    s.info("pinning", "one thread on CPU 0");
}

template <class Client, class Server, class Stop>
void run_pinned_pair(session& s, Client&& client, Server&& server, Stop&& stop_both) {
    s.info("pinning", "client loop on CPU 0, server loop on CPU 1");
    std::mutex m;
    std::exception_ptr first;
    auto guarded = [&](int cpu, auto& body) {
        try {
            pin_to_cpu(cpu);
            body();
        } catch (...) {
            {
                std::lock_guard lock(m);
                if (!first) first = std::current_exception();
            }
            stop_both();
        }
    };
    std::thread server_thread([&] { guarded(server_cpu, server); });
    guarded(client_cpu, client);
    server_thread.join();
    if (first) std::rethrow_exception(first);
}

}  // namespace tern_bench
