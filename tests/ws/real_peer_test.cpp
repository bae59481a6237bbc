// ws::stream against a WebSocket implementation tern did not write, on both backends: Python's websockets library
// (Debian's python3-websockets, run by /usr/bin/python3) as a client of a tern server and as a server for a tern
// client. Echoes of text, binary, fragmented and 16 MiB messages checked by hash, pings and pongs both ways, every
// close code each way, bad UTF-8 (1007) and oversized messages (1009) each way, and permessage-deflate agreed with
// it in both roles.
#include "ws_support.hpp"

#include "tls/tls_support.hpp"

#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>

namespace {

using namespace tern_test;
namespace net = tern::net;

class ws_real_peer_test : public ::testing::TestWithParam<tern::backend_kind> {};
TERN_INSTANTIATE_BACKENDS(ws_real_peer_test);

const char* const python = "/usr/bin/python3";

// Writes a script to a file of this test process; removed when the object goes.
struct script_file {
  std::string path;
  explicit script_file(const std::string& text) {
    char pattern[] = "/tmp/tern-ws-peer-XXXXXX";
    const int fd = ::mkstemp(pattern);
    ::close(fd);
    path = pattern;
    std::ofstream(path) << text;
  }
  ~script_file() { std::remove(path.c_str()); }
};

// The Python client: runs the steps named on its command line against ws://127.0.0.1:PORT/ and prints one line per
// result, which the test compares.
const char* const client_script = R"PY(
import asyncio, hashlib, os, sys, websockets
from websockets.frames import Opcode

async def main():
    port, compression, steps = sys.argv[1], sys.argv[2], sys.argv[3:]
    uri = "ws://127.0.0.1:%s/echo" % port
    comp = "deflate" if compression == "deflate" else None
    for step in steps:
        async with websockets.connect(uri, compression=comp, max_size=64 * 2**20) as ws:
            if step == "echo":
                await ws.send("hello, κόσμε")
                print("text", await ws.recv())
                await ws.send(b"\x00\x01binary\xff")
                print("binary", (await ws.recv()).hex())
                await ws.send(iter(["frag", "men", "ted"]))
                print("fragmented", await ws.recv())
                big = os.urandom(16 * 2**20)
                await ws.send(big)
                back = await ws.recv()
                print("16MiB", hashlib.sha256(back).hexdigest() == hashlib.sha256(big).hexdigest(), len(back))
                print("extensions", [e.name for e in ws.extensions])
                await ws.close()
                print("closed", ws.close_code)
            elif step == "ping":
                await asyncio.wait_for(await ws.ping(b"py-ping"), 5)
                print("pong received")
                await ws.send("ping me")
                print("after server ping", await ws.recv())
            elif step.startswith("close:"):
                code = int(step[6:])
                await ws.close(code, "bye %d" % code)
                print("closed", ws.close_code, ws.close_reason)
            elif step.startswith("server-close:"):
                await ws.send(step)
                try:
                    await ws.recv()
                except websockets.ConnectionClosed as e:
                    print("server closed", e.rcvd.code, e.rcvd.reason)
            elif step == "bad-utf8":
                await ws.write_frame(True, Opcode.TEXT, b"ok \xc0\xaf")
                try:
                    await ws.recv()
                except websockets.ConnectionClosed as e:
                    print("bad-utf8 closed", e.rcvd.code)
            elif step == "too-big":
                try:
                    await ws.send(b"x" * (2 * 2**20))
                    await ws.recv()
                except websockets.ConnectionClosed as e:
                    print("too-big closed", e.rcvd.code)
    print("done")

asyncio.run(main())
)PY";

// A tern WebSocket server on a thread of its own: echoes messages, answers "ping me" after pinging the client,
// and "server-close:CODE" by closing with CODE; records how each connection ended.
class ws_server_thread {
 public:
  ws_server_thread(tern::backend_kind backend, ws::stream_options opts)
      : ctx_(options_for(backend)), acceptor_(ctx_), opts_(opts) {
    port_ = listen_loopback(acceptor_).port();
    thread_ = std::thread([this] { ctx_.block_on(serve()); });
  }
  ~ws_server_thread() {
    ctx_.post([this] { stop_.request_stop(); });
    thread_.join();
  }
  std::uint16_t port() const { return port_; }
  // How the connections ended, in order: the read's error ("4001 bye 4001", "1007", ...).
  std::vector<std::string> endings() {
    std::lock_guard<std::mutex> lock(mutex_);
    return endings_;
  }

 private:
  tern::task<void> serve() {
    tern::task_group group(ctx_);
    for (;;) {
      auto [ec, socket] = co_await tern::with_stop(acceptor_.accept(), stop_.get_token());
      if (ec) break;
      group.spawn(connection(std::move(socket)));
    }
    group.cancel();
    co_await group.wait();
    // The listener's io_uring multishot accept ends in the kernel before block_on returns: the loop is destroyed
    // on the test's thread, which could not reap it.
    acceptor_.close();
    co_await tern::closes_settled(ctx_);
  }

  tern::task<void> connection(net::tcp_socket socket) {
    ws_tcp s(std::move(socket), ws::role::server, opts_);
    if (auto ec = co_await s.accept()) {
      record("accept " + ec.message());
      co_return;
    }
    std::string m;
    for (;;) {
      auto [ec, type] = co_await s.read(m);
      if (ec) {
        std::string ending = std::to_string(ec.value());
        if (s.close_code() != 0 && ws::is_close_code(ec)) ending += " " + std::string(s.close_reason());
        record(ending);
        co_return;
      }
      if (m == "ping me") {
        EXPECT_OK(co_await s.ping("tern-ping"));
        m = "pongs so far " + std::to_string(s.pongs_received());
      } else if (m.starts_with("server-close:")) {
        const int code = std::stoi(m.substr(13));
        EXPECT_OK(co_await s.close(ws::close_code(code), "tern says " + std::to_string(code)));
        record("closed " + std::to_string(code));
        co_return;
      }
      if (auto wec = co_await s.write(type, m)) {
        record("write " + wec.message());
        co_return;
      }
    }
  }

  void record(std::string s) {
    std::lock_guard<std::mutex> lock(mutex_);
    endings_.push_back(std::move(s));
  }

  tern::io_context ctx_;
  net::tcp_acceptor acceptor_;
  ws::stream_options opts_;
  std::uint16_t port_ = 0;
  std::stop_source stop_;
  std::mutex mutex_;
  std::vector<std::string> endings_;
  std::thread thread_;
};

ws::stream_options server_options(bool deflate) {
  ws::stream_options o;
  o.max_message_size = 17 << 20;
  o.deflate.enabled = deflate;
  return o;
}

std::string run_client(std::uint16_t port, bool deflate, const std::string& steps) {
  script_file script(client_script);
  int status = 0;
  std::string out = run_command(std::string(python) + " " + script.path + " " + std::to_string(port) + " " +
                                    (deflate ? "deflate" : "plain") + " " + steps,
                                status);
  EXPECT_EQ(status, 0) << out;
  return out;
}

TEST_P(ws_real_peer_test, python_client_echo) {
  for (bool deflate : {false, true}) {
    ws_server_thread server(GetParam(), server_options(deflate));
    const std::string out = run_client(server.port(), deflate, "echo");
    EXPECT_NE(out.find("text hello, κόσμε\n"), std::string::npos) << out;
    EXPECT_NE(out.find("binary 000162696e617279ff\n"), std::string::npos) << out;
    EXPECT_NE(out.find("fragmented fragmented\n"), std::string::npos) << out;
    EXPECT_NE(out.find("16MiB True 16777216\n"), std::string::npos) << out;
    EXPECT_NE(out.find(deflate ? "extensions ['permessage-deflate']" : "extensions []"), std::string::npos) << out;
    EXPECT_NE(out.find("closed 1000\n"), std::string::npos) << out;
  }
}

TEST_P(ws_real_peer_test, python_client_pings_and_is_pinged) {
  ws_server_thread server(GetParam(), server_options(false));
  const std::string out = run_client(server.port(), false, "ping");
  EXPECT_NE(out.find("pong received\n"), std::string::npos) << out;
  // The server pinged before answering; Python's pong arrived before the next message the server read.
  EXPECT_NE(out.find("after server ping pongs so far 0\n"), std::string::npos) << out;
}

TEST_P(ws_real_peer_test, every_close_code_both_ways) {
  const int codes[] = {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 4000, 4999};
  std::string steps;
  for (int c : codes) steps += " close:" + std::to_string(c) + " server-close:" + std::to_string(c);
  ws_server_thread server(GetParam(), server_options(false));
  const std::string out = run_client(server.port(), false, steps);
  for (int c : codes) {
    const std::string n = std::to_string(c);
    // tern echoes the code of a close it answers, without the reason.
    EXPECT_NE(out.find("closed " + n + " \n"), std::string::npos) << n << "\n" << out;
    EXPECT_NE(out.find("server closed " + n + " tern says " + n + "\n"), std::string::npos) << n << "\n" << out;
  }
  std::vector<std::string> expected;
  for (int c : codes) {
    expected.push_back(std::to_string(c) + " bye " + std::to_string(c));
    expected.push_back("closed " + std::to_string(c));
  }
  EXPECT_EQ(server.endings(), expected);
}

TEST_P(ws_real_peer_test, python_client_breaking_the_rules) {
  ws::stream_options small = server_options(false);
  small.max_message_size = 1 << 20;  // Python sends 2 MiB
  ws_server_thread server(GetParam(), small);
  const std::string out = run_client(server.port(), false, "bad-utf8 too-big");
  EXPECT_NE(out.find("bad-utf8 closed 1007\n"), std::string::npos) << out;
  EXPECT_NE(out.find("too-big closed 1009\n"), std::string::npos) << out;
  const auto endings = server.endings();
  ASSERT_EQ(endings.size(), 2u);
  EXPECT_EQ(endings[0], std::to_string(static_cast<int>(ws::error::invalid_utf8)));
  EXPECT_EQ(endings[1], std::to_string(static_cast<int>(ws::error::message_too_big)));
}

// The Python server: echoes, and on request pings, closes with a code, sends bad UTF-8 or a large message.
const char* const server_script = R"PY(
import asyncio, sys, websockets
from websockets.frames import Opcode

async def handler(ws, path=None):
    try:
        async for msg in ws:
            if msg == "ping me":
                await asyncio.wait_for(await ws.ping(b"py-ping"), 5)
                await ws.send("pong came back")
            elif isinstance(msg, str) and msg.startswith("close:"):
                code = int(msg[6:])
                await ws.close(code, "python says %d" % code)
            elif msg == "bad-utf8":
                await ws.write_frame(True, Opcode.TEXT, b"bad \xed\xa0\x80")
            elif msg == "too-big":
                await ws.send(b"y" * (2 * 2**20))
            else:
                await ws.send(msg)
    except websockets.ConnectionClosed:
        pass
    print("connection closed", ws.close_code, flush=True)

async def main():
    comp = "deflate" if sys.argv[1] == "deflate" else None
    async with websockets.serve(handler, "127.0.0.1", 0, compression=comp, max_size=64 * 2**20) as server:
        print("port", server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()

asyncio.run(main())
)PY";

struct python_server {
  script_file script{server_script};
  child_process process;
  std::uint16_t port = 0;
  explicit python_server(bool deflate) : process({python, script.path, deflate ? "deflate" : "plain"}) {
    const std::string out = process.read_until("port ");
    port = trailing_port(out, "port ");
    EXPECT_NE(port, 0) << out;
  }
};

tern::task<ws_tcp> connect_to(tern::io_context& ctx, std::uint16_t port, ws::stream_options opts) {
  net::tcp_socket socket(ctx);
  EXPECT_OK(co_await socket.connect(net::endpoint::loopback_v4(port)));
  ws_tcp s(std::move(socket), ws::role::client, opts);
  EXPECT_OK(co_await s.handshake("127.0.0.1:" + std::to_string(port), "/echo"));
  co_return s;
}

TEST_P(ws_real_peer_test, tern_client_echo_against_python) {
  for (bool deflate : {false, true}) {
    python_server peer(deflate);
    tern::io_context ctx(options_for(GetParam()));
    run_bounded(ctx, [](tern::io_context& ctx, std::uint16_t port, bool deflate) -> tern::task<void> {
      ws::stream_options o = server_options(deflate);
      ws_tcp s = co_await connect_to(ctx, port, o);
      CO_ASSERT(s.is_open());
      EXPECT_EQ(s.deflate_agreed(), deflate);
      std::string m;
      CO_ASSERT_OK(co_await s.write(ws::message_type::text, "hello, κόσμε"));
      auto [ec, t] = co_await s.read(m);
      CO_ASSERT_OK(ec);
      EXPECT_EQ(t, ws::message_type::text);
      EXPECT_EQ(m, "hello, κόσμε");
      // Fragmented, with a ping between the fragments.
      CO_ASSERT_OK(co_await s.write_some(false, ws::message_type::binary, "frag"));
      CO_ASSERT_OK(co_await s.ping("between"));
      CO_ASSERT_OK(co_await s.write_some(true, ws::message_type::binary, "mented"));
      CO_ASSERT_OK((co_await s.read(m)).ec);
      EXPECT_EQ(m, "fragmented");
      EXPECT_EQ(s.pongs_received(), 1u);
      // 16 MiB of noise, checked by hash.
      const std::vector<char> big = make_pattern(16 << 20, 42);
      CO_ASSERT_OK(co_await s.write(ws::message_type::binary, big));
      auto [bec, bt] = co_await s.read(m);
      CO_ASSERT_OK(bec);
      EXPECT_EQ(bt, ws::message_type::binary);
      EXPECT_EQ(m.size(), big.size());
      EXPECT_EQ(fnv1a(m), fnv1a(std::string_view(big.data(), big.size())));
      // Python pings while the client reads: the pong goes back without the client doing anything.
      CO_ASSERT_OK(co_await s.write(ws::message_type::text, "ping me"));
      CO_ASSERT_OK((co_await s.read(m)).ec);
      EXPECT_EQ(m, "pong came back");
      EXPECT_OK(co_await s.close(ws::close_code::going_away, "done"));
      EXPECT_EQ(s.close_code(), 1001);  // echoed
    }(ctx, peer.port, deflate));
    EXPECT_NE(peer.process.read_until("connection closed").find("connection closed 1001"), std::string::npos);
  }
}

TEST_P(ws_real_peer_test, tern_client_sees_every_close_code_of_python) {
  python_server peer(false);
  tern::io_context ctx(options_for(GetParam()));
  run_bounded(ctx, [](tern::io_context& ctx, std::uint16_t port) -> tern::task<void> {
    for (int code : {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 4000, 4999}) {
      ws_tcp s = co_await connect_to(ctx, port, {});
      CO_ASSERT_OK(co_await s.write(ws::message_type::text, "close:" + std::to_string(code)));
      std::string m;
      auto [ec, t] = co_await s.read(m);
      EXPECT_EQ(ec, ws::close_code(code)) << ec.message();
      EXPECT_EQ(s.close_code(), code);
      EXPECT_EQ(s.close_reason(), "python says " + std::to_string(code));
    }
  }(ctx, peer.port));
}

TEST_P(ws_real_peer_test, tern_client_refuses_bad_utf8_and_oversized_messages) {
  python_server peer(false);
  tern::io_context ctx(options_for(GetParam()));
  run_bounded(ctx, [](tern::io_context& ctx, std::uint16_t port) -> tern::task<void> {
    {
      ws_tcp s = co_await connect_to(ctx, port, {});
      CO_ASSERT_OK(co_await s.write(ws::message_type::text, "bad-utf8"));
      std::string m;
      EXPECT_EC((co_await s.read(m)).ec, ws::error::invalid_utf8);
    }
    {
      ws::stream_options small;
      small.max_message_size = 1 << 20;
      ws_tcp s = co_await connect_to(ctx, port, small);
      CO_ASSERT_OK(co_await s.write(ws::message_type::text, "too-big"));
      std::string m;
      EXPECT_EC((co_await s.read(m)).ec, ws::error::message_too_big);
    }
  }(ctx, peer.port));
  EXPECT_NE(peer.process.read_until("connection closed 1007").find("connection closed 1007"), std::string::npos);
  EXPECT_NE(peer.process.read_until("connection closed 1009").find("connection closed 1009"), std::string::npos);
}

}  // namespace
