// The buffers a program runs in: its constant arena and each run's activation arena.
#include "Emitter.h"

#include "kiln/Base/Pages.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

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
  // Under every page policy (kiln/Base/Pages.h): activations are a network's most
  // rewritten memory, and an arena of them a few huge pages, faulted in once per context.
  if (p) // advice only: without huge pages the buffer works the same
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

namespace {
constexpr uint64_t kHugePage = 2u << 20;
} // namespace

ConstantArena::~ConstantArena() { freeConstantArena(data_, capacity_); }

bool ConstantArena::resize(uint64_t bytes) {
  if (bytes <= capacity_) {
    size_ = std::max(size_, bytes);
    return true;
  }
  // Room for growth without a call per weight; mremap moves pages, not bytes, so the
  // factor costs only address space.
  uint64_t cap = std::max<uint64_t>(bytes, capacity_ + capacity_ / 2);
  cap = (cap + kHugePage - 1) / kHugePage * kHugePage;
#if defined(__linux__)
  void *p = capacity_ == 0
                ? mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                : mremap(data_, capacity_, cap, MREMAP_MAYMOVE);
  if (p == MAP_FAILED)
    return false;
#if defined(MADV_HUGEPAGE)
  // Advice only, and only for arenas of several huge pages (a huge page is zeroed whole
  // on its first touch, which for a small network's constants cost more than they did):
  // the page policy's choice (kiln/Base/Pages.h; 4 KiB pages where fresh huge ones are
  // host faults).
  if (cap >= 2 * kHugePage)
    madvise(p, cap, longLivedMemoryInHugePages() ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#endif
#else
  void *p = std::aligned_alloc(kAlign, cap);
  if (!p)
    return false;
  std::memset(p, 0, cap);
  if (data_) {
    std::memcpy(p, data_, size_);
    std::free(data_);
  }
#endif
  data_ = static_cast<char *>(p);
  capacity_ = cap;
  size_ = bytes;
  return true;
}

Expected<ConstantArena::Released> ConstantArena::release() {
  if (!data_ && !resize(kAlign))
    return makeError(ErrorCode::OutOfMemory, "CPU backend: cannot allocate the constant arena");
  Released r{data_, capacity_};
  data_ = nullptr;
  size_ = capacity_ = 0;
  return r;
}

void freeConstantArena(char *data, uint64_t mappedBytes) {
  if (!data)
    return;
#if defined(__linux__)
  munmap(data, mappedBytes);
#else
  (void)mappedBytes;
  std::free(data);
#endif
}

} // namespace kiln::cpu
