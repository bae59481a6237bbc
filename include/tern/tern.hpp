// tern/tern.hpp: the whole public API in one include.
#pragma once

#include "tern/buffer.hpp"
#include "tern/cancel.hpp"
#include "tern/io_context.hpp"
#include "tern/net/endpoint.hpp"
#include "tern/net/error.hpp"
#include "tern/net/tcp.hpp"
#include "tern/run.hpp"
#include "tern/runtime.hpp"
#include "tern/signal.hpp"
#include "tern/spawn.hpp"
#include "tern/sync.hpp"
#include "tern/task.hpp"
#include "tern/task_group.hpp"
#include "tern/timer.hpp"
#include "tern/yield.hpp"
