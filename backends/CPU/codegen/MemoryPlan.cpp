// Static activation offsets: a first-fit allocator replayed over the IR's explicit
// alloc/dealloc order, so buffers whose lifetimes do not overlap share memory.
#include "Codegen.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kiln::cpu {

namespace {
constexpr uint64_t kAlign = 64;
uint64_t alignUp(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
} // namespace

MemoryPlan planActivations(const IRFunction &F) {
  MemoryPlan plan;
  std::map<uint64_t, uint64_t> freeList; // offset -> size, beyond `top` all free
  uint64_t top = 0;
  std::unordered_map<const Value *, uint64_t> sizes;
  for (const auto &I : F.getInstrs()) {
    if (auto *a = dyn_cast<AllocActivationInst>(I.get())) {
      uint64_t size = alignUp(std::max<uint64_t>(a->getType()->sizeInBytes(), 1));
      plan.sumOfSizes += size;
      uint64_t off = UINT64_MAX;
      for (auto it = freeList.begin(); it != freeList.end(); ++it) {
        if (it->second < size)
          continue;
        off = it->first;
        uint64_t rest = it->second - size;
        freeList.erase(it);
        if (rest)
          freeList[off + size] = rest;
        break;
      }
      if (off == UINT64_MAX) {
        // Grow: reuse a free block that ends at the top.
        if (!freeList.empty()) {
          auto last = std::prev(freeList.end());
          if (last->first + last->second == top) {
            off = last->first;
            freeList.erase(last);
          }
        }
        if (off == UINT64_MAX)
          off = top;
        top = off + size;
      }
      plan.offsets[a] = off;
      sizes[a] = size;
      plan.size = std::max(plan.size, top);
    } else if (auto *d = dyn_cast<DeallocActivationInst>(I.get())) {
      auto it = plan.offsets.find(d->getSrc());
      if (it == plan.offsets.end())
        continue;
      uint64_t off = it->second, size = sizes[d->getSrc()];
      // Insert and coalesce with neighbours.
      auto next = freeList.lower_bound(off);
      if (next != freeList.end() && off + size == next->first) {
        size += next->second;
        next = freeList.erase(next);
      }
      if (next != freeList.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == off) {
          prev->second += size;
          continue;
        }
      }
      freeList[off] = size;
    }
  }
  return plan;
}

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
