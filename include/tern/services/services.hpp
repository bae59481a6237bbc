// tern/services/services.hpp: the whole of tern::services in one include (registry.hpp first: its header says how
// services, dependencies and the registry fit together; event_bus.hpp for events).
#pragma once

#include "tern/services/event_bus.hpp"
#include "tern/services/registry.hpp"
#include "tern/services/service.hpp"
#include "tern/services/status.hpp"
