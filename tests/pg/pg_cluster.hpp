// A PostgreSQL cluster of the tests' own: Debian's postgresql (initdb, pg_ctl from /usr/lib/postgresql/<v>/bin),
// in a directory of its own, listening on a Unix socket in that directory and on a free TCP port of 127.0.0.1,
// with TLS on (a self-signed certificate for localhost and 127.0.0.1, made with the openssl command).
//
// initdb refuses to run as root, so a root process runs the server's commands as the postgres user (which
// Debian's postgresql package creates) through setpriv; any other user runs them as itself. fsync and friends are
// off: the data is thrown away with the directory.
//
// Roles: tern (the superuser, trusted on the socket and on TCP), tern_pw (SCRAM password "secret" over TCP),
// tern_tls (TCP only with TLS: refused without it).
//
// One cluster serves a whole test executable (and, under ctest, every test process of it: a fixture starts it
// and stops it, see tests/CMakeLists.txt); the tests stay independent by using tables of their own. A test that
// restarts its server (the pool's recovery) clones the cluster's pristine copy instead, in a second directory,
// which costs a copy rather than an initdb.
#pragma once

#include <libpq-fe.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tern_test::pg {

// The directory of the server's programs: the newest /usr/lib/postgresql/<version>/bin with initdb in it.
inline std::string server_bin_dir() {
  std::string best;
  int best_version = -1;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string v = e.path().filename().string();
    const int version = std::atoi(v.c_str());
    if (std::filesystem::exists(e.path() / "bin" / "initdb") && version > best_version) {
      best_version = version;
      best = (e.path() / "bin").string();
    }
  }
  if (best.empty()) throw std::runtime_error("no PostgreSQL server found under /usr/lib/postgresql (postgresql)");
  return best;
}

inline int free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

inline bool running_as_root() { return ::geteuid() == 0; }

// The prefix that runs a command as the server's user.
inline std::string as_server_user() {
  return running_as_root() ? "setpriv --reuid=postgres --regid=postgres --clear-groups " : "";
}

inline void run(const std::string& command) {
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
}

struct cluster {
  std::string dir;      // everything lives here; the Unix socket too
  int port = 0;
  std::string bin;

  std::string data() const { return dir + "/data"; }
  std::string root_cert() const { return dir + "/root.crt"; }

  // A connection string over the Unix socket (the superuser, database postgres), with extra keywords appended.
  std::string socket_conninfo(const std::string& extra = "") const {
    return "host=" + dir + " port=" + std::to_string(port) + " user=tern dbname=postgres " + extra;
  }
  // A connection string over TCP.
  std::string tcp_conninfo(const std::string& extra = "") const {
    return "host=127.0.0.1 port=" + std::to_string(port) + " user=tern dbname=postgres sslmode=disable " + extra;
  }

  // Runs SQL as the superuser with blocking libpq (set-up only); throws on failure.
  void exec(const std::string& sql) const {
    PGconn* c = PQconnectdb(socket_conninfo().c_str());
    if (PQstatus(c) != CONNECTION_OK) {
      std::string m = PQerrorMessage(c);
      PQfinish(c);
      throw std::runtime_error("connect: " + m);
    }
    PGresult* r = PQexec(c, sql.c_str());
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    std::string m = PQerrorMessage(c);
    PQclear(r);
    PQfinish(c);
    if (!ok) throw std::runtime_error(sql + ": " + m);
  }

  void start_server() const {
    run(as_server_user() + bin + "/pg_ctl -D " + data() + " -l " + dir + "/server.log -w -t 60 -o \"-p " +
        std::to_string(port) + " -k " + dir + "\" start > /dev/null");
  }
  // Starts the server on a free port: another process may take the port between free_tcp_port() finding it and
  // the server binding it, so a start that fails is tried again on another port (the log says why it failed).
  void start_on_free_port() {
    for (int attempt = 1;; ++attempt) {
      port = free_tcp_port();
      try {
        start_server();
        return;
      } catch (const std::runtime_error&) {
        if (attempt == 3) throw;
      }
    }
  }
  void stop_server() const {
    std::system((as_server_user() + bin + "/pg_ctl -D " + data() + " -m fast -w -t 60 stop > /dev/null 2>&1").c_str());
  }
  // Stops the server and removes the directory.
  void destroy() const {
    stop_server();
    std::filesystem::remove_all(dir);
  }

  // A new cluster in dir from scratch: initdb, the certificate, the settings, the roles; started.
  static cluster create(const std::string& dir) {
    cluster c;
    c.dir = dir;
    c.bin = server_bin_dir();
    std::filesystem::create_directories(dir);
    if (running_as_root()) run("chown postgres:postgres " + dir);
    run("cd " + dir + " && " + as_server_user() + c.bin + "/initdb -D " + c.data() +
        " -U tern --auth=trust --no-sync -E UTF8 --locale=C > " + dir + "/initdb.log 2>&1");
    run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3 -subj /CN=localhost"
        " -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " + c.data() + "/server.key -out " + c.data() +
        "/server.crt > /dev/null 2>&1");
    run("cp " + c.data() + "/server.crt " + c.root_cert() + " && chmod 600 " + c.data() + "/server.key");
    if (running_as_root()) run("chown postgres:postgres " + c.data() + "/server.key " + c.data() + "/server.crt");
    {
      std::ofstream conf(c.data() + "/postgresql.conf", std::ios::app);
      conf << "listen_addresses = '127.0.0.1'\n"
           << "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
           << "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n"
           << "max_connections = 300\nshared_buffers = 64MB\nmax_wal_size = 1GB\n"
           << "password_encryption = 'scram-sha-256'\n";
    }
    {
      std::ofstream hba(c.data() + "/pg_hba.conf", std::ios::trunc);
      hba << "local all all trust\n"
          << "hostssl all tern_tls 127.0.0.1/32 trust\n"
          << "host all tern_tls 127.0.0.1/32 reject\n"
          << "host all tern_pw 127.0.0.1/32 scram-sha-256\n"
          << "host all all 127.0.0.1/32 trust\n";
    }
    // The pristine copy that clones start from (configured, never started).
    run("cp -a " + c.data() + " " + dir + "/template");
    c.start_on_free_port();
    c.exec("CREATE ROLE tern_pw LOGIN PASSWORD 'secret'; CREATE ROLE tern_tls LOGIN");
    c.save();
    return c;
  }

  // A second cluster from this one's pristine copy, in dir; started.
  cluster clone(const std::string& to) const {
    cluster c;
    c.dir = to;
    c.bin = bin;
    std::filesystem::create_directories(to);
    run("cp -a " + dir + "/template " + c.data());
    if (running_as_root()) run("chown -R postgres:postgres " + to);
    c.start_on_free_port();
    c.exec("CREATE ROLE tern_pw LOGIN PASSWORD 'secret'; CREATE ROLE tern_tls LOGIN");
    return c;
  }

  // Writes where the cluster is into dir/cluster.info, for the other processes of a ctest run.
  void save() const {
    std::ofstream info(dir + "/cluster.info", std::ios::trunc);
    info << port << "\n" << bin << "\n";
  }
  // The cluster an earlier create() left in dir; false if there is none.
  static bool load(const std::string& dir, cluster& c) {
    std::ifstream info(dir + "/cluster.info");
    if (!(info >> c.port >> c.bin)) return false;
    c.dir = dir;
    return true;
  }
};

// The cluster this test process uses (set by the test environment in main.cpp).
cluster& shared_cluster();

}  // namespace tern_test::pg
