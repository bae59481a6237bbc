// pg/select's libpq comparators, libpq used directly (see pg_bench.hpp):
//
// raw/libpq_blocking: PQexecParams one query at a time, what most code does; `tasks` does not apply (one thread
// has one query in flight), the queries go round the `conns` connections in turn.
// raw/libpq_pipeline: the floor. Every connection in pipeline mode and non-blocking, `tasks` queries in flight
// spread over the connections (task i on connection i % conns); whenever a connection has room it sends the
// queries that fit, then one sync point and one flush; poll() waits for the sockets; each result is checked and
// its slot refilled. The same SQL and parameters as tern's: unnamed statements, parsed by the server each time.
#include "../registry.hpp"
#include "pg_bench.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <charconv>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace tern_bench::raw_impl {

namespace {

using pg_bench::op_meter;

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

}  // namespace

void pg_select_libpq_blocking(session& s) {
    pg_bench::cluster c;
    pg_bench::announce(s, c);
    const auto conns = static_cast<std::size_t>(s.param_int("conns"));
    std::vector<conn_ptr> cs;
    for (std::size_t i = 0; i < conns; ++i) cs.push_back(connect(c));
    op_meter meter(s, "queries_per_s", "client_cpu_us_per_query");
    meter.start();
    char buf[16];
    for (std::uint64_t seq = 0;; ++seq) {
        PGconn* conn = cs[seq % conns].get();
        const int sent = pg_bench::value_of(0, seq);
        const char* values[1] = {format_int(buf, sent)};
        check_result(conn, PQexecParams(conn, pg_bench::select_sql, 1, nullptr, values, nullptr, nullptr, 0), sent);
        if (!meter.tick()) break;
    }
}

void pg_select_libpq_pipeline(session& s) {
    pg_bench::cluster c;
    pg_bench::announce(s, c);
    const auto conns = static_cast<std::size_t>(s.param_int("conns"));
    const auto tasks = static_cast<std::uint64_t>(s.param_int("tasks"));
    std::vector<pipe_conn> ps(conns);
    for (std::uint64_t t = 0; t < tasks; ++t) ps[t % conns].tasks.push_back(t);
    for (auto& p : ps) {
        p.conn = connect(c);
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
            pipe_conn& p = ps[i];
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
