// A proxy between one client and the tests' PostgreSQL server that can hold back the server's answer at a chosen
// point of the protocol, for the windows the server itself never leaves open: it sends a COPY's end (CopyDone)
// and the statement's result (CommandComplete, ReadyForQuery) in one write, so a client cannot be caught between
// them against the real server alone.
//
// It listens on a Unix socket of its own (in a directory of its own, named .s.PGSQL.<the server's port>, so that
// libpq reaches it with conninfo()) and forwards both ways on a thread of its own with blocking sockets. The first
// connection is the one watched: what the server sends on it is cut into the protocol's messages (a type byte, then
// a length that counts itself), and once hold_after(type) is armed, the message of that type goes through and
// everything after it waits until release(). Later connections (cancel requests, which libpq sends to the address
// it connected to) are forwarded as they are, or, while hold_others(true), held unforwarded (accepted, and their
// bytes left unread) until hold_others(false).
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tern_test::pg {

class pg_proxy {
 public:
  // Forwards to the server listening on server_dir/.s.PGSQL.port.
  pg_proxy(const std::string& server_dir, int port) : port_(port) {
    char tmpl[] = "/tmp/tern-pg-proxy-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("pg_proxy: mkdtemp failed");
    dir_ = tmpl;
    server_path_ = server_dir + "/.s.PGSQL." + std::to_string(port);
    listener_ = listen_at(dir_ + "/.s.PGSQL." + std::to_string(port));
    thread_ = std::thread([this] { serve(); });
  }
  pg_proxy(const pg_proxy&) = delete;
  pg_proxy& operator=(const pg_proxy&) = delete;
  ~pg_proxy() {
    stop_.store(true);
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    for (std::thread& t : others_) t.join();
    ::close(listener_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string conninfo() const {
    return "host=" + dir_ + " port=" + std::to_string(port_) + " user=tern dbname=postgres";
  }

  // From the next message of this type the server sends: it goes through, what follows waits for release().
  void hold_after(char type) {
    released_.store(false);
    hold_type_.store(type);
  }
  // True once that message has gone through and more of the server's bytes wait behind it.
  bool holding() const { return holding_.load(); }
  void release() { released_.store(true); }

  // Later connections wait, not forwarded, while held.
  void hold_others(bool hold) { others_held_.store(hold); }
  // How many later connections wait now.
  int others_waiting() const { return others_waiting_.load(); }

 private:
  static sockaddr_un address(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    return a;
  }

  static int listen_at(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_un a = address(path);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 4) != 0) {
      ::close(fd);
      throw std::runtime_error("pg_proxy: cannot listen on " + path);
    }
    return fd;
  }

  static bool send_all(int fd, const char* p, std::size_t n) {
    while (n > 0) {
      const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
      if (w <= 0) return false;
      p += w;
      n -= static_cast<std::size_t>(w);
    }
    return true;
  }

  // Sends the client the whole messages at the front of pending_, stopping after one of the held type (then
  // held_ is set); false if the client is gone.
  bool forward(int client) {
    std::size_t whole = 0;
    while (pending_.size() - whole >= 5) {
      std::uint32_t len = 0;
      for (std::size_t i = 1; i <= 4; ++i) len = (len << 8) | static_cast<unsigned char>(pending_[whole + i]);
      if (pending_.size() - whole < 1 + std::size_t{len}) break;
      const char type = pending_[whole];
      whole += 1 + std::size_t{len};
      if (type != 0 && type == hold_type_.load()) {
        held_ = true;
        break;
      }
    }
    const bool ok = send_all(client, pending_.data(), whole);
    pending_.erase(0, whole);
    return ok;
  }

  int connect_server() const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_un a = address(server_path_);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  // A later connection, forwarded as it is both ways until either end closes it.
  void pass_through(int client) {
    if (others_held_.load()) {
      ++others_waiting_;
      while (others_held_.load() && !stop_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      --others_waiting_;
    }
    const int server = connect_server();
    char buf[4096];
    while (server >= 0 && !stop_.load()) {
      pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(fds, 2, 5) < 0) break;
      bool open = true;
      for (int i = 0; i < 2 && open; ++i) {
        if (fds[i].revents == 0) continue;
        const ssize_t n = ::recv(fds[i].fd, buf, sizeof buf, 0);
        open = n > 0 && send_all(fds[1 - i].fd, buf, static_cast<std::size_t>(n));
      }
      if (!open) break;
    }
    if (server >= 0) ::close(server);
    ::close(client);
  }

  void serve() {
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) return;
    const int server = connect_server();
    if (server < 0) {
      ::close(client);
      return;
    }
    char buf[65536];
    while (!stop_.load()) {
      pollfd fds[3] = {{client, POLLIN, 0}, {server, POLLIN, 0}, {listener_, POLLIN, 0}};
      if (::poll(fds, 3, 5) < 0) break;
      if (fds[2].revents != 0) {
        const int other = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (other >= 0) others_.emplace_back([this, other] { pass_through(other); });
      }
      if (fds[0].revents != 0) {
        const ssize_t n = ::recv(client, buf, sizeof buf, 0);
        if (n <= 0 || !send_all(server, buf, static_cast<std::size_t>(n))) break;
      }
      if (fds[1].revents != 0) {
        const ssize_t n = ::recv(server, buf, sizeof buf, 0);
        if (n <= 0) break;
        pending_.append(buf, static_cast<std::size_t>(n));
      }
      if (released_.load() && hold_type_.load() != 0) {  // released (held or not yet): the hold is over
        hold_type_.store(0);
        held_ = false;
      }
      if (!held_ && !forward(client)) break;
      holding_.store(held_ && !pending_.empty());
    }
    ::close(server);
    ::close(client);
  }

  int port_;
  std::string dir_;
  std::string server_path_;
  int listener_ = -1;
  std::thread thread_;
  std::vector<std::thread> others_;  // the later connections' (the proxy's thread only, until it is joined)
  std::atomic<bool> stop_{false};
  std::atomic<char> hold_type_{0};
  std::atomic<bool> released_{false};
  std::atomic<bool> holding_{false};
  std::atomic<bool> others_held_{false};
  std::atomic<int> others_waiting_{0};
  bool held_ = false;    // the held message went through; the rest waits (the proxy's thread only)
  std::string pending_;  // the server's bytes not yet forwarded (the proxy's thread only)
};

}  // namespace tern_test::pg
