// Names and reports: type names for services and interfaces, and the text of a registry_report.
#include "tern/services/status.hpp"

#include <cxxabi.h>

#include <cctype>
#include <cstdlib>
#include <memory>

namespace tern::services {

std::string type_name(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status),
                                                   std::free);
  const std::string full = status == 0 && demangled ? demangled.get() : type.name();
  // Drop every qualifier, template arguments' included: at each "::", take back the name before it (an
  // identifier, or a parenthesised group such as "(anonymous namespace)" or a function's "f()").
  std::string out;
  for (std::size_t i = 0; i < full.size(); ++i) {
    if (full.compare(i, 2, "::") != 0) {
      out += full[i];
      continue;
    }
    ++i;
    if (!out.empty() && out.back() == ')') {
      int depth = 0;
      while (!out.empty()) {
        const char c = out.back();
        out.pop_back();
        if (c == ')') ++depth;
        if (c == '(' && --depth == 0) break;
      }
    }
    while (!out.empty() && (std::isalnum(static_cast<unsigned char>(out.back())) || out.back() == '_')) {
      out.pop_back();
    }
  }
  return out;
}

const char* to_string(service_state s) noexcept {
  switch (s) {
    case service_state::waiting: return "waiting";
    case service_state::starting: return "starting";
    case service_state::running: return "running";
    case service_state::stopping: return "stopping";
    case service_state::stopped: return "stopped";
    case service_state::failed: return "failed";
    case service_state::blocked: return "blocked";
    case service_state::cycle: return "cycle";
  }
  return "unknown";
}

bool registry_report::all_running() const noexcept {
  for (const service_status& s : services) {
    if (s.state != service_state::running) return false;
  }
  return true;
}

const service_status* registry_report::find(std::string_view name) const noexcept {
  for (const service_status& s : services) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string registry_report::to_string() const {
  std::string out;
  for (const service_status& s : services) {
    out += s.name;
    out += ": ";
    out += services::to_string(s.state);
    if (!s.reason.empty()) {
      out += " (";
      out += s.reason;
      out += ')';
    }
    out += '\n';
  }
  return out;
}

}  // namespace tern::services
