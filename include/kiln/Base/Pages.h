#pragma once
/// Which pages a model's long-lived memory asks the kernel for: its large tensors (the
/// weights among them) and a backend's packed constants. With 2 MiB pages (Linux's
/// MADV_HUGEPAGE) a network that streams large weights every run takes fewer TLB misses;
/// their first touch is where hosts differ. On bare metal a fresh 2 MiB page costs no more
/// per MB than fresh 4 KiB ones. In a virtual machine whose balloon device reports free
/// memory to its host (free page reporting: Firecracker, QEMU/KVM virtio-balloon), the
/// free blocks of 2 MiB and more go back to the host a few seconds after they are freed,
/// so an idle guest's fresh huge pages are ones the host faults in and zeroes again,
/// several times the cost per MB of 4 KiB pages, which mostly come from smaller blocks the
/// host never took. There a large model's cold start is set by the MB it puts in huge
/// pages (backends/CPU/README.md, "Huge pages and a cold start"). Yet right after a large
/// process exits, the same guest's fresh huge pages are the cheapest of all. So the
/// default measures the pages it is given, on the first large allocations of the process.

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln {

enum class PagePolicy {
  /// Huge pages while they prove cheap: large allocations are faulted in at once, 4 MiB at
  /// a time, and timed (faultInLongLived); a step of huge pages slower than
  /// kSlowHugePageNsPerMB makes the next step 4 KiB pages, and the cheaper of the two
  /// kinds is kept from then on.
  Auto,
  /// Always ask for huge pages: the fastest runs.
  Huge,
  /// Ask for 4 KiB pages (MADV_NOHUGEPAGE, also where the kernel's THP setting is
  /// "always"): the fastest cold start where fresh huge pages are host faults.
  Small,
};

/// Sets the process's policy (Auto until called); applies to memory mapped afterwards.
/// Setting Auto starts its measurement afresh.
void setPagePolicy(PagePolicy policy);
PagePolicy pagePolicy();

/// Parses "auto", "huge" or "small"; false (and \p policy unchanged) for anything else.
bool parsePagePolicy(const std::string &text, PagePolicy *policy);

/// Whether a large tensor or packed constants mapped now ask for huge pages.
bool longLivedMemoryInHugePages();

/// Auto times fault-ins in steps of this many bytes.
constexpr size_t kTimedFaultInBytes = size_t(4) << 20;
/// Auto tries 4 KiB pages once huge ones took longer than this per MB to fault in (on
/// the guest in backends/CPU/README.md: huge pages 0.05-0.2 ms right after a large
/// process exits, 2-4 ms some seconds later; 4 KiB pages 0.4-0.8 ms either way).
constexpr int64_t kSlowHugePageNsPerMB = 300000;

/// For memory its owner is about to write whole: [p, p + bytes), page-aligned, a fresh
/// part of a private mapping. Under Auto, while it measures, faults it in step by step
/// (kTimedFaultInBytes each, the last step taking a shorter remainder), each step advised
/// for the kind of page being tried and timed (noteFaultInTime); the rest is advised as
/// Auto then says and left to the owner's first touch. Nothing under Huge or Small.
void faultInLongLived(void *p, size_t bytes);

/// Whether Auto is still measuring (the policy is Auto and has not decided).
bool pagePolicyMeasuring();

/// Auto's step for one timed fault-in of \p nsPerMB per MB in huge pages (\p huge) or
/// 4 KiB ones (faultInLongLived's last step; public for tests): huge pages slower than
/// kSlowHugePageNsPerMB make the next one 4 KiB pages, and that one's time decides by
/// hugePagesPay. A time for the kind Auto is not trying (another thread's) is ignored.
void noteFaultInTime(bool huge, int64_t nsPerMB);

/// Auto's choice once both kinds were timed (ns per MB): 4 KiB pages only when they took
/// less than two thirds of the time of huge ones, so that huge pages, which the run
/// prefers, stay wherever the two are close.
bool hugePagesPay(int64_t hugeNsPerMB, int64_t smallNsPerMB);

} // namespace kiln
