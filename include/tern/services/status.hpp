// tern/services/status.hpp
//
// What the registry reports about its services: a service_status each, and a registry_report of them all.
//
// A status is a snapshot, taken on the registry's loop. The states a service not running can be in say why:
// - waiting: it waits for a required interface that no running service provides (waiting_for names it, and
//   reason says whether nobody provides it or which provider has not started yet);
// - failed: its constructor or start() failed (error or error_code holds the cause, reason its message);
// - blocked: a service it (transitively) requires failed, so it is not started (failed_dependency names it);
// - cycle: its required dependencies form a cycle, so none of them can start (cycle lists it, "a -> b -> a");
// - stopped: stopped by registry::stop(id), or the registry is not running.
#pragma once

#include <exception>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "tern/services/service.hpp"

namespace tern::services {

// Where a service stands.
enum class service_state {
  waiting,   // not started: a required interface has no running provider
  starting,  // constructed; its start() runs
  running,   // started; its interfaces are available to dependents
  stopping,  // its stop() runs (its dependents have stopped)
  stopped,   // stopped by stop(id), or the registry is not running
  failed,    // its constructor or start() failed
  blocked,   // not started: a service it requires failed
  cycle,     // not started: its required dependencies form a cycle
};

// "waiting", "starting", ...
const char* to_string(service_state s) noexcept;

// One service, as the registry sees it now.
struct service_status {
  service_id id;                      // its identity in the registry
  std::string name;                   // its name
  service_state state = service_state::stopped;  // where it stands
  std::string reason;                 // why it is not running, in words (empty while starting or running)
  std::string waiting_for;            // waiting: the interface it waits for
  std::string failed_dependency;      // blocked: the failed service it (transitively) requires
  std::vector<std::string> cycle;     // cycle: the services of the cycle, the first repeated at the end
  std::exception_ptr error;           // failed: what its constructor or start() threw
  std::error_code error_code;         // failed: what its start() returned
  std::exception_ptr stop_error;      // what its last stop() threw, if it did
};

// Every service of a registry, in the order they were added.
struct registry_report {
  std::vector<service_status> services;  // one per registered service

  // True if every service is running.
  bool all_running() const noexcept;
  // The service of that name, or nullptr.
  const service_status* find(std::string_view name) const noexcept;
  // One line per service: "name: state (reason)".
  std::string to_string() const;
};

}  // namespace tern::services
