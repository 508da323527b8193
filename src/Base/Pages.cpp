#include "kiln/Base/Pages.h"

#include <atomic>
#include <chrono>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kiln {
namespace {

/// Where Auto's measurement stands.
enum class AutoState : int {
  HugeTrial,  ///< huge pages, each large fault-in timed
  SmallTrial, ///< huge pages were slow: the next large fault-in in 4 KiB pages, timed
  HugeKept,   ///< decided: huge pages
  SmallKept,  ///< decided: 4 KiB pages
};

struct PageState {
  std::atomic<PagePolicy> policy{PagePolicy::Auto};
  std::atomic<AutoState> state{AutoState::HugeTrial};
  std::atomic<int64_t> hugeNsPerMB{0};
};

PageState &pageState() {
  static PageState s;
  return s;
}

/// Writes one zero into each 4 KiB page of [p, p + bytes): faults in fresh zero pages
/// without changing them, where MADV_POPULATE_WRITE is missing (Linux before 5.14).
void touchPages(void *p, size_t bytes) {
  auto *c = static_cast<volatile char *>(p);
  for (size_t off = 0; off < bytes; off += 4096)
    c[off] = 0;
}

/// Faults in [p, p + bytes) (p page-aligned).
void populate(void *p, size_t bytes) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  if (madvise(p, bytes, MADV_POPULATE_WRITE) == 0)
    return;
#endif
  touchPages(p, bytes);
}

/// Advises [p, p + bytes) for huge or 4 KiB pages.
void advise(char *p, size_t bytes, bool huge) {
#if defined(__linux__) && defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
  madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#else
  (void)p;
  (void)bytes;
  (void)huge;
#endif
}

} // namespace

void setPagePolicy(PagePolicy policy) {
  PageState &s = pageState();
  s.policy.store(policy);
  if (policy == PagePolicy::Auto) {
    s.state.store(AutoState::HugeTrial);
    s.hugeNsPerMB.store(0);
  }
}

PagePolicy pagePolicy() { return pageState().policy.load(); }

bool parsePagePolicy(const std::string &text, PagePolicy *policy) {
  if (text == "auto")
    *policy = PagePolicy::Auto;
  else if (text == "huge")
    *policy = PagePolicy::Huge;
  else if (text == "small")
    *policy = PagePolicy::Small;
  else
    return false;
  return true;
}

bool longLivedMemoryInHugePages() {
  const PageState &s = pageState();
  switch (s.policy.load()) {
  case PagePolicy::Huge:
    return true;
  case PagePolicy::Small:
    return false;
  case PagePolicy::Auto:
    break;
  }
  const AutoState st = s.state.load();
  return st == AutoState::HugeTrial || st == AutoState::HugeKept;
}

bool hugePagesPay(int64_t hugeNsPerMB, int64_t smallNsPerMB) {
  return 3 * smallNsPerMB >= 2 * hugeNsPerMB;
}

void faultInLongLived(void *p, size_t bytes) {
  if (pagePolicy() != PagePolicy::Auto)
    return;
  // In steps of kTimedFaultInBytes, so that a wrong trial costs one step, not a whole
  // weight of hundreds of MB: each step advised for the kind being tried, faulted in and
  // timed. After a timed step the rest gets the advice Auto ends with, and is left to its
  // owner's first touch.
  char *c = static_cast<char *>(p);
  size_t off = 0;
  while (bytes - off >= kTimedFaultInBytes && pagePolicyMeasuring()) {
    // A remainder shorter than a step goes with the last one.
    const size_t step = bytes - off < 2 * kTimedFaultInBytes ? bytes - off : kTimedFaultInBytes;
    const bool huge = longLivedMemoryInHugePages();
    advise(c + off, step, huge);
    const auto t0 = std::chrono::steady_clock::now();
    populate(c + off, step);
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now() - t0)
                           .count();
    noteFaultInTime(huge, int64_t(double(ns) * double(1 << 20) / double(step)));
    off += step;
  }
  if (off > 0 && off < bytes)
    advise(c + off, bytes - off, longLivedMemoryInHugePages());
}

void noteFaultInTime(bool huge, int64_t nsPerMB) {
  PageState &s = pageState();
  AutoState st = s.state.load();
  if (s.policy.load() != PagePolicy::Auto) {
    return;
  } else if (st == AutoState::HugeTrial && huge) {
    if (nsPerMB > kSlowHugePageNsPerMB) {
      s.hugeNsPerMB.store(nsPerMB);
      s.state.compare_exchange_strong(st, AutoState::SmallTrial);
    }
  } else if (st == AutoState::SmallTrial && !huge) {
    s.state.compare_exchange_strong(st, hugePagesPay(s.hugeNsPerMB.load(), nsPerMB)
                                            ? AutoState::HugeKept
                                            : AutoState::SmallKept);
  }
}

bool pagePolicyMeasuring() {
  const PageState &s = pageState();
  const AutoState st = s.state.load();
  return s.policy.load() == PagePolicy::Auto &&
         (st == AutoState::HugeTrial || st == AutoState::SmallTrial);
}

} // namespace kiln
