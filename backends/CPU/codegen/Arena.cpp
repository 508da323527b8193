// The buffers a program runs in: its constant arena and each run's activation arena.
#include "Emitter.h"

#include <algorithm>
#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kiln::cpu {

char *allocArena(uint64_t bytes) {
  constexpr uint64_t kHuge = 2u << 20;
  bytes = std::max<uint64_t>(alignUp(bytes), kAlign);
  if (bytes < 2 * kHuge)
    return static_cast<char *>(std::aligned_alloc(kAlign, bytes));
  bytes = (bytes + kHuge - 1) / kHuge * kHuge;
  char *p = static_cast<char *>(std::aligned_alloc(kHuge, bytes));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p) // advice only: without huge pages the buffer works the same
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

} // namespace kiln::cpu
