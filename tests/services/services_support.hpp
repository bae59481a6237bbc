// Shared pieces of the tern::services tests: a journal of what services did, interfaces, and a configurable test
// service that provides one interface and requires others.
#pragma once

#include <tern/services/services.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "support.hpp"

namespace services_test {

namespace svc = tern::services;

// What the services did, in order: "constructed x", "started x", "stop x" (stop() began), "stopped x".
struct journal {
  std::vector<std::string> lines;

  void add(std::string line) { lines.push_back(std::move(line)); }
  // Position of line, or -1.
  long at(std::string_view line) const {
    auto it = std::find(lines.begin(), lines.end(), line);
    return it == lines.end() ? -1 : static_cast<long>(it - lines.begin());
  }
  bool has(std::string_view line) const { return at(line) >= 0; }
  // Both present, first before second.
  bool before(std::string_view first, std::string_view second) const {
    return has(first) && has(second) && at(first) < at(second);
  }
};

// Interfaces, each a distinct type (their names appear in reports).
struct a_if {
  virtual ~a_if() = default;
  virtual bool started() const = 0;
};
struct b_if {
  virtual ~b_if() = default;
  virtual bool started() const = 0;
};
struct c_if {
  virtual ~c_if() = default;
  virtual bool started() const = 0;
};
struct d_if {
  virtual ~d_if() = default;
  virtual bool started() const = 0;
};
struct none {};  // provides nothing

// How a test service behaves.
struct behaviour {
  bool throw_in_start = false;
  bool error_in_start = false;   // start() returns std::errc::address_in_use instead
  bool throw_in_constructor = false;
  bool throw_in_stop = false;
};

// Provides Provided (unless none), requires Req...; records its life in a journal. Its start() and stop() suspend
// once (a yield), so they are really asynchronous.
template <class Provided, class... Req>
class node_service : public std::conditional_t<std::is_same_v<Provided, none>, none, Provided> {
 public:
  using dependencies = svc::depends<svc::required<Req>...>;
  using interfaces = std::conditional_t<std::is_same_v<Provided, none>, svc::provides<>, svc::provides<Provided>>;

  node_service(Req&... deps, journal& j, std::string name, behaviour b = {})
      : journal_(j), name_(std::move(name)), behaviour_(b) {
    // Every required dependency is running when a dependent is constructed.
    const bool all_started = (deps.started() && ...);
    journal_.add((all_started ? "constructed " : "constructed too early ") + name_);
    if (behaviour_.throw_in_constructor) throw std::runtime_error("constructor of " + name_ + " failed");
  }

  tern::task<std::error_code> start() {
    co_await tern::yield();
    if (behaviour_.throw_in_start) throw std::runtime_error("no disk for " + name_);
    if (behaviour_.error_in_start) co_return std::make_error_code(std::errc::address_in_use);
    started_ = true;
    journal_.add("started " + name_);
    co_return std::error_code{};
  }

  tern::task<> stop() {
    journal_.add("stop " + name_);
    co_await tern::yield();
    started_ = false;
    journal_.add("stopped " + name_);
    if (behaviour_.throw_in_stop) throw std::runtime_error("stop of " + name_ + " failed");
  }

  bool started() const { return started_; }

 private:
  journal& journal_;
  std::string name_;
  behaviour behaviour_;
  bool started_ = false;
};

// The usual shapes: a provides a_if and needs nothing; b, c and d provide theirs and need Req....
using a_service = node_service<a_if>;
template <class... Req>
using b_service = node_service<b_if, Req...>;
template <class... Req>
using c_service = node_service<c_if, Req...>;
template <class... Req>
using d_service = node_service<d_if, Req...>;

// Registers a node_service T named name, in the registry and in its journal lines.
template <class T>
svc::service_id add_node(svc::registry& reg, journal& j, const std::string& name, behaviour b = {}) {
  return reg.add<T>(svc::named{name}, std::ref(j), name, b);
}

}  // namespace services_test
