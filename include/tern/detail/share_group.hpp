// tern/detail/share_group.hpp
//
// share_group: what a loop sees of the other loops of its runtime when it shares work (io_context::post_shared,
// balance): which of them are idle and how much shareable work each has. tern::runtime implements it.
#pragma once

#include <atomic>
#include <cstddef>

namespace tern {
class io_context;
}  // namespace tern

namespace tern::detail {

// The loops of one runtime, as far as sharing work is concerned: which of them are idle. Implemented by runtime.
class share_group {
 public:
  // Any idle member at all (one relaxed load: checked once per loop turn by busy members).
  bool any_idle() const noexcept { return idle_count_.load(std::memory_order_relaxed) != 0; }
  // Marks member i idle or busy (from member i's thread).
  void set_idle(unsigned i, bool idle) noexcept;
  // Claims an idle member other than self (clears its idle mark), or returns null.
  io_context* claim_idle(unsigned self) noexcept;
  // Member i's amount of shareable work, as it last published it (from member i's thread).
  void publish_load(unsigned i, std::size_t load) noexcept { load_slot(i).store(load, std::memory_order_relaxed); }
  // The member other than self with the least published shareable work, and that amount (null if alone).
  io_context* least_loaded(unsigned self, std::size_t& load) noexcept;

 protected:
  share_group() = default;
  ~share_group() = default;
  virtual io_context* member(unsigned i) noexcept = 0;
  virtual std::atomic<bool>& idle_flag(unsigned i) noexcept = 0;
  virtual std::atomic<std::size_t>& load_slot(unsigned i) noexcept = 0;
  virtual unsigned member_count() const noexcept = 0;

 private:
  std::atomic<unsigned> idle_count_{0};
};

}  // namespace tern::detail
