// The slow parts of detail::biased_lock (tern/detail/biased_lock.hpp): the process-wide memory barrier that revokes
// a bias.
#include "tern/detail/biased_lock.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace tern::detail {

namespace {

long membarrier(int cmd) noexcept { return ::syscall(__NR_membarrier, cmd, 0U, 0); }

// PRIVATE_EXPEDITED interrupts only the CPUs running this process's threads, and needs a registration of the
// process first (once; later threads are covered). Without it (kernel before 4.14, seccomp), no lock biases.
bool register_once() noexcept {
  long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0 ||
      (cmds & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0) {
    return false;
  }
  return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

}  // namespace

bool membarrier_biasing_available() noexcept {
  static const bool available = register_once();
  return available;
}

void heavy_barrier() noexcept {
  // A lock biases only after membarrier_biasing_available() said yes, and a registered process's expedited
  // barrier does not fail; if it ever did, going on could let two threads into one section.
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    std::fputs("tern: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after registration\n", stderr);
    std::abort();
  }
}

}  // namespace tern::detail
