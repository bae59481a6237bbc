// tern/services/service.hpp
//
// What a service is, as the registry sees it: any class, described by a few types.
//
//   struct config_iface { virtual int port() const = 0; virtual ~config_iface() = default; };
//
//   class producer {
//    public:
//     using dependencies = svc::depends<svc::required<config_iface>, svc::optional<logger_iface>>;
//     producer(config_iface& config, logger_iface* log, int extra);  // dependencies first, then add()'s arguments
//     tern::task<> start();                                          // optional; or tern::task<std::error_code>
//     tern::task<> stop();                                           // optional
//   };
//
// - dependencies (a nested alias, optional): the interfaces the service needs, in the order its constructor takes
//   them. required<I> is injected as I&, optional<I> as I* (nullptr when no provider of I runs at construction).
// - interfaces (a nested alias `using interfaces = svc::provides<I...>;`, optional): the interfaces it provides;
//   registry::add(svc::provides<I...>{}, ...) names them at the call instead (and then wins). The class must derive
//   from each (the registry hands out I& by a static_cast).
// - start(): tern::task<> that reports failure by throwing, or tern::task<std::error_code> that reports it by
//   returning a non-empty code; no start() means starting cannot fail (but the constructor may throw).
// - stop(): tern::task<>; it cannot veto: an exception it throws is recorded in the service's status and the service
//   counts as stopped.
// Both are detected by concepts (has_start, has_stop); a start() or stop() of another shape is a compile error.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "tern/task.hpp"

namespace tern::services {

// A required dependency on interface I: injected as I&; the service is constructed only once a provider of I runs.
template <class I>
struct required {
  using interface = I;
};

// An optional dependency on interface I: injected as I*, or nullptr if no provider of I runs at construction.
template <class I>
struct optional {
  using interface = I;
};

// The list of a service's dependencies (a service's nested `using dependencies = depends<...>;`).
template <class... D>
struct depends {};

// The interfaces a service provides: a tag for registry::add, or a service's nested `using interfaces = ...;`.
template <class... I>
struct provides {};

// A service's name, passed to registry::add ahead of everything else (default: its type's name without
// namespaces, e.g. "config_service").
struct named {
  std::string value;  // the name shown in reports and cycle errors; unique within a registry
};

// A registered service's identity within its registry.
struct service_id {
  std::uint64_t value = 0;  // 0: no service
  friend bool operator==(service_id, service_id) = default;
};

// T has a start() of one of the two accepted shapes.
template <class T>
concept has_start = requires(T& s) {
  { s.start() } -> std::same_as<task<void>>;
} || requires(T& s) {
  { s.start() } -> std::same_as<task<std::error_code>>;
};

// T has a stop() returning tern::task<>.
template <class T>
concept has_stop = requires(T& s) {
  { s.stop() } -> std::same_as<task<void>>;
};

// The readable name of a type: demangled, without namespaces ("config_service", "counter<int>").
std::string type_name(const std::type_info& type);

namespace detail {

template <class D>
struct dependency_traits {
  static_assert(sizeof(D) == 0, "a dependency is tern::services::required<I> or tern::services::optional<I>");
};
template <class I>
struct dependency_traits<required<I>> {
  using interface = I;
  using argument = I&;
  static constexpr bool is_required = true;
  static I& make(void* p) noexcept { return *static_cast<I*>(p); }
};
template <class I>
struct dependency_traits<optional<I>> {
  using interface = I;
  using argument = I*;
  static constexpr bool is_required = false;
  static I* make(void* p) noexcept { return static_cast<I*>(p); }
};

template <class T>
struct dependencies_of {
  using type = depends<>;
};
template <class T>
  requires requires { typename T::dependencies; }
struct dependencies_of<T> {
  using type = typename T::dependencies;
};

template <class T>
struct interfaces_of {
  using type = provides<>;
};
template <class T>
  requires requires { typename T::interfaces; }
struct interfaces_of<T> {
  using type = typename T::interfaces;
};

template <class... T>
constexpr bool all_distinct() {
  if constexpr (sizeof...(T) < 2) {
    return true;
  } else {
    return []<class First, class... Rest>(std::type_identity<First>, std::type_identity<Rest>...) {
      return (!std::is_same_v<First, Rest> && ...) && all_distinct<Rest...>();
    }(std::type_identity<T>{}...);
  }
}

// An interface as the registry keeps it: its type, and how to turn the service object (as void*) into an I*.
struct interface_info {
  const std::type_info* type;
  void* (*to_interface)(void* object) noexcept;
};

// A dependency as the registry keeps it.
struct dependency_info {
  const std::type_info* type;
  bool required;
};

// A service of some type, type-erased: the registry constructs, starts, stops and destroys it through this.
class service_model {
 public:
  service_model(bool start, bool stop) noexcept : has_start_(start), has_stop_(stop) {}
  virtual ~service_model() = default;
  service_model(const service_model&) = delete;
  service_model& operator=(const service_model&) = delete;

  // Constructs the object from deps (one pointer per dependency, in declaration order; null: an absent optional).
  virtual void construct(void* const* deps) = 0;
  // Destroys the object (it exists).
  virtual void destroy() noexcept = 0;
  // The object, as void* to its most derived type.
  virtual void* object() noexcept = 0;
  // The object's start(), as a task yielding the error it reports (has_start() only).
  virtual task<std::error_code> start() = 0;
  // The object's stop() (has_stop() only).
  virtual task<void> stop() = 0;

  bool has_start() const noexcept { return has_start_; }
  bool has_stop() const noexcept { return has_stop_; }

 private:
  bool has_start_;
  bool has_stop_;
};

template <class T, class Deps, class... Args>
class model;

template <class T, class... D, class... Args>
class model<T, depends<D...>, Args...> final : public service_model {
 public:
  template <class... A>
  explicit model(A&&... args)
      : service_model(services::has_start<T>, services::has_stop<T>), args_(std::forward<A>(args)...) {}

  void construct(void* const* deps) override {
    construct_from(deps, std::index_sequence_for<D...>{}, std::index_sequence_for<Args...>{});
  }
  void destroy() noexcept override { object_.reset(); }
  void* object() noexcept override { return std::addressof(*object_); }

  task<std::error_code> start() override {
    if constexpr (requires(T& s) {
                    { s.start() } -> std::same_as<task<std::error_code>>;
                  }) {
      return object_->start();
    } else if constexpr (services::has_start<T>) {
      return start_void(*object_);
    } else {
      return no_start();
    }
  }
  task<void> stop() override {
    if constexpr (services::has_stop<T>) {
      return object_->stop();
    } else {
      return no_stop();
    }
  }

 private:
  template <std::size_t... Di, std::size_t... Ai>
  void construct_from(void* const* deps, std::index_sequence<Di...>, std::index_sequence<Ai...>) {
    (void)deps;
    object_.emplace(dependency_traits<D>::make(deps[Di])..., std::get<Ai>(args_)...);
  }
  static task<std::error_code> start_void(T& s) {
    co_await s.start();
    co_return std::error_code{};
  }
  static task<std::error_code> no_start() { co_return std::error_code{}; }
  static task<void> no_stop() { co_return; }

  std::tuple<Args...> args_;  // add()'s arguments, passed as lvalues to every construction
  std::optional<T> object_;
};

template <class T, class I>
void* to_interface(void* object) noexcept {
  return static_cast<I*>(static_cast<T*>(object));
}

template <class T>
struct is_provides : std::false_type {};
template <class... I>
struct is_provides<provides<I...>> : std::true_type {};

// The first of Args is one of add()'s tags.
template <class... Args>
struct starts_with_tag : std::false_type {};
template <class First, class... Rest>
struct starts_with_tag<First, Rest...>
    : std::bool_constant<std::is_same_v<std::remove_cvref_t<First>, named> ||
                         is_provides<std::remove_cvref_t<First>>::value> {};

}  // namespace detail

}  // namespace tern::services
