// The registry's engine: the dependency graph, start and stop waves, and the classification of what cannot start.
//
// Invariants (all state lives on the home loop's thread):
// - slot.met is true exactly when the slot's interface has a running provider (one in its `running` list), and
//   node.unmet counts the node's required slots that are not met. A provider enters `running` when its start()
//   succeeds and leaves it as soon as a stop wave takes hold of it, so nothing new binds to a provider on its way
//   down. The first provider entering, or the last leaving, walks the interface's users once: O(edges).
// - A constructed node is bound to the providers it was given (slot.bound); each provider lists those slots
//   (dependents), and stops only when that list is empty.
// - A stop wave holds a closure of nodes (the targets and everything bound to them, transitively); a held node is
//   not started again until the wave is over, so a dependent cannot rebind to a provider that is stopping.
// - busy counts the start() and stop() coroutines in flight; the registry is settled when it is zero. Ready starts
//   and stops are queued and run by pump(), iteratively, so a long chain of services without start() or stop()
//   costs no stack.
// - Every start() and stop() runs as a task spawned with service_calls' token, which the tasks it awaits inherit:
//   an operation awaited under that token would wait for the call that awaits it, and is refused instead.
// - operations counts the operations (start, stop, settled, ...) from their first step to the end of their turn,
//   on whichever thread they began; the destructor refuses to run while any is counted.
#include "tern/services/registry.hpp"

#include <atomic>
#include <cstdio>
#include <deque>
#include <exception>
#include <future>
#include <map>
#include <span>
#include <stdexcept>
#include <stop_token>
#include <system_error>
#include <typeindex>
#include <unordered_map>

#include "tern/error.hpp"
#include "tern/spawn.hpp"

namespace tern::services {

namespace {

template <class T>
struct link {
  T* prev = nullptr;
  T* next = nullptr;
};

// Intrusive doubly linked list through a link<T> member: O(1) insertion and removal, no allocation.
template <class T, link<T> T::*L>
class ilist {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  T* front() const noexcept { return head_; }
  static T* next(T* x) noexcept { return (x->*L).next; }
  void push_back(T* x) noexcept {
    (x->*L).prev = tail_;
    (x->*L).next = nullptr;
    if (tail_ != nullptr) {
      (tail_->*L).next = x;
    } else {
      head_ = x;
    }
    tail_ = x;
  }
  void erase(T* x) noexcept {
    link<T>& l = x->*L;
    if (l.prev != nullptr) {
      (l.prev->*L).next = l.next;
    } else {
      head_ = l.next;
    }
    if (l.next != nullptr) {
      (l.next->*L).prev = l.prev;
    } else {
      tail_ = l.prev;
    }
    l.prev = l.next = nullptr;
  }

 private:
  T* head_ = nullptr;
  T* tail_ = nullptr;
};

std::string describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception of unknown type";
  }
}

}  // namespace

struct registry::state {
  struct node;
  struct interface_record;

  // A node provides an interface.
  struct provision {
    node* owner = nullptr;
    interface_record* iface = nullptr;
    void* (*to_interface)(void*) noexcept = nullptr;
    bool running = false;  // in iface->running
    link<provision> registered_link;
    link<provision> running_link;
  };

  // A node depends on an interface.
  struct slot {
    node* owner = nullptr;
    interface_record* iface = nullptr;
    bool required = false;
    bool met = false;       // iface has a running provider
    node* bound = nullptr;  // the provider injected into the constructed object, if any
    link<slot> user_link;   // in iface->users
    link<slot> bound_link;  // in bound->dependents
  };

  struct interface_record {
    std::string name;
    ilist<provision, &provision::registered_link> registered;  // every provider, in add order
    ilist<provision, &provision::running_link> running;        // running providers, in start order
    ilist<slot, &slot::user_link> users;                       // every dependency on it
    // Classification scratch, valid when stamp is the current pass.
    std::uint64_t stamp = 0;
    std::size_t providers = 0;  // enabled providers
    std::size_t alive = 0;      // enabled providers not failed nor blocked
    bool dead = false;          // providers > 0 and alive == 0: its users are blocked
    bool ok = false;            // it may yet get a running provider without anything being added or fixed
    const std::string* root = nullptr;  // dead: the failed service behind it
  };

  enum class phase { idle, starting, running, stopping };

  struct node {
    service_id id;
    std::string name;
    std::unique_ptr<detail::service_model> model;
    std::vector<provision> provides;  // never resized once linked: the lists point into it
    std::vector<slot> deps;
    ilist<slot, &slot::bound_link> dependents;  // slots of constructed nodes bound to this one
    phase ph = phase::idle;
    bool enabled = true;   // wanted: cleared by stop(id) and remove(id)
    bool failed = false;   // its constructor or start() failed; cleared by start(id)
    bool held = false;     // part of the current stop wave
    bool queued = false;   // in to_start
    std::size_t unmet = 0;
    std::exception_ptr error;
    std::error_code error_code;
    std::exception_ptr stop_error;
    // Classification results and scratch.
    service_state verdict = service_state::stopped;
    std::string reason;
    std::string waiting_for;
    std::string failed_dependency;
    std::vector<std::string> cycle;
    std::uint64_t candidate = 0;  // == stamp: idle and wanting to run in this pass
    std::size_t need = 0;
    bool sat = false;
    std::uint64_t walk = 0;
  };

  explicit state(io_context& h) : home(&h), service_calls(service_calls_source.get_token()) {}

  io_context* home;
  // Never stopped: its token only marks the tasks of services' start() and stop() (see the invariants above).
  std::stop_source service_calls_source;
  std::stop_token service_calls;
  // Incremented by an operation's first step, on the awaiting thread, and decremented (release) on the home loop
  // once it has ended its turn, its last access to the state; the destructor's acquire load pairs with it.
  std::atomic<std::size_t> operations{0};
  std::map<std::uint64_t, std::unique_ptr<node>> nodes;  // by id, so in add order
  std::uint64_t next_id = 1;
  std::unordered_map<std::type_index, std::unique_ptr<interface_record>> interfaces;
  std::unordered_map<std::string, node*> names;
  bool running = false;
  std::deque<node*> to_start;
  std::vector<node*> to_stop;
  bool pumping = false;
  std::size_t busy = 0;
  std::vector<node*> wave;
  std::size_t wave_remaining = 0;
  std::coroutine_handle<> wave_waiter;
  std::vector<std::coroutine_handle<>> quiet_waiters;
  bool op_busy = false;
  std::deque<std::coroutine_handle<>> op_waiters;
  bool dirty = true;
  std::uint64_t stamp = 0;
  std::vector<void*> scratch;

  // ---- lookups ----

  interface_record& interface_for(const std::type_info& t) {
    auto& slot = interfaces[std::type_index(t)];
    if (!slot) {
      slot = std::make_unique<interface_record>();
      slot->name = type_name(t);
    }
    return *slot;
  }

  node& find(service_id id) const {
    auto it = nodes.find(id.value);
    if (it == nodes.end()) {
      throw std::out_of_range("tern::services::registry: no service with id " + std::to_string(id.value));
    }
    return *it->second;
  }

  // ---- starting ----

  bool startable(const node& n) const noexcept {
    return running && n.enabled && !n.held && !n.failed && n.ph == phase::idle && n.unmet == 0;
  }

  void consider(node& n) {
    if (!n.queued && startable(n)) {
      n.queued = true;
      to_start.push_back(&n);
    }
  }

  void pump() {
    if (pumping) return;  // the outer call's loop takes what was queued
    pumping = true;
    while (!to_stop.empty() || !to_start.empty()) {
      if (!to_stop.empty()) {
        node* n = to_stop.back();
        to_stop.pop_back();
        begin_stop(*n);
        continue;
      }
      node* n = to_start.front();
      to_start.pop_front();
      n->queued = false;
      if (startable(*n)) begin_start(*n);
    }
    pumping = false;
    if (busy == 0) wake_all(quiet_waiters);
  }

  void wake_all(std::vector<std::coroutine_handle<>>& waiters) {
    for (auto h : waiters) home->post([h] { h.resume(); });
    waiters.clear();
  }

  void begin_start(node& n) {
    dirty = true;
    scratch.assign(n.deps.size(), nullptr);
    for (std::size_t i = 0; i < n.deps.size(); ++i) {
      slot& s = n.deps[i];
      provision* p = s.iface->running.front();
      if (p == nullptr) continue;  // an absent optional (a required one is met: unmet == 0)
      s.bound = p->owner;
      p->owner->dependents.push_back(&s);
      scratch[i] = p->to_interface(p->owner->model->object());
    }
    try {
      n.model->construct(scratch.data());
    } catch (...) {
      unbind(n);
      fail(n, std::current_exception(), {});
      return;
    }
    if (n.model->has_start()) {
      n.ph = phase::starting;
      ++busy;
      tern::spawn(*home, run_start(this, &n), service_calls).detach();
    } else {
      become_running(n);
    }
  }

  static task<void> run_start(state* self, node* n) {
    std::error_code ec;
    std::exception_ptr error;
    try {
      task<std::error_code> started = n->model->start();
      ec = co_await std::move(started);
    } catch (...) {
      error = std::current_exception();
    }
    self->start_done(*n, ec, error);
  }

  void start_done(node& n, std::error_code ec, std::exception_ptr error) {
    --busy;
    if (error || ec) {
      n.model->destroy();
      n.ph = phase::idle;
      unbind(n);
      fail(n, error, ec);
      if (n.held) wave_node_done();
    } else {
      become_running(n);
    }
    pump();
  }

  void fail(node& n, std::exception_ptr error, std::error_code ec) {
    dirty = true;
    n.failed = true;
    n.error = std::move(error);
    n.error_code = ec;
  }

  void become_running(node& n) {
    dirty = true;
    n.ph = phase::running;
    if (n.held) {  // a stop wave took hold of it while it started: nobody is bound to it yet, so it stops now
      to_stop.push_back(&n);
      return;
    }
    for (provision& p : n.provides) {
      const bool first = p.iface->running.empty();
      p.iface->running.push_back(&p);
      p.running = true;
      if (!first) continue;
      for (slot* u = p.iface->users.front(); u != nullptr; u = decltype(p.iface->users)::next(u)) {
        u->met = true;
        if (u->required && --u->owner->unmet == 0) consider(*u->owner);
      }
    }
  }

  // Takes n's interfaces out of the running lists: nothing binds to it any more.
  void withdraw(node& n) {
    for (provision& p : n.provides) {
      if (!p.running) continue;
      p.iface->running.erase(&p);
      p.running = false;
      if (!p.iface->running.empty()) continue;
      for (slot* u = p.iface->users.front(); u != nullptr; u = decltype(p.iface->users)::next(u)) {
        u->met = false;
        if (u->required) ++u->owner->unmet;
      }
    }
  }

  // n's object is gone: it no longer holds its providers, which may now stop.
  void unbind(node& n) {
    for (slot& s : n.deps) {
      node* p = s.bound;
      if (p == nullptr) continue;
      p->dependents.erase(&s);
      s.bound = nullptr;
      if (p->held && p->ph == phase::running && p->dependents.empty()) to_stop.push_back(p);
    }
  }

  // ---- stopping ----

  void begin_stop(node& n) {
    if (n.ph != phase::running) return;  // queued twice
    dirty = true;
    n.ph = phase::stopping;
    ++busy;
    if (n.model->has_stop()) {
      tern::spawn(*home, run_stop(this, &n), service_calls).detach();
    } else {
      stop_done(n, nullptr);
    }
  }

  static task<void> run_stop(state* self, node* n) {
    std::exception_ptr error;
    try {
      task<void> stopped = n->model->stop();
      co_await std::move(stopped);
    } catch (...) {
      error = std::current_exception();
    }
    self->stop_done(*n, error);
  }

  void stop_done(node& n, std::exception_ptr error) {
    --busy;
    n.stop_error = std::move(error);
    n.model->destroy();
    n.ph = phase::idle;
    unbind(n);
    if (n.held) wave_node_done();
    pump();
  }

  void wave_node_done() {
    if (--wave_remaining == 0 && wave_waiter) {
      auto h = std::exchange(wave_waiter, {});
      home->post([h] { h.resume(); });
    }
  }

  // Holds targets and everything bound to them, and starts stopping those nothing depends on.
  void begin_wave(std::span<node* const> targets) {
    wave.clear();
    wave_remaining = 0;
    std::vector<node*> stack(targets.begin(), targets.end());
    while (!stack.empty()) {
      node& m = *stack.back();
      stack.pop_back();
      if (m.held) continue;
      m.held = true;
      dirty = true;
      wave.push_back(&m);
      if (m.ph != phase::idle) ++wave_remaining;
      if (m.ph == phase::running) withdraw(m);
      for (slot* s = m.dependents.front(); s != nullptr; s = decltype(m.dependents)::next(s)) stack.push_back(s->owner);
    }
    for (node* m : wave) {
      if (m->ph == phase::running && m->dependents.empty()) to_stop.push_back(m);
    }
    pump();
  }

  // The wave is over: its nodes may start again (those still wanted).
  void end_wave() {
    for (node* m : wave) m->held = false;
    for (node* m : wave) consider(*m);
    wave.clear();
    pump();
  }

  void erase(node& n) {
    for (provision& p : n.provides) p.iface->registered.erase(&p);
    for (slot& s : n.deps) s.iface->users.erase(&s);
    names.erase(n.name);
    dirty = true;
    nodes.erase(n.id.value);
  }

  // ---- awaiting ----

  struct op_turn {
    state* s;
    bool await_ready() const noexcept {
      if (s->op_busy) return false;
      s->op_busy = true;
      return true;
    }
    void await_suspend(std::coroutine_handle<> h) { s->op_waiters.push_back(h); }
    void await_resume() const noexcept {}
  };
  // Waits for the operations awaited before this one (the turn passes straight to the next waiter).
  op_turn take_turn() noexcept { return {this}; }
  void end_turn() {
    if (op_waiters.empty()) {
      op_busy = false;
      return;
    }
    auto h = op_waiters.front();
    op_waiters.pop_front();
    home->post([h] { h.resume(); });
  }

  struct quiet_awaiter {
    state* s;
    bool await_ready() const noexcept { return s->busy == 0; }
    void await_suspend(std::coroutine_handle<> h) { s->quiet_waiters.push_back(h); }
    void await_resume() const noexcept {}
  };
  quiet_awaiter quiet() noexcept { return {this}; }

  struct wave_awaiter {
    state* s;
    bool await_ready() const noexcept { return s->wave_remaining == 0; }
    void await_suspend(std::coroutine_handle<> h) noexcept { s->wave_waiter = h; }
    void await_resume() const noexcept {}
  };
  wave_awaiter wave_over() noexcept { return {this}; }

  // ---- classification ----

  void classify();
  void classify_cycles(const std::vector<node*>& candidates);
  service_status status_of(const node& n) const {
    service_status st;
    fill_status(n, st);
    return st;
  }
  // Writes n's status into a default-constructed st (no temporary to move).
  void fill_status(const node& n, service_status& st) const;
};

void registry::state::classify() {
  if (!dirty) return;
  dirty = false;
  ++stamp;
  std::vector<node*> candidates;
  for (auto& [id, np] : nodes) {
    node& n = *np;
    n.reason.clear();
    n.waiting_for.clear();
    n.failed_dependency.clear();
    n.cycle.clear();
    n.sat = false;
    if (n.ph != phase::idle) continue;
    if (n.failed) {
      n.verdict = service_state::failed;
      n.reason = "start failed: " + (n.error ? describe(n.error) : n.error_code.message());
    } else if (!running || !n.enabled || n.held) {
      n.verdict = service_state::stopped;
      n.reason = !n.enabled ? "stopped by stop(id)"
                 : !running ? "the registry is not running"
                            : "waiting while a provider it used stops";
    } else {
      n.verdict = service_state::waiting;
      n.candidate = stamp;
      candidates.push_back(&n);
    }
  }
  // The interfaces the candidates wait for, with their providers counted.
  std::vector<interface_record*> touched;
  for (node* n : candidates) {
    for (slot& s : n->deps) {
      interface_record& i = *s.iface;
      if (!s.required || s.met || i.stamp == stamp) continue;
      i.stamp = stamp;
      i.providers = i.alive = 0;
      i.dead = false;
      i.ok = false;
      i.root = nullptr;
      for (provision* p = i.registered.front(); p != nullptr; p = decltype(i.registered)::next(p)) {
        node& o = *p->owner;
        if (!o.enabled) continue;
        ++i.providers;
        if (o.ph != phase::idle || o.held) i.ok = true;  // on its way: may run without anything changing
        if (!o.failed) {
          ++i.alive;
        } else if (i.root == nullptr) {
          i.root = &o.name;
        }
      }
      touched.push_back(&i);
    }
  }
  // Blocked: a required interface whose providers all failed, or are blocked themselves (a least fixpoint,
  // propagated from the failed ones with a count of live providers per interface).
  std::vector<interface_record*> work;
  for (interface_record* i : touched) {
    if (i->providers > 0 && i->alive == 0) {
      i->dead = true;
      work.push_back(i);
    }
  }
  while (!work.empty()) {
    interface_record& i = *work.back();
    work.pop_back();
    for (slot* u = i.users.front(); u != nullptr; u = decltype(i.users)::next(u)) {
      node& o = *u->owner;
      if (!u->required || u->met || o.candidate != stamp || o.verdict != service_state::waiting) continue;
      o.verdict = service_state::blocked;
      o.failed_dependency = *i.root;
      o.reason = "not started: it requires " + i.name + ", and '" + *i.root + "' failed to start";
      for (provision& q : o.provides) {
        interface_record& j = *q.iface;
        if (j.stamp != stamp || j.dead) continue;
        if (--j.alive == 0) {
          j.dead = true;
          j.root = &o.failed_dependency;
          work.push_back(&j);
        }
      }
    }
  }
  classify_cycles(candidates);
  for (node* n : candidates) {
    if (n->verdict != service_state::waiting) continue;
    for (slot& s : n->deps) {
      if (!s.required || s.met) continue;
      n->waiting_for = s.iface->name;
      if (s.iface->providers == 0) {
        n->reason = s.iface->registered.empty() ? "waiting for " + s.iface->name + ": no service provides it"
                                                : "waiting for " + s.iface->name + ": its providers are stopped";
      } else {
        std::string provider;
        for (provision* p = s.iface->registered.front(); p != nullptr; p = decltype(s.iface->registered)::next(p)) {
          if (p->owner->enabled && !p->owner->failed) {
            provider = p->owner->name;
            break;
          }
        }
        n->reason = "waiting for " + s.iface->name + ": its provider '" + provider + "' has not started";
      }
      break;
    }
  }
}

// Among the waiting candidates, those that cannot start even if every missing interface got a provider are stuck
// on a cycle of required dependencies. Computed as the complement of a least fixpoint ("may start": every unmet
// interface is missing, on its way, or has a provider that may start), then one walk per stuck node along
// not-startable providers, which must close a cycle.
void registry::state::classify_cycles(const std::vector<node*>& candidates) {
  std::vector<interface_record*> work;
  std::vector<node*> ready;
  for (node* n : candidates) {
    if (n->verdict != service_state::waiting) continue;
    n->need = 0;
    for (slot& s : n->deps) {
      if (!s.required || s.met) continue;
      interface_record& i = *s.iface;
      if (i.providers == 0) i.ok = true;  // missing: adding a provider would do
      if (!i.ok) ++n->need;
    }
    if (n->need == 0) ready.push_back(n);
  }
  auto satisfy = [&](node& n) {
    n.sat = true;
    for (provision& q : n.provides) {
      interface_record& j = *q.iface;
      if (j.stamp == stamp && !j.ok) {
        j.ok = true;
        work.push_back(&j);
      }
    }
  };
  for (node* n : ready) satisfy(*n);
  while (!work.empty()) {
    interface_record& i = *work.back();
    work.pop_back();
    for (slot* u = i.users.front(); u != nullptr; u = decltype(i.users)::next(u)) {
      node& o = *u->owner;
      if (!u->required || u->met || o.candidate != stamp || o.verdict != service_state::waiting || o.sat) continue;
      if (--o.need == 0) satisfy(o);
    }
  }
  // The next node along a stuck node's first stuck interface: a provider that is itself stuck.
  auto next_stuck = [&](node& n) -> node* {
    for (slot& s : n.deps) {
      if (!s.required || s.met || s.iface->ok) continue;
      for (provision* p = s.iface->registered.front(); p != nullptr; p = decltype(s.iface->registered)::next(p)) {
        node& o = *p->owner;
        if (o.candidate == stamp && o.verdict != service_state::blocked && !o.sat) return &o;
      }
    }
    return nullptr;
  };
  std::vector<node*> path;
  for (node* start : candidates) {
    if (start->verdict != service_state::waiting || start->sat) continue;
    path.clear();
    node* cur = start;
    while (cur != nullptr && cur->verdict == service_state::waiting && cur->walk != stamp) {
      cur->walk = stamp;
      path.push_back(cur);
      cur = next_stuck(*cur);
    }
    if (cur == nullptr) continue;  // cannot happen: a stuck node always has a stuck provider
    std::vector<std::string> cycle;
    std::size_t first = path.size();
    if (cur->verdict == service_state::waiting) {  // closed a cycle on this walk: cur is on the path
      while (first > 0 && path[first - 1] != cur) --first;
      --first;
      for (std::size_t k = first; k < path.size(); ++k) cycle.push_back(path[k]->name);
      cycle.push_back(cur->name);
    } else {  // reached the cycle of an earlier walk
      cycle = cur->cycle;
    }
    std::string text;
    for (const std::string& name : cycle) text += (text.empty() ? "" : " -> ") + name;
    for (std::size_t k = 0; k < path.size(); ++k) {
      node& n = *path[k];
      n.verdict = service_state::cycle;
      n.cycle = cycle;
      n.reason = k >= first ? "dependency cycle: " + text : "not started: it requires a dependency cycle: " + text;
    }
  }
}

void registry::state::fill_status(const node& n, service_status& s) const {
  s.id = n.id;
  s.name = n.name;
  s.error = n.error;
  s.error_code = n.error_code;
  s.stop_error = n.stop_error;
  switch (n.ph) {
    case phase::starting: s.state = service_state::starting; return;
    case phase::running: s.state = service_state::running; return;
    case phase::stopping: s.state = service_state::stopping; return;
    case phase::idle: break;
  }
  s.state = n.verdict;
  s.reason = n.reason;
  s.waiting_for = n.waiting_for;
  s.failed_dependency = n.failed_dependency;
  s.cycle = n.cycle;
}

// ---- registry ----

registry::registry(io_context& home) : home_(&home), state_(std::make_unique<state>(home)) {}

registry::~registry() {
  state& s = *state_;
  if (s.busy != 0) {
    std::fputs("tern::services::registry destroyed while a service's start() or stop() runs (await stop() first)\n",
               stderr);
    std::terminate();
  }
  if (s.operations.load(std::memory_order_acquire) != 0) {
    std::fputs("tern::services::registry destroyed while an operation (start, stop, remove, settled) is running or "
               "waiting for its turn (await every operation before destroying the registry)\n",
               stderr);
    std::terminate();
  }
  // Dependents first, without stop(): what depends on nothing constructed goes first.
  std::vector<state::node*> ready;
  for (auto& [id, n] : s.nodes) {
    if (n->ph == state::phase::running) {
      n->held = true;
      if (n->dependents.empty()) ready.push_back(n.get());
    }
  }
  while (!ready.empty()) {
    state::node& n = *ready.back();
    ready.pop_back();
    n.model->destroy();
    n.ph = state::phase::idle;
    s.unbind(n);
    for (state::node* p : s.to_stop) ready.push_back(p);
    s.to_stop.clear();
  }
}

namespace {
// Runs f() where the registry's state may be touched: at once on the home loop's thread, or on any thread while no
// thread runs the home loop (before it runs, after it stopped). From a thread that runs no loop while the home loop
// runs on another, f() is posted there and this thread waits for it (it holds up no loop). From another loop's
// thread it is refused with wrong_loop: blocking there could deadlock, and the caller can co_await enter() instead.
template <class F>
auto at_home(io_context& home, const char* what, F&& f) -> decltype(f()) {
  io_context* here = io_context::current();
  if (here == &home || (here == nullptr && !home.running_elsewhere())) return f();
  if (here != nullptr) {
    throw std::system_error(make_error_code(tern::error::wrong_loop),
                            std::string("tern::services::registry::") + what +
                                ": called on another loop than the registry's; co_await registry.enter() first");
  }
  using R = decltype(f());
  std::promise<R> done;
  std::future<R> result = done.get_future();
  // The handler owns the promise: dropped unrun (its loop torn down), it breaks it and get() throws.
  home.post([p = std::move(done), &f]() mutable {
    try {
      if constexpr (std::is_void_v<R>) {
        f();
        p.set_value();
      } else {
        p.set_value(f());
      }
    } catch (...) {
      p.set_exception(std::current_exception());
    }
  });
  return result.get();
}
}  // namespace

service_id registry::add_model(std::string name, std::unique_ptr<detail::service_model> model,
                               std::vector<detail::interface_info> interfaces,
                               std::vector<detail::dependency_info> dependencies) {
  return at_home(*home_, "add", [&] {
    return add_here(std::move(name), std::move(model), std::move(interfaces), std::move(dependencies));
  });
}

service_id registry::add_here(std::string name, std::unique_ptr<detail::service_model> model,
                              std::vector<detail::interface_info> interfaces,
                              std::vector<detail::dependency_info> dependencies) {
  state& s = *state_;
  if (s.names.count(name) != 0) {
    throw std::invalid_argument("tern::services::registry::add: a service named '" + name +
                                "' is registered already; give this one a name with svc::named{...}");
  }
  auto n = std::make_unique<state::node>();
  n->id = service_id{s.next_id++};
  n->name = std::move(name);
  n->model = std::move(model);
  n->provides.resize(interfaces.size());
  n->deps.resize(dependencies.size());
  for (std::size_t i = 0; i < interfaces.size(); ++i) {
    state::provision& p = n->provides[i];
    p.owner = n.get();
    p.iface = &s.interface_for(*interfaces[i].type);
    p.to_interface = interfaces[i].to_interface;
    p.iface->registered.push_back(&p);
  }
  for (std::size_t i = 0; i < dependencies.size(); ++i) {
    state::slot& d = n->deps[i];
    d.owner = n.get();
    d.iface = &s.interface_for(*dependencies[i].type);
    d.required = dependencies[i].required;
    d.met = !d.iface->running.empty();
    if (d.required && !d.met) ++n->unmet;
    d.iface->users.push_back(&d);
  }
  state::node& added = *n;
  s.names.emplace(added.name, &added);
  s.nodes.emplace(added.id.value, std::move(n));
  s.dirty = true;
  s.consider(added);
  s.pump();
  return added.id;
}

namespace {
// An operation's first step: refused (resource_deadlock_would_occur) when awaited from a service's start() or
// stop(), which it would wait for; otherwise counted until its turn ends (registry::state::operations).
// token: the awaiting task's (current_stop_token()).
void begin_operation(registry::state& s, const std::stop_token* token, const char* what) {
  if (token != nullptr && *token == s.service_calls) {
    throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                            std::string("tern::services::registry::") + what +
                                " awaited from a service's start() or stop(): it would wait for that call to end; "
                                "spawn it instead (tern::spawn(registry.home(), ...)), and it runs after the call");
  }
  s.operations.fetch_add(1, std::memory_order_relaxed);
}

// The end of an operation's turn: the next operation's, and the last access to the state.
void end_operation(registry::state& s) {
  s.end_turn();
  s.operations.fetch_sub(1, std::memory_order_release);
}

// Runs op on the registry's loop, one operation at a time, and returns to the caller's loop (with op's value, or
// rethrowing its exception there).
template <class R, class F>
task<R> on_home(registry::state& s, const char* what, F op) {
  begin_operation(s, co_await current_stop_token(), what);
  io_context* back = io_context::current();
  co_await detail::hop_awaiter{s.home};
  co_await s.take_turn();
  std::optional<R> value;
  std::exception_ptr error;
  try {
    task<R> body = op();
    value.emplace(co_await std::move(body));
  } catch (...) {
    error = std::current_exception();
  }
  end_operation(s);
  co_await detail::hop_awaiter{back};
  if (error) std::rethrow_exception(error);
  co_return std::move(*value);
}
}  // namespace

task<registry_report> registry::start() {
  state* s = state_.get();
  const registry* self = this;
  return on_home<registry_report>(*s, "start", [s, self]() -> task<registry_report> {
    s->running = true;
    s->dirty = true;
    for (auto& [id, n] : s->nodes) s->consider(*n);
    s->pump();
    co_await s->quiet();
    co_return self->report_here();
  });
}

task<void> registry::stop() {
  state* s = state_.get();
  co_await on_home<bool>(*s, "stop", [s]() -> task<bool> {
    s->running = false;
    std::vector<state::node*> all;
    for (auto& [id, n] : s->nodes) all.push_back(n.get());
    s->begin_wave(all);
    co_await s->wave_over();
    s->end_wave();
    co_await s->quiet();
    co_return true;
  });
}

task<service_status> registry::start(service_id id) {
  // on_home's steps written out: this is the hot one (start & stop of one service), and a status is large, so it
  // is built once in this frame and moved once to the caller, instead of through a second task and an optional.
  state* s = state_.get();
  begin_operation(*s, co_await current_stop_token(), "start");
  io_context* back = io_context::current();
  co_await detail::hop_awaiter{s->home};
  co_await s->take_turn();
  service_status status;
  std::exception_ptr error;
  try {
    state::node& n = s->find(id);
    n.enabled = true;
    n.failed = false;
    n.error = nullptr;
    n.error_code = {};
    s->dirty = true;
    s->consider(n);
    s->pump();
    co_await s->quiet();
    // n is still there: remove(id) is an operation too, so it waits for this one's turn to end.
    // A service that is not idle has its status in its phase: no need to classify the whole graph (O(N)).
    if (n.ph == state::phase::idle) s->classify();
    s->fill_status(n, status);
  } catch (...) {
    error = std::current_exception();
  }
  end_operation(*s);
  co_await detail::hop_awaiter{back};
  if (error) std::rethrow_exception(error);
  co_return status;
}

namespace {
// stop(id) and remove(id): a stop wave for one service (its dependents stop first); remove also takes it out of
// the graph once the wave has stopped it, while the wave still holds it.
task<bool> stop_one(registry::state& s, service_id id, bool then_remove) {
  registry::state::node& n = s.find(id);
  n.enabled = false;
  registry::state::node* target = &n;
  s.begin_wave({&target, 1});
  co_await s.wave_over();
  if (then_remove) {
    n.held = false;
    std::erase(s.wave, &n);
    s.erase(n);
  }
  s.end_wave();
  co_await s.quiet();
  co_return true;
}
}  // namespace

task<void> registry::stop(service_id id) {
  state* s = state_.get();
  co_await on_home<bool>(*s, "stop", [s, id] { return stop_one(*s, id, false); });
}

task<void> registry::remove(service_id id) {
  state* s = state_.get();
  co_await on_home<bool>(*s, "remove", [s, id] { return stop_one(*s, id, true); });
}

task<registry_report> registry::settled() {
  state* s = state_.get();
  const registry* self = this;
  return on_home<registry_report>(*s, "settled", [s, self]() -> task<registry_report> {
    co_await s->quiet();
    co_return self->report_here();
  });
}

service_status registry::status(service_id id) const {
  return at_home(*home_, "status", [&] {
    state_->classify();
    return state_->status_of(state_->find(id));
  });
}

registry_report registry::report() const {
  return at_home(*home_, "report", [&] { return report_here(); });
}

registry_report registry::report_here() const {
  state_->classify();
  registry_report r;
  r.services.reserve(state_->nodes.size());
  for (auto& [id, n] : state_->nodes) r.services.push_back(state_->status_of(*n));
  return r;
}

}  // namespace tern::services
