// What every pg/* implementation shares: the PostgreSQL cluster it runs against and the meter of redis/*.
//
// The worker (pinned to CPU 0 by the orchestrator) makes a throwaway cluster in a temporary directory with Debian's
// initdb and pg_ctl (the newest /usr/lib/postgresql/<version>/bin), listening on a Unix socket in that directory
// only, fsync off, and starts it pinned to CPU 1 (the postmaster and every backend inherit the affinity); the
// destructor stops it and removes the directory. A root worker runs the server's commands as the postgres user
// (initdb refuses root). No libpq here: the tern worker links only what tern::pg links.
//
// pg/select: `tasks` loops spread over `conns` connections, each running SELECT $1::int with a number of its own
// and checking that the value returned is the one sent. queries_per_s counts the queries; client_cpu_us_per_query
// is the worker process's CPU time (getrusage: user + system; the server is other processes) over the phase, per
// query.
#pragma once

#include "../redis/redis_bench.hpp"

#include <string>

namespace tern_bench::pg_bench {

constexpr int client_cpu = 0;
constexpr int server_cpu = 1;
constexpr const char* select_sql = "SELECT $1::int";

class cluster {
public:
    cluster();
    ~cluster();
    cluster(const cluster&) = delete;
    cluster& operator=(const cluster&) = delete;

    // A libpq connection string for the superuser over the Unix socket.
    std::string conninfo() const { return "host=" + dir_ + " port=" + std::to_string(port_) + " user=bench dbname=postgres"; }

private:
    std::string dir_;
    std::string bin_;
    int port_ = 5432;
    bool started_ = false;
};

// Reports which server the run used and where everything is pinned.
void announce(session& s, const cluster& c);

// The number task `task` sends in iteration `seq`: distinct across tasks, fits an int.
inline int value_of(std::uint64_t task, std::uint64_t seq) {
    return static_cast<int>((task * 1'000'003 + seq) % 2'000'000'000);
}

using redis_bench::op_meter;

}  // namespace tern_bench::pg_bench
