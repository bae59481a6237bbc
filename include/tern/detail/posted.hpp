// tern/detail/posted.hpp
//
// The work items that carry a handler given to io_context::post, post_shared or dispatch, one per place its block
// comes from: the frame pool (posted), the home loop's handler slabs (posted_here, and posted_roaming for shareable
// work), a line pool block that goes back to its posters (posted_remote). The members that give a block back to
// its loop need io_context complete: they are in detail/posted_members.hpp, which io_context.hpp includes at its end.
#pragma once

#include <utility>

#include "tern/detail/frame_pool.hpp"
#include "tern/detail/work_queue.hpp"

namespace tern {
class io_context;
}  // namespace tern

namespace tern::detail {

// Posted handler: the callable lives in a pooled block next to its queue node.
template <class F>
struct posted final : work_item {
  F fn;
  explicit posted(F&& f) : fn(std::move(f)) { init(); }
  explicit posted(const F& f) : fn(f) { init(); }
  void init() noexcept {
    run = &invoke;
    discard = &drop;
  }
  static void drop(work_item* w) noexcept {
    auto* self = static_cast<posted*>(w);
    self->~posted();
    frame_pool::deallocate(self, sizeof(posted));
  }
  static void invoke(work_item* w) {
    auto* self = static_cast<posted*>(w);
    F local(std::move(self->fn));
    self->~posted();
    frame_pool::deallocate(self, sizeof(posted));
    local();
  }
};

// Handler posted from the loop's own thread: it lives in a block of that loop's handler slabs and gives the block
// back when it runs (see io_context::handler_slab). Only post() makes these, from the loop's thread, so the handler
// always runs, or is dropped, on its home loop.
template <class F>
struct posted_here final : work_item {
  F fn;
  io_context* home;
  posted_here(F&& f, io_context* h) : work_item(&invoke, &drop), fn(std::move(f)), home(h) {}
  posted_here(const F& f, io_context* h) : work_item(&invoke, &drop), fn(f), home(h) {}
  static void drop(work_item* w) noexcept;
  static void invoke(work_item* w);
};

// Shareable handler posted from a runtime worker's own thread: it lives in a block of that worker's handler slabs
// and may run on any worker of the runtime (work sharing). The block always goes back to its home worker: run at
// home, onto its free list; run elsewhere, through the home's returned list (one CAS). If the worker that ran it
// kept it instead, the two workers' live blocks would end up interleaved line by line in the same slabs, and
// dispatch/scaling at 2 workers fell from 1.9x to 1.1-1.3x in about a third of the runs once a hand-over had mixed
// the blocks (both workers slowed alike, missing the cache on the next queued handler; see docs/design.md). A
// runtime destroys its loops only after discarding what every loop has queued, so a block outlives every use of it.
template <class F>
struct posted_roaming final : work_item {
  F fn;
  io_context* home;
  posted_roaming(F&& f, io_context* h) : work_item(&invoke, &drop), fn(std::move(f)), home(h) {}
  posted_roaming(const F& f, io_context* h) : work_item(&invoke, &drop), fn(f), home(h) {}
  // Teardown: the block goes with its slab.
  static void drop(work_item* w) noexcept { static_cast<posted_roaming*>(w)->~posted_roaming(); }
  static void invoke(work_item* w);
};

// Handler posted from another thread (or loop) to its home loop: its block comes from the poster's line pool
// (cache-line blocks carved from slabs, detail/line_pool.hpp) and goes back to the posters through the home loop
// (io_context::return_remote_block), instead of piling up in the loop thread's pool while every poster allocates
// afresh.
template <class F>
struct posted_remote final : work_item {
  F fn;
  io_context* home;
  posted_remote(F&& f, io_context* h) : work_item(&invoke, &drop), fn(std::move(f)), home(h) {}
  posted_remote(const F& f, io_context* h) : work_item(&invoke, &drop), fn(f), home(h) {}
  static void drop(work_item* w) noexcept;
  static void invoke(work_item* w);
};

}  // namespace tern::detail
