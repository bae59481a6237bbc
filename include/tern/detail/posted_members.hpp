// tern/detail/posted_members.hpp
//
// The members of the posted handlers (detail/posted.hpp) that give their block back to the home loop, defined
// where io_context is complete: io_context.hpp includes this header at its end.
#pragma once

#include <utility>

#include "tern/detail/line_pool.hpp"
#include "tern/detail/posted.hpp"
#include "tern/io_context.hpp"

namespace tern {

template <class F>
void detail::posted_remote<F>::drop(work_item* w) noexcept {
  auto* self = static_cast<posted_remote*>(w);
  self->~posted_remote();
  line_pool::deallocate(self);
}

template <class F>
void detail::posted_remote<F>::invoke(work_item* w) {
  auto* self = static_cast<posted_remote*>(w);
  io_context* home = self->home;
  F local(std::move(self->fn));
  self->~posted_remote();
  home->return_remote_block(self);
  local();
}

template <class F>
void detail::posted_roaming<F>::invoke(work_item* w) {
  auto* self = static_cast<posted_roaming*>(w);
  F local(std::move(self->fn));
  io_context* home = self->home;  // read before the destructor ends the object's lifetime
  self->~posted_roaming();
  if (home->running_here()) [[likely]] {
    home->give_handler_block(self);
  } else {
    home->return_handler_block(self);  // handed over to another worker: the block still goes home
  }
  local();
}

template <class F>
void detail::posted_here<F>::drop(work_item* w) noexcept {
  auto* self = static_cast<posted_here*>(w);
  io_context* home = self->home;
  self->~posted_here();
  home->give_handler_block(self);
}

template <class F>
void detail::posted_here<F>::invoke(work_item* w) {
  auto* self = static_cast<posted_here*>(w);
  io_context* home = self->home;
  F local(std::move(self->fn));
  self->~posted_here();
  home->give_handler_block(self);
  local();
}

}  // namespace tern
