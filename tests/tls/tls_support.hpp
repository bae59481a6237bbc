// Helpers for the tern::tls tests: certificates made at test time with the openssl command (a CA, server
// certificates for two names, a client certificate, and a server certificate from a CA nobody trusts; valid two
// days, in a directory of the test process removed at exit), contexts made from them, TLS stream pairs over
// loopback TCP, and child processes (openssl s_server, a Python peer) whose output the test reads.
#pragma once

#include "fs_support.hpp"
#include "net_support.hpp"

#include <tern/tls/context.hpp>
#include <tern/tls/stream.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

extern char** environ;

// EXPECT_OK's fatal form, for test bodies (not coroutines).
#define ASSERT_OK(ec) ASSERT_TRUE(::tern_test::ec_ok((ec)))

namespace tern_test {

namespace tls = tern::tls;
using tls_tcp = tls::stream<tern::net::tcp_socket>;

// Runs a shell command; its stdout and stderr together, and its exit status in status.
inline std::string run_command(const std::string& command, int& status) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) {
    status = -1;
    return out;
  }
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int raw = ::pclose(p);
  status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return out;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The certificates of this test process.
struct test_pki {
  std::string dir;
  std::string ca;                              // the trusted CA's certificate
  std::string server_cert, server_key;         // localhost, 127.0.0.1 and ::1, from ca
  std::string other_cert, other_key;           // other.test, from ca
  std::string client_cert, client_key;         // a client certificate (CN tern test client), from ca
  std::string rogue_cert, rogue_key;           // localhost, from a CA that is trusted nowhere
  bool ok = false;

  test_pki() {
    char pattern[] = "/tmp/tern-tls-XXXXXX";
    const char* made = ::mkdtemp(pattern);
    if (made == nullptr) return;
    dir = made;
    ca = dir + "/ca.pem";
    const bool made_all = make_ca("ca", "tern test CA") && make_ca("rogue-ca", "tern rogue CA") &&
                          make_leaf("server", "localhost", "DNS:localhost,IP:127.0.0.1,IP:::1", "ca", "serverAuth") &&
                          make_leaf("other", "other.test", "DNS:other.test", "ca", "serverAuth") &&
                          make_leaf("client", "tern test client", "DNS:client.test", "ca", "clientAuth") &&
                          make_leaf("rogue", "localhost", "DNS:localhost,IP:127.0.0.1", "rogue-ca", "serverAuth");
    server_cert = dir + "/server.pem";
    server_key = dir + "/server.key";
    other_cert = dir + "/other.pem";
    other_key = dir + "/other.key";
    client_cert = dir + "/client.pem";
    client_key = dir + "/client.key";
    rogue_cert = dir + "/rogue.pem";
    rogue_key = dir + "/rogue.key";
    ok = made_all;
  }
  test_pki(const test_pki&) = delete;
  test_pki& operator=(const test_pki&) = delete;
  ~test_pki() {
    if (!dir.empty()) std::system(("rm -rf '" + dir + "'").c_str());
  }

 private:
  bool shell(const std::string& command) {
    int status = 0;
    const std::string out = run_command("cd '" + dir + "' && " + command, status);
    if (status != 0) std::fprintf(stderr, "tls test certificates: %s\n%s\n", command.c_str(), out.c_str());
    return status == 0;
  }
  bool make_ca(const std::string& name, const std::string& cn) {
    return shell("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -keyout " +
                 name + ".key -out " + name + ".pem -subj '/CN=" + cn +
                 "' -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign");
  }
  bool make_leaf(const std::string& name, const std::string& cn, const std::string& san, const std::string& issuer,
                 const std::string& usage) {
    std::ofstream(dir + "/" + name + ".ext") << "subjectAltName=" << san << "\nbasicConstraints=CA:FALSE\n"
                                             << "extendedKeyUsage=" << usage << "\n";
    return shell("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + name +
                 ".key -out " + name + ".csr -subj '/CN=" + cn + "' && openssl x509 -req -in " + name +
                 ".csr -CA " + issuer + ".pem -CAkey " + issuer + ".key -CAcreateserial -days 2 -out " + name +
                 ".pem -extfile " + name + ".ext");
  }
};

// Made on first use, once per test process (each test runs in a process of its own).
inline const test_pki& pki() {
  static test_pki certificates;
  EXPECT_TRUE(certificates.ok) << "the openssl command could not make the test certificates";
  return certificates;
}

// A server context presenting cert and key.
inline tls::context server_context(const std::string& cert, const std::string& key) {
  tls::context c(tls::role::server);
  EXPECT_OK(c.use_certificate_chain_file(cert));
  EXPECT_OK(c.use_private_key_file(key));
  return c;
}
inline tls::context server_context() { return server_context(pki().server_cert, pki().server_key); }

// A client context that trusts the test CA (only) and verifies the server.
inline tls::context client_context() {
  tls::context c(tls::role::client);
  EXPECT_OK(c.load_verify_file(pki().ca));
  return c;
}

struct tls_pair {
  tls_tcp client;
  tls_tcp server;
};

// A TCP connection over loopback with a TLS stream on each end; the client names host. No handshake yet.
inline tern::task<tls_pair> tls_over_tcp(tern::io_context& ctx, const tls::context& client_ctx,
                                         const tls::context& server_ctx, std::string host = "localhost") {
  socket_pair p = co_await connected_pair(ctx);
  tls_pair out{tls_tcp(std::move(p.client), client_ctx), tls_tcp(std::move(p.server), server_ctx)};
  EXPECT_OK(out.client.set_host_name(host));
  co_return out;
}

// Both handshakes, run together; the client's error and the server's.
inline tern::task<std::pair<std::error_code, std::error_code>> handshake_both(tls_pair& p) {
  auto [c, s] = co_await tern::when_all(p.client.handshake(), p.server.handshake());
  co_return std::pair{c, s};
}

// The usual start: the test server's and client's contexts, a connection, both handshakes. Empty (with the
// failures recorded) if a handshake failed.
inline tern::task<std::optional<tls_pair>> shaken_pair(tern::io_context& ctx) {
  tls_pair p = co_await tls_over_tcp(ctx, client_context(), server_context());
  auto [c, s] = co_await handshake_both(p);
  EXPECT_OK(c);
  EXPECT_OK(s);
  if (c || s) co_return std::nullopt;
  co_return std::optional<tls_pair>(std::move(p));
}

// A child process with its stdout and stderr on a pipe the test reads; killed (SIGTERM) and reaped at the end.
class child_process {
 public:
  explicit child_process(const std::vector<std::string>& argv) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (::posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    out_ = fds[0];
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    if (out_ >= 0) ::close(out_);
  }

  // Output up to and including the first line that contains marker (or all of it, if the child ends or timeout
  // passes first).
  std::string read_until(std::string_view marker, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const std::size_t at = seen_.find(marker);
      if (at != std::string::npos) {
        const std::size_t end = seen_.find('\n', at);
        if (end != std::string::npos) return seen_.substr(0, end + 1);
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{out_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) != 1) return seen_;
      char buf[4096];
      const ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) return seen_;
      seen_.append(buf, static_cast<std::size_t>(n));
    }
  }
  bool started() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string seen_;
};

// The port in a line such as "ACCEPT 127.0.0.1:36197" or "port 36197": the digits at its end.
inline std::uint16_t trailing_port(std::string_view text, std::string_view marker) {
  const std::size_t at = text.find(marker);
  if (at == std::string_view::npos) return 0;
  std::string_view line = text.substr(at);
  line = line.substr(0, line.find('\n'));
  std::size_t start = line.size();
  while (start > 0 && line[start - 1] >= '0' && line[start - 1] <= '9') --start;
  return static_cast<std::uint16_t>(std::atoi(std::string(line.substr(start)).c_str()));
}

}  // namespace tern_test
