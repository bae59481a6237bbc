// A DNS server for the resolver tests, on a loopback UDP port, written with tern's own UDP socket.
//
// It answers A and AAAA questions from a table (with an optional CNAME in front of a name's records), NXDOMAIN for
// a name it does not know, and NODATA (no error, no answer) for a known name without records of the asked type. The
// other behaviours are what a resolver must survive: a server that never answers, one that answers with a
// malformed packet (right ID and question, then an answer section cut short), one that answers noise, and one that
// answers SERVFAIL. With `truncating`, every UDP answer is empty with the TC bit set, and the full answer is served
// over TCP on the same port (as a resolver then retries). It counts the questions it received, by type.
#pragma once

#include <arpa/inet.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "net_support.hpp"

namespace tern_test {

enum class dns_behaviour { answer, silent, malformed, noise, server_failure, truncating };

class dns_server {
 public:
  struct records {
    std::vector<std::array<std::uint8_t, 4>> a;
    std::vector<std::array<std::uint8_t, 16>> aaaa;
    std::string cname;  // when set, the answer is "name CNAME cname" followed by cname's records
  };

  dns_server(tern::io_context& ctx, dns_behaviour behaviour, bool v6 = false)
      : socket_(ctx), acceptor_(ctx), behaviour_(behaviour) {
    const tern::net::endpoint any_port = v6 ? tern::net::endpoint::loopback_v6(0) : tern::net::endpoint::loopback_v4(0);
    if (behaviour != dns_behaviour::truncating) {
      EXPECT_OK(socket_.bind(any_port));
      auto [ec, ep] = socket_.local_endpoint();
      EXPECT_OK(ec);
      endpoint_ = ep;
      return;
    }
    // UDP and TCP on one port number: a free TCP port, then UDP on the same number, which another process may hold
    // already (then try another).
    for (int attempt = 0; attempt < 100; ++attempt) {
      acceptor_.close();
      socket_.close();
      if (acceptor_.listen(any_port)) continue;
      auto [ec, ep] = acceptor_.local_endpoint();
      if (ec || socket_.bind(ep)) continue;
      endpoint_ = ep;
      return;
    }
    ADD_FAILURE() << "no port number free for both UDP and TCP";
  }

  // Adds addresses (text form, v4 or v6) for name.
  void add(const std::string& name, std::initializer_list<const char*> addresses) {
    records& r = table_[lower(name)];
    for (const char* text : addresses) {
      std::array<std::uint8_t, 16> six{};
      std::array<std::uint8_t, 4> four{};
      if (::inet_pton(AF_INET, text, four.data()) == 1) {
        r.a.push_back(four);
      } else if (::inet_pton(AF_INET6, text, six.data()) == 1) {
        r.aaaa.push_back(six);
      } else {
        ADD_FAILURE() << "not an address: " << text;
      }
    }
  }
  void add_cname(const std::string& name, const std::string& target) { table_[lower(name)].cname = lower(target); }

  const tern::net::endpoint& endpoint() const { return endpoint_; }
  int questions(std::uint16_t type) const {
    auto it = questions_.find(type);
    return it == questions_.end() ? 0 : it->second;
  }
  int questions() const {
    int n = 0;
    for (const auto& [type, count] : questions_) n += count;
    return n;
  }

  // Answers until close() (its pending receive then fails and serve returns); with `truncating`, the TCP side too.
  tern::task<void> serve() {
    if (behaviour_ == dns_behaviour::truncating) {
      co_await tern::when_all(serve_udp(), serve_tcp());
    } else {
      co_await serve_udp();
    }
  }
  void close() {
    socket_.close();
    acceptor_.close();
  }
  int tcp_questions() const { return tcp_questions_; }

 private:
  tern::task<void> serve_udp() {
    std::array<std::uint8_t, 1500> in{};
    for (;;) {
      auto [ec, got] = co_await socket_.receive_from(tern::mutable_buffer(in.data(), in.size()));
      if (ec) co_return;
      std::vector<std::uint8_t> out;
      if (!answer(std::basic_string_view<std::uint8_t>(in.data(), got.size), out, true)) continue;
      auto [sec, sent] = co_await socket_.send_to(tern::const_buffer(out.data(), out.size()), got.from);
      EXPECT_OK(sec);
      (void)sent;
    }
  }

  // DNS over TCP: each message is preceded by its length (two bytes, big-endian).
  tern::task<void> serve_tcp() {
    for (;;) {
      auto [ec, conn] = co_await acceptor_.accept();
      if (ec) co_return;
      for (;;) {
        std::uint8_t length[2];
        if ((co_await conn.read_exact(tern::mutable_buffer(length, 2))).ec) break;
        std::vector<std::uint8_t> query(static_cast<std::size_t>(length[0] << 8 | length[1]));
        if ((co_await conn.read_exact(tern::mutable_buffer(query.data(), query.size()))).ec) break;
        ++tcp_questions_;
        std::vector<std::uint8_t> out;
        if (!answer(std::basic_string_view<std::uint8_t>(query.data(), query.size()), out, false)) break;
        std::vector<std::uint8_t> framed{static_cast<std::uint8_t>(out.size() >> 8), static_cast<std::uint8_t>(out.size())};
        framed.insert(framed.end(), out.begin(), out.end());
        if ((co_await conn.write_all(tern::const_buffer(framed.data(), framed.size()))).ec) break;
      }
    }
  }

 public:
  static constexpr std::uint16_t type_a = 1;
  static constexpr std::uint16_t type_cname = 5;
  static constexpr std::uint16_t type_aaaa = 28;

 private:
  static std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return s;
  }
  static void put16(std::vector<std::uint8_t>& out, std::uint16_t v) {
    out.push_back(static_cast<std::uint8_t>(v >> 8));
    out.push_back(static_cast<std::uint8_t>(v));
  }
  static void put32(std::vector<std::uint8_t>& out, std::uint32_t v) {
    put16(out, static_cast<std::uint16_t>(v >> 16));
    put16(out, static_cast<std::uint16_t>(v));
  }
  static void put_name(std::vector<std::uint8_t>& out, std::string_view name) {
    while (!name.empty()) {
      const std::size_t dot = name.find('.');
      const std::string_view label = name.substr(0, dot);
      out.push_back(static_cast<std::uint8_t>(label.size()));
      out.insert(out.end(), label.begin(), label.end());
      name = dot == std::string_view::npos ? std::string_view{} : name.substr(dot + 1);
    }
    out.push_back(0);
  }
  // One resource record: owner name, type, class IN, TTL 60, data.
  static void put_record(std::vector<std::uint8_t>& out, std::string_view owner, std::uint16_t type,
                         const std::vector<std::uint8_t>& data) {
    put_name(out, owner);
    put16(out, type);
    put16(out, 1);
    put32(out, 60);
    put16(out, static_cast<std::uint16_t>(data.size()));
    out.insert(out.end(), data.begin(), data.end());
  }

  // Builds the reply to one query; false: send nothing.
  bool answer(std::basic_string_view<std::uint8_t> q, std::vector<std::uint8_t>& out, bool over_udp) {
    if (q.size() < 12) return false;
    // The question: labels up to the root, then type and class.
    std::size_t pos = 12;
    std::string name;
    while (pos < q.size() && q[pos] != 0) {
      const std::size_t len = q[pos];
      if (len > 63 || pos + 1 + len > q.size()) return false;
      if (!name.empty()) name += '.';
      name.append(reinterpret_cast<const char*>(q.data() + pos + 1), len);
      pos += 1 + len;
    }
    if (pos + 5 > q.size()) return false;
    const std::uint16_t type = static_cast<std::uint16_t>(q[pos + 1] << 8 | q[pos + 2]);
    const std::size_t question_end = pos + 5;
    ++questions_[type];
    name = lower(name);

    if (behaviour_ == dns_behaviour::silent) return false;
    if (behaviour_ == dns_behaviour::noise) {
      out.assign({0xde, 0xad, 0xbe, 0xef, 0x00});
      return true;
    }
    // Header: the query's ID; QR, RD copied, RA; one question.
    out.assign(q.begin(), q.begin() + 2);
    std::uint8_t rcode = 0;
    std::vector<std::vector<std::uint8_t>> answers;  // whole records
    if (behaviour_ == dns_behaviour::server_failure) {
      rcode = 2;
    } else if (auto it = table_.find(name); it == table_.end()) {
      rcode = 3;  // NXDOMAIN
    } else {
      std::string owner = name;
      const records* r = &it->second;
      if (!r->cname.empty()) {
        std::vector<std::uint8_t> target;
        put_name(target, r->cname);
        std::vector<std::uint8_t> rec;
        put_record(rec, owner, type_cname, target);
        answers.push_back(rec);
        owner = r->cname;
        auto t = table_.find(owner);
        r = t == table_.end() ? nullptr : &t->second;
      }
      if (r != nullptr && type == type_a) {
        for (const auto& a : r->a) {
          std::vector<std::uint8_t> rec;
          put_record(rec, owner, type_a, std::vector<std::uint8_t>(a.begin(), a.end()));
          answers.push_back(rec);
        }
      } else if (r != nullptr && type == type_aaaa) {
        for (const auto& a : r->aaaa) {
          std::vector<std::uint8_t> rec;
          put_record(rec, owner, type_aaaa, std::vector<std::uint8_t>(a.begin(), a.end()));
          answers.push_back(rec);
        }
      }
    }
    const bool truncated = over_udp && behaviour_ == dns_behaviour::truncating;
    if (truncated) answers.clear();
    out.push_back(static_cast<std::uint8_t>(0x80 | (truncated ? 0x02 : 0) | (q[2] & 0x01)));  // QR, TC, RD
    out.push_back(static_cast<std::uint8_t>(0x80 | rcode));                                    // RA, RCODE
    put16(out, 1);
    put16(out, static_cast<std::uint16_t>(behaviour_ == dns_behaviour::malformed ? 3 : answers.size()));
    put16(out, 0);
    put16(out, 0);
    out.insert(out.end(), q.begin() + 12, q.begin() + static_cast<std::ptrdiff_t>(question_end));
    if (behaviour_ == dns_behaviour::malformed) {
      // Three answers announced; half of a record's fixed part follows.
      put16(out, 0xc00c);
      put16(out, type);
      put16(out, 1);
      return true;
    }
    for (const auto& rec : answers) out.insert(out.end(), rec.begin(), rec.end());
    return true;
  }

  tern::net::udp_socket socket_;
  tern::net::tcp_acceptor acceptor_;
  dns_behaviour behaviour_;
  int tcp_questions_ = 0;
  tern::net::endpoint endpoint_;
  std::map<std::string, records> table_;
  std::map<std::uint16_t, int> questions_;
};

}  // namespace tern_test
