// epoll backend.
//
// Readiness model with the same observable behaviour as the io_uring backend. Every fd is registered once, for its
// whole life, edge-triggered for input (no epoll_ctl per operation); output edges are added only while an operation
// waits for room (see attach). An operation first tries its syscall without blocking; only on EAGAIN does it wait
// on the descriptor's pending list, and each readiness edge retries the waiting operations of that direction in
// order. A completed retry is queued on the loop like an io_uring completion, so user code never runs inside the
// event scan.
//
// A wait with a timeout arms a timerfd (registered with its own marker) at the absolute deadline and waits without
// one: epoll's own timeouts carry the thread's timer slack (50 us by default, added to every timer's lateness),
// a timerfd does not, so timers are as precise as on io_uring (timers/accuracy: mean lateness 44 -> 12 us). The
// timerfd is re-armed only when the deadline changes. Other threads wake a blocked wait through an eventfd
// registered with a null data pointer.
#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <cstdint>
#include <ctime>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <system_error>
#include <unistd.h>

#include "backends.hpp"
#include "tern/io_context.hpp"

namespace tern::detail {
namespace {

int errno_result(long rc) noexcept { return rc < 0 ? -errno : static_cast<int>(rc); }

class epoll_backend final : public backend {
 public:
  explicit epoll_backend(io_context& ctx) : ctx_(ctx) {
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) throw std::system_error(errno, std::system_category(), "epoll_create1");
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) {
      int e = errno;
      ::close(epfd_);
      throw std::system_error(e, std::system_category(), "eventfd");
    }
    timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (timer_fd_ < 0) {
      int e = errno;
      ::close(wake_fd_);
      ::close(epfd_);
      throw std::system_error(e, std::system_category(), "timerfd_create");
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.ptr = nullptr;
    ::epoll_ctl(epfd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    // Edge-triggered: every expiry is an edge, so the timerfd never needs reading.
    ev.data.ptr = &timer_marker_;
    ::epoll_ctl(epfd_, EPOLL_CTL_ADD, timer_fd_, &ev);
  }

  ~epoll_backend() override {
    ::close(timer_fd_);
    ::close(wake_fd_);
    ::close(epfd_);
  }

  backend_kind kind() const noexcept override { return backend_kind::epoll; }

  // Registered for input edges only: output edges are asked for when an operation first has to wait for room (or
  // a connect for its end), and given up at the first output edge that finds no operation waiting for one. A Unix
  // socket raises an output edge each time its peer reads from it, so a connection registered for both woke its
  // loop for nothing after each of its writes: pg/select's client (tern/epoll) parked twice per batch, one of them
  // for that edge alone, where a poll() loop asking for POLLOUT only when its flush is short parks once.
  static constexpr std::uint32_t input_events = EPOLLIN | EPOLLRDHUP | EPOLLET;

  void attach(descriptor& d) override {
    epoll_event ev{};
    ev.events = input_events;
    ev.data.ptr = &d;
    const int rc = ::epoll_ctl(epfd_, EPOLL_CTL_ADD, d.fd, &ev);
    count_syscall();
    if (rc < 0) throw std::system_error(errno, std::system_category(), "epoll_ctl");
    d.epoll_registered = true;
    d.epoll_out = false;
  }

  // Adds or drops output edges; 0 or -errno. Adding re-polls the descriptor, so an edge that passed while they were
  // not asked for is reported by the next wait.
  [[gnu::noinline]] int set_output(descriptor& d, bool on) noexcept {
    epoll_event ev{};
    ev.events = on ? input_events | EPOLLOUT : input_events;
    ev.data.ptr = &d;
    const int rc = ::epoll_ctl(epfd_, EPOLL_CTL_MOD, d.fd, &ev);
    ctx_.counters().syscalls.add();
    if (rc < 0) return -errno;
    d.epoll_out = on;
    return 0;
  }

  void detach(descriptor& d) noexcept override {
    if (!d.epoll_registered) return;
    ::epoll_ctl(epfd_, EPOLL_CTL_DEL, d.fd, nullptr);
    count_syscall();
    d.epoll_registered = false;
  }

  bool start(io_op& op) noexcept override {
    if (is_file_op(op.code)) {
      // Files cannot be polled: the call runs on the blocking pool, which posts the completion back, unless it is
      // a read the page cache can answer at once.
      auto& f = static_cast<file_op&>(op);
      if (f.code == op_code::read_at && read_cached(f, ctx_.counters())) return true;
      f.job.owner = &f;
      f.job.execute = &execute_file_op;
      f.completion.owner = &f;
      f.completion.run = &file_op_done;
      f.completion.discard = nullptr;
      blocking_pool::instance().submit(&f.job);
      return false;
    }
    if (op.code == op_code::recv && op.desc->recv_drained && buffer_of(op).len != 0) {
      // The last read left the socket empty and no input edge has come since: a recv now could only fail. A
      // request/response connection's next read always starts so, right after its own send: one system call
      // per message on each side. The edge of the next data still comes, and retries it.
      op.res = -EAGAIN;
      ++waiting_;
      return false;
    }
    int r = attempt(op, false);
    ctx_.counters().syscalls.add();
    note_read(op, r);
    if (r == -EAGAIN || r == -EWOULDBLOCK || r == -EINPROGRESS) {
      if (!waits_for_input(op.code) && !op.desc->epoll_out) {
        if (const int e = set_output(*op.desc, true); e != 0) {
          op.res = e;
          return true;
        }
      }
      op.res = r;
      ++waiting_;
      return false;
    }
    op.res = r;
    return true;
  }

  void cancel(io_op& op) noexcept override {
    if (is_file_op(op.code)) {
      // A call not started yet is taken back; one that runs completes with its own result. A read whose first
      // bytes came from the page cache completes with them (a read at the file's position has moved it).
      auto& f = static_cast<file_op&>(op);
      if (!blocking_pool::instance().withdraw(&f.job)) return;
      op.res = f.code == op_code::read_at && f.length != 0 ? static_cast<int>(f.length) : -ECANCELED;
      ctx_.complete(op);
      return;
    }
    op.res = -ECANCELED;
    --waiting_;
    ctx_.complete(op);
  }

  void before_close(descriptor&) noexcept override {}

  // attach and detach may run on any thread (a descriptor opened or released off the loop): counted only on it.
  void count_syscall() noexcept {
    if (ctx_.running_here()) ctx_.counters().syscalls.add();
  }

  void abandon(io_op& op) noexcept override {
    if (!is_file_op(op.code)) return;
    auto& f = static_cast<file_op&>(op);
    if (blocking_pool::instance().withdraw(&f.job)) return;
    // Running or done: wait for the pool thread to let go of the op, then drop the completion it posted.
    blocking_pool::wait_idle(&f.job);
    ctx_.purge(&f.completion);
  }

  void poll(std::int64_t timeout_ns) override {
    timespec ts{};
    timespec* tsp = &ts;  // zero: do not block
    if (timeout_ns < 0) {
      tsp = nullptr;
    } else if (timeout_ns > 0 && arm_timer(timeout_ns)) {
      tsp = nullptr;  // the timerfd ends the wait
      timeout_ns = -1;
    } else if (timeout_ns > 0) {
      ts.tv_sec = timeout_ns / 1'000'000'000;
      ts.tv_nsec = timeout_ns % 1'000'000'000;
    }
    int n = wait(tsp, timeout_ns);
    loop_counters& counters = ctx_.counters();
    counters.kernel_waits.add();
    counters.syscalls.add();
    for (int i = 0; i < n; ++i) {
      void* data = events_[i].data.ptr;
      if (data == &timer_marker_) continue;  // the deadline passed: the loop fires its timers next
      auto* d = static_cast<descriptor*>(data);
      if (d == nullptr) {
        std::uint64_t value;
        [[maybe_unused]] ssize_t r = ::read(wake_fd_, &value, sizeof value);
        counters.wakeups_received.add();
        counters.syscalls.add();
        continue;
      }
      dispatch(*d, events_[i].events);
    }
  }

  void wake() noexcept override {
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
    count_syscall_of_caller();
  }

  bool busy() const noexcept override { return waiting_ != 0; }

 private:
  static constexpr int max_events = 256;

  void dispatch(descriptor& d, std::uint32_t ev) noexcept {
    const bool in = (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
    const bool out = (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0;
    if (in) d.recv_drained = false;  // something arrived (or the stream ended) since the last read
    // Once the peer's stream has ended, a short read may be followed by the end of the stream with no further
    // edge to announce it (the edge that said so is this one): reads go back to trying first.
    if ((ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) d.short_read_drains = false;
    if ((ev & EPOLLOUT) != 0 && d.epoll_out) [[unlikely]] output_edge(d);
    for (io_op* op = d.pending_head; op != nullptr;) {
      io_op* next = op->next_pending;  // complete() unlinks op
      // A file call on a watched descriptor (fs::file on a FIFO or a terminal: its stat, its sync) runs on the
      // blocking pool, which completes it; readiness says nothing about it.
      if (op->st == io_op::state::pending && !is_file_op(op->code) && wants(op->code, in, out)) {
        // poll_inout reports what this edge says, both ways; the other operations try their call.
        int r = op->code == op_code::poll_inout ? (in ? POLLIN : 0) | (out ? POLLOUT : 0) : attempt(*op, true);
        note_read(*op, r);
        // A connect's check is two calls (SO_ERROR, then getpeername); a poll's retry makes none.
        const bool is_poll =
            op->code == op_code::poll_in || op->code == op_code::poll_out || op->code == op_code::poll_inout;
        ctx_.counters().syscalls.add(op->code == op_code::connect ? 2 : is_poll ? 0 : 1);
        if (r != -EAGAIN && r != -EWOULDBLOCK) {
          op->res = r;
          --waiting_;
          ctx_.complete(*op);
        }
      }
      op = next;
    }
  }

  // An output edge while they are asked for: given up when no operation waits for one (out of line: the common
  // dispatch never gets here, and keeps its registers).
  [[gnu::noinline, gnu::cold]] void output_edge(descriptor& d) noexcept {
    for (io_op* op = d.pending_head; op != nullptr; op = op->next_pending) {
      if (op->st == io_op::state::pending && !is_file_op(op->code) && !waits_for_input(op->code)) return;
    }
    (void)set_output(d, false);
  }

  // Whether a recv's result says the socket is now empty (descriptor::recv_drained): EAGAIN on any socket, or
  // fewer bytes than asked for where that means the queue was emptied (TCP: its recv copies until the buffer is
  // full or the queue and backlog are empty; anything that arrives after it raises an edge). Never from a peek,
  // which leaves the bytes where they are.
  static void note_read(io_op& op, int r) noexcept {
    if (op.code != op_code::recv) return;
    const buffer_op& b = buffer_of(op);
    descriptor& d = *op.desc;
    d.recv_drained = r == -EAGAIN || r == -EWOULDBLOCK ||
                     (r > 0 && d.short_read_drains && static_cast<std::uint32_t>(r) < b.len &&
                      (b.msg_flags & MSG_PEEK) == 0);
  }

  // One non-blocking try of op's syscall; returns the result or -errno. A connect that is under way answers
  // -EINPROGRESS the first time and is then checked through SO_ERROR.
  int attempt(io_op& op, bool retry) noexcept {
    const int fd = op.desc->fd;
    for (;;) {
      int r = 0;
      switch (op.code) {
        case op_code::poll_in: r = retry ? POLLIN : ready_now(fd, POLLIN); break;
        case op_code::poll_out: r = retry ? POLLOUT : ready_now(fd, POLLOUT); break;
        case op_code::poll_inout: r = ready_events(fd, POLLIN | POLLOUT); break;  // retried in dispatch()
        case op_code::sendfile: {
          auto& s = static_cast<splice_op&>(op);
          off_t offset = static_cast<off_t>(s.off_in);
          r = errno_result(::sendfile(fd, s.fd_in, &offset, op.len));
          break;
        }
        case op_code::receive: r = receive_now(static_cast<receive_op&>(op)); break;
        case op_code::splice: r = -EINVAL; break;  // io_uring's; never started here
        default:
          if (is_file_op(op.code)) {
            r = -EINVAL;  // file operations go to the blocking pool
          } else {
            r = attempt_on_buffer(buffer_of(op), fd, retry);
          }
          break;
      }
      if (r != -EINTR) return r;
    }
  }

  // attempt() for the operations on a caller's buffer (buffer_op).
  static int attempt_on_buffer(buffer_op& op, int fd, bool retry) noexcept {
    switch (op.code) {
      case op_code::recv: return errno_result(::recv(fd, op.buf, op.len, op.msg_flags | MSG_NOSIGNAL));
      case op_code::send: return errno_result(::send(fd, op.buf, op.len, MSG_NOSIGNAL));
      case op_code::read: return errno_result(::read(fd, op.buf, op.len));
      case op_code::write: return errno_result(::write(fd, op.buf, op.len));
      case op_code::accept:
        return errno_result(
            ::accept4(fd, static_cast<sockaddr*>(op.buf), &op.addr_len, SOCK_NONBLOCK | SOCK_CLOEXEC));
      case op_code::recvmsg: return errno_result(::recvmsg(fd, static_cast<msghdr*>(op.buf), op.msg_flags));
      case op_code::sendmsg:
        return errno_result(::sendmsg(fd, static_cast<const msghdr*>(op.buf), op.msg_flags | MSG_NOSIGNAL));
      case op_code::recvmmsg:
        return errno_result(::recvmmsg(fd, static_cast<mmsghdr*>(op.buf), op.len, op.msg_flags, nullptr));
      case op_code::sendmmsg:
        return errno_result(::sendmmsg(fd, static_cast<mmsghdr*>(op.buf), op.len, op.msg_flags | MSG_NOSIGNAL));
      case op_code::connect:
        return retry ? connect_result(fd) : errno_result(::connect(fd, static_cast<const sockaddr*>(op.buf), op.len));
      default: return -EINVAL;
    }
  }

  // receive(): a recv into a buffer taken from the loop's pool only now that the socket is (likely) readable, so
  // a connection that waits holds no buffer; the buffer goes back at once if the recv finds nothing. A pool at its
  // maximum with every buffer out lends a heap overflow buffer instead.
  int receive_now(receive_op& op) noexcept {
    receive_pool& pool = ctx_.receive_pool();
    if (pool.stack_empty()) ctx_.counters().receive_pool_dry.add();
    std::uint32_t id = pool.take();
    if (id == receive_pool::none) {
      id = pool.take_overflow();
      if (id == receive_pool::none) return -ENOMEM;
      ctx_.counters().receive_overflows.add();
    }
    const int r = errno_result(::recv(op.desc->fd, pool.address(id), pool.buffer_size(), MSG_NOSIGNAL));
    if (r > 0) {
      op.set_buffer(id);
    } else {
      pool.recycle(id);
      op.set_buffer(receive_pool::none);
    }
    return r;
  }

  // A buffered read whose bytes are in the page cache is a memory copy. Made here on the loop with RWF_NOWAIT,
  // which makes the kernel answer EAGAIN instead of waiting for the device, it saves the two thread hand-offs of
  // the pool (io_uring does the same at submission): files/random_read, buffered 4 KiB blocks, went from 0.15x to
  // 0.94-1.01x of Asio's io_uring configuration. True when op is complete; false when the pool must read (the rest of)
  // it: nothing cached, O_DIRECT (whose reads wait for the device whatever the flag says), or a file without
  // support for the flag. A partly cached range leaves its first bytes read and op pointed at the rest.
  static bool read_cached(file_op& op, loop_counters& counters) noexcept {
    op.length = 0;
    descriptor& d = *op.desc;
    if (d.cached == descriptor::cached_reads::unknown) {
      const int flags = ::fcntl(d.fd, F_GETFL);
      counters.syscalls.add();
      d.cached = flags >= 0 && (flags & O_DIRECT) == 0 ? descriptor::cached_reads::tried
                                                        : descriptor::cached_reads::never;
    }
    if (d.cached != descriptor::cached_reads::tried) return false;
    iovec iov{op.buf, op.len};
    const off_t offset = op.offset == file_op::current_position ? -1 : static_cast<off_t>(op.offset);
    const ssize_t r = ::preadv2(d.fd, &iov, 1, offset, RWF_NOWAIT);
    counters.syscalls.add();
    if (r < 0) {
      // EOPNOTSUPP: the file cannot; EINVAL: a kernel without the flag (or a call the pool will refuse too).
      if (errno == EOPNOTSUPP || errno == EINVAL) d.cached = descriptor::cached_reads::never;
      return false;  // EAGAIN, or an error the pool's blocking read reports the same way
    }
    if (r == 0 || static_cast<std::size_t>(r) == op.len) {
      op.res = static_cast<int>(r);
      return true;
    }
    op.length = static_cast<std::uint64_t>(r);
    op.buf = static_cast<char*>(op.buf) + r;
    op.len -= static_cast<std::uint32_t>(r);
    if (op.offset != file_op::current_position) op.offset += static_cast<std::uint64_t>(r);
    return false;
  }

  // Pool thread: the blocking call of a file operation; then the completion goes to the loop's inbox (the pool
  // marks the job finished after that, and the loop waits for the mark before it resumes the task).
  static void execute_file_op(blocking_job* job) noexcept {
    file_op& op = *static_cast<file_op::pool_job*>(job)->owner;
    const int fd = op.desc != nullptr ? op.desc->fd : AT_FDCWD;
    long r = 0;
    do {
      switch (op.code) {
        case op_code::read_at:
          r = op.offset == file_op::current_position ? ::read(fd, op.buf, op.len)
                                                     : ::pread(fd, op.buf, op.len, static_cast<off_t>(op.offset));
          break;
        case op_code::write_at:
          r = op.offset == file_op::current_position ? ::write(fd, op.buf, op.len)
                                                     : ::pwrite(fd, op.buf, op.len, static_cast<off_t>(op.offset));
          break;
        case op_code::fsync: r = op.flags != 0 ? ::fdatasync(fd) : ::fsync(fd); break;
        case op_code::fallocate:
          r = ::fallocate(fd, op.flags, static_cast<off_t>(op.offset), static_cast<off_t>(op.length));
          break;
        case op_code::ftruncate: r = ::ftruncate(fd, static_cast<off_t>(op.offset)); break;
        case op_code::statx:
          r = ::statx(fd, op.path, op.flags, op.mode, static_cast<struct statx*>(op.buf));
          break;
        case op_code::openat: r = ::openat(AT_FDCWD, op.path, op.flags, op.mode); break;
        case op_code::renameat: r = ::renameat(AT_FDCWD, op.path, AT_FDCWD, op.path2); break;
        case op_code::unlinkat: r = ::unlinkat(AT_FDCWD, op.path, op.flags); break;
        case op_code::mkdirat: r = ::mkdirat(AT_FDCWD, op.path, op.mode); break;
        default: r = -1; errno = EINVAL; break;
      }
    } while (r < 0 && errno == EINTR);
    op.res = errno_result(r);
    if (op.code == op_code::read_at && op.length != 0) {
      // The first bytes came from the page cache on the loop: they count, even if reading the rest failed.
      op.res = static_cast<int>(op.length) + (op.res > 0 ? op.res : 0);
    }
    op.ctx->enqueue(&op.completion);
  }

  // Loop thread: the pool thread has posted the completion; once it has also let go of the job, the op completes
  // like any other.
  static void file_op_done(work_item* w) {
    file_op& op = *static_cast<file_op::pool_completion*>(w)->owner;
    blocking_pool::wait_idle(&op.job);
    op.ctx->complete(op);
  }

  // Arms the timerfd timeout_ns from now (absolute, so a late re-arm cannot stretch it). False if it cannot be
  // armed; the wait then takes the timeout itself.
  bool arm_timer(std::int64_t timeout_ns) noexcept {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    const std::int64_t now_ns = now.tv_sec * 1'000'000'000 + now.tv_nsec;
    const std::int64_t deadline = now_ns + timeout_ns;
    // An expiry already armed, still ahead and not later than this one, serves: the wait ends by then at the
    // latest, and the loop looks at its timers again. Deadlines that move later (a timeout per request, each
    // one replacing the last) then cost one early wake-up when the old expiry comes, not a timerfd_settime per
    // wait: http/minimal's client and server made two per round trip.
    if (armed_deadline_ > now_ns && armed_deadline_ <= deadline) return true;
    itimerspec spec{};
    spec.it_value.tv_sec = deadline / 1'000'000'000;
    spec.it_value.tv_nsec = deadline % 1'000'000'000;
    ctx_.counters().syscalls.add();
    if (::timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr) < 0) return false;
    armed_deadline_ = deadline;
    return true;
  }

  // epoll_pwait2 (Linux 5.11) takes a nanosecond timeout; without it, epoll_wait's milliseconds are rounded up so
  // that a timer never fires early.
  int wait(const timespec* tsp, std::int64_t timeout_ns) noexcept {
    if (has_pwait2_) {
      int n = ::epoll_pwait2(epfd_, events_, max_events, tsp, nullptr);
      if (n >= 0 || errno != ENOSYS) return n;
      has_pwait2_ = false;
    }
    int ms = timeout_ns < 0 ? -1 : static_cast<int>(std::min<std::int64_t>((timeout_ns + 999'999) / 1'000'000, 1 << 30));
    return ::epoll_wait(epfd_, events_, max_events, ms);
  }

  // An edge may have passed before the op started: ask once, without waiting.
  // Whether an edge of this kind (input, output) can complete an operation of this code.
  static bool wants(op_code code, bool in, bool out) noexcept {
    if (code == op_code::poll_inout) return in || out;
    return waits_for_input(code) ? in : out;
  }

  // The events of fd that are ready now, among events (errors and hang-ups included), or -EAGAIN.
  static int ready_events(int fd, short events) noexcept {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, 0);
    if (n < 0) return -errno;
    return n > 0 ? p.revents : -EAGAIN;
  }

  static int ready_now(int fd, short events) noexcept {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, 0);
    if (n < 0) return -errno;
    return n > 0 ? events : -EAGAIN;
  }

  static int connect_result(int fd) noexcept {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return -errno;
    if (err != 0) return -err;
    sockaddr_storage peer{};
    socklen_t plen = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) < 0) {
      return errno == ENOTCONN ? -EAGAIN : -errno;  // not finished yet: keep waiting
    }
    return 0;
  }

  io_context& ctx_;
  int epfd_ = -1;
  int wake_fd_ = -1;
  int timer_fd_ = -1;
  std::int64_t armed_deadline_ = -1;  // CLOCK_MONOTONIC ns the timerfd is set to
  char timer_marker_ = 0;             // its address tags the timerfd's events
  std::size_t waiting_ = 0;
  bool has_pwait2_ = true;
  epoll_event events_[max_events];
};

}  // namespace

std::unique_ptr<backend> make_epoll_backend(io_context& ctx) { return std::make_unique<epoll_backend>(ctx); }

}  // namespace tern::detail
