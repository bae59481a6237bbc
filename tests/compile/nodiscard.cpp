// Compiled by check_diagnostics.py, never run: each line marked `// expect: unused-result` forgets a co_await (or
// drops an error code), and the compiler must warn on it; the unmarked lines are the right forms and must not
// warn.
#include <tern/tern.hpp>

#include <string>

namespace net = tern::net;
using namespace std::chrono_literals;

tern::task<int> compute() { co_return 1; }

tern::task<void> forgotten(tern::io_context& ctx, net::tcp_socket& s, net::tcp_acceptor& a, tern::runtime& rt) {
  char buf[16];
  const net::endpoint ep = net::endpoint::loopback_v4(80);
  s.read_some(buf);  // expect: unused-result
  s.write_some(tern::const_buffer("x"));  // expect: unused-result
  s.read_exact(buf);  // expect: unused-result
  s.write_all(tern::const_buffer("hello"));  // expect: unused-result
  s.connect(ep);  // expect: unused-result
  s.open(AF_INET);  // expect: unused-result
  s.shutdown();  // expect: unused-result
  s.set_no_delay(true);  // expect: unused-result
  s.local_endpoint();  // expect: unused-result
  s.release();  // expect: unused-result
  s.move_to(ctx);  // expect: unused-result
  a.listen(ep);  // expect: unused-result
  a.accept();  // expect: unused-result
  a.accept(ctx);  // expect: unused-result
  net::connect(ctx, ep);  // expect: unused-result
  tern::sleep_for(1ms);  // expect: unused-result
  tern::sleep_until(tern::clock::now());  // expect: unused-result
  tern::timer t(ctx);
  t.wait();  // expect: unused-result
  tern::with_timeout(s.read_some(buf), 1s);  // expect: unused-result
  tern::with_deadline(s.read_some(buf), tern::clock::now());  // expect: unused-result
  tern::with_stop(s.read_some(buf), std::stop_token());  // expect: unused-result
  tern::with_timeout(compute(), 1s);  // expect: unused-result
  tern::yield();  // expect: unused-result
  tern::current_stop_token();  // expect: unused-result
  compute();  // expect: unused-result
  tern::spawn(ctx, compute());  // expect: unused-result
  tern::spawn(ctx, [] { return compute(); });  // expect: unused-result
  rt.switch_to(1);  // expect: unused-result
  tern::when_all(compute(), compute());  // expect: unused-result

  tern::sync::mutex m;
  m.lock();  // expect: unused-result
  m.scoped_lock();  // expect: unused-result
  m.try_lock();  // expect: unused-result
  tern::sync::semaphore sem(1);
  sem.acquire();  // expect: unused-result
  sem.try_acquire();  // expect: unused-result
  tern::sync::channel<int> ch(4);
  ch.send(1);  // expect: unused-result
  ch.receive();  // expect: unused-result
  ch.try_send(1);  // expect: unused-result
  ch.try_receive();  // expect: unused-result
  tern::sync::manual_reset_event ev;
  ev.wait();  // expect: unused-result
  tern::sync::latch l(1);
  l.wait();  // expect: unused-result
  tern::sync::wait_group wg;
  wg.wait();  // expect: unused-result

  tern::task_group g(ctx);
  g.wait();  // expect: unused-result
  tern::task_group::run(ctx, [](tern::task_group&) -> tern::task<void> { co_return; });  // expect: unused-result

  tern::buffered_reader reader(s);
  reader.read_line();  // expect: unused-result
  tern::buffered_writer writer(s);
  writer.flush();  // expect: unused-result
  tern::block_signals({SIGUSR1});  // expect: unused-result

  net::udp_socket u(ctx);
  net::datagram_batch batch(4, 64);
  u.receive_batch(batch);  // expect: unused-result
  u.send_batch(batch, 4);  // expect: unused-result
  tern::fs::file f(ctx);
  f.register_file();  // expect: unused-result
  tern::fs::registered_buffers::create(ctx, 1, 4096);  // expect: unused-result
  auto [bec, bufs] = tern::fs::registered_buffers::create(ctx, 1, 4096);
  f.read_at(bufs[0], 0);  // expect: unused-result
  f.write_all_at(bufs[0], 0);  // expect: unused-result

  // The right forms: awaited, or the result used or explicitly dropped.
  auto [ec, n] = co_await s.read_some(buf);
  (void)s.set_no_delay(true);
  if (auto lec = a.listen(ep)) co_return;
  co_await tern::sleep_for(1ms);
  (void)co_await tern::with_timeout(s.read_some(buf), 1s);
  tern::spawn(ctx, compute()).detach();
  co_await g.wait();
  (void)ec, (void)n, (void)bec;
}

int main() {}
