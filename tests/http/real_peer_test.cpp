// http::server against clients tern did not write, on both backends: curl (keep-alive over several URLs, HEAD,
// uploads with Content-Length and chunked, Expect: 100-continue, a large download checked byte by byte) and
// Python's http.client (keep-alive, chunked upload, HEAD, and pipelined requests read back in order).
#include "http_support.hpp"

#include <tern/http/router.hpp>
#include <tern/http/stream.hpp>

#include <cstdio>
#include <fstream>
#include <future>

#include "fs_support.hpp"

namespace {

using namespace tern_test;
namespace http = tern::http;

class http_real_peer_test : public ::testing::TestWithParam<tern::backend_kind> {};
TERN_INSTANTIATE_BACKENDS(http_real_peer_test);

http::router peer_routes() {
  http::router r;
  r.get("/hello", [](http::request&) -> tern::task<http::response> { co_return http::response(200, "hello\n"); });
  r.get("/who/{name}", [](http::request& q) -> tern::task<http::response> {
    co_return http::response(200, "hi " + std::string(q.param("name")) + " via " + std::string(q.header("user-agent")).substr(0, 4));
  });
  r.post("/sum", [](http::request& q) -> tern::task<http::response> {
    co_return http::response(200, size_and_sum(q.body()));
  });
  r.stream(http::method::put, "/sum",
           [](http::request&, http::body_reader& body, http::response_stream& out) -> tern::task<void> {
             std::string all;
             if (co_await body.read_all(all, 64 << 20)) co_return;
             const std::string text = size_and_sum(all);
             (void)co_await out.start(201, {}, text.size());
             (void)co_await out.write(tern::const_buffer(text.data(), text.size()));
             (void)co_await out.finish();
           });
  add_pattern_route(r, 65536);
  return r;
}

std::string shell_quote(const std::string& s) { return "'" + s + "'"; }

TEST_P(http_real_peer_test, curl) {
  server_thread s(GetParam(), peer_routes());
  int status = 0;
  // Two URLs in one curl: the second reuses the connection (num_connects 0).
  std::string out = command_output("curl -sS --http1.1 -w ' [%{http_code} %{num_connects}]\\n' " +
                                    shell_quote(s.url("/hello")) + " " + shell_quote(s.url("/who/ann")),
                                status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "hello\n [200 1]\nhi ann via curl [200 0]\n");

  // HEAD
  out = command_output("curl -sS -I " + shell_quote(s.url("/hello")), status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(out.find("HTTP/1.1 200 OK\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Content-Length: 6\r\n"), std::string::npos) << out;

  // Uploads: a 3 MB file, with Content-Length and then chunked, and with Expect: 100-continue.
  temp_dir dir;
  const std::string path = dir.path("upload.bin");
  std::string data(3'000'000, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 % 256);
  std::ofstream(path, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
  const std::string expected = size_and_sum(data);
  out = command_output("curl -sS --data-binary @" + path + " " + shell_quote(s.url("/sum")), status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, expected);
  out = command_output("curl -sS -H 'Transfer-Encoding: chunked' --data-binary @" + path + " " + shell_quote(s.url("/sum")),
                    status);
  EXPECT_EQ(out, expected) << "chunked upload";
  out = command_output("curl -sS -v -H 'Expect: 100-continue' -T " + path + " " + shell_quote(s.url("/sum")) + " 2>&1",
                    status);
  EXPECT_NE(out.find("HTTP/1.1 100 Continue"), std::string::npos) << out;
  EXPECT_NE(out.find("HTTP/1.1 201 Created"), std::string::npos) << out;
  EXPECT_NE(out.find(expected), std::string::npos) << out;

  // A chunked download of 5 MB, every byte checked.
  out = command_output("curl -sS " + shell_quote(s.url("/pattern/5000000")), status);
  ASSERT_EQ(out.size(), 5'000'000u);
  bool same = true;
  for (std::size_t i = 0; i < out.size() && same; ++i) same = out[i] == static_cast<char>('a' + i % 26);
  EXPECT_TRUE(same);

  // A malformed request from curl's raw mode is refused, not served.
  out = command_output("curl -sS -o /dev/null -w '%{http_code}' -H 'Content-Length: 3' -H 'Transfer-Encoding: chunked' "
                    "--data-binary abc " + shell_quote(s.url("/sum")),
                    status);
  EXPECT_EQ(out, "400");

  // A Host that is not a host and port (RFC 9112 §3.2) is refused as a missing one is, and a valid one served.
  for (const std::string host : {"a b", "a/b", "[::1", "h:port"}) {
    out = command_output("curl -sS -o /dev/null -w '%{http_code}' -H " + shell_quote("Host: " + host) + " " +
                             shell_quote(s.url("/hello")),
                         status);
    EXPECT_EQ(out, "400") << "Host: " << host;
  }
  out = command_output("curl -sS -w ' %{http_code}' -H 'Host: [::1]:8080' " + shell_quote(s.url("/hello")), status);
  EXPECT_EQ(out, "hello\n 200");
}

// A handler that moves to another worker (runtime::switch_to, say to reach a file that worker owns) and returns
// there: the connection goes on on its own loop all the same. Python's http.client sends many requests over
// several keep-alive connections to a 2-worker runtime, and checks every answer; a streaming handler that
// finishes its response and then moves away is answered whole too.
TEST_P(http_real_peer_test, handlers_that_end_on_another_worker) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  auto routes = std::make_shared<http::router>();
  routes->get("/cross/{n}", [&rt](http::request& q) -> tern::task<http::response> {
    const std::size_t here = rt.current_worker();
    std::string body = "n=" + std::string(q.param("n"));
    co_await rt.switch_to(1 - here);
    body += rt.current_worker() != here ? " crossed" : " stayed";
    co_return http::response(200, body);
  });
  routes->stream(http::method::get, "/cross-stream/{n}",
                 [&rt](http::request& q, http::body_reader&, http::response_stream& out) -> tern::task<void> {
                   const std::string body = "streamed " + std::string(q.param("n"));
                   if (co_await out.start(200, {}, body.size())) co_return;
                   if (co_await out.write(tern::const_buffer(body.data(), body.size()))) co_return;
                   if (co_await out.finish()) co_return;
                   co_await rt.switch_to(1 - rt.current_worker());
                 });
  // The response stream used from the other worker refuses (and names switch_to); back home, it works.
  routes->stream(http::method::get, "/stream-away",
                 [&rt](http::request&, http::body_reader&, http::response_stream& out) -> tern::task<void> {
                   const std::size_t home = rt.current_worker();
                   co_await rt.switch_to(1 - home);
                   const std::error_code away = co_await out.start(200);
                   co_await rt.switch_to(home);
                   const bool named = away.message().find("switch_to") != std::string::npos;
                   const std::string body = away == tern::error::wrong_loop && named ? "refused away" : away.message();
                   if (co_await out.start(200, {}, body.size())) co_return;
                   if (co_await out.write(tern::const_buffer(body.data(), body.size()))) co_return;
                   (void)co_await out.finish();
                 });
  routes->post("/cross-body", [&rt](http::request& q) -> tern::task<http::response> {
    std::string body(q.body());
    co_await rt.switch_to(1 - rt.current_worker());
    co_return http::response(200, std::to_string(body.size()));
  });
  std::promise<tern::net::endpoint> listening;
  std::thread server([&] {
    const std::error_code ec = rt.block_on(http::serve(rt, routes, tern::net::endpoint::loopback_v4(0), {},
                                                       std::chrono::seconds(2),
                                                       [&](const tern::net::endpoint& ep) { listening.set_value(ep); }));
    EXPECT_FALSE(ec) << ec.message();
  });
  const std::uint16_t port = listening.get_future().get().port();
  const std::string script = R"(
import http.client, sys, threading
port = int(sys.argv[1])
failures = []
def client(k):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for i in range(60):
            n = "%d-%d" % (k, i)
            c.request("GET", "/cross/" + n)
            r = c.getresponse(); body = r.read()
            assert r.status == 200 and body == ("n=%s crossed" % n).encode(), (n, r.status, body)
            c.request("GET", "/cross-stream/" + n)
            r = c.getresponse(); body = r.read()
            assert r.status == 200 and body == ("streamed " + n).encode(), (n, r.status, body)
            c.request("GET", "/stream-away")
            r = c.getresponse(); body = r.read()
            assert r.status == 200 and body == b"refused away", (n, r.status, body)
            c.request("POST", "/cross-body", body=b"x" * (i * 100))
            r = c.getresponse(); body = r.read()
            assert r.status == 200 and body == str(i * 100).encode(), (n, r.status, body)
        c.close()
    except Exception as e:
        failures.append(repr(e))
threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
for t in threads: t.start()
for t in threads: t.join()
print("ok" if not failures else failures[0])
)";
  int status = 0;
  const std::string out = command_output("python3 -c " + shell_quote(script) + " " + std::to_string(port) + " 2>&1",
                                         status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "ok\n");
  EXPECT_TRUE(rt.shutdown(std::chrono::seconds(3)));
  server.join();
}

TEST_P(http_real_peer_test, python_http_client_with_a_bad_host) {
  server_thread s(GetParam(), peer_routes());
  const std::string script = R"(
import http.client, sys
port = int(sys.argv[1])
for host, expected in (("a b", 400), ("a@b", 400), ("[v1.x]:1", 200), ("example.org:80", 200), ("", 200)):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.putrequest("GET", "/hello", skip_host=True)
    c.putheader("Host", host)
    c.endheaders()
    r = c.getresponse()
    assert r.status == expected, (host, r.status)
    body = r.read()
    assert (body == b"hello\n") == (expected == 200), (host, body)
    c.close()
print("ok")
)";
  int status = 0;
  const std::string out =
      command_output("python3 -c " + shell_quote(script) + " " + std::to_string(s.port()) + " 2>&1", status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "ok\n");
}

TEST_P(http_real_peer_test, python_http_client) {
  server_thread s(GetParam(), peer_routes());
  const std::string script = R"(
import http.client, io, socket, sys
port = int(sys.argv[1])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
for name in ("a", "b", "c"):                       # keep-alive: one connection
    c.request("GET", "/who/" + name, headers={"User-Agent": "python-test"})
    r = c.getresponse()
    assert r.status == 200 and r.read() == ("hi %s via pyth" % name).encode(), name
data = bytes((i * 7) % 256 for i in range(200000))
expected = "%d %d" % (len(data), sum(data))
c.request("POST", "/sum", body=data)
r = c.getresponse(); assert r.read().decode() == expected
c.request("POST", "/sum", body=iter([data[:1000], data[1000:150000], data[150000:]]), encode_chunked=True)
r = c.getresponse(); assert r.read().decode() == expected, "chunked"
c.request("HEAD", "/hello")
r = c.getresponse(); assert r.status == 200 and r.getheader("Content-Length") == "6" and r.read() == b""
c.request("GET", "/missing")
r = c.getresponse(); assert r.status == 404; r.read()
c.close()
# Pipelining: three requests in one write, answers read back in order.
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"GET /who/x HTTP/1.1\r\nHost: p\r\nUser-Agent: pipe\r\n\r\n"
          b"POST /sum HTTP/1.1\r\nHost: p\r\nContent-Length: 3\r\n\r\nabc"
          b"GET /hello HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n")
class kept(io.BufferedReader):                     # http.client closes the file when a body ends
    def close(self): pass
f = kept(s.makefile("rb", buffering=0))
bodies = []
for method in ("GET", "POST", "GET"):
    r = http.client.HTTPResponse(s, method=method)
    r.fp = f
    r.begin()
    bodies.append(r.read())
assert bodies == [b"hi x via pipe", b"3 294", b"hello\n"], bodies
print("ok")
)";
  int status = 0;
  const std::string out =
      command_output("python3 -c " + shell_quote(script) + " " + std::to_string(s.port()) + " 2>&1", status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "ok\n");
}

}  // namespace
