// Snapshots of the loops' counters, the registry of every loop in the process, and the Prometheus text form
// (see tern/metrics.hpp and detail/loop_counters.hpp).
#include "tern/metrics.hpp"

#include <charconv>
#include <mutex>

#include "backends.hpp"
#include "loop_registry.hpp"
#include "tern/detail/io_op.hpp"
#include "tern/io_context.hpp"

namespace tern {

namespace detail {

static_assert(static_cast<std::size_t>(op_code::mkdirat) + 1 == op_kind_count,
              "loop_counters keeps one counter per op_code: op_kind_count and kind_names must follow op_code");

namespace {
// In op_code's order.
constexpr std::string_view kind_names[op_kind_count] = {
    "recv",     "send",      "accept",    "connect",        "read",             "write",   "poll_in",
    "poll_out", "poll_inout", "recvmsg",   "sendmsg",   "splice",         "sendfile",         "recvmmsg", "sendmmsg",
    "receive",  "recv_multishot", "accept_multishot", "send_zc", "read_at", "write_at",   "fsync",   "fallocate",
    "ftruncate", "statx",    "openat",    "renameat",       "unlinkat",         "mkdirat",
};
}  // namespace

void count_syscall_of_caller() noexcept {
  io_context* caller = io_context::current();
  if (caller != nullptr && caller->running_here()) caller->counters().syscalls.add();
}

namespace {
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
io_context* registry_head = nullptr;  // guarded by registry_mutex
// What the destroyed loops counted (guarded by registry_mutex); its loops figure stays 0.
metrics::loop_snapshot& retired_counts() {
  static metrics::loop_snapshot r = [] {
    metrics::loop_snapshot s;
    s.loops = 0;
    return s;
  }();
  return r;
}
}  // namespace

void loop_registry::add(io_context* c) {
  std::lock_guard lock(registry_mutex());
  c->registry_prev_ = nullptr;
  c->registry_next_ = registry_head;
  if (registry_head != nullptr) registry_head->registry_prev_ = c;
  registry_head = c;
}

void loop_registry::retire(io_context* c) noexcept {
  metrics::loop_snapshot last = metrics::snapshot(*c);
  // A destroyed loop's pools are its thread's, which go on without it: only its counters are kept.
  last.frame_blocks_in_use = 0;
  last.frame_blocks_cached = 0;
  last.line_blocks_cached = 0;
  last.loops = 0;  // the loops figure counts live loops
  std::lock_guard lock(registry_mutex());
  if (c->registry_prev_ != nullptr) c->registry_prev_->registry_next_ = c->registry_next_;
  else registry_head = c->registry_next_;
  if (c->registry_next_ != nullptr) c->registry_next_->registry_prev_ = c->registry_prev_;
  retired_counts() += last;
}

metrics::loop_snapshot loop_registry::total() {
  std::lock_guard lock(registry_mutex());
  metrics::loop_snapshot sum = retired_counts();
  for (io_context* c = registry_head; c != nullptr; c = c->registry_next_) sum += metrics::snapshot(*c);
  return sum;
}

}  // namespace detail

namespace metrics {

std::string_view op_kind_name(std::size_t i) noexcept {
  return i < op_kind_count ? detail::kind_names[i] : std::string_view("unknown");
}

std::uint64_t lag_histogram::count() const noexcept {
  std::uint64_t n = 0;
  for (std::uint64_t b : buckets) n += b;
  return n;
}

std::uint64_t lag_histogram::quantile_bound_us(double q) const noexcept {
  const std::uint64_t n = count();
  if (n == 0) return 0;
  const auto rank = static_cast<std::uint64_t>(q * static_cast<double>(n) + 0.5);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < bucket_count; ++i) {
    seen += buckets[i];
    if (seen >= rank && seen != 0) return i + 1 < bucket_count ? upper_bound_us(i) : upper_bound_us(i - 1) * 2;
  }
  return upper_bound_us(bucket_count - 2) * 2;
}

std::uint64_t loop_snapshot::ops_started() const noexcept {
  std::uint64_t n = 0;
  for (const op_counts& o : ops) n += o.started;
  return n;
}

loop_snapshot& loop_snapshot::operator+=(const loop_snapshot& o) noexcept {
  turns += o.turns;
  items_run += o.items_run;
  posts_local += o.posts_local;
  posts_remote += o.posts_remote;
  wakeups_sent += o.wakeups_sent;
  wakeups_received += o.wakeups_received;
  parks += o.parks;
  park_ns += o.park_ns;
  spins += o.spins;
  spin_ns += o.spin_ns;
  spin_hits += o.spin_hits;
  inline_completions += o.inline_completions;
  receive_pool_dry += o.receive_pool_dry;
  receive_overflows += o.receive_overflows;
  receive_bundles += o.receive_bundles;
  receive_ring_moves += o.receive_ring_moves;
  zero_copy_copied += o.zero_copy_copied;
  kernel_waits += o.kernel_waits;
  syscalls += o.syscalls;
  timers_armed += o.timers_armed;
  timers_fired += o.timers_fired;
  frame_blocks_in_use += o.frame_blocks_in_use;
  frame_blocks_cached += o.frame_blocks_cached;
  line_blocks_cached += o.line_blocks_cached;
  for (std::size_t i = 0; i < op_kind_count; ++i) {
    ops[i].started += o.ops[i].started;
    ops[i].completed += o.ops[i].completed;
  }
  for (std::size_t i = 0; i < lag_histogram::bucket_count; ++i) loop_lag.buckets[i] += o.loop_lag.buckets[i];
  loop_lag.sum_ns += o.loop_lag.sum_ns;
  loops += o.loops;
  return *this;
}

loop_snapshot runtime_snapshot::total() const noexcept {
  loop_snapshot sum;
  sum.loops = 0;
  for (const loop_snapshot& w : workers) sum += w;
  return sum;
}

loop_snapshot snapshot(const io_context& ctx) noexcept {
  const detail::loop_counters& c = ctx.counters();
  loop_snapshot s;
  s.turns = c.turns.get();
  s.items_run = c.items_run.get();
  s.posts_local = ctx.posts_local();
  s.posts_remote = c.posts_remote.get();
  s.wakeups_sent = c.wakeups_sent.get();
  s.wakeups_received = c.wakeups_received.get();
  s.parks = c.parks.get();
  s.park_ns = c.park_ns.get();
  s.spins = c.spins.get();
  s.spin_ns = c.spin_ns.get();
  s.spin_hits = c.spin_hits.get();
  s.inline_completions = c.inline_completions.get();
  s.receive_pool_dry = c.receive_pool_dry.get();
  s.receive_overflows = c.receive_overflows.get();
  s.receive_bundles = c.receive_bundles.get();
  s.receive_ring_moves = c.receive_ring_moves.get();
  s.zero_copy_copied = c.zero_copy_copied.get();
  s.kernel_waits = c.kernel_waits.get();
  s.syscalls = c.syscalls.get();
  s.timers_armed = ctx.timers().armed();
  s.timers_fired = ctx.timers().fired();
  s.frame_blocks_in_use = c.frame_blocks_in_use.get();
  s.frame_blocks_cached = static_cast<std::uint64_t>(c.frame_blocks_cached.get());
  s.line_blocks_cached = static_cast<std::uint64_t>(c.line_blocks_cached.get());
  for (std::size_t i = 0; i < op_kind_count; ++i) {
    s.ops[i].started = c.ops_started[i].get();
    s.ops[i].completed = c.ops_completed[i].get();
  }
  for (std::size_t i = 0; i < lag_histogram::bucket_count; ++i) s.loop_lag.buckets[i] = c.lag_buckets_us[i].get();
  s.loop_lag.sum_ns = c.lag_sum_ns.get();
  return s;
}

loop_snapshot process_snapshot() { return detail::loop_registry::total(); }

// ---- Prometheus text exposition format 0.0.4 ----

namespace {

void append_number(std::string& out, std::uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_number(std::string& out, std::int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_seconds(std::string& out, std::uint64_t ns) {
  // Exact decimal seconds: whole part, then nine digits of nanoseconds.
  append_number(out, ns / 1'000'000'000);
  char frac[10] = {'.'};
  std::uint64_t rest = ns % 1'000'000'000;
  for (int i = 9; i >= 1; --i) {
    frac[i] = static_cast<char>('0' + rest % 10);
    rest /= 10;
  }
  out.append(frac, 10);
}

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void series_start(std::string& out, std::string_view name, std::string_view loop) {
  out += name;
  out += "{loop=\"";
  out += loop;  // a worker index or a caller's plain label: no quotes or backslashes to escape
  out += '"';
}

template <class V>
void sample(std::string& out, std::string_view name, std::string_view loop, V value) {
  series_start(out, name, loop);
  out += "} ";
  append_number(out, value);
  out += '\n';
}

// One metric of the exposition: its name, type, help text, and how to write its samples for one loop.
struct family {
  std::string_view name;
  std::string_view type;
  std::string_view help;
  void (*write)(std::string& out, std::string_view name, const loop_snapshot& s, std::string_view loop);
};

template <auto Field>
void scalar(std::string& out, std::string_view name, const loop_snapshot& s, std::string_view loop) {
  sample(out, name, loop, s.*Field);
}

void seconds(std::string& out, std::string_view name, std::uint64_t ns, std::string_view loop) {
  series_start(out, name, loop);
  out += "} ";
  append_seconds(out, ns);
  out += '\n';
}

void per_op(std::string& out, std::string_view name, const loop_snapshot& s, std::string_view loop, bool started) {
  for (std::size_t i = 0; i < op_kind_count; ++i) {
    const std::uint64_t v = started ? s.ops[i].started : s.ops[i].completed;
    if (v == 0) continue;  // two dozen kinds, most unused by a given program
    series_start(out, name, loop);
    out += ",op=\"";
    out += op_kind_name(i);
    out += "\"} ";
    append_number(out, v);
    out += '\n';
  }
}

void lag(std::string& out, std::string_view name, const loop_snapshot& s, std::string_view loop) {
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < lag_histogram::bucket_count; ++i) {
    cumulative += s.loop_lag.buckets[i];
    out += name;
    out += "_bucket{loop=\"";
    out += loop;
    out += "\",le=\"";
    if (i + 1 < lag_histogram::bucket_count) {
      append_seconds(out, lag_histogram::upper_bound_us(i) * 1000);
    } else {
      out += "+Inf";
    }
    out += "\"} ";
    append_number(out, cumulative);
    out += '\n';
  }
  out += name;
  out += "_sum{loop=\"";
  out += loop;
  out += "\"} ";
  append_seconds(out, s.loop_lag.sum_ns);
  out += '\n';
  out += name;
  out += "_count{loop=\"";
  out += loop;
  out += "\"} ";
  append_number(out, cumulative);
  out += '\n';
}

const family families[] = {
    {"tern_loop_turns_total", "counter", "Passes of the event loop.", scalar<&loop_snapshot::turns>},
    {"tern_loop_items_run_total", "counter", "Queued items run: resumptions, completions and handlers.",
     scalar<&loop_snapshot::items_run>},
    {"tern_loop_posts_local_total", "counter", "Handlers posted from the loop's own thread.",
     scalar<&loop_snapshot::posts_local>},
    {"tern_loop_posts_remote_total", "counter", "Items received from other threads through the loop's inbox.",
     scalar<&loop_snapshot::posts_remote>},
    {"tern_loop_wakeups_sent_total", "counter", "Parked loops this loop's thread woke by posting to them.",
     scalar<&loop_snapshot::wakeups_sent>},
    {"tern_loop_wakeups_received_total", "counter", "Wake-ups of this loop from a park by another thread.",
     scalar<&loop_snapshot::wakeups_received>},
    {"tern_loop_parks_total", "counter", "Blocking waits in the kernel.", scalar<&loop_snapshot::parks>},
    {"tern_loop_park_seconds_total", "counter", "Time spent in blocking waits.",
     [](std::string& out, std::string_view name, const loop_snapshot& s, std::string_view loop) {
       seconds(out, name, s.park_ns, loop);
     }},
    {"tern_loop_spins_total", "counter", "Polling spins before a park.", scalar<&loop_snapshot::spins>},
    {"tern_loop_spin_seconds_total", "counter", "Time spent spinning before parks.",
     [](std::string& out, std::string_view name, const loop_snapshot& s, std::string_view loop) {
       seconds(out, name, s.spin_ns, loop);
     }},
    {"tern_loop_spin_hits_total", "counter", "Spins that found work, saving a park.",
     scalar<&loop_snapshot::spin_hits>},
    {"tern_loop_inline_completions_total", "counter", "I/O operations that finished without waiting.",
     scalar<&loop_snapshot::inline_completions>},
    {"tern_loop_receive_pool_dry_total", "counter",
     "Times the receive buffer pool ran dry (the pool grew, or a receive used an overflow buffer).",
     scalar<&loop_snapshot::receive_pool_dry>},
    {"tern_loop_receive_overflows_total", "counter",
     "Receives that used an overflow buffer: the pool was at its maximum and empty (or its ring was being enlarged).",
     scalar<&loop_snapshot::receive_overflows>},
    {"tern_loop_receive_bundles_total", "counter",
     "Receive completions that filled more than one pool buffer at once (io_uring bundles).",
     scalar<&loop_snapshot::receive_bundles>},
    {"tern_loop_receive_ring_moves_total", "counter",
     "Times the receive pool's buffer ring was moved to a larger one as the pool grew (io_uring).",
     scalar<&loop_snapshot::receive_ring_moves>},
    {"tern_loop_zero_copy_copied_total", "counter",
     "Zero-copy sends whose bytes the kernel copied after all (loopback, or a device without scatter-gather).",
     scalar<&loop_snapshot::zero_copy_copied>},
    {"tern_loop_kernel_waits_total", "counter", "io_uring_enter calls that submit and reap, or epoll_wait calls.",
     scalar<&loop_snapshot::kernel_waits>},
    {"tern_loop_syscalls_total", "counter", "System calls made for I/O by the loop and its backend.",
     scalar<&loop_snapshot::syscalls>},
    {"tern_timers_armed_total", "counter", "Timers put on the loop's timer wheel.",
     scalar<&loop_snapshot::timers_armed>},
    {"tern_timers_fired_total", "counter", "Timers that expired.", scalar<&loop_snapshot::timers_fired>},
    {"tern_ops_started_total", "counter", "I/O operations started, by kind.",
     [](std::string& out, std::string_view name, const loop_snapshot& s, std::string_view loop) {
       per_op(out, name, s, loop, true);
     }},
    {"tern_ops_completed_total", "counter", "I/O operations completed (cancelled and failed included), by kind.",
     [](std::string& out, std::string_view name, const loop_snapshot& s, std::string_view loop) {
       per_op(out, name, s, loop, false);
     }},
    {"tern_frame_pool_blocks_in_use", "gauge", "Frame-pool blocks held by the loop's thread.",
     scalar<&loop_snapshot::frame_blocks_in_use>},
    {"tern_frame_pool_blocks_cached", "gauge", "Free frame-pool blocks cached by the loop's thread.",
     scalar<&loop_snapshot::frame_blocks_cached>},
    {"tern_line_pool_blocks_cached", "gauge", "Free line-pool blocks cached by the loop's thread.",
     scalar<&loop_snapshot::line_blocks_cached>},
    {"tern_loop_lag_seconds", "histogram", "Time from an item becoming runnable to its run (sampled).", lag},
};

}  // namespace

void write_prometheus(const loop_snapshot& s, std::string& out, std::string_view loop) {
  for (const family& f : families) {
    header(out, f.name, f.type, f.help);
    f.write(out, f.name, s, loop);
  }
}

void write_prometheus(const runtime_snapshot& s, std::string& out) {
  for (const family& f : families) {
    header(out, f.name, f.type, f.help);
    for (std::size_t i = 0; i < s.workers.size(); ++i) {
      char label[24];
      auto r = std::to_chars(label, label + sizeof label, i);
      f.write(out, f.name, s.workers[i], std::string_view(label, static_cast<std::size_t>(r.ptr - label)));
    }
  }
}

}  // namespace metrics

}  // namespace tern
