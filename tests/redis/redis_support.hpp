// Helpers for the tern::redis tests: a real redis-server per test, started on a free port and on a Unix socket in
// a temporary directory (no persistence: --save '' --appendonly no), stopped (or killed, and started again on the
// same port and socket) by the test; and the connection settings that reach it.
#pragma once

#include "net_support.hpp"

#include <tern/redis/connection.hpp>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace tern_test {

namespace redis = tern::redis;

// The loop of the test's own thread (tern::io_context::current()).
inline tern::io_context& here() { return *tern::io_context::current(); }

// A TCP port for a test's redis-server, free on 127.0.0.1 when asked. Drawn at random below the kernel's ephemeral
// range, so that no socket bound to port 0 or connecting out (in this test or in any test running beside it) can take
// it between this check and the server's bind; two tests drawing the same port are met by redis_server::start(),
// which draws again when its server exits at once.
inline std::uint16_t free_port() {
  static std::mt19937 random(std::random_device{}());
  unsigned low = 32768;
  if (std::FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%u", &low) != 1) low = 32768;
    std::fclose(f);
  }
  const unsigned first = low > 12000 ? 10000 : 1024;
  std::uniform_int_distribution<unsigned> pick(first, low - 1);
  for (int attempt = 0; attempt < 100; ++attempt) {
    const auto port = static_cast<std::uint16_t>(pick(random));
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as redis-server binds
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (free) return port;
  }
  ADD_FAILURE() << "no free port below " << low;
  return 0;
}

class redis_server {
 public:
  // Starts redis-server with the given extra arguments (each one config directive word), and with a TLS port too
  // when given TLS arguments; waits until it answers. Its socket, log and files are in a temporary directory of its
  // own; its ports are drawn again (a few times) when it cannot bind them.
  explicit redis_server(std::vector<std::string> extra = {}, std::vector<std::string> tls = {})
      : extra_(std::move(extra)), tls_(std::move(tls)) {
    char templ[] = "/tmp/tern-redis-XXXXXX";
    if (::mkdtemp(templ) == nullptr) ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    dir_ = templ;
    unix_path_ = dir_ + "/redis.sock";
    for (int attempt = 0; attempt < 10; ++attempt) {
      port_ = free_port();
      if (!tls_.empty()) tls_port_ = free_port();
      switch (launch()) {
        case outcome::answers: return;
        case outcome::exited: continue;  // most likely a port taken since it was drawn
        case outcome::silent: return;
      }
    }
    ADD_FAILURE() << "redis-server did not start (log: " << dir_ << "/redis.log)";
  }
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;
  // SIGKILL: nothing is persisted, and a SIGTERM waits for the server's next tick (100 ms).
  ~redis_server() {
    stop(SIGKILL);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::uint16_t port() const noexcept { return port_; }
  std::uint16_t tls_port() const noexcept { return tls_port_; }
  const std::string& unix_path() const noexcept { return unix_path_; }
  const std::string& dir() const noexcept { return dir_; }

  // Settings for a connection to it over TCP (or over the Unix socket).
  redis::config tcp_config() const {
    redis::config c;
    c.host = "127.0.0.1";
    c.port = port_;
    return c;
  }
  redis::config unix_config() const {
    redis::config c;
    c.unix_path = unix_path_;
    return c;
  }

  // Starts the server again, after kill(), on the same ports and socket; true once it answers PING.
  bool start() {
    if (launch() == outcome::answers) return true;
    ADD_FAILURE() << "redis-server did not start again (log: " << dir_ << "/redis.log)";
    return false;
  }

  // SIGKILL: the server dies at once, its connections reset.
  void kill() { stop(SIGKILL); }

  // Stops the server with sig and waits for it.
  void stop(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    ::unlink(unix_path_.c_str());
  }

 private:
  enum class outcome { answers, exited, silent };

  // Forks redis-server and waits up to 5 s for it to answer PING on its Unix socket (in this server's own
  // directory, so that the answer cannot come from another test's server).
  outcome launch() {
    std::vector<std::string> args = {"redis-server",
                                     "--port", std::to_string(port_),
                                     "--bind", "127.0.0.1",
                                     "--unixsocket", unix_path_,
                                     "--unixsocketperm", "700",
                                     "--dir", dir_,
                                     "--save", "",
                                     "--appendonly", "no",
                                     "--daemonize", "no",
                                     "--logfile", dir_ + "/redis.log",
                                     "--enable-debug-command", "yes",
                                     "--proto-max-bulk-len", "1gb",
                                     "--client-output-buffer-limit", "pubsub 0 0 0"};
    if (!tls_.empty()) {
      args.insert(args.end(), {"--tls-port", std::to_string(tls_port_)});
      args.insert(args.end(), tls_.begin(), tls_.end());
    }
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The server dies with the test process (SIGKILL when it goes, even killed by ctest's timeout): forked by
    // hand for prctl, with only async-signal-safe calls in the child (the test may have threads).
    pid_ = ::fork();
    if (pid_ < 0) {
      ADD_FAILURE() << "cannot start redis-server: " << std::strerror(errno);
      return outcome::silent;
    }
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::execvp("redis-server", argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 1000; ++i) {
      if (answers_ping()) return outcome::answers;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return outcome::exited;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ADD_FAILURE() << "redis-server did not answer within 5 s (log: " << dir_ << "/redis.log)";
    return outcome::silent;
  }

  // A blocking PING over the Unix socket: any answer (+PONG, or -NOAUTH from a server with a password) will do.
  bool answers_ping() const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", unix_path_.c_str());
    bool ok = false;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      const char ping[] = "PING\r\n";
      char got[16] = {};
      ok = ::write(fd, ping, sizeof ping - 1) == sizeof ping - 1 && ::read(fd, got, sizeof got) > 0 &&
           (got[0] == '+' || got[0] == '-');
    }
    ::close(fd);
    return ok;
  }

  std::vector<std::string> extra_;
  std::vector<std::string> tls_;
  std::string dir_;
  std::string unix_path_;
  std::uint16_t port_ = 0;
  std::uint16_t tls_port_ = 0;
  pid_t pid_ = -1;
};

// FNV-1a, 64 bits: enough to tell a 64 MiB value from a damaged one.
inline std::uint64_t fnv1a(std::string_view data) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : data) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// A fixture with a server per test, on both backends.
class redis_test : public backend_test {
 protected:
  redis_server server;
};

}  // namespace tern_test
