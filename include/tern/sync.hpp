// tern/sync.hpp: every synchronisation primitive of tern::sync in one include.
#pragma once

#include "tern/sync/channel.hpp"
#include "tern/sync/error.hpp"
#include "tern/sync/event.hpp"
#include "tern/sync/latch.hpp"
#include "tern/sync/mutex.hpp"
#include "tern/sync/semaphore.hpp"
#include "tern/sync/wait_group.hpp"
