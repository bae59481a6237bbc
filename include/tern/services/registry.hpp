// tern/services/registry.hpp
//
// registry: services started in dependency order and stopped in reverse, on one loop (Ichor-style dependency
// injection on tern's public API).
//
//   namespace svc = tern::services;
//   svc::registry reg(ctx);
//   reg.add<config_service>(svc::provides<config_iface>{}, "app.conf");
//   reg.add<producer>(svc::named{"producer"}, 42);          // producer(config_iface&, logger_iface*, int)
//   svc::registry_report r = co_await reg.start();          // returns once nothing more can start
//   ...
//   co_await reg.stop();                                    // dependents first
//
// Decisions, and why:
// - Dependencies are interfaces, not services: a service declares required<I>/optional<I> in a nested
//   `dependencies` alias and receives I& / I* in its constructor, before add()'s own arguments. The object is
//   constructed only once every required interface has a *running* provider, so a service never sees an unstarted
//   dependency and has no "dependency arrived" callbacks to get wrong. An optional interface is injected if a
//   provider runs at that moment, else nullptr; it is not injected later (the service is not reconstructed for it).
// - A service's dependency on the providers it was given is binding for as long as it exists: stopping (or
//   removing) a provider first stops every service constructed with it, required or optional, then the provider.
//   A dependent stopped that way stays registered and starts again, with whatever provider runs then (an optional
//   one may now be nullptr), once the stop is over. add()'s arguments are kept and passed as lvalues to every
//   construction for that reason.
// - Failure: start() throws, or returns a non-empty std::error_code (the two accepted shapes); a constructor may
//   throw too. The service is then `failed` with its cause, and every service that needs it (transitively) is
//   `blocked` with the failed one named; services that do not need it start as usual. start(id) retries.
// - A required interface nobody provides is not an error: the dependent is `waiting` for it, and starts when a
//   provider is added. A cycle of required dependencies is an error: its services are `cycle`, with the cycle
//   named ("a -> b -> a"). Statuses are classified when asked for (status(), report()), in O(N + E).
// - Starts and stops are concurrent where the graph allows: each start() and stop() coroutine is a task of its
//   own on the registry's loop. Per service, a count of required interfaces without a running provider and a
//   list of the services bound to it make a whole start or stop O(N + E) (services + dependency edges).
// - One home loop: the registry's state is touched only there. add(), status() and report() run on the home
//   loop's thread; called from a thread that runs no loop, they are carried out there while that loop runs (the
//   caller waits), or at once while no thread runs it (before it runs). From another worker they throw
//   std::system_error(tern::error::wrong_loop): co_await enter() first. The operations that return tasks (start,
//   stop, remove, settled) may be awaited from any worker of a runtime: they continue on the home loop and come
//   back to the caller's loop. Those operations run one at a time, in the order they were awaited.
// - A service's start() and stop() run on the home loop; a service that wants other workers spawns there itself.
//   An operation awaited inside them (directly or through the tasks they await) would wait for them to end, so it
//   throws std::system_error(std::errc::resource_deadlock_would_occur) instead; spawn it (it then runs after
//   them). add(), status() and report() may be called there.
// - Lifetimes: the registry outlives nothing it does not wait for. Await stop() before destroying it; a registry
//   destroyed with services running destroys them dependents first, without their stop(). One destroyed while a
//   start() or stop() is still running, or while an operation is running or waiting for its turn, terminates the
//   program with a message (they refer to it).
#pragma once

#include <coroutine>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "tern/io_context.hpp"
#include "tern/services/service.hpp"
#include "tern/services/status.hpp"
#include "tern/task.hpp"

namespace tern::services {

namespace detail {
// Awaitable: continues the calling coroutine on target (at once if it already runs there).
struct [[nodiscard]] hop_awaiter {
  io_context* target;
  bool await_ready() const noexcept { return target == nullptr || io_context::current() == target; }
  void await_suspend(std::coroutine_handle<> h) { target->post([h] { h.resume(); }); }
  void await_resume() const noexcept {}
};
}  // namespace detail

class registry {
 public:
  // A registry whose services run on home.
  explicit registry(io_context& home);
  // See "Lifetimes" above.
  ~registry();
  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  // Registers T, constructed with its dependencies and then args (copied now, passed as lvalues). Its
  // interfaces are T::interfaces (none if it has no such alias). Starts it if the registry is running. Home loop
  // (see above).
  template <class T, class... Args>
    requires(!detail::starts_with_tag<Args...>::value)
  service_id add(Args&&... args) {
    return add_as<T>(named{type_name(typeid(T))}, typename detail::interfaces_of<T>::type{},
                     std::forward<Args>(args)...);
  }
  // Registers T as the provider of I... (instead of T::interfaces).
  template <class T, class... I, class... Args>
  service_id add(provides<I...> p, Args&&... args) {
    return add_as<T>(named{type_name(typeid(T))}, p, std::forward<Args>(args)...);
  }
  // Registers T under a name of your choice.
  template <class T, class... Args>
    requires(!detail::starts_with_tag<Args...>::value)
  service_id add(named name, Args&&... args) {
    return add_as<T>(std::move(name), typename detail::interfaces_of<T>::type{}, std::forward<Args>(args)...);
  }
  // Registers T under a name, as the provider of I....
  template <class T, class... I, class... Args>
  service_id add(named name, provides<I...> p, Args&&... args) {
    return add_as<T>(std::move(name), p, std::forward<Args>(args)...);
  }

  // Starts every service whose dependencies allow it, independent ones concurrently, and returns the report once
  // nothing more can start. From then on the registry is running: services added later start by themselves.
  task<registry_report> start();
  // Stops every service, each after all the services bound to it, independent ones concurrently; the registry
  // is no longer running (start() starts them again).
  task<void> stop();
  // (Re)enables one service, retrying it if it failed; returns its status once nothing more can start.
  task<service_status> start(service_id id);
  // Stops one service after the services bound to it, and keeps it stopped (they wait for another provider).
  task<void> stop(service_id id);
  // stop(id), then unregisters the service.
  task<void> remove(service_id id);
  // Waits until no service is starting or stopping; returns the report.
  task<registry_report> settled();

  // One service's status; throws std::out_of_range for an id it does not know. Home loop (see above).
  service_status status(service_id id) const;
  // Every service's status. Home loop (see above).
  registry_report report() const;
  // The loop the services run on.
  io_context& home() const noexcept { return *home_; }
  // Awaitable: continues the calling coroutine on the home loop (to call add() from another worker).
  detail::hop_awaiter enter() const noexcept { return {home_}; }

  struct state;  // the engine (registry.cpp)

 private:
  template <class T, class... I, class... Args>
  service_id add_as(named name, provides<I...>, Args&&... args) {
    using deps = typename detail::dependencies_of<T>::type;
    static_assert(std::is_class_v<T>, "a service is a class");
    static_assert((std::is_convertible_v<T*, I*> && ...),
                  "a service must derive (publicly) from every interface it provides");
    static_assert(detail::all_distinct<I...>(), "an interface is listed twice in provides<...>");
    static_assert(!requires(T& s) { s.start(); } || has_start<T>,
                  "start() must return tern::task<> (failure: throw) or tern::task<std::error_code>");
    static_assert(!requires(T& s) { s.stop(); } || has_stop<T>, "stop() must return tern::task<>");
    return add_with<T>(deps{}, std::move(name), provides<I...>{}, std::forward<Args>(args)...);
  }

  template <class T, class... D, class... I, class... Args>
  service_id add_with(depends<D...>, named name, provides<I...>, Args&&... args) {
    static_assert(detail::all_distinct<typename detail::dependency_traits<D>::interface...>(),
                  "an interface is listed twice in dependencies");
    static_assert(std::is_constructible_v<T, typename detail::dependency_traits<D>::argument...,
                                          std::decay_t<Args>&...>,
                  "the service must be constructible from its dependencies (I& for required<I>, I* for "
                  "optional<I>, in the order of its `dependencies`) followed by add()'s arguments as lvalues");
    auto m = std::make_unique<detail::model<T, depends<D...>, std::decay_t<Args>...>>(std::forward<Args>(args)...);
    std::vector<detail::interface_info> interfaces{detail::interface_info{&typeid(I), &detail::to_interface<T, I>}...};
    std::vector<detail::dependency_info> dependencies{
        detail::dependency_info{&typeid(typename detail::dependency_traits<D>::interface),
                                detail::dependency_traits<D>::is_required}...};
    return add_model(std::move(name.value), std::move(m), std::move(interfaces), std::move(dependencies));
  }

  service_id add_model(std::string name, std::unique_ptr<detail::service_model> model,
                       std::vector<detail::interface_info> interfaces,
                       std::vector<detail::dependency_info> dependencies);
  // add_model and report on the home loop's thread.
  service_id add_here(std::string name, std::unique_ptr<detail::service_model> model,
                      std::vector<detail::interface_info> interfaces,
                      std::vector<detail::dependency_info> dependencies);
  registry_report report_here() const;

  io_context* home_;
  std::unique_ptr<state> state_;
};

}  // namespace tern::services
