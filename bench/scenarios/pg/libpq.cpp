// pg/select's libpq comparators, libpq used directly (see pg_bench.hpp):
//
// raw/libpq_blocking: PQexecParams one query at a time, what most code does; `tasks` does not apply (one thread
// has one query in flight), the queries go round the `conns` connections in turn.
// raw/libpq_pipeline: the floor. Every connection in pipeline mode and non-blocking, `tasks` queries in flight
// spread over the connections (task i on connection i % conns); whenever a connection has room it sends the
// queries that fit, then one sync point and one flush; poll() waits for the sockets; each result is checked and
// its slot refilled. The same SQL and parameters as tern's: unnamed statements, parsed by the server each time.
//
// pg/insert_batch (one connection): raw/libpq_blocking, PQexecParams of each INSERT with text parameters, one at a
// time, autocommit; mode=copy, PQexec of the COPY then PQputCopyData of 64 KiB chunks (blocking mode) and
// PQputCopyEnd: the COPY floor. raw/libpq_pipeline (mode=insert only: COPY is not allowed in pipeline mode): the
// INSERT prepared once (PQprepare, the parameters typed int4, unknown, float8 as tern's statement types them), then
// in pipeline mode `tasks` PQsendQueryPrepared in flight with the numbers in binary as tern sends them, refilled
// as results come, one sync point per refill, poll().
#include "../registry.hpp"
#include "pg_bench.hpp"

#include <endian.h>
#include <libpq-fe.h>
#include <poll.h>

#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace tern_bench::raw_impl {

using pg_bench::op_meter;

namespace pg_libpq {  // this file's own (see bench/CMakeLists.txt)
namespace {

struct conn_deleter {
    void operator()(PGconn* c) const { PQfinish(c); }
};
using conn_ptr = std::unique_ptr<PGconn, conn_deleter>;

conn_ptr connect(const pg_bench::cluster& c) {
    conn_ptr conn(PQconnectdb(c.conninfo().c_str()));
    if (PQstatus(conn.get()) != CONNECTION_OK) throw bench_failure(std::string("connect: ") + PQerrorMessage(conn.get()));
    return conn;
}

// The text of v in buf (NUL-terminated).
const char* format_int(char (&buf)[16], int v) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf - 1, v);
    *end = '\0';
    return buf;
}

void check_result(PGconn* c, PGresult* r, int sent) {
    int got = -1;
    const bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0);
    if (ok) {
        const char* text = PQgetvalue(r, 0, 0);
        std::from_chars(text, text + PQgetlength(r, 0, 0), got);
    }
    PQclear(r);
    if (!ok) throw bench_failure(std::string("SELECT: ") + PQerrorMessage(c));
    if (got != sent) throw bench_failure("SELECT " + std::to_string(sent) + " answered " + std::to_string(got));
}

// One pipelined connection of raw/libpq_pipeline: its slots (one per task) and what it has in flight.
struct pipe_conn {
    conn_ptr conn;
    std::vector<std::uint64_t> tasks;     // the task ids of its slots
    std::vector<std::uint64_t> seq;       // per slot: the next iteration
    std::vector<std::size_t> order;       // the slots in flight, in the order sent (a ring)
    std::size_t head = 0, count = 0;
    std::size_t syncs = 0;                // sync points not yet consumed
    std::vector<std::size_t> idle;        // slots with no query in flight
};

void send_ready(pipe_conn& p, bool more) {
    PGconn* c = p.conn.get();
    if (!more || p.idle.empty()) return;
    char buf[16];
    while (!p.idle.empty()) {
        const std::size_t slot = p.idle.back();
        p.idle.pop_back();
        const char* values[1] = {format_int(buf, pg_bench::value_of(p.tasks[slot], p.seq[slot]))};
        if (PQsendQueryParams(c, pg_bench::select_sql, 1, nullptr, values, nullptr, nullptr, 0) != 1)
            throw bench_failure(std::string("PQsendQueryParams: ") + PQerrorMessage(c));
        p.order[(p.head + p.count++) % p.order.size()] = slot;
    }
    if (PQpipelineSync(c) != 1) throw bench_failure(std::string("PQpipelineSync: ") + PQerrorMessage(c));
    ++p.syncs;
}

// Takes every result libpq has parsed; false once the meter is done.
bool drain(pipe_conn& p, op_meter& meter, bool& more) {
    PGconn* c = p.conn.get();
    if (PQconsumeInput(c) != 1) throw bench_failure(std::string("PQconsumeInput: ") + PQerrorMessage(c));
    while ((p.count > 0 || p.syncs > 0) && PQisBusy(c) == 0) {
        PGresult* r = PQgetResult(c);
        if (r == nullptr) continue;  // the end of one query's results
        if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            --p.syncs;
            continue;
        }
        if (p.count == 0) throw bench_failure("a result no query was waiting for");
        const std::size_t slot = p.order[p.head];
        p.head = (p.head + 1) % p.order.size();
        --p.count;
        check_result(c, r, pg_bench::value_of(p.tasks[slot], p.seq[slot]));
        ++p.seq[slot];
        p.idle.push_back(slot);
        if (more && !meter.tick()) more = false;
    }
    return more;
}

void exec_ok(PGconn* c, const char* sql) {
    PGresult* r = PQexec(c, sql);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) throw bench_failure(std::string(sql) + ": " + PQerrorMessage(c));
}

void check_table(PGconn* c, std::int64_t n) {
    PGresult* r = PQexec(c, pg_bench::checksum_sql);
    const bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    const std::string got = ok ? PQgetvalue(r, 0, 0) : std::string("error: ") + PQerrorMessage(c);
    PQclear(r);
    pg_bench::check_checksum(got, n);
}

// A command's result that must say it touched `rows` rows; cleared.
void check_rows(PGconn* c, PGresult* r, std::int64_t rows) {
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK && std::strtoll(PQcmdTuples(r), nullptr, 10) == rows;
    PQclear(r);
    if (!ok) throw bench_failure(std::string("INSERT or COPY: ") + PQerrorMessage(c));
}

void copy_rows(PGconn* c, int n, std::string& chunk) {
    PGresult* r = PQexec(c, pg_bench::copy_sql);
    const bool started = PQresultStatus(r) == PGRES_COPY_IN;
    PQclear(r);
    if (!started) throw bench_failure(std::string("COPY: ") + PQerrorMessage(c));
    for (int next = 0; next < n;) {
        chunk.clear();
        pg_bench::append_copy_rows(chunk, next, n, pg_bench::copy_chunk);
        if (PQputCopyData(c, chunk.data(), static_cast<int>(chunk.size())) != 1)
            throw bench_failure(std::string("PQputCopyData: ") + PQerrorMessage(c));
    }
    if (PQputCopyEnd(c, nullptr) != 1) throw bench_failure(std::string("PQputCopyEnd: ") + PQerrorMessage(c));
    check_rows(c, PQgetResult(c), n);
    while (PGresult* more = PQgetResult(c)) PQclear(more);
}

void insert_blocking(PGconn* c, int n) {
    char id_text[16], value_text[32], name[16];
    for (int id = 0; id < n; ++id) {
        *std::to_chars(value_text, value_text + sizeof value_text - 1, pg_bench::row_value(id)).ptr = '\0';
        pg_bench::row_name(name, id);
        const char* values[3] = {format_int(id_text, id), name, value_text};
        check_rows(c, PQexecParams(c, pg_bench::insert_sql, 3, nullptr, values, nullptr, nullptr, 0), 1);
    }
}

// The pipelined INSERTs of raw/libpq_pipeline: `window` in flight, the ids in order.
class insert_pipe {
public:
    insert_pipe(PGconn* c, int n, int window) : c_(c), n_(n), window_(window) {}

    void run() {
        while (done_ < n_) {
            send_ready();
            const int flushed = PQflush(c_);
            if (flushed < 0) throw bench_failure(std::string("PQflush: ") + PQerrorMessage(c_));
            pollfd fd{PQsocket(c_), static_cast<short>(POLLIN | (flushed == 1 ? POLLOUT : 0)), 0};
            if (::poll(&fd, 1, -1) < 0 && errno != EINTR) throw bench_failure(std::string("poll: ") + std::strerror(errno));
            if (fd.revents & (POLLIN | POLLERR | POLLHUP)) drain();
        }
        while (syncs_ > 0) {  // the last sync point's result, so the connection is idle again
            pollfd fd{PQsocket(c_), POLLIN, 0};
            if (::poll(&fd, 1, -1) < 0 && errno != EINTR) throw bench_failure(std::string("poll: ") + std::strerror(errno));
            drain();
        }
    }

private:
    void send_ready() {
        if (next_ >= n_ || next_ - done_ >= window_) return;
        while (next_ < n_ && next_ - done_ < window_) {
            const int id = next_++;
            const std::uint32_t id_be = htobe32(static_cast<std::uint32_t>(id));
            const std::uint64_t value_be = htobe64(std::bit_cast<std::uint64_t>(pg_bench::row_value(id)));
            char name[16];
            pg_bench::row_name(name, id);
            const char* values[3] = {reinterpret_cast<const char*>(&id_be), name,
                                     reinterpret_cast<const char*>(&value_be)};
            static constexpr int lengths[3] = {4, 0, 8};
            static constexpr int formats[3] = {1, 0, 1};
            if (PQsendQueryPrepared(c_, "bench_insert", 3, values, lengths, formats, 0) != 1)
                throw bench_failure(std::string("PQsendQueryPrepared: ") + PQerrorMessage(c_));
        }
        if (PQpipelineSync(c_) != 1) throw bench_failure(std::string("PQpipelineSync: ") + PQerrorMessage(c_));
        ++syncs_;
    }

    void drain() {
        if (PQconsumeInput(c_) != 1) throw bench_failure(std::string("PQconsumeInput: ") + PQerrorMessage(c_));
        while ((next_ > done_ || syncs_ > 0) && PQisBusy(c_) == 0) {
            PGresult* r = PQgetResult(c_);
            if (r == nullptr) continue;  // the end of one query's results
            if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
                PQclear(r);
                --syncs_;
                continue;
            }
            if (next_ == done_) throw bench_failure("a result no INSERT was waiting for");
            check_rows(c_, r, 1);
            ++done_;
        }
    }

    PGconn* c_;
    int n_, window_;
    int next_ = 0, done_ = 0;  // INSERTs sent, and answered
    int syncs_ = 0;            // sync points not yet consumed
};

// The rounds of pg/insert_batch on c, whose table exists: insert(n) writes the rows of mode=insert.
template <class Insert>
void insert_batch_rounds(session& s, PGconn* c, Insert&& insert) {
    const int n = pg_bench::rows_of(s);
    std::string chunk;
    chunk.reserve(pg_bench::copy_chunk + 64);
    for (const phase& p : s.phases()) {
        exec_ok(c, pg_bench::truncate_sql);
        pg_bench::round_meter meter(n);
        meter.start();
        if (pg_bench::copy_mode(s))
            copy_rows(c, n, chunk);
        else
            insert(n);
        metric_values values = meter.stop();
        check_table(c, n);
        s.report(p, values);
    }
}

}  // namespace
}  // namespace pg_libpq

void pg_insert_batch_libpq_blocking(session& s) {
    pg_bench::cluster c;
    pg_bench::announce(s, c);
    pg_libpq::conn_ptr conn = pg_libpq::connect(c);
    pg_libpq::exec_ok(conn.get(), pg_bench::create_sql);
    pg_libpq::insert_batch_rounds(s, conn.get(), [&](int n) { pg_libpq::insert_blocking(conn.get(), n); });
}

void pg_insert_batch_libpq_pipeline(session& s) {
    pg_bench::cluster c;
    pg_bench::announce(s, c);
    if (pg_bench::copy_mode(s)) throw bench_failure("raw/libpq_pipeline runs mode=insert only");
    const int tasks = static_cast<int>(s.param_int("tasks"));
    pg_libpq::conn_ptr conn = pg_libpq::connect(c);
    PGconn* pc = conn.get();
    pg_libpq::exec_ok(pc, pg_bench::create_sql);
    static constexpr Oid types[3] = {23, 0, 701};  // int4, unknown, float8
    PGresult* r = PQprepare(pc, "bench_insert", pg_bench::insert_sql, 3, types);
    const bool prepared = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!prepared) throw bench_failure(std::string("PQprepare: ") + PQerrorMessage(pc));
    pg_libpq::insert_batch_rounds(s, pc, [&](int n) {
        if (PQsetnonblocking(pc, 1) != 0 || PQenterPipelineMode(pc) != 1)
            throw bench_failure(std::string("pipeline mode: ") + PQerrorMessage(pc));
        pg_libpq::insert_pipe(pc, n, tasks).run();
        if (PQexitPipelineMode(pc) != 1 || PQsetnonblocking(pc, 0) != 0)
            throw bench_failure(std::string("leaving pipeline mode: ") + PQerrorMessage(pc));
    });
}

void pg_select_libpq_blocking(session& s) {
    pg_bench::cluster c;
    pg_bench::announce(s, c);
    const auto conns = static_cast<std::size_t>(s.param_int("conns"));
    std::vector<pg_libpq::conn_ptr> cs;
    for (std::size_t i = 0; i < conns; ++i) cs.push_back(pg_libpq::connect(c));
    op_meter meter(s, "queries_per_s", "client_cpu_us_per_query");
    meter.start();
    char buf[16];
    for (std::uint64_t seq = 0;; ++seq) {
        PGconn* conn = cs[seq % conns].get();
        const int sent = pg_bench::value_of(0, seq);
        const char* values[1] = {pg_libpq::format_int(buf, sent)};
        pg_libpq::check_result(conn, PQexecParams(conn, pg_bench::select_sql, 1, nullptr, values, nullptr, nullptr, 0),
            sent);
        if (!meter.tick()) break;
    }
}

void pg_select_libpq_pipeline(session& s) {
    pg_bench::cluster c;
    pg_bench::announce(s, c);
    const auto conns = static_cast<std::size_t>(s.param_int("conns"));
    const auto tasks = static_cast<std::uint64_t>(s.param_int("tasks"));
    std::vector<pg_libpq::pipe_conn> ps(conns);
    for (std::uint64_t t = 0; t < tasks; ++t) ps[t % conns].tasks.push_back(t);
    for (auto& p : ps) {
        p.conn = pg_libpq::connect(c);
        if (PQsetnonblocking(p.conn.get(), 1) != 0 || PQenterPipelineMode(p.conn.get()) != 1)
            throw bench_failure(std::string("pipeline mode: ") + PQerrorMessage(p.conn.get()));
        p.seq.assign(p.tasks.size(), 0);
        p.order.assign(std::max<std::size_t>(p.tasks.size(), 1), 0);
        for (std::size_t i = p.tasks.size(); i > 0; --i) p.idle.push_back(i - 1);
    }
    std::vector<pollfd> fds(conns);
    op_meter meter(s, "queries_per_s", "client_cpu_us_per_query");
    meter.start();
    bool more = true;
    for (;;) {
        bool pending = false;
        for (std::size_t i = 0; i < conns; ++i) {
            pg_libpq::pipe_conn& p = ps[i];
            send_ready(p, more);
            const int flushed = PQflush(p.conn.get());
            if (flushed < 0) throw bench_failure(std::string("PQflush: ") + PQerrorMessage(p.conn.get()));
            fds[i] = {PQsocket(p.conn.get()), static_cast<short>(POLLIN | (flushed == 1 ? POLLOUT : 0)), 0};
            pending = pending || p.count > 0 || p.syncs > 0;
        }
        if (!pending) break;
        if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR)
            throw bench_failure(std::string("poll: ") + std::strerror(errno));
        for (std::size_t i = 0; i < conns; ++i)
            if (fds[i].revents & (POLLIN | POLLERR | POLLHUP)) more = drain(ps[i], meter, more);
    }
}

}  // namespace tern_bench::raw_impl
