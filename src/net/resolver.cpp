// net::resolver (see tern/net/resolver.hpp): c-ares driven by the loop.
//
// The pieces:
// - The channel's sockets are created and closed through tern (ares_set_socket_functions), so each is a descriptor
//   of the loop from its first to its last moment, and closing one goes through close_descriptor, which handles an
//   operation still in flight on it (an io_uring poll holds the file until its cancellation completes).
// - c-ares says which sockets it wants watched (the socket state callback); a watch keeps one poll_in and one
//   poll_out operation armed accordingly, and each completion calls ares_process_fd for that socket. The
//   operations complete through the loop's run queue like any other (their run function is ours, not a coroutine
//   resumption), so c-ares is only ever entered from the loop's own thread, and never re-entered.
// - The retransmission timeouts: after every call into c-ares, one node on the loop's timer wheel is set to
//   ares_timeout(); when it fires, ares_process_fd(BAD, BAD) lets c-ares retry or give up.
// - A query's state (resolve_query) is on the heap because it can outlive its awaiter: c-ares has no per-query
//   cancellation, so a cancelled resolve is completed at once and its query detached; when c-ares calls back, the
//   answer is dropped and the query freed.
// - A watch outlives its socket while an operation on it is still in flight or queued: it is freed by its last
//   completion, so the resolver can be destroyed at any time.
#include "tern/net/resolver.hpp"

#include <ares.h>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <optional>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tern/detail/io_op.hpp"
#include "tern/detail/timer_wheel.hpp"
#include "tern/error.hpp"

namespace tern::net {

namespace {

class resolver_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "tern.resolver"; }
  std::string message(int code) const override { return ares_strerror(code); }
  std::error_condition default_error_condition(int code) const noexcept override {
    switch (code) {
      case ARES_ECONNREFUSED: return std::errc::connection_refused;
      case ARES_ENOMEM: return std::errc::not_enough_memory;
      case ARES_ECANCELLED:
      case ARES_EDESTRUCTION: return std::errc::operation_canceled;
      default: return {code, *this};
    }
  }
};

// ares_library_init once per process, before the first channel (it is not thread-safe, and a no-op on Linux
// beyond reference counting, but required by the API).
int library_status() noexcept {
  static const int status = ares_library_init(ARES_LIB_INIT_ALL);
  return status;
}

// The port of a service: empty is 0, a number is itself, a name comes from /etc/services (TCP first, then UDP).
std::optional<std::uint16_t> lookup_port(std::string_view service) noexcept {
  if (service.empty()) return std::uint16_t{0};
  unsigned value = 0;
  bool numeric = service.size() <= 5;
  for (char c : service) {
    numeric = numeric && c >= '0' && c <= '9';
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (numeric) return value <= 65535 ? std::optional<std::uint16_t>(static_cast<std::uint16_t>(value)) : std::nullopt;
  std::string name(service);  // NUL-terminated
  for (const char* protocol : {"tcp", "udp"}) {
    servent entry{};
    servent* found = nullptr;
    char buffer[1024];
    if (::getservbyname_r(name.c_str(), protocol, &entry, buffer, sizeof buffer, &found) == 0 && found != nullptr) {
      return static_cast<std::uint16_t>(ntohs(static_cast<std::uint16_t>(found->s_port)));
    }
  }
  return std::nullopt;
}

// c-ares's status as tern reports it: a cancellation and a timeout are tern's own codes, as for any operation.
std::error_code resolver_code(int status) noexcept {
  if (status == ARES_ECANCELLED || status == ARES_EDESTRUCTION) return make_error_code(error::operation_canceled);
  if (status == ARES_ETIMEOUT) return make_error_code(error::timed_out);
  return {status, dns::category()};
}

}  // namespace

const std::error_category& dns::category() noexcept {
  static const resolver_category_impl category;
  return category;
}

namespace detail {

using tern::detail::descriptor;
using tern::detail::io_op;
using tern::detail::op_code;
using tern::detail::timer_node;
using tern::detail::work_item;

struct socket_watch;

// A poll operation of a watch; its completion runs on_ready instead of resuming a coroutine.
struct watch_op : io_op {
  socket_watch* watch = nullptr;
  bool queued = false;  // started, and its completion has not run yet (pending, cancelling, or in the run queue)
};

struct socket_watch {
  resolver_impl* owner = nullptr;  // null once c-ares has closed the socket (or the resolver is gone)
  descriptor* desc = nullptr;
  int fd = -1;
  bool want_read = false;
  bool want_write = false;
  watch_op read_op;
  watch_op write_op;

  bool idle() const noexcept { return !read_op.queued && !write_op.queued; }
};

struct resolve_query {
  resolver_impl* owner = nullptr;
  resolve_request* request = nullptr;  // null once the awaiter gave up (cancelled or destroyed)
};

struct resolver_impl {
  io_context* ctx = nullptr;
  ares_channel channel = nullptr;
  std::error_code init_error;
  std::vector<socket_watch*> watches;
  // Queries whose awaiter still waits. When the last one gives up, the channel's queries are cancelled (c-ares
  // cancels only all at once), so that abandoned retransmissions do not keep sockets, timers and the loop alive.
  std::size_t awaited = 0;
  struct timeout_node : timer_node {
    resolver_impl* owner = nullptr;
  } timeout;
  // The expiry runs from the run queue, not from inside the wheel's advance (which must not be re-entered by the
  // timer insertions and socket operations that c-ares's processing leads to).
  struct due_item : work_item {
    resolver_impl* owner = nullptr;
    bool queued = false;
  } due;
  ares_socket_functions functions{};

  explicit resolver_impl(io_context& c, const resolver_options& options);
  ~resolver_impl();

  socket_watch* find(int fd) noexcept {
    for (socket_watch* w : watches) {
      if (w->fd == fd) return w;
    }
    return nullptr;
  }

  // Starts what a watch wants and is not already running (an operation whose completion is still queued is not
  // restarted: its completion re-arms it).
  void arm(socket_watch* w) noexcept {
    if (w->want_read && !w->read_op.queued) start(w, w->read_op);
    if (w->want_write && !w->write_op.queued) start(w, w->write_op);
  }

  void start(socket_watch* w, watch_op& op) noexcept {
    op.ctx = ctx;
    op.desc = w->desc;
    op.res = 0;
    op.queued = true;
    if (ctx->start(op)) ctx->schedule(&op);
  }

  static void on_ready(work_item* item) {
    auto& op = *static_cast<watch_op*>(item);
    socket_watch* w = op.watch;
    resolver_impl* self = w->owner;
    // op stays queued until the end, so that a close of the socket inside ares_process_fd (drop) cannot free w
    // under this function.
    if (self != nullptr && op.res != -ECANCELED && (&op == &w->read_op ? w->want_read : w->want_write)) {
      // An error on the socket (a refused UDP port) is read by c-ares itself when it receives.
      const int fd = w->fd;
      ares_process_fd(self->channel, &op == &w->read_op ? fd : ARES_SOCKET_BAD,
                      &op == &w->write_op ? fd : ARES_SOCKET_BAD);
      self->update_timeout();
    }
    op.queued = false;
    if (w->owner == nullptr) {  // the socket was closed (before or during the call)
      if (w->idle()) delete w;
      return;
    }
    self->arm(w);
  }

  // c-ares's socket state callback: which directions of s to watch now.
  static void on_socket_state(void* data, ares_socket_t s, int readable, int writable) {
    auto* self = static_cast<resolver_impl*>(data);
    socket_watch* w = self->find(s);
    if (w == nullptr) return;  // not one of ours (cannot happen: every socket comes from open_socket)
    w->want_read = readable != 0;
    w->want_write = writable != 0;
    if (!w->want_read && w->read_op.st == io_op::state::pending) self->ctx->cancel(w->read_op);
    if (!w->want_write && w->write_op.st == io_op::state::pending) self->ctx->cancel(w->write_op);
    self->arm(w);
  }

  static ares_socket_t open_socket(int domain, int type, int protocol, void* data) {
    auto* self = static_cast<resolver_impl*>(data);
    const int fd = ::socket(domain, type | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
    if (fd < 0) return ARES_SOCKET_BAD;
    auto* w = new (std::nothrow) socket_watch;
    if (w == nullptr) {
      ::close(fd);
      errno = ENOMEM;
      return ARES_SOCKET_BAD;
    }
    try {
      self->watches.reserve(self->watches.size() + 1);
      w->desc = self->ctx->open_descriptor(fd);
    } catch (const std::system_error& e) {
      ::close(fd);
      delete w;
      errno = e.code().category() == std::system_category() ? e.code().value() : ENOMEM;
      return ARES_SOCKET_BAD;
    } catch (...) {
      ::close(fd);
      delete w;
      errno = ENOMEM;
      return ARES_SOCKET_BAD;
    }
    w->owner = self;
    w->fd = fd;
    for (watch_op* op : {&w->read_op, &w->write_op}) {
      op->watch = w;
      op->run = &on_ready;
      op->ctx = self->ctx;
    }
    w->read_op.code = op_code::poll_in;
    w->write_op.code = op_code::poll_out;
    self->watches.push_back(w);
    return fd;
  }

  // Orphans the watch and closes the descriptor through the loop (which cancels what is in flight on it).
  void drop(socket_watch* w) noexcept {
    std::erase(watches, w);
    w->owner = nullptr;
    w->want_read = w->want_write = false;
    ctx->close_descriptor(w->desc);  // cancels the pending polls; the fd is closed now
    w->desc = nullptr;
    w->fd = -1;
    if (w->idle()) delete w;
  }

  static int close_socket(ares_socket_t s, void* data) {
    auto* self = static_cast<resolver_impl*>(data);
    if (socket_watch* w = self->find(s)) {
      self->drop(w);
      return 0;
    }
    return ::close(s);
  }

  static int connect_socket(ares_socket_t s, const sockaddr* addr, ares_socklen_t len, void*) {
    return ::connect(s, addr, len);
  }

  static ares_ssize_t receive_from(ares_socket_t s, void* buf, size_t len, int flags, sockaddr* from,
                                   ares_socklen_t* from_len, void*) {
    return ::recvfrom(s, buf, len, flags, from, from_len);
  }

  static ares_ssize_t send_vector(ares_socket_t s, const iovec* iov, int n, void*) {
    msghdr m{};
    m.msg_iov = const_cast<iovec*>(iov);
    m.msg_iovlen = static_cast<std::size_t>(n);
    return ::sendmsg(s, &m, MSG_NOSIGNAL);
  }

  static void on_timeout(timer_node* n) noexcept {
    resolver_impl* self = static_cast<timeout_node*>(n)->owner;
    if (!self->due.queued) {
      self->due.queued = true;
      self->ctx->schedule(&self->due);
    }
  }

  // Sets the timer to c-ares's next timeout, or disarms it when no query is waiting.
  void update_timeout() noexcept {
    if (channel == nullptr) return;
    timeval tv{};
    const timeval* next = ares_timeout(channel, nullptr, &tv);
    if (timeout.linked()) ctx->timers().remove(&timeout);
    if (next == nullptr) return;
    const std::uint64_t ns = static_cast<std::uint64_t>(next->tv_sec) * 1'000'000'000u +
                             static_cast<std::uint64_t>(next->tv_usec) * 1'000u;
    // One wheel tick later than asked, so that the wheel always takes the node.
    timeout.deadline_ns = ctx->deadline_now_ns() + ns + (std::uint64_t{1} << tern::detail::timer_wheel::tick_shift);
    if (!ctx->timers().insert(&timeout)) on_timeout(&timeout);
  }

  static void on_due(work_item* item) {
    resolver_impl* self = static_cast<due_item*>(item)->owner;
    self->due.queued = false;
    ares_process_fd(self->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
    self->update_timeout();
  }

  static void on_answer(void* arg, int status, int /*timeouts*/, ares_addrinfo* info) {
    auto* q = static_cast<resolve_query*>(arg);
    if (resolve_request* r = q->request) {
      --q->owner->awaited;
      r->query = nullptr;
      r->done = true;
      if (status == ARES_SUCCESS) {
        fill(*r, info);
      } else {
        r->ec = resolver_code(status);
      }
      if (!r->starting) {
        r->queued = true;
        q->owner->ctx->schedule(r);
      }
    }
    if (info != nullptr) ares_freeaddrinfo(info);
    delete q;
  }

  static void fill(resolve_request& r, const ares_addrinfo* info) {
    try {
      for (const ares_addrinfo_node* n = info->nodes; n != nullptr; n = n->ai_next) {
        if (n->ai_addr == nullptr || (n->ai_family != AF_INET && n->ai_family != AF_INET6)) continue;
        endpoint ep(n->ai_addr, static_cast<socklen_t>(n->ai_addrlen));
        bool seen = false;
        for (const endpoint& e : r.results.endpoints) seen = seen || e == ep;
        if (!seen) r.results.endpoints.push_back(ep);
      }
      const char* canonical = nullptr;
      for (const ares_addrinfo_cname* c = info->cnames; c != nullptr; c = c->next) {
        if (c->name != nullptr) canonical = c->name;
      }
      if (canonical == nullptr) canonical = info->name;
      if (canonical != nullptr) r.results.canonical_name = canonical;
      if (r.results.endpoints.empty()) r.ec = make_error_code(dns::error::no_data);
    } catch (const std::bad_alloc&) {
      r.results = {};
      r.ec = make_error_code(dns::error::no_memory);
    }
  }
};

resolver_impl::resolver_impl(io_context& c, const resolver_options& options) : ctx(&c) {
  timeout.owner = this;
  timeout.fire = &on_timeout;
  due.owner = this;
  due.run = &on_due;
  if (const int status = library_status(); status != ARES_SUCCESS) {
    init_error = resolver_code(status);
    return;
  }
  ares_options o{};
  int mask = ARES_OPT_SOCK_STATE_CB | ARES_OPT_LOOKUPS;
  o.sock_state_cb = &on_socket_state;
  o.sock_state_cb_data = this;
  char lookups_files_first[] = "fb";
  char lookups_dns_only[] = "b";
  o.lookups = options.hosts_file ? lookups_files_first : lookups_dns_only;
  if (options.timeout.count() > 0) {
    mask |= ARES_OPT_TIMEOUTMS;
    o.timeout = static_cast<int>(options.timeout.count());
  }
  if (options.tries > 0) {
    mask |= ARES_OPT_TRIES;
    o.tries = options.tries;
  }
  if (!options.search_domains) {
    mask |= ARES_OPT_FLAGS | ARES_OPT_DOMAINS;
    o.flags = ARES_FLAG_NOSEARCH;
    o.domains = nullptr;
    o.ndomains = 0;
  }
  if (const int status = ares_init_options(&channel, &o, mask); status != ARES_SUCCESS) {
    channel = nullptr;
    init_error = resolver_code(status);
    return;
  }
  functions.asocket = &open_socket;
  functions.aclose = &close_socket;
  functions.aconnect = &connect_socket;
  functions.arecvfrom = &receive_from;
  functions.asendv = &send_vector;
  ares_set_socket_functions(channel, &functions, this);
  if (!options.servers.empty()) {
    std::string csv;
    for (const endpoint& s : options.servers) {
      if (!csv.empty()) csv += ',';
      csv += s.to_string();  // "1.2.3.4:53", "[::1]:53": the form ares_set_servers_ports_csv reads
    }
    if (const int status = ares_set_servers_ports_csv(channel, csv.c_str()); status != ARES_SUCCESS) {
      init_error = resolver_code(status);
    }
  }
}

resolver_impl::~resolver_impl() {
  if (timeout.linked()) ctx->timers().remove(&timeout);
  if (due.queued) ctx->purge(&due);
  // Calls back every pending query (ARES_EDESTRUCTION: its awaiter is completed with operation_canceled) and
  // closes every socket through close_socket.
  if (channel != nullptr) ares_destroy(channel);
  while (!watches.empty()) drop(watches.back());
}

resolve_awaiter::~resolve_awaiter() {
  // A frame destroyed while suspended (loop teardown): the query must not write into it any more.
  if (req_.query != nullptr) {
    req_.query->request = nullptr;
    --impl_->awaited;
  }
  if (req_.queued) ctx_->purge(&req_);
}

bool resolve_awaiter::await_ready() noexcept {
  if (!ctx_->running_here()) {
    req_.ec = make_error_code(error::wrong_loop);
    return true;
  }
  if (impl_ == nullptr) {
    req_.ec = make_error_code(error::operation_canceled);
    return true;
  }
  if (impl_->init_error) {
    req_.ec = impl_->init_error;
    return true;
  }
  std::optional<std::uint16_t> port = lookup_port(service_);
  if (!port) {
    req_.ec = make_error_code(dns::error::service_not_found);
    return true;
  }
  port_ = *port;
  // A numeric host is converted here, without c-ares (1.18 sends queries for some literals).
  if (auto address = ip_address::parse(host_)) {
    const bool wanted = family_ == address_family::any || (family_ == address_family::v6) == address->is_v6();
    if (!wanted) {
      req_.ec = make_error_code(dns::error::no_data);
      return true;
    }
    try {
      req_.results.endpoints.emplace_back(*address, port_);
      req_.results.canonical_name = host_;
    } catch (const std::bad_alloc&) {
      req_.results = {};
      req_.ec = make_error_code(dns::error::no_memory);
    }
    return true;
  }
  return false;
}

bool resolve_awaiter::await_suspend(std::coroutine_handle<> h) noexcept {
  req_.handle = h;
  auto* q = new (std::nothrow) resolve_query;
  if (q == nullptr) {
    req_.ec = make_error_code(dns::error::no_memory);
    return false;
  }
  q->owner = impl_;
  q->request = &req_;
  req_.query = q;
  ++impl_->awaited;
  ares_addrinfo_hints hints{};
  hints.ai_family = family_ == address_family::v4 ? AF_INET : family_ == address_family::v6 ? AF_INET6 : AF_UNSPEC;
  hints.ai_flags = ARES_AI_CANONNAME | ARES_AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;  // one node per address
  // The port was looked up by await_ready; c-ares gets it as a number (or no service for port 0).
  char port_text[8];
  std::snprintf(port_text, sizeof port_text, "%u", static_cast<unsigned>(port_));
  // The host is the resolve task's own std::string, so it is NUL-terminated.
  req_.starting = true;
  ares_getaddrinfo(impl_->channel, host_.data(), port_ == 0 ? nullptr : port_text, &hints,
                   &resolver_impl::on_answer, q);
  req_.starting = false;
  impl_->update_timeout();
  return !req_.done;  // an answer from /etc/hosts or a numeric host came at once
}

void resolve_awaiter::cancel() noexcept {
  if (req_.done || req_.query == nullptr) return;
  req_.query->request = nullptr;
  req_.query = nullptr;
  req_.done = true;
  req_.ec = make_error_code(error::operation_canceled);
  req_.queued = true;
  ctx_->schedule(&req_);
  if (--impl_->awaited == 0) {
    ares_cancel(impl_->channel);  // only abandoned queries are left
    impl_->update_timeout();
  }
}

}  // namespace detail

resolver::resolver(io_context& ctx, resolver_options options)
    : ctx_(&ctx), impl_(std::make_unique<detail::resolver_impl>(ctx, options)) {}

resolver::resolver(resolver&&) noexcept = default;

resolver& resolver::operator=(resolver&& o) noexcept {
  if (this != &o) {
    impl_ = std::move(o.impl_);
    ctx_ = o.ctx_;
  }
  return *this;
}

resolver::~resolver() = default;

task<io_result<resolve_results>> resolver::resolve(std::string host, std::string service, address_family family) {
  co_return co_await detail::resolve_awaiter(impl_.get(), *ctx_, host, service, family);
}

void resolver::cancel() noexcept {
  if (impl_ != nullptr && impl_->channel != nullptr) {
    ares_cancel(impl_->channel);
    impl_->update_timeout();
  }
}

std::error_code resolver::error() const noexcept {
  return impl_ != nullptr ? impl_->init_error : make_error_code(error::operation_canceled);
}

}  // namespace tern::net
