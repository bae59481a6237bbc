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
//
// pg/insert_batch: n rows of the table bench_rows (id int, name text, value float8; no index), row i being
// (i, 'row-i', i + 0.25), written in each round by INSERTs (mode=insert) or by one COPY FROM STDIN in the text
// format (mode=copy). A round is timed from its first row sent to the server's acknowledgement of the last one
// (the last INSERT's result, the COPY's end or the transaction's COMMIT); before it, outside the timing, the table
// is emptied (TRUNCATE), and after it every implementation checks with one query that the table holds exactly
// those rows (count, sum of ids, sum of 4 x value, rows whose name matches their id). rows_per_s is n over the
// round's time; client_cpu_us_per_row the worker's CPU time over the round, per row.
#pragma once

#include "../redis/redis_bench.hpp"

#include <charconv>
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

// ---- pg/insert_batch ----

constexpr const char* create_sql = "CREATE TABLE bench_rows (id int NOT NULL, name text NOT NULL, value float8 NOT NULL)";
constexpr const char* truncate_sql = "TRUNCATE bench_rows";
constexpr const char* insert_sql = "INSERT INTO bench_rows (id, name, value) VALUES ($1, $2, $3)";
constexpr const char* copy_sql = "COPY bench_rows (id, name, value) FROM STDIN";
// One text field: "count sum(id) sum(4 x value) named", compared with expected_checksum(n).
constexpr const char* checksum_sql =
    "SELECT format('%s %s %s %s', count(*), coalesce(sum(id), 0), coalesce(sum(value * 4), 0)::int8, "
    "count(*) FILTER (WHERE name = 'row-' || id)) FROM bench_rows";

inline std::string expected_checksum(std::int64_t n) {
    const std::int64_t ids = n * (n - 1) / 2;
    return std::to_string(n) + " " + std::to_string(ids) + " " + std::to_string(4 * ids + n) + " " + std::to_string(n);
}

inline double row_value(int id) { return id + 0.25; }

// Row id's name ("row-<id>") into buf; its length.
inline std::size_t row_name(char (&buf)[16], int id) {
    buf[0] = 'r', buf[1] = 'o', buf[2] = 'w', buf[3] = '-';
    auto [end, ec] = std::to_chars(buf + 4, buf + sizeof buf - 1, id);
    *end = '\0';
    return static_cast<std::size_t>(end - buf);
}

// Appends the COPY text lines of rows [next, n) to out until it holds at least `chunk` bytes; advances next.
void append_copy_rows(std::string& out, int& next, int n, std::size_t chunk);
constexpr std::size_t copy_chunk = 64 * 1024;

// The rows of one round (the parameter n) and whether they go by INSERTs (mode=insert) or by COPY (mode=copy).
int rows_of(const session& s);
bool copy_mode(const session& s);
// Throws unless the checksum query's answer says the table holds rows 0 .. n-1 exactly.
void check_checksum(std::string_view got, std::int64_t n);

// A round's timing: start() before the first row, stop() after the server acknowledged the last; the metrics.
class round_meter {
public:
    explicit round_meter(std::int64_t rows) : rows_(static_cast<double>(rows)) {}
    void start() {
        cpu0_ = redis_bench::process_cpu_seconds();
        t0_ = bench_clock::now();
    }
    metric_values stop() const {
        const double secs = std::chrono::duration<double>(bench_clock::now() - t0_).count();
        const double cpu = redis_bench::process_cpu_seconds() - cpu0_;
        return {{"rows_per_s", rows_ / secs}, {"client_cpu_us_per_row", cpu * 1e6 / rows_}};
    }

private:
    double rows_;
    double cpu0_ = 0;
    bench_clock::time_point t0_{};
};

}  // namespace tern_bench::pg_bench
